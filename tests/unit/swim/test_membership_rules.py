"""The membership rules one at a time, each on the smallest evidence that decides it: what
the fault timeline counts, which declarations are excused, who must declare a crash, how the
periods and thresholds are counted, and which options and node facts set the windows.

Intervals are closed (an event at the instant a fault ends, or at the final snapshot, is
inside), and every ``swim_max_*`` threshold is a maximum: a figure equal to it passes."""

from __future__ import annotations

import math
from typing import Any

import pytest

from checkers.membership import (
    Aligned,
    Timeline,
    align,
    build_timeline,
    check_completeness,
    check_convergence,
    check_dissemination,
)
from checkers.membership import check as check_membership
from checkers.result import is_not_exercised
from tests.unit.swim.test_membership_checker import (
    NODES,
    S,
    child,
    ev,
    hist,
    kill_events,
    obs,
    state,
    test_desc,
)
from tests.unit.swim.test_membership_completeness import crash, detected
from tests.unit.swim.test_membership_completeness import e as hev
from tests.unit.swim.test_membership_dissemination import events as join_events


def op(t: float, process: Any, type_: str, f: str, value: Any = None) -> dict[str, Any]:
    return {"process": process, "type": type_, "f": f, "value": value, "time": int(t * S)}


def with_ops(h: list[dict[str, Any]], *ops: dict[str, Any]) -> list[dict[str, Any]]:
    """``h`` with client ``ops`` before its final op."""
    return h[:-1] + list(ops) + h[-1:]


def n1_declares_n2_dead_at(t: float) -> dict[str, list[dict[str, Any]]]:
    return {"n1": [ev(t, "dead", member=2, gen=0, by=1, local=True)]}


# ------------------------------------------------------------------------ the fault timeline


def test_a_failed_leave_is_no_leave() -> None:
    """Only an ``ok`` leave takes a node out: after a failed one, its declarations are judged."""
    h = with_ops(hist(), op(5, 7, "invoke", "leave"), op(5.1, 7, "fail", "leave", {"node": "n1"}))
    assert build_timeline(h, NODES).left == {}
    acc = child(check_membership(test_desc(), h, obs(n1_declares_n2_dead_at(30))), "accuracy")
    assert acc.valid is False and acc.stats["false_positives"] == 1


def test_an_end_with_nothing_open_closes_nothing() -> None:
    """A join of a node that never left (the workload's first joins), a restart or resume of
    a node never killed or paused: nothing to close, no interval, no error."""
    h = with_ops(hist((3, "restart", {"nodes": ["n2"]}), (4, "resume", {"nodes": ["n4"]}),
                      (6, "heal-all", {"resumed": ["n1"], "restarted": ["n3"]})),
                 op(2, 7, "invoke", "join"), op(2.5, 7, "ok", "join", "n3"))
    tl = build_timeline(h, NODES)
    assert (tl.crashed, tl.paused, tl.left, tl.kills) == ({}, {}, {}, [])
    assert child(check_membership(test_desc(), h, obs()), "accuracy").valid is True


def test_heal_all_ends_a_latency_for_good() -> None:
    h = hist((5, "start-latency", {"ms": 100}), (8, "heal-all", {}))
    assert build_timeline(h, NODES).slowed == [(5.0, 8.000001)]
    acc = child(check_membership(test_desc(), h, obs(n1_declares_n2_dead_at(30))), "accuracy")
    assert acc.valid is False  # 22 s after the latency ended: no excuse


# ------------------------------------------------------------------------ the time axis


def test_the_first_clock_sync_to_complete_sets_the_offset() -> None:
    syncs = [op(9, 0, "invoke", "clock-sync"), op(10, 1, "invoke", "clock-sync"),
             op(10.5, 1, "ok", "clock-sync", {"mono": 110.0}),   # completes first
             op(12, 0, "ok", "clock-sync", {"mono": 500.0})]
    nodes = {"nodes": {"n1": {"events": [{"type": "start", "t": 1.0, "mono": 100.0}]}}}
    al = align({}, syncs, nodes, {})
    assert al.method == "clock-sync"
    assert al.events["n1"][0]["ht"] == pytest.approx(100.0 - (110.0 - 10.25))


def test_an_event_at_the_final_snapshot_belongs_to_the_run() -> None:
    """Events *after* the final-state snapshot are the teardown; one at its instant is not."""
    sync = [op(0, 0, "invoke", "clock-sync"), op(0, 0, "ok", "clock-sync", {"mono": 1000.0})]
    nodes = {"nodes": {"n1": {"events": [{"type": "dead", "mono": 1050.0, "member": 2},
                                         {"type": "dead", "mono": 1050.5, "member": 3}],
                              "state": {"mono": 1050.0}}}}
    al = align({}, sync, nodes, {2: "n2", 3: "n3"})
    assert [e["member_name"] for e in al.events["n1"]] == ["n2"] and al.end == 50.0


def test_without_a_clock_the_final_views_are_still_judged() -> None:
    """No clock-sync, no started_wall, no journal: the journal checks have nothing to judge,
    but a wrong final view is still a convergence failure, not an error."""
    st = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n1"] = state("n1", ["n2", "n3"])
    o = {"nodes": {n: {"events": [], "state": st[n]} for n in NODES}}
    r = check_membership(test_desc(), [op(60, 0, "invoke", "noop")], o)
    assert r.valid is False and child(r, "convergence").valid is False
    assert child(r, "accuracy").valid == "unknown"


# ------------------------------------------------------------------------ convergence


def test_a_lone_survivor_is_not_an_orphan() -> None:
    """Everyone else left: the one live member tracks nobody, which is right."""
    states = {n: state(n, [], left=n != "n1") for n in NODES}
    r = check_convergence(states, NODES, set(NODES))
    assert r.valid is True and not r.anomalies and r.examined["live"] == 1


# ------------------------------------------------------------------------ accuracy


@pytest.mark.parametrize("fault", [
    pytest.param((9, "pause", {"nodes": ["n1"]}, 11, "resume", {"nodes": ["n1"]}),
                 id="the-declarer-was-paused"),
    pytest.param((9, "start-latency", {"ms": 300}, 11, "stop-latency", {}),
                 id="latency-on-the-network"),
])
def test_a_recent_fault_on_the_declarer_or_the_network_excuses_a_death(fault: tuple[Any, ...]
                                                                       ) -> None:
    """Within the grace window (7 s here) before the declaration; not after it."""
    t0, f0, v0, t1, f1, v1 = fault
    h = hist((t0, f0, v0), (t1, f1, v1))
    excused = check_membership(test_desc(), h, obs(n1_declares_n2_dead_at(14)))
    assert child(excused, "accuracy").valid is True, excused.explain()
    late = check_membership(test_desc(), h, obs(n1_declares_n2_dead_at(19)))
    assert child(late, "accuracy").valid is False


def test_the_false_positive_rate_is_per_member_hour_of_the_run() -> None:
    """Two false positives in a 0.5 s run of four members: 2 / (0.5 s * 4) = 3600 per
    member-hour, judged against ``swim_max_fp_per_member_hour``."""
    e = {"n1": [ev(0.2, "dead", member=2, gen=0, by=1, local=True)],
         "n3": [ev(0.3, "dead", member=4, gen=0, by=3, local=True)]}
    h = hist(end=0.5)
    strict = child(check_membership(test_desc(swim_max_fp_per_member_hour=3000), h, obs(e)),
                   "accuracy")
    assert strict.valid is False and strict.examined["deaths"] == 2
    loose = child(check_membership(test_desc(swim_max_fp_per_member_hour=4000), h, obs(e)),
                  "accuracy")
    assert loose.valid is True and loose.stats["false_positives"] == 2


def test_a_false_suspicion_rate_at_the_maximum_passes() -> None:
    """One false suspicion in 60 s of four members is 15 per member-hour."""
    e = {"n1": [ev(10, "suspect", member=2, gen=0, by=1, local=True)]}
    at = check_membership(test_desc(swim_max_false_suspicions_per_member_hour=15), hist(), obs(e))
    assert child(at, "accuracy").valid is True
    over = check_membership(test_desc(swim_max_false_suspicions_per_member_hour=14), hist(),
                            obs(e))
    assert child(over, "accuracy").valid is False


# ------------------------------------------------------------------------ completeness


def completeness(evs: dict[str, list[dict[str, Any]]], tl: Timeline, **kw: Any) -> Any:
    args = {"window": 5.0, "period": 1.0, "max_first_periods": None, "max_all_dead_s": None}
    return check_completeness(Aligned(evs, "clock-sync"), tl, NODES, **{**args, **kw})


def test_a_declaration_at_the_instant_of_the_restart_counts() -> None:
    evs = detected()
    evs["n3"] = [hev(5, "joined", "n4"), hev(30, "dead", "n4")]  # n4 restarted at 30
    assert completeness(evs, crash(10, 30)).valid is True
    evs["n3"] = [hev(5, "joined", "n4"), hev(30.5, "dead", "n4")]
    assert completeness(evs, crash(10, 30)).valid is False


def test_with_a_capacity_an_observer_that_tracked_the_victim_must_declare_it() -> None:
    """What decides is the victim's own last event in the observer's journal at the crash
    (an eviction at the crash instant is before it); other members' events do not count."""
    evs = detected()
    evs["n3"] = [hev(5, "joined", "n4"), hev(8, "evicted", "n1")]  # still tracks n4
    assert completeness(evs, crash(), capacity=2).valid is False
    evs["n3"] = [hev(5, "joined", "n4"), hev(10, "evicted", "n4")]  # at the crash instant
    assert completeness(evs, crash(), capacity=2).valid is True
    evs["n3"] = [hev(5, "joined", "n4"), hev(8, "evicted", "n4")]
    assert completeness(evs, crash(), capacity=1).valid is True  # any capacity, even one
    assert completeness(evs, crash(), capacity=0).valid is False  # no capacity: everyone


def test_first_detection_counts_whole_periods() -> None:
    """Period 0.2 s, crash at 10.0, the accuser's probe fails at 10.6: three whole periods
    (floating point makes 0.6 / 0.2 a hair under 3; it is still three)."""
    evs = detected()
    evs["n1"] = [hev(5, "joined", "n4"), hev(10.6, "suspect", "n4", local=True),
                 hev(14, "dead", "n4", local=True)]
    evs["n2"] = [hev(5, "joined", "n4"), hev(15, "dead", "n4")]
    r = completeness(evs, crash(), period=0.2, max_first_periods=3.0)
    assert r.valid is True and r.stats["first_detection_periods"]["max"] == 3.0
    assert completeness(evs, crash(), period=0.2, max_first_periods=2.9).valid is False


def test_a_time_until_all_declare_at_the_maximum_passes() -> None:
    assert completeness(detected(), crash(), max_all_dead_s=6.5).valid is True  # 16.5 - 10
    assert completeness(detected(), crash(), max_all_dead_s=6.4).valid is False


def test_a_crash_exactly_the_window_long_is_judged() -> None:
    evs = detected()
    evs["n3"] = [hev(5, "joined", "n4")]  # never declares
    r = completeness(evs, crash(10, 15), window=5.0)
    assert r.valid is False and r.stats["judged"] == 1
    assert is_not_exercised(completeness(evs, crash(10, 14.9), window=5.0))  # too short


def test_every_crash_long_enough_is_judged_after_a_short_one() -> None:
    kills = [("n4", 10.0, 12.0), ("n4", 20.0, 40.0), ("n4", 45.0, 60.0)]
    tl = Timeline(end=60, crashed={"n4": [(d, u) for _, d, u in kills]}, kills=kills)
    evs = {o: [hev(5, "joined", "n4"), hev(21, "dead", "n4", local=o == "n1"),
               hev(46, "dead", "n4", local=o == "n1")] for o in ("n1", "n2", "n3")}
    r = completeness(evs, tl)
    assert r.valid is True and r.examined["judged"] == 2 and r.stats["too_short"] == 1
    evs["n3"] = evs["n3"][:2]  # n3 never declares the third crash
    assert completeness(evs, tl).valid is False


# ------------------------------------------------------------------------ dissemination


def dissemination(evs: dict[str, list[dict[str, Any]]], tl: Timeline | None = None,
                  period: float = 1.0, max_periods: float | None = None) -> Any:
    return check_dissemination(Aligned(evs, "clock-sync"), tl or Timeline(end=60), NODES,
                               window=5, period=period, max_periods=max_periods, capacity=0)


def test_a_rejoin_is_measured_after_a_troubled_join() -> None:
    """n2's first join (t=10) is under a pause and not measured; its rejoin at 30 is."""
    evs = join_events()
    evs["n2"].append(hev(30, "join-ok", None, seed=1, gen=2))
    for o, t in (("n1", 30.5), ("n3", 31.0), ("n4", 32.0)):
        evs[o].append({"ht": t, "type": "joined", "member_name": "n2", "gen": 2})
    r = dissemination(evs, Timeline(end=60, paused={"n2": [(11.0, 13.0)]}))
    assert r.valid is True and r.stats["join_periods"]["max"] == 2.0


def test_an_observer_may_learn_of_a_join_up_to_one_period_early() -> None:
    evs = join_events()
    evs["n4"][1]["ht"] = 9.0  # exactly one period before n2's join-ok at 10
    assert dissemination(evs, max_periods=10).valid is True
    evs["n4"][1]["ht"] = 8.9  # before that: a stale sighting, the join never reached n4
    assert dissemination(evs, max_periods=10).valid is False


def test_join_periods_are_counted_in_the_protocol_period_and_the_maximum_passes() -> None:
    """The slowest observer (n3) has n2 alive 2 s after its join: 4 periods of 0.5 s."""
    evs = join_events()
    evs["n4"][1]["ht"] = 9.6  # within the half-second lead
    assert dissemination(evs, period=0.5, max_periods=4.0).valid is True
    assert dissemination(evs, period=0.5, max_periods=3.9).valid is False


def test_a_death_spread_is_measured_over_healthy_observers_only() -> None:
    """n1, cut off by a partition, declares n4 dead: a cut-off node's own verdict has not
    spread anywhere. When n3 (healthy) also declares it 2 s later, that is the spread."""
    tl = Timeline(end=60, cut={"n1": [(15.0, 25.0)], "n4": [(15.0, 25.0)]})
    evs: dict[str, list[dict[str, Any]]] = {
        "n1": [hev(20, "dead", "n4", local=True)], "n2": [], "n3": [], "n4": []}
    alone = dissemination(evs, tl)
    assert alone.valid == "unknown" and alone.examined["deaths"] == 0
    evs["n3"] = [hev(22, "dead", "n4")]
    spread = dissemination(evs, tl)
    assert spread.valid is True and spread.stats["death_spread_periods"]["max"] == 2.0


# ------------------------------------------------------------------------ options and nodes


def many(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


def test_member_ids_follow_the_tests_node_order_and_the_timeout_grows_with_the_group() -> None:
    """Twelve nodes: member 12 is n12 (the 12th in the test's order, not in sorted order),
    and the suspicion timeout is 4 * log10(12) periods = 4.3 s, so the grace is 7.3 s: a
    death of n12 declared 7 s after its pause ended is excused."""
    names = many(12)
    h = hist((9, "pause", {"nodes": ["n12"]}), (11, "resume", {"nodes": ["n12"]}))
    o = {"nodes": {n: {"events": [ev(0, "start", gen=0)], "state": None} for n in names}}
    o["nodes"]["n1"]["events"].append(ev(18, "dead", member=12, gen=0, by=1, local=True))
    r = check_membership({"nodes": names, "options": {"period_s": 1.0, "suspicion_mult": 4}},
                         h, o)
    assert child(r, "accuracy").valid is True, r.explain()
    o["nodes"]["n1"]["events"][-1] = ev(18.5, "dead", member=12, gen=0, by=1, local=True)
    r = check_membership({"nodes": names, "options": {"period_s": 1.0, "suspicion_mult": 4}},
                         h, o)
    assert child(r, "accuracy").valid is False


def test_without_nodes_in_the_test_the_observed_nodes_are_judged() -> None:
    r = check_membership({"options": {"period_s": 1.0}}, hist(), obs(n1_declares_n2_dead_at(14)))
    assert child(r, "accuracy").valid is False and r.stats["nodes"] == 4


def test_the_grace_and_window_options_are_honoured() -> None:
    h = hist((9, "pause", {"nodes": ["n2"]}), (11, "resume", {"nodes": ["n2"]}))
    e = n1_declares_n2_dead_at(14)
    assert child(check_membership(test_desc(), h, obs(e)), "accuracy").valid is True
    tight = check_membership(test_desc(swim_grace_s=1.0), h, obs(e))
    assert child(tight, "accuracy").valid is False
    h = hist((20, "kill", {"nodes": ["n4"]}), (25, "restart", {"nodes": ["n4"]}))
    assert is_not_exercised(child(check_membership(test_desc(), h, obs()), "completeness"))
    short = check_membership(test_desc(swim_completeness_window_s=3.0), h, obs())
    assert child(short, "completeness").valid is False  # nobody declared the 5 s crash


def test_the_all_dead_bound_option_is_honoured() -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (40, "restart", {"nodes": ["n4"]}))
    e = kill_events(["n1", "n2", "n3"])  # all dead by 26: 6 s
    ok = check_membership(test_desc(swim_max_all_dead_s=6.0), h, obs(e))
    assert child(ok, "completeness").valid is True
    slow = check_membership(test_desc(swim_max_all_dead_s=5.0), h, obs(e))
    assert child(slow, "completeness").valid is False


def test_a_capacity_the_nodes_ran_with_applies_when_the_test_sets_none() -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (40, "restart", {"nodes": ["n4"]}))
    e = kill_events(["n1", "n2"])
    e["n3"] = [ev(2, "joined", member=4, gen=0, via=1), ev(3, "evicted", member=4)]
    o = obs(e)
    o["nodes"]["n1"]["events"][0]["options"] = {"capacity": 2}
    assert child(check_membership(test_desc(), h, o), "completeness").valid is True
    assert child(check_membership(test_desc(), h, obs(e)), "completeness").valid is False


def test_the_run_lasts_until_the_final_snapshot() -> None:
    """The history's last op is at 30 s, the nodes' final state at 50 s: n4, killed at 10
    and never restarted, declared dead by everyone at 40 s was detected while down."""
    h = hist((10, "kill", {"nodes": ["n4"]}), end=30)
    e = kill_events(["n1", "n2", "n3"], dead_at=40)
    o = obs(e)
    for n in NODES:
        if o["nodes"][n]["state"] is not None:
            o["nodes"][n]["state"]["mono"] = 1050.0
    r = check_membership(test_desc(), h, o)
    assert child(r, "completeness").valid is True, r.explain()
    assert r.stats["duration_s"] == 50.0 and not math.isinf(r.stats["duration_s"])
