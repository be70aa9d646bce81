"""DRiP as a search target: what each schedule step does to a four-node mesh (`DripSim`,
the ring ``n1 n2 n3 n4`` with the chord ``n2 n4``), and how a run is judged (`checkers.twopc`,
as a real run is, plus liveness: after the last heal an update at ``n1`` must commit).

Kinds (node ``b`` of ``n1..n4``, edge ``a`` of the five): ``cut`` (cut edge ``a``), ``heal``,
``crash``, ``restart``, ``pause``/``resume``, ``loss`` and ``dup`` (rate ``a``/10), ``delay``
(latency 1 + 50·``a`` ms, jitter 10·``b`` ms: past the request timeout an answer is late,
which is what the late-vote bug modes need) and ``update`` (a client update at node ``b`` of
key ``k`` + ``a`` mod 2). A bug mode is switched on in every node. Not drawn yet: membership
changes, clock skew, hostile peers.
"""

from __future__ import annotations

import json
from typing import Any

from checkers import twopc
from harness.sim.drip import DripSim
from harness.sim.driver import RunCap
from harness.sim.search import MAX_EVENTS, WALL_CAP_S, Outcome, Step, Target, cap_witness

EDGES = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4")]
NODES = ["n1", "n2", "n3", "n4"]
KINDS = ("cut", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "update")
BUGS = ("retake-duplicate-votes", "skip-sync")
# not found in 10 s at seed 1: commit-partial-vote, forget-in-progress, syncing-votes-no,
# inactive-takes-part, act-on-late-votes, commit-after-abort
SETTLE_S = 30.0  # after the last heal: request timeouts, syncs and retries many times


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
        if kind == "cut":
            sim.cut(*EDGES[a % len(EDGES)])
        elif kind == "update" and sim.running(n):
            self.update(n, f"k{a % 2}")
        else:
            sim.fault_step(kind, n, a, b, delay=(0.001, 0.05, 0.01))

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
    sim.cap(MAX_EVENTS, WALL_CAP_S)
    witness: list[dict[str, Any]] = []
    try:
        for s in schedule:
            r.step(s)
        sim.heal_everything(NODES, latency=0.001)
        sim.run_for(SETTLE_S)
        final = r.update("n1", "final")
        sim.run_for(SETTLE_S)
        if not sim.committed(final):
            a = sim.outcome(final)
            witness.append({"checker": "liveness", "kind": "no-progress-after-heal",
                            "message": f"an update at n1 {SETTLE_S:g} s after the last heal "
                                       f"did not commit in {SETTLE_S:g} s (answer "
                                       f"{None if a is None else (a.status, a.body)})",
                            "witness": {"t": sim.now}})
    except RunCap as e:
        witness.append(cap_witness(e))
    history = r.history()
    if not any(w["kind"].endswith("-cap") for w in witness):
        res = twopc.check({}, history, sim.observations())
        if res.valid is False:
            witness += [{"checker": res.checker, **a.to_json()} for a in res.anomalies]
    trace = sim.trace_bytes() + json.dumps([history, witness], sort_keys=True,
                                           default=str).encode()
    return Outcome(not witness, witness, trace, history, sim.now)


TARGET = Target("drip", KINDS, BUGS, run)
