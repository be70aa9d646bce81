"""The issue-25 bug modes of the SWIM core on the simulator, each judged by the membership
checker from the simulated journals, final views and send counters: the exact leaf flags the
buggy members and passes correct ones on the same seed and schedule."""

from __future__ import annotations

from typing import Any

from checkers.membership import check as check_membership
from harness.sim.swim import WIRE
from harness.sim.swim import SwimSim as Sim
from nodes.swim import codec as c
from nodes.swim.core import Options

FAST = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)
S = 1_000_000_000
#: bytes a member sends per period: correct members of 10 send about 73 (seed 10), members
#: that piggyback every update every time about 280
BYTES = 150


def name(i: int) -> str:
    return f"n{i}"


def judge(s: Sim, ops: list[tuple[float, str, str, str]], **options: Any) -> Any:
    """The checker's verdict on ``s`` so far; ``ops`` are (time, process, f, node) completions
    of what the test did (nemesis pauses, a client leave), on the simulator's clock."""
    history: list[dict[str, Any]] = [
        {"process": 0, "type": "invoke", "f": "clock-sync", "value": None, "time": 0},
        {"process": 0, "type": "ok", "f": "clock-sync", "value": {"mono": 0.0}, "time": 0}]
    for t, proc, f, node in ops:
        kind = "info" if proc == "nemesis" else "ok"
        history += [{"process": proc, "type": "invoke", "f": f, "value": {"node": node},
                     "time": int(t * S)},
                    {"process": proc, "type": kind, "f": f,
                     "value": {"nodes": [node]} if proc == "nemesis" else {"node": node},
                     "time": int(t * S) + 1}]
    history.append({"process": 0, "type": "invoke", "f": "noop", "value": None,
                    "time": int(s.now * S)})
    sent: dict[int, list[int]] = {}
    for rec in s.trace:
        if rec[1] == "send":
            sent.setdefault(rec[2], []).append(int(rec[4] or 0))
    nodes = {}
    for i, core in s.cores.items():
        evs = [{"t": 0.0, "mono": 0.0, "type": "start", "gen": 0}]
        evs += [{"t": e.t, "mono": e.t, "type": e.type, **e.fields}
                for e in s.events if e.node == i]
        nodes[name(i)] = {"events": evs, "state": {
            "id": name(i), "num_id": i, "left": core.left, "capacity": 0, "mono": s.now,
            "members": [{**m, "name": name(m["id"])} for m in core.view()],
            "period": core.period, "stats": {"datagrams_out": len(sent.get(i, [])),
                                              "bytes_out": sum(sent.get(i, []))}}}
    test = {"nodes": [name(i) for i in sorted(s.cores)],
            "options": {"period_s": 1.0, "suspicion_mult": 4, **options}}
    return check_membership(test, history, {"nodes": nodes})


def leaf(res: Any, path: str) -> Any:
    return next(ch for ch in res.children if ch.checker == path)


def test_ignore_leave_is_caught_by_the_leave_leaf() -> None:
    def run(bugs: tuple[str, ...]) -> Any:
        s = Sim(5, FAST, seed=7, bugs=bugs)
        s.run_for(8)
        t = s.now
        s.command(4, "leave")
        s.run_for(20)
        return judge(s, [(t, "client", "leave", "n4")])

    bad, good = leaf(run(("ignore-leave",)), "leave"), leaf(run(()), "leave")
    assert bad.valid is False and {a.kind for a in bad.anomalies} == {"dead-not-left"}
    assert good.valid is True and good.examined["leaves"] == 1, good.explain()


def paused(s: Sim, member: int, paused_for: float) -> list[tuple[float, str, str, str]]:
    """After 8 s of warm-up, pause ``member`` for ``paused_for`` s: the nemesis ops."""
    s.run_for(8)
    t = s.now
    s.pause(member)
    s.run_for(paused_for)
    s.resume(member)
    return [(t, "nemesis", "pause", f"n{member}"), (s.now, "nemesis", "resume", f"n{member}")]


def test_never_suspect_paused_is_caught_by_the_detection_leaf() -> None:
    def run(bugs: tuple[str, ...]) -> Any:
        s = Sim(5, FAST, seed=8, bugs=bugs)
        faults = paused(s, 3, paused_for=10)
        s.run_for(10)
        return judge(s, faults)

    bad, good = leaf(run(("never-suspect-paused",)), "detection"), leaf(run(()), "detection")
    assert bad.valid is False and bad.anomalies[0].kind == "undetected-pause"
    assert good.valid is True and good.examined["outages"] == 1, good.explain()


def test_accept_forged_dead_is_caught_by_the_gossip_accuracy_leaf() -> None:
    """n4 is paused until declared dead, resumes and refutes (gen 1); then n2 repeats the old
    DEAD at gen 0 to n1: a correct member keeps n4 alive, a buggy one takes it dead again."""
    def run(bugs: tuple[str, ...]) -> Any:
        s = Sim(5, FAST, seed=9, bugs=bugs)
        faults = paused(s, 4, paused_for=9)
        s.run_for(25)
        assert s.cores[1].members[4].gen >= 1
        stale = c.Update(c.UpdateKind.DEAD, c.NodeInfo(4, 0), 2)
        ping = c.PingRequest(2, 1, 0, c.Payload(0, (stale,), (c.NodeInfo(2, s.cores[2].gen),)))
        s._deliver(s.nodes[1], 2, WIRE.encode(ping))
        s.run_for(5)
        return judge(s, faults)

    bad = leaf(run(("accept-forged-dead",)), "gossip-accuracy")
    good = leaf(run(()), "gossip-accuracy")
    assert bad.valid is False and "stale-gossip-death" in {a.kind for a in bad.anomalies}
    assert good.valid is True and good.examined["gossip_deaths"] > 0, good.explain()


def test_unbounded_gossip_is_caught_by_the_cost_leaf() -> None:
    def run(bugs: tuple[str, ...]) -> Any:
        s = Sim(10, FAST, seed=10, bugs=bugs)
        s.run_for(40)
        return judge(s, [], swim_max_bytes_per_member_period=BYTES)

    bad, good = leaf(run(("unbounded-gossip",)), "cost"), leaf(run(()), "cost")
    assert bad.valid is False and bad.anomalies[0].kind == "dissemination-cost"
    assert good.valid is True, good.explain()

