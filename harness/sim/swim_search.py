"""SWIM as a search target: what each schedule step does to a 5-member `SwimSim`, and how
its run is judged (the suite's membership convergence check on every member's final view,
after the last heal and a settle of `SETTLE_S`; and two simulation-only checks: accuracy,
`_Accuracy`: no member suspects another over one cut link that indirect probes go around;
dissemination speed, `_Dissemination`: a rejoin in a quiet stretch reaches every member within
the gossip bound `GOSSIP_PERIODS`).

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
import math
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
#: the gossip bound, in protocol periods: the SWIM paper (Das, Gupta and Motivala, DSN 2002,
#: section 4.1) has an update piggybacked lambda*log(n) times reach every member within
#: O(log n) periods with high probability; lambda = 1.5 over log2 is the real runs' bound
#: (`swim_max_dissemination_periods` = 5 at 10 members, tests/chaos/test_swim_chaos.py). At 5
#: members: 3.48 periods, well before a member's first sync (`Options.sync_periods`, 10).
GOSSIP_PERIODS = 1.5 * math.log2(N)
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


def _still(sim: SwimSim) -> bool:
    """Nothing wrong with the network or a process: no cut, loss, duplication or jitter,
    base latency, every member running on a true-rate clock (the quiet-stretch checks'
    condition, besides the views)."""
    net = sim.net
    return (not net.cut and not net.loss and not net.dup and not net.jitter
            and net.latency <= LATENCY_S and not sim.down and len(sim.cores) == N
            and all(sim.running(i) for i in IDS)
            and all(n.clock is None or n.clock[2] == 1.0 for n in sim.nodes.values()))


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
    began, for messages and probes from before it). A later step that changes anything
    (`_step`) ends the window early.
    Simulation only: a real run cannot hold the rest of the network this still."""

    def __init__(self, sim: SwimSim) -> None:
        self.sim = sim
        self.windows: list[_Window] = []
        self.until = 0.0  # when the last cut ends

    def step(self, before: int) -> None:
        """A step changed the state (`_disturbed`): the windows opened before it end now."""
        for w in self.windows[:before]:
            w.end = min(w.end, self.sim.now)

    def cut(self, x: int, y: int) -> None:
        sim = self.sim
        calm = (_still(sim) and all(not c.left for c in sim.cores.values())
                and sim.converged(set(IDS)))
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
                                "message": f"n{w.x} suspected n{w.y} with only the link "
                                           f"n{w.x}->n{w.y} cut (indirect probes go round it)",
                                "witness": {"t": round(e.t, 4), "by": f"n{e.node}",
                                            "member": f"n{e.fields['member']}",
                                            "cut": [f"n{w.x}", f"n{w.y}"],
                                            "since": round(w.start, 4)}})
                    break
        return out


@dataclass
class _Rejoin:
    """Member ``member`` rejoined (generation ``gen``) at ``since`` in a quiet stretch; the
    stretch ends at ``end`` (the next step, or the run's end)."""

    member: int
    gen: int
    since: float
    end: float = math.inf


class _Dissemination:
    """Simulation-only dissemination check (the speed the spec's piggy-backed gossip exists
    for; the periodic sync mends slow views later, so final views alone cannot see it): a
    member that rejoins while every other member is running, in the group and agreed on who
    is alive, with links at their base latency, no loss, duplication or cut, must be known
    alive at its new generation by every other member within `GOSSIP_PERIODS` of its
    ``join-ok``. Judged only if no step changed anything before that bound. At 5 members a joiner's own
    probes reach the four others in 3-4 periods, so the bound passes only with gossip
    re-sent (retransmitted) as the spec's infection-style dissemination does."""

    def __init__(self, sim: SwimSim) -> None:
        self.sim = sim
        self.rejoins: list[_Rejoin] = []

    def step(self, before: int) -> None:
        """As `_Accuracy.step`: the rejoins watched before a disturbing step stop being judged."""
        for r in self.rejoins[:before]:
            r.end = min(r.end, self.sim.now)

    def rejoin(self, i: int) -> None:
        """Member ``i`` (left, running) rejoins; watched if nothing else is wrong now."""
        sim = self.sim
        others = set(IDS) - {i}
        calm = (_still(sim) and not any(sim.cores[j].left for j in others)
                and all(sim.alive_view(j) == others - {j} for j in others))
        sim.command(i, "rejoin")
        if calm:
            self.rejoins.append(_Rejoin(i, sim.cores[i].gen, sim.now))

    def witness(self) -> list[dict[str, Any]]:
        sim, bound = self.sim, GOSSIP_PERIODS * OPTS.period_s
        out: list[dict[str, Any]] = []
        for r in self.rejoins:
            ok = [e.t for e in sim.events if e.type == "join-ok" and e.node == r.member
                  and e.fields.get("gen") == r.gen and e.t >= r.since]
            if not ok or ok[0] + bound > min(r.end, sim.now):
                continue  # not joined, or the quiet stretch ended before the bound
            t0, late = ok[0], []
            for o in IDS:
                if o == r.member:
                    continue
                seen = [e.t for e in sim.events if e.node == o and e.type in ("joined", "alive")
                        and e.fields.get("member") == r.member
                        and (e.fields.get("gen") or 0) >= r.gen and e.t >= r.since]
                if not seen or seen[0] > t0 + bound:
                    late.append({"member": f"n{o}",
                                 "learned_after_periods": round((seen[0] - t0) / OPTS.period_s, 2)
                                 if seen else None})
            if late:
                slow = ", ".join(f"{x['member']} after {x['learned_after_periods']}"
                                 for x in late)
                out.append({"kind": "gossip-too-slow", "checker": "dissemination",
                            "message": f"n{r.member}'s quiet rejoin reached {slow} periods "
                                       f"> the gossip bound {GOSSIP_PERIODS:.2f}",
                            "witness": {"joiner": f"n{r.member}", "gen": r.gen,
                                        "join_ok": round(t0, 4),
                                        "bound_periods": round(GOSSIP_PERIODS, 2),
                                        "late": late}})
        return out


def _state(sim: SwimSim) -> tuple[Any, ...]:
    """What the quiet-stretch checks rely on and a step may change: the links, and each
    member's process (incarnation, up, paused, clock) and membership (left, generation)."""
    net = sim.net
    return (frozenset(net.cut), net.loss, net.dup, net.latency, net.jitter,
            tuple((i, n.boot, n.up, n.paused, n.clock) for i, n in sorted(sim.nodes.items())),
            tuple((i, c.left, c.gen) for i, c in sorted(sim.cores.items())))


def _step(sim: SwimSim, s: Step, acc: _Accuracy, dis: _Dissemination) -> None:
    """One step; the checks' windows end only if it changed something (`_state`; a hostile
    burst always does): a step that changes nothing (a heal with nothing cut, loss or
    delay at the values already on, resuming a running member) leaves the stretch quiet."""
    kind, dt, a, b = s
    sim.run_for(dt / 1000)
    state, windows, rejoins = _state(sim), len(acc.windows), len(dis.rejoins)
    _apply(sim, s, acc, dis)
    if kind == "hostile" or _state(sim) != state:
        acc.step(windows)
        dis.step(rejoins)


def _apply(sim: SwimSim, s: Step, acc: _Accuracy, dis: _Dissemination) -> None:
    kind, _dt, a, b = s
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
            dis.rejoin(i) if kind == "rejoin" else sim.command(i, kind)
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


def _settle(sim: SwimSim, dis: _Dissemination) -> None:
    """After the last heal: every member that left joins again, then `SETTLE_S`."""
    for i, core in sorted(sim.cores.items()):
        if core.left:
            dis.rejoin(i)
    sim.run_for(SETTLE_S)


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a freshly formed 5-member group and judge its final views."""
    sim = SwimSim(N, OPTS, seed=seed, bugs=bugs)
    acc, dis = _Accuracy(sim), _Dissemination(sim)
    stuck = play(sim, schedule, lambda s: _step(sim, s, acc, dis), ids=IDS, latency=LATENCY_S,
                 before=lambda: sim.run_for(FORM_S), settle=lambda: _settle(sim, dis),
                 finish=lambda: _play_out(sim, acc))
    witness: list[dict[str, Any]] = [] if stuck is None else [stuck]
    if not witness:
        names = [f"n{i}" for i in IDS]
        witness += witness_of(check_convergence(_states(sim), names, set(names)))
        witness += acc.witness()
        witness += dis.witness()
    tail = json.dumps(witness, sort_keys=True, default=str).encode()
    return Outcome(not witness, witness, lambda: sim.trace_bytes() + tail, [], sim.now)


TARGET = Target("swim", KINDS, BUGS, run, optional=("hostile", "skew"))
