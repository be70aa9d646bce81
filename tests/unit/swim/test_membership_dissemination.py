"""Dissemination on hand-placed events: how long a join and a death take to reach everyone,
which observers count, and when a join that never reached everyone fails the run."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.membership import Aligned, Timeline, check_dissemination
from checkers.result import is_not_exercised
from tests.unit.golden import Golden

NODES = ["n1", "n2", "n3", "n4"]


def e(ht: float, type_: str, **kw: Any) -> dict[str, Any]:
    return {"ht": ht, "type": type_, **kw}


def events() -> dict[str, list[dict[str, Any]]]:
    """n1, n3, n4 founded the group by t=2 (no seed); n2 joins (gen 1) at t=10 through n1."""
    return {
        "n1": [e(1, "join-ok", seed=None), e(10.5, "joined", member_name="n2", gen=1)],
        "n2": [e(10, "join-ok", seed=1, gen=1)],
        "n3": [e(2, "join-ok", seed=None), e(7, "alive", member_name="n2", gen=1),    # too early
               e(9.5, "alive", member_name="n2", gen=0),                            # old gen
               e(12, "alive", member_name="n2", gen=1)],
        "n4": [e(2, "join-ok", seed=None), e(9.2, "joined", member_name="n2", gen=1)],  # within a period
    }


def run(evs: dict[str, list[dict[str, Any]]], tl: Timeline | None = None,
        max_periods: float | None = None, capacity: int = 0) -> Any:
    return check_dissemination(Aligned(evs, "clock-sync"), tl or Timeline(end=60), NODES,
                               window=5, period=1, max_periods=max_periods, capacity=capacity)


def test_a_join_is_measured_to_the_last_observer(golden: Golden) -> None:
    r = golden(run(events()))
    assert r.valid is True
    assert r.stats["join_periods"] == {"n": 1, "mean": 2.0, "min": 2.0, "p50": 2.0, "max": 2.0}
    assert r.examined == {"journals": 4, "joins": 1, "deaths": 0, "spreads": 1}
    r = golden(run(events(), max_periods=1.5))
    assert r.valid is False
    assert r.note == "the slowest join took 2.0 periods to reach everyone > 1.5"


def test_a_join_that_never_reached_everyone(golden: Golden) -> None:
    evs = events()
    evs["n3"] = evs["n3"][:-1]  # n3 never saw the current generation
    r = golden(run(evs, max_periods=10))
    assert r.valid is False and r.note == "1 join(s) never reached every member"
    assert r.stats["joins_not_everywhere"] == 1 and r.examined["joins"] == 1
    assert run(evs).valid is True  # no bound: measured, not judged
    assert run(evs, max_periods=10, capacity=1).valid is True  # partial views are allowed


@pytest.mark.parametrize("who", ["n2", "n3"])
def test_a_troubled_joiner_or_observer_is_left_out(who: str) -> None:
    tl = Timeline(end=60, paused={who: [(11.0, 13.0)]})
    r = run(events(), tl)
    if who == "n2":  # the join itself is not measured
        assert r.stats["join_periods"] == {"n": 0} and r.valid == "unknown"
    else:  # n3 is not waited for: the join reached everyone else by 10.5
        assert r.stats["join_periods"]["max"] == 0.5


def test_a_death_is_measured_from_the_first_local_declaration(golden: Golden) -> None:
    evs = events()
    evs["n1"].append(e(20, "dead", member_name="n4", local=True))
    evs["n2"].append(e(21, "dead", member_name="n4"))
    evs["n3"].append(e(23.5, "dead", member_name="n4"))
    evs["n3"].append(e(22, "dead", member_name="n1"))  # hearsay, nobody declared n1 locally
    r = golden(run(evs))
    assert r.stats["death_spread_periods"]["max"] == 3.5
    assert r.examined["deaths"] == 1 and r.examined["spreads"] == 2


def test_a_death_across_a_cut_does_not_hide_a_later_death() -> None:
    """n3 was found dead (gen 0) by the far side of a partition, where every observer is
    excused; killed later (gen 1), its death spread in 2 periods. That later death used to
    go unmeasured: only the member's first local verdict was looked at."""
    cut = {n: [(3.0, 9.0)] for n in NODES}
    evs: dict[str, list[dict[str, Any]]] = {n: [e(1, "join-ok", seed=None)] for n in NODES}
    evs["n4"] += [e(4.0, "dead", member_name="n3", gen=0, local=True),
                  e(14.0, "dead", member_name="n3", gen=1, local=True)]
    evs["n1"] += [e(4.1, "dead", member_name="n3", gen=0), e(15.0, "dead", member_name="n3", gen=1)]
    evs["n2"] += [e(16.0, "dead", member_name="n3", gen=1)]
    r = run(evs, Timeline(end=60, cut=cut))
    assert r.examined["deaths"] == 1
    assert r.stats["death_spread_periods"]["max"] == 2.0


def test_no_join_through_a_seed_and_no_death_is_not_exercised() -> None:
    """Founders only (no seed) and nobody declared dead: nothing of the leaf's kind happened."""
    evs = {n: [e(1, "join-ok", seed=None)] for n in NODES}
    r = run(evs, max_periods=1)
    assert is_not_exercised(r), r.note
    assert r.note == "not exercised: no join through a seed and no death to spread"
    assert r.examined == {"journals": 4, "joins": 0, "deaths": 0, "spreads": 0}


def test_joins_none_measurable_stay_plain_unknown() -> None:
    """A join did happen, but its joiner was paused throughout the window: the spread was
    there to measure and could not be, which is "unknown", not "not exercised"."""
    r = run(events(), Timeline(end=60, paused={"n2": [(9.0, 16.0)]}), max_periods=1)
    assert r.valid == "unknown" and not is_not_exercised(r), r.note
    assert r.note == ("nothing to judge: 1 join(s) or death(s), none seen spreading among "
                      "healthy members: dissemination not measured")
    assert r.examined["spreads"] == 0


def _replay_history(heal_at: float, join_at: float) -> list[dict[str, Any]]:
    """A SWIM sim replay's real history: n2 leaves at 10.3, n1 is isolated at 10.4 and the
    schedule's last heal (the nemesis's own ``heal-all`` op) gives it back at ``heal_at``; n2
    rejoins (its ``join`` op) at ``join_at``."""
    def o(t: float, proc: Any, type_: str, f: str, value: Any = None) -> dict[str, Any]:
        return {"time": int(t * 1e9), "process": proc, "type": type_, "f": f, "value": value}
    cut = [["n1", m] for m in ("n2", "n3", "n4")] + [[m, "n1"] for m in ("n2", "n3", "n4")]
    return [o(10.3, 1, "invoke", "leave", "n2"),
            o(10.31, 1, "ok", "leave", {"node": "n2", "gen": 0, "left": True}),
            o(10.4, "nemesis", "invoke", "start-partition", {"shape": "isolate", "node": "n1"}),
            o(10.41, "nemesis", "info", "start-partition", {"cut": cut}),
            o(heal_at, "nemesis", "invoke", "heal-all"),
            o(heal_at + 0.01, "nemesis", "info", "heal-all", {"links": cut}),
            o(join_at, 1, "invoke", "join", "n2"),
            o(join_at + 0.01, 1, "ok", "join", {"node": "n2", "gen": 1, "left": False})]


def _rejoin_events(t0: float, late_by: float) -> dict[str, list[dict[str, Any]]]:
    """Everyone formed the group by t=2; n2's rejoin (gen 1) at ``t0`` reaches n1 and n3 in
    one period and n4 after ``late_by`` periods (the bug's fourth probe: 4)."""
    return {"n1": [e(1, "join-ok", seed=None), e(t0 + 1, "alive", member_name="n2", gen=1)],
            "n2": [e(2, "join-ok", seed=1), e(t0, "join-ok", seed=3, gen=1)],
            "n3": [e(1, "join-ok", seed=None), e(t0 + 1, "alive", member_name="n2", gen=1)],
            "n4": [e(1, "join-ok", seed=None),
                   e(t0 + late_by, "alive", member_name="n2", gen=1)]}


def test_a_replayed_quiet_rejoin_after_the_last_heal_is_judged_and_named() -> None:
    """The seed-4 `gossip-too-slow` replay as a real history: the rejoin after the last heal
    (a ``heal-all`` op of the nemesis's) is judged at the sim's bound 3.48 and named in
    ``joins_judged`` with its generation; at 4 periods it fails, at 2 it passes. Its
    ``join-ok`` (11.405) comes before the harness recorded the join op's answer (11.41):
    the left span that answer closes is not trouble for this join."""
    from checkers.membership import build_timeline

    tl = build_timeline(_replay_history(heal_at=10.42, join_at=11.4), NODES)
    assert tl.cut["n1"] == [(10.4, pytest.approx(10.43))]  # the heal-all op closes the cut
    slow = check_dissemination(Aligned(_rejoin_events(11.405, 4.0), "clock-sync"), tl, NODES,
                               window=14, period=1, max_periods=3.48, capacity=0)
    assert slow.valid is False and slow.note.startswith("the slowest join took 4.0 periods")
    assert {"node": "n2", "gen": 1, "at_s": 11.405, "periods": 4.0} in slow.stats["joins_judged"]
    fast = check_dissemination(Aligned(_rejoin_events(11.405, 2.0), "clock-sync"), tl, NODES,
                               window=14, period=1, max_periods=3.48, capacity=0)
    assert fast.valid is True
    assert [j for j in fast.stats["joins_judged"] if j["gen"] == 1] == [
        {"node": "n2", "gen": 1, "at_s": 11.405, "periods": 2.0}]


def test_a_rejoin_with_a_fault_after_it_is_not_judged() -> None:
    """What the old replay did: the plan's rejoin came before the partition (the plan and
    the nemesis counted from different origins), so the slow rejoin was left out: what
    the leaf then said rested on other joins (the formation's), not on the finding."""
    from checkers.membership import build_timeline

    tl = build_timeline(_replay_history(heal_at=14.7, join_at=10.35), NODES)
    r = check_dissemination(Aligned(_rejoin_events(10.36, 4.0), "clock-sync"), tl, NODES,
                            window=14, period=1, max_periods=3.48, capacity=0)
    assert not [j for j in r.stats["joins_judged"] if j["gen"] == 1]
    assert r.valid == "unknown"
