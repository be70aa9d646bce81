"""Completeness on hand-placed events: every healthy observer must declare a crashed member
dead while it is down; first detection is counted in whole protocol periods."""

from __future__ import annotations

from typing import Any

from checkers.membership import Aligned, Timeline, check_completeness
from checkers.result import is_not_exercised
from tests.unit.golden import Golden

NODES = ["n1", "n2", "n3", "n4"]


def e(ht: float, type_: str, member: str, **kw: Any) -> dict[str, Any]:
    return {"ht": ht, "type": type_, "member_name": member, **kw}


def crash(down: float = 10.0, up: float = 30.0, end: float = 60.0, **kw: Any) -> Timeline:
    return Timeline(end=end, crashed={"n4": [(down, up)]}, kills=[("n4", down, up)], **kw)


def detected() -> dict[str, list[dict[str, Any]]]:
    """n1 suspects n4 itself (2.5 periods in) and declares it; the others hear of it."""
    return {"n1": [e(5, "joined", "n4"), e(12.5, "suspect", "n4", local=True),
                   e(14, "dead", "n4", local=True)],
            "n2": [e(5, "joined", "n4"), e(11, "suspect", "n4"), e(15, "dead", "n4")],
            "n3": [e(5, "joined", "n4"), e(16.5, "left", "n4")],
            "n4": []}


def run(evs: dict[str, list[dict[str, Any]]], tl: Timeline, **kw: Any) -> Any:
    args = {"window": 5.0, "period": 1.0, "max_first_periods": None, "max_all_dead_s": None}
    return check_completeness(Aligned(evs, "clock-sync"), tl, NODES, **{**args, **kw})


def test_a_crash_every_observer_declared(golden: Golden) -> None:
    r = golden(run(detected(), crash()))
    assert r.valid is True and not r.anomalies
    assert r.stats["first_detection_periods"]["max"] == 2.0  # whole periods before the probe
    assert r.stats["first_detection_since_crash_periods"]["max"] == 1.0  # hearsay at 11
    assert r.stats["all_survivors_dead_s"]["max"] == 6.5
    assert r.examined == {"journals": 3, "crashes": 1, "judged": 1, "detected": 1}
    r = golden(run(detected(), crash(), max_first_periods=1.5, max_all_dead_s=6.0))
    assert r.valid is False and r.note == (
        "mean first detection 2.00 periods > 1.5; "
        "mean time until all survivors mark dead 6.50s > 6.0")


def test_an_observer_that_never_declared_it(golden: Golden) -> None:
    evs = detected()
    evs["n3"] = [e(5, "joined", "n4"), e(31, "dead", "n4")]  # after n4 came back: too late
    r = golden(run(evs, crash()))
    assert [a.kind for a in r.anomalies] == ["undetected-crash"]
    assert r.anomalies[0].witness == {"node": "n3", "member": "n4", "down_s": 10.0, "up_s": 30.0}
    assert r.anomalies[0].message == ("n3 never declared crashed n4 dead during its 20.0s down "
                                      "time (from 10.000s)")
    assert r.stats["all_survivors_dead_s"] == {"n": 0}


def test_who_must_declare_it(golden: Golden) -> None:
    evs = detected()
    evs["n3"] = [e(5, "joined", "n4"), e(8, "evicted", "n4")]  # made room before the crash
    assert run(evs, crash()).valid is False  # without a capacity, everyone must
    r = golden(run(evs, crash(), capacity=2))
    assert r.valid is True, r.explain()
    paused = crash(paused={"n3": [(20.0, 25.0)]})
    assert run(evs, paused).valid is True  # a paused observer is excused


def test_short_and_unfinished_crashes(golden: Golden) -> None:
    r = golden(run(detected(), crash(down=10, up=13)))
    assert is_not_exercised(r)
    assert r.note == "not exercised: 1 crash(es) shorter than the 5.0s window, none judged"
    assert (r.stats["judged"], r.stats["too_short"]) == (0, 1)
    r = run(detected(), crash(down=10, up=float("inf"), end=40))  # still down at the end
    assert r.valid is True and r.stats["judged"] == 1
    r = golden(run(detected(), Timeline(end=60)))
    assert is_not_exercised(r) and r.note == "not exercised: no node crashed"
