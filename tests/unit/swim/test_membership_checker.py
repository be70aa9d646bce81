"""checkers.membership on hand-made journals, views and histories: each property must fail
on evidence that breaks it, and pass on evidence that keeps it."""

from __future__ import annotations

from typing import Any

from checkers.membership import build_timeline
from checkers.membership import check as check_membership
from checkers.result import is_not_exercised
from tests.unit.golden import Golden

NODES = ["n1", "n2", "n3", "n4"]
S = 1_000_000_000  # ns


def test_desc(**options: Any) -> dict[str, Any]:
    return {"nodes": NODES, "options": {"period_s": 1.0, "suspicion_mult": 4, **options}}


test_desc.__test__ = False  # type: ignore[attr-defined]


def hist(*ops: tuple[float, str, Any], end: float = 60.0) -> list[dict[str, Any]]:
    """Nemesis ops as (time_s, f, completion value); a clock-sync at 0 with mono 1000."""
    out: list[dict[str, Any]] = [
        {"process": 0, "type": "invoke", "f": "clock-sync", "value": None, "time": 0},
        {"process": 0, "type": "ok", "f": "clock-sync", "value": {"mono": 1000.0, "wall": 0},
         "time": 0},
    ]
    for t, f, v in ops:
        out.append({"process": "nemesis", "type": "invoke", "f": f, "value": None,
                    "time": int(t * S)})
        out.append({"process": "nemesis", "type": "info", "f": f, "value": v,
                    "time": int(t * S) + 1000})
    out.append({"process": 0, "type": "invoke", "f": "noop", "value": None, "time": int(end * S)})
    return out


def ev(t: float, type_: str, **kw: Any) -> dict[str, Any]:
    return {"t": 1.7e9 + t, "mono": 1000.0 + t, "type": type_, **kw}


def state(name: str, alive: list[str], dead: list[str] = (), capacity: int = 0,
          left: bool = False) -> dict[str, Any]:
    ids = {n: i + 1 for i, n in enumerate(NODES)}
    members = [{"id": ids[n], "name": n, "gen": 0, "state": "alive"} for n in alive]
    members += [{"id": ids[n], "name": n, "gen": 0, "state": "dead"} for n in dead]
    # 60 periods at 2 datagrams (a probe and an ack) of 40 bytes each: a quiet member's cost
    return {"id": name, "members": members, "capacity": capacity, "left": left, "period": 60,
            "stats": {"datagrams_out": 120, "bytes_out": 4800}}


def obs(events: dict[str, list[dict[str, Any]]] | None = None,
        states: dict[str, dict[str, Any] | None] | None = None) -> dict[str, Any]:
    events = events or {}
    states = states if states is not None else {
        n: state(n, [m for m in NODES if m != n]) for n in NODES}
    return {"nodes": {n: {"events": [ev(0, "start", gen=0)] + events.get(n, []),
                          "state": states.get(n)} for n in NODES}}


def child(res: Any, name: str) -> Any:
    return next(c for c in res.children if c.checker == name)


def joined_group() -> dict[str, list[dict[str, Any]]]:
    """n1 founds the group; n2..n4 join through it and n1 learns each a moment later."""
    out = {"n1": [ev(0.5, "join-ok", seed=None, gen=0)]
           + [ev(1.2, "joined", member=i, gen=0, via=i) for i in (2, 3, 4)]}
    for n in NODES[1:]:
        out[n] = [ev(1.0, "join-ok", seed=1, gen=0)]
    return out


def test_all_good(golden: Golden) -> None:
    res = check_membership(test_desc(), hist(), obs(joined_group()))
    golden(res)
    assert res.valid is True, res.explain()


def test_view_missing_a_live_member_is_not_converged(golden: Golden) -> None:
    st = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n1"] = state("n1", ["n2", "n3"], dead=["n4"])
    res = check_membership(test_desc(), hist(), obs(states=st))
    golden(res)
    conv = child(res, "convergence")
    assert conv.valid is False and conv.anomalies[0].witness["missing"] == ["n4"]


def test_left_member_must_not_be_alive_anywhere(golden: Golden) -> None:
    st = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n4"] = state("n4", [], left=True)
    res = check_membership(test_desc(), hist(), obs(states=st))
    golden(res)
    assert child(res, "convergence").valid is False  # n1..n3 still hold n4 alive


def test_capacity_rules(golden: Golden) -> None:
    ring = {"n1": ["n2", "n4"], "n2": ["n1", "n3"], "n3": ["n2", "n4"], "n4": ["n3", "n1"]}
    st = {n: state(n, ring[n], capacity=2) for n in NODES}
    ok = golden(check_membership(test_desc(), hist(), obs(states=st)))
    assert child(ok, "convergence").valid is True, ok.explain()
    st["n2"] = state("n2", ["n1", "n3", "n4"], capacity=2)
    bad = golden(check_membership(test_desc(), hist(), obs(states=st)))
    assert [a.kind for a in child(bad, "convergence").anomalies] == ["over-capacity"]
    orphan = {n: state(n, ["n1"] if n != "n1" else ["n2"], capacity=2) for n in NODES}
    res = check_membership(test_desc(), hist(), obs(states=orphan))
    golden(res)
    assert "orphan" in [a.kind for a in child(res, "convergence").anomalies]


def test_missing_final_state_is_unknown_not_a_pass(golden: Golden) -> None:
    st: dict[str, Any] = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n3"] = None
    res = check_membership(test_desc(), hist(), obs(states=st))
    golden(res)
    assert child(res, "convergence").valid == "unknown"


def test_false_positive_on_a_healthy_member(golden: Golden) -> None:
    e = {"n1": [ev(10, "suspect", member=2, gen=0, by=1, local=True),
                ev(14, "dead", member=2, gen=0, by=1, local=True)]}
    res = check_membership(test_desc(), hist(), obs(e))
    golden(res)
    acc = child(res, "accuracy")
    assert acc.valid is False and acc.stats["false_positives"] == 1
    assert acc.anomalies[0].witness["member"] == "n2"


def test_death_of_a_paused_or_cut_member_is_excused_but_loss_is_not(golden: Golden) -> None:
    e = {"n1": [ev(14, "dead", member=2, gen=0, by=1, local=True)]}
    paused = hist((9, "pause", {"nodes": ["n2"]}), (11, "resume", {"nodes": ["n2"]}))
    assert child(golden(check_membership(test_desc(), paused, obs(e))), "accuracy").valid is True
    cut = hist((9, "start-partition", {"cut": [["n1", "n2"], ["n2", "n1"]]}),
               (12, "stop-partition", {}))
    assert child(golden(check_membership(test_desc(), cut, obs(e))), "accuracy").valid is True
    loss = hist((9, "start-loss", {"p": 0.3}), (20, "stop-loss", {}))
    assert child(golden(check_membership(test_desc(), loss, obs(e))), "accuracy").valid is False
    # hearsay deaths are the accuser's, not the repeater's
    hearsay = {"n1": [ev(14, "dead", member=2, gen=0, by=3, local=False)]}
    assert child(golden(check_membership(test_desc(), hist(), obs(hearsay))), "accuracy").valid is True


def test_false_suspicion_threshold(golden: Golden) -> None:
    e = {"n1": [ev(10 + i, "suspect", member=2, gen=i, by=1, local=True) for i in range(5)]}
    res = check_membership(test_desc(swim_max_false_suspicions_per_member_hour=10), hist(),
                           obs(e))
    golden(res)
    assert child(res, "accuracy").valid is False
    res = check_membership(test_desc(), hist(), obs(e))
    golden(res)
    assert child(res, "accuracy").valid is True  # reported only


def kill_events(observers: list[str], dead_at: float = 26.0) -> dict[str, list[dict[str, Any]]]:
    out = {"n2": [ev(21.5, "suspect", member=4, gen=0, by=2, local=True)]}
    for o in observers:
        out.setdefault(o, []).append(ev(dead_at, "dead", member=4, gen=0, by=2, local=o == "n2"))
    return out


def test_crashed_member_declared_dead_by_every_survivor(golden: Golden) -> None:
    h = hist((20, "kill", {"node": "n4", "nodes": ["n4"]}),
             (40, "restart", {"nodes": ["n4"]}))
    res = check_membership(test_desc(swim_max_first_detection_periods=2.0), h,
                           obs(kill_events(["n1", "n2", "n3"])))
    golden(res)
    comp = child(res, "completeness")
    assert comp.valid is True, res.explain()
    assert comp.stats["first_detection_since_crash_periods"]["mean"] == 1.5
    assert comp.stats["first_detection_periods"]["mean"] == 1.0  # whole periods (the paper's)
    assert comp.stats["all_survivors_dead_s"]["max"] == 6.0
    slow = check_membership(test_desc(swim_max_first_detection_periods=0.5), h,
                            obs(kill_events(["n1", "n2", "n3"])))
    assert child(slow, "completeness").valid is False


def test_survivor_that_never_declares_the_crash_is_incomplete(golden: Golden) -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (40, "restart", {"nodes": ["n4"]}))
    res = check_membership(test_desc(), h, obs(kill_events(["n1", "n2"])))
    golden(res)
    comp = child(res, "completeness")
    assert comp.valid is False
    assert comp.anomalies[0].witness == {"node": "n3", "member": "n4", "down_s": 20.0,
                                         "up_s": 40.0}


def test_short_crash_is_not_judged(golden: Golden) -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (22, "restart", {"nodes": ["n4"]}))
    comp = child(golden(check_membership(test_desc(), h, obs())), "completeness")
    assert is_not_exercised(comp) and comp.stats["too_short"] == 1


def test_join_dissemination_figures_and_threshold(golden: Golden) -> None:
    e = {"n4": [ev(1, "join-ok", seed=1, gen=0)],
         "n1": [ev(0.5, "join-ok", seed=None, gen=0), ev(1.1, "joined", member=4, gen=0, via=1)],
         "n2": [ev(0.6, "join-ok", seed=1, gen=0), ev(3, "joined", member=4, gen=0, via=1)],
         "n3": [ev(0.7, "join-ok", seed=1, gen=0), ev(6, "joined", member=4, gen=0, via=2)]}
    res = check_membership(test_desc(swim_max_dissemination_periods=3), hist(), obs(e))
    golden(res)
    dis = child(res, "dissemination")
    assert dis.stats["join_periods"]["max"] == 5.0 and dis.valid is False
    e["n3"] = e["n3"][:1]
    res = check_membership(test_desc(swim_max_dissemination_periods=30), hist(), obs(e))
    golden(res)
    assert child(res, "dissemination").valid is False  # never reached n3


def test_timeline_from_heal_all() -> None:
    h = hist((5, "kill", {"nodes": ["n2"]}), (6, "pause", {"nodes": ["n3"]}),
             (9, "heal-all", {"links": [], "resumed": ["n3"], "restarted": ["n2"]}))
    tl = build_timeline(h, NODES)
    assert tl.kills == [("n2", 5.0, 9.000001)]
    assert tl.troubled("n3", 7, 8) and not tl.troubled("n3", 10, 11)


def test_with_capacity_only_members_that_tracked_the_victim_must_declare_it(golden: Golden) -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (40, "restart", {"nodes": ["n4"]}))
    e = kill_events(["n1", "n2"])
    e["n1"].insert(0, ev(2, "joined", member=4, gen=0, via=1))
    e["n2"].insert(0, ev(2, "joined", member=4, gen=0, via=1))
    e["n3"] = [ev(2, "joined", member=4, gen=0, via=1), ev(3, "left", member=4, gen=0)]
    res = check_membership(test_desc(capacity=2), h, obs(e))
    golden(res)
    assert child(res, "completeness").valid is True, res.explain()
    for gone in ("evicted", "dropped"):  # made room for another member / stopped tracking
        e["n3"] = [ev(2, "joined", member=4, gen=0, via=1), ev(3, gone, member=4)]
        res = golden(check_membership(test_desc(capacity=2), h, obs(e)))
        assert child(res, "completeness").valid is True, (gone, res.explain())
    e["n3"] = [ev(2, "joined", member=4, gen=0, via=1)]  # n3 tracked it and never noticed
    res = check_membership(test_desc(capacity=2), h, obs(e))
    golden(res)
    assert child(res, "completeness").valid is False


def test_torn_journal_makes_journal_checks_unknown(golden: Golden) -> None:
    o = obs()
    o["nodes"]["n2"]["missing"] = [{"what": "event", "type": "dead", "detail": "torn line 7"}]
    res = check_membership(test_desc(), hist(), o)
    golden(res)
    assert child(res, "accuracy").valid == "unknown"
    assert child(res, "convergence").valid is True
