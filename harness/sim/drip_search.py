"""DRiP as a search target: what each schedule step does to a four-node mesh (`DripSim`,
the ring ``n1 n2 n3 n4`` with the chord ``n2 n4``), and how a run is judged (`checkers.twopc`,
as a real run is, plus liveness: after the last heal an update at ``n1`` must commit).

Kinds (node ``b`` of ``n1..n4``, edge ``a`` of the five): ``cut`` (cut edge ``a``), ``heal``,
``crash``, ``restart``, ``pause``/``resume``, ``loss`` and ``dup`` (rate ``a``/10), ``delay``
(latency 1 + 50·``a`` ms, jitter 10·``b`` ms: past the request timeout an answer is late,
which is what the late-vote bug modes need) and ``update`` (a client update at node ``b`` of
key ``k`` + ``a`` mod 2); then the shapes a busy mesh meets, each in one step: ``race`` (two
updates of that key, at node ``b`` and at the node opposite, in one millisecond: two
initiators contend for one key), ``stall`` (node ``b`` paused now and resumed ``a`` + 1
seconds later while the schedule goes on: its votes arrive after the vote timeout),
``rejoin`` (node ``b`` restarted and, in the same millisecond, an update at the next node:
the request reaches a node still syncing) and ``isolate`` (every link of node ``b`` cut, and
healed ``a`` + 1 seconds later, when an update starts at the next node: a node that found
itself alone meets a request before its next heartbeat). A bug mode is switched on in every
node. Not drawn yet: membership changes, clock skew, hostile peers.

A run settles until it is quiet instead of for a fixed time (a DRiP run is the costliest of
the targets: every hop is an HTTP request in JSON): after the last heal, until every node is
up and active (at most `SETTLE_S`); then the final update, until it is decided (at most
`SETTLE_S`); then `TAIL_S` more for what follows a decision (late votes, lock expiry).
"""

from __future__ import annotations

import json
from typing import Any

from checkers import twopc
from harness.sim.drip import DripSim
from harness.sim.play import capped, play
from harness.sim.search import Outcome, Step, Target, witness_of

EDGES = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4")]
NODES = ["n1", "n2", "n3", "n4"]
KINDS = ("cut", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "update", "race", "stall", "rejoin", "isolate")
BUGS = ("retake-duplicate-votes", "skip-sync", "commit-partial-vote", "forget-in-progress",
        "syncing-votes-no")
# not searched (docs/sim.md): act-on-late-votes and commit-after-abort (a ``stall`` gives the
# initiator a late yes, but the late voter's answer does not name it among the voters, so the
# kept-open vote never completes), inactive-takes-part (no schedule found that hands an
# inactive node a request before its next heartbeat)
SETTLE_S = 30.0  # the most a settle waits: request timeouts, syncs and retries many times
STEP_S = 0.5  # how often a settle looks whether it may stop
#: after the final update's decision: more than a vote timeout and a lock's lifetime
#: (`CoreConfig`: 2 s, 3 s), so what a late vote or an expired lock does is still seen
TAIL_S = 5.0


class _Run:
    def __init__(self, seed: int, bugs: tuple[str, ...]) -> None:
        self.sim = DripSim(EDGES, seed=seed, bugs=bugs, jitter=0.002)
        self.updates: list[tuple[str, str, int, str]] = []  # node, key, value, uid

    def update(self, n: str, key: str) -> str:
        uid = f"u{len(self.updates)}"
        self.updates.append((n, key, len(self.updates), uid))
        self.sim.update(n, key, len(self.updates) - 1, uid)
        return uid

    def step(self, s: Step) -> None:
        kind, dt, a, b = s
        sim = self.sim
        sim.run_for(dt / 1000)
        n = NODES[b % len(NODES)]
        nxt = NODES[(b + 1) % len(NODES)]
        if kind == "cut":
            sim.cut(*EDGES[a % len(EDGES)])
        elif kind == "update" and sim.running(n):
            self.update(n, f"k{a % 2}")
        elif kind == "race":
            for m in (n, NODES[(b + 2) % len(NODES)]):
                if sim.running(m):
                    self.update(m, f"k{a % 2}")
        elif kind == "stall":
            if sim.running(n):
                sim.pause(n)
                sim.at(sim.now + a + 1, lambda: sim.resume(n))
        elif kind == "rejoin":
            sim.restart(n)
            if sim.running(nxt):
                self.update(nxt, f"k{a % 2}")
        elif kind == "isolate":
            links = [e for e in EDGES if n in e]
            for e in links:
                sim.cut(*e)
            sim.at(sim.now + a + 1, lambda: self._rejoin_links(links, nxt, a))
        else:
            sim.fault_step(kind, n, a, b, delay=(0.001, 0.05, 0.01))

    def _rejoin_links(self, links: list[tuple[str, str]], n: str, a: int) -> None:
        """``isolate``'s end: its links back (only those) and an update at ``n``."""
        self.sim.net.cut -= {(x, y) for x, y in links} | {(y, x) for x, y in links}
        self.sim.trace.append((self.sim.now, "uncut", [list(e) for e in links]))
        if self.sim.running(n):
            self.update(n, f"k{a % 2}")

    def quiet(self) -> bool:
        """Every node up, running and active (no sync under way)."""
        return all(self.sim.running(n) and self.sim.core(n).state == "active" for n in NODES)

    def progress(self) -> dict[str, Any] | None:
        """Liveness: once the mesh is quiet after the last heal, an update at n1 commits.
        None: it did."""
        sim = self.sim
        end = sim.now + SETTLE_S
        sim.run_for(STEP_S)
        while not self.quiet() and sim.now < end:
            sim.run_for(STEP_S)
        final = self.update("n1", "final")
        end = sim.now + SETTLE_S
        while sim.outcome(final) is None and sim.now < end:
            sim.run_for(STEP_S)
        sim.run_for(TAIL_S)
        if sim.committed(final):
            return None
        a = sim.outcome(final)
        return {"kind": "no-progress-after-heal",
                "message": f"an update at n1 once the mesh was quiet after the last heal (or "
                           f"{SETTLE_S:g} s after it) did not commit in {SETTLE_S + TAIL_S:g} s "
                           f"(answer {None if a is None else (a.status, a.body)})",
                "witness": {"t": sim.now}}

    def history(self) -> list[dict[str, Any]]:
        """invoke/complete pairs of every update, as `checkers.twopc` reads a run."""
        h: list[dict[str, Any]] = []
        for p, (node, key, value, uid) in enumerate(self.updates):
            h.append({"index": len(h), "process": p, "type": "invoke", "f": "update",
                      "value": [key, value, uid], "node": node})
        for p, (node, key, value, uid) in enumerate(self.updates):
            d = self.sim.outcome(uid)
            t = "info" if d is None else ("ok" if d.status == 200 else "fail")
            h.append({"index": len(h), "process": p, "type": t, "f": "update",
                      "value": [key, value, uid], "node": node,
                      **({"error": d.body.get("error")} if d and d.status != 200 else {})})
        return h


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a fresh mesh, heal, settle, update once more, and judge it."""
    r = _Run(seed, bugs)
    sim = r.sim
    stuck = play(sim, schedule, r.step, ids=NODES, latency=0.001, settle=r.progress)
    witness: list[dict[str, Any]] = [] if stuck is None else [stuck]
    history = r.history()
    if not capped(stuck):
        witness += witness_of(twopc.check({}, history, sim.observations()))
    trace = sim.trace_bytes() + json.dumps([history, witness], sort_keys=True,
                                           default=str).encode()
    return Outcome(not witness, witness, trace, history, sim.now)


TARGET = Target("drip", KINDS, BUGS, run)
