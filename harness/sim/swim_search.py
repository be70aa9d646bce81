"""SWIM as a search target: what each schedule step does to a 5-member `SwimSim`, and how
its run is judged (the suite's membership convergence check on every member's final view,
after the last heal and a settle of `SETTLE_S`; and a simulation-only accuracy check, `_Accuracy`:
no member suspects another over one cut link that indirect probes go around).

Kinds: ``partition`` (``a`` even: isolate member ``b``; odd: a two/three split), ``heal``,
``crash``, ``restart``, ``pause``/``resume`` (member ``b``), ``loss`` and ``dup`` (rate
``a``/10), ``delay`` (latency 2 + 20·``a`` ms, jitter 10·``b`` ms), and when asked
(``--hostile``) ``hostile``: one burst of `nodes.swim.hostile`'s datagrams at member ``b``
(``a % 3``: 0 every kind, 1 those from an unknown address, 2 those forged from a member's
address), sent through the simulated network as the real fault sends them through the relay.
``cut``: the link from member ``b`` to another (``a % 4`` picks it) one way, for `CUT_S`
(the last heal waits for it). ``leave``/``rejoin``: member ``b`` leaves the group (the
``leave`` command: a Leave to every member, then silence) or joins it again with a higher generation; the last heal rejoins every
member still out. Not drawn: joins of members outside the first group, clock skew (the core
reads only the simulated clock's intervals).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from checkers.membership import check_convergence
from faults.hostile import Target as HostileTarget
from harness.sim.play import play
from harness.sim.search import Outcome, Step, Target, witness_of
from harness.sim.swim import SwimSim, address
from nodes.swim import hostile
from nodes.swim.core import Options

N = 5
IDS = tuple(range(1, N + 1))
KINDS = ("partition", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "leave", "rejoin", "cut")
BUGS = ("no-refutation", "no-gossip-retransmit", "no-indirect-probes")
OPTS = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)
FORM_S = 10.0  # the group forms (every member joined through member 1) before the schedule
SETTLE_S = 30.0  # after the last heal: a dead verdict, a rejoin and its gossip fit in it
LATENCY_S = 0.002  # the links' base latency (the last heal's)
#: a ``cut`` of one link lasts this long: a member probes each other one within a few periods
CUT_S = 8.0
#: an accuracy window opens this long after its cut: probes and messages from before it end
GRACE_S = 2.0
#: the hostile peer's own id: outside every address book, as the real fault's socket is
ATTACKER = 0


def hostile_burst(sim: SwimSim, i: int, a: int) -> int:
    """One burst of SWIM's hostile datagrams at member ``i`` (``a % 3``: 0 all kinds, 1 the
    attacker's own, 2 the ones forged from a member's address); how many were sent. The kinds
    come from `nodes.swim.hostile` (the real ``hostile`` fault's), drawn from a random seeded
    by the run's seed and the time, so a replay sends the same bytes."""
    rng = random.Random(f"{sim.seed}:hostile:{sim.now!r}:{i}")
    targets = [HostileTarget(f"n{j}", j, *address(j)) for j in IDS]
    pick = [t for t in targets if t.num_id == i]
    sent = 0
    for node, kind, data, *via in hostile.messages(rng, pick + [t for t in targets
                                                                 if t.num_id != i]):
        if node != f"n{i}":
            continue
        forged = via[0] if via else None
        if (a % 3 == 1 and forged) or (a % 3 == 2 and not forged):
            continue
        src = ATTACKER if forged is None else int(forged.removeprefix("n"))
        sim.trace.append((sim.now, "hostile", i, kind))
        sent += sim.inject(src, i, src, data)
    return sent


@dataclass
class _Window:
    """A ``cut`` of the link x->y alone while nothing else is wrong: x's probe of y fails,
    but any of the three other members relays it, and y answers x directly (y->x works), so
    a correct member's indirect probe succeeds. (Cut both ways, y's answer is lost too, and
    correct SWIM suspects; so does y of x here: x's acks to y are lost.)"""

    x: int
    y: int
    start: float
    end: float


class _Accuracy:
    """Simulation-only accuracy check (SWIM's indirect probes exist for exactly this): while
    one link alone is cut, every member is running and in the group, links have their base
    latency and no loss, and every view held every member alive when the cut began, the
    cut link's sender may not suspect its receiver on its own probe (`GRACE_S` after the cut
    began, for messages and probes from before it). Any later step ends the window early.
    Simulation only: a real run cannot hold the rest of the network this still."""

    def __init__(self, sim: SwimSim) -> None:
        self.sim = sim
        self.windows: list[_Window] = []
        self.until = 0.0  # when the last cut ends

    def step(self) -> None:
        """Called before each step takes effect: the state changes now, so open windows end."""
        for w in self.windows:
            w.end = min(w.end, self.sim.now)

    def cut(self, x: int, y: int) -> None:
        sim = self.sim
        calm = (not sim.net.cut and not sim.net.loss and not sim.net.dup and not sim.net.jitter
                and sim.net.latency <= LATENCY_S and not sim.down
                and all(sim.running(i) and not c.left for i, c in sim.cores.items())
                and len(sim.cores) == N and sim.converged(set(IDS)))
        sim.net.cut_one_way(x, y)
        sim.trace.append((sim.now, "cut", x, y))
        sim.at(sim.now + CUT_S, lambda: self._uncut(x, y))
        self.until = max(self.until, sim.now + CUT_S)
        if calm:
            self.windows.append(_Window(x, y, sim.now, sim.now + CUT_S))

    def _uncut(self, x: int, y: int) -> None:
        self.sim.net.cut.discard((x, y))
        self.sim.trace.append((self.sim.now, "uncut", x, y))

    def witness(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for w in self.windows:
            for e in self.sim.events:
                if e.type == "suspect" and e.fields.get("local") and \
                        w.start + GRACE_S <= e.t < w.end and \
                        (e.node, e.fields.get("member")) == (w.x, w.y):
                    out.append({"kind": "suspected-over-one-cut-link", "checker": "accuracy",
                                "witness": {"t": round(e.t, 4), "by": f"n{e.node}",
                                            "member": f"n{e.fields['member']}",
                                            "cut": [f"n{w.x}", f"n{w.y}"],
                                            "since": round(w.start, 4)}})
                    break
        return out


def _step(sim: SwimSim, s: Step, acc: _Accuracy) -> None:
    kind, dt, a, b = s
    sim.run_for(dt / 1000)
    acc.step()
    i = IDS[b % N]
    if kind == "cut":  # member b and one other: a % 4 picks which
        acc.cut(i, IDS[(b + 1 + a % (N - 1)) % N])
    elif kind == "partition":
        others = [j for j in IDS if j != i]
        sim.partition([i], others) if a % 2 == 0 else sim.partition(IDS[:2], IDS[2:])
    elif kind == "hostile":
        hostile_burst(sim, i, a)
    elif kind in ("leave", "rejoin"):
        core = sim.cores.get(i)
        if core is not None and sim.running(i) and core.left == (kind == "rejoin"):
            sim.command(i, kind)
    else:
        sim.fault_step(kind, i, a, b, delay=(0.002, 0.02, 0.01))


def _states(sim: SwimSim) -> dict[str, dict[str, Any] | None]:
    """What each member's /admin/state says of its view (the fields the checker reads)."""
    out: dict[str, dict[str, Any] | None] = {}
    for i in IDS:
        core = sim.cores.get(i)
        out[f"n{i}"] = None if core is None else {
            "left": core.left, "capacity": OPTS.capacity,
            "members": [{**m, "name": f"n{m['id']}"} for m in core.view()]}
    return out


def _play_out(sim: SwimSim, acc: _Accuracy) -> None:
    """After the last step: a ``cut`` still on lasts its `CUT_S` (the last heal would end it)."""
    if acc.until > sim.now:
        sim.run_until(acc.until)


def _settle(sim: SwimSim) -> None:
    """After the last heal: every member that left joins again, then `SETTLE_S`."""
    for i, core in sorted(sim.cores.items()):
        if core.left:
            sim.command(i, "rejoin")
    sim.run_for(SETTLE_S)


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a freshly formed 5-member group and judge its final views."""
    sim = SwimSim(N, OPTS, seed=seed, bugs=bugs)
    acc = _Accuracy(sim)
    stuck = play(sim, schedule, lambda s: _step(sim, s, acc), ids=IDS, latency=LATENCY_S,
                 before=lambda: sim.run_for(FORM_S), settle=lambda: _settle(sim),
                 finish=lambda: _play_out(sim, acc))
    witness: list[dict[str, Any]] = [] if stuck is None else [stuck]
    if not witness:
        names = [f"n{i}" for i in IDS]
        witness += witness_of(check_convergence(_states(sim), names, set(names)))
        witness += acc.witness()
    trace = sim.trace_bytes() + json.dumps(witness, sort_keys=True, default=str).encode()
    return Outcome(not witness, witness, trace, [], sim.now)


TARGET = Target("swim", KINDS, BUGS, run, optional=("hostile", "skew"))
