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
