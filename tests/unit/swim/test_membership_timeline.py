"""The two readers the membership checks stand on: the fault timeline built from the history,
and node events put on the history's time axis. Every fault op and every alignment method,
pinned whole (golden) and by the facts the checks use."""

from __future__ import annotations

import math
from typing import Any

import pytest

from checkers.membership import align, build_timeline
from tests.unit.golden import Golden

S = 1_000_000_000
NODES = ["n1", "n2", "n3", "n4"]


def op(t: float, process: Any, type_: str, f: str, value: Any = None) -> dict[str, Any]:
    return {"process": process, "type": type_, "f": f, "value": value, "time": int(t * S)}


def fault(t: float, f: str, value: Any, took: float = 0.5) -> list[dict[str, Any]]:
    return [op(t, "nemesis", "invoke", f), op(t + took, "nemesis", "info", f, value)]


def every_fault() -> list[dict[str, Any]]:
    return [
        op(1, 7, "invoke", "leave"), op(1.2, 7, "ok", "leave", {"node": "n3"}),
        op(4, 7, "invoke", "join"), op(4.25, 7, "ok", "join", "n3"),
        op(5, 8, "invoke", "leave"), op(5.1, 8, "fail", "leave", {"node": "n1"}),  # not left
        *fault(2, "kill", {"nodes": ["n2"]}), *fault(6, "restart", {"nodes": ["n2"]}),
        *fault(7, "pause", {"node": "n4"}), *fault(9, "resume", {"nodes": ["n4"]}),
        *fault(10, "start-partition", {"cut": [["n1", "n2"]]}),
        *fault(12, "start-partition", {"cut": [["n3", "n4"]]}),  # replaces the first
        *fault(14, "stop-partition", None),
        *fault(15, "start-latency", {"ms": 100}), *fault(17, "stop-latency", None),
        *fault(18, "stop-latency", None),  # nothing open: nothing closed
        *fault(19, "pause", {"nodes": ["n1"]}), *fault(19.5, "kill", {"nodes": ["n3"]}),
        *fault(20, "start-latency", {"ms": 50}),
        *fault(20.5, "start-partition", {"cut": [["n2", "n4"]]}),
        *fault(21, "heal-all", {"resumed": ["n1"], "restarted": ["n3"]}),
        *fault(22, "kill", {"nodes": ["n4"]}), *fault(23, "pause", {"nodes": ["n2"]}),
        *fault(24, "start-latency", {}), *fault(24.5, "start-partition", {"cut": [["n1", "n3"]]}),
        op(25, 9, "invoke", "leave"), op(25.5, 9, "ok", "leave", {"node": "n1"}),
        op(30, 0, "invoke", "noop"),
    ]


def test_every_fault_op_opens_and_closes_its_interval(golden: Golden) -> None:
    tl = build_timeline(every_fault(), NODES)
    golden(tl)
    assert tl.end == 30.0
    assert tl.left == {"n3": [(1.0, 4.25)], "n1": [(25.0, math.inf)]}
    assert tl.crashed == {"n2": [(2.0, 6.5)], "n3": [(19.5, 21.5)], "n4": [(22.0, math.inf)]}
    assert tl.kills == [("n2", 2.0, 6.5), ("n3", 19.5, 21.5), ("n4", 22.0, math.inf)]
    assert tl.paused == {"n4": [(7.0, 9.5)], "n1": [(19.0, 21.5)], "n2": [(23.0, math.inf)]}
    assert tl.cut == {"n1": [(10.0, 12.5), (24.5, math.inf)], "n2": [(10.0, 12.5), (20.5, 21.5)],
                      "n3": [(12.0, 14.5), (24.5, math.inf)], "n4": [(12.0, 14.5), (20.5, 21.5)]}
    assert tl.slowed == [(15.0, 17.5), (20.0, 21.5), (24.0, math.inf)]


@pytest.mark.parametrize(("node", "a", "b", "troubled"), [
    ("n2", 1.0, 1.9, False), ("n2", 1.9, 2.0, True), ("n2", 6.5, 6.6, True),
    ("n2", 6.6, 9.9, False), ("n4", 9.6, 11.9, False), ("n4", 12.0, 12.0, True),
    ("n1", 5.0, 5.2, False),  # a failed leave left nothing behind
])
def test_troubled_is_any_overlap_with_a_fault_interval(node: str, a: float, b: float,
                                                       troubled: bool) -> None:
    assert build_timeline(every_fault(), NODES).troubled(node, a, b) is troubled


def test_slowed_in_is_any_overlap_with_a_latency_interval() -> None:
    tl = build_timeline(every_fault(), NODES)
    assert [tl.slowed_in(a, b) for a, b in [(14.0, 14.9), (14.9, 15.0), (17.5, 17.5),
                                            (17.6, 19.9), (30.0, 40.0)]] == [
        False, True, True, False, True]


def test_an_empty_history_has_an_empty_timeline(golden: Golden) -> None:
    tl = build_timeline([], NODES)
    golden(tl)
    assert tl.end == 0 and not (tl.crashed or tl.paused or tl.left or tl.cut or tl.slowed)


def nodes(**states: Any) -> dict[str, Any]:
    evs = {"n1": [{"type": "start", "t": 1000.0, "mono": 50.0},
                  {"type": "suspect", "t": 1003.0, "mono": 53.0, "member": 2},
                  {"type": "dead", "t": 1004.0, "mono": 54.0, "member": 9},
                  {"type": "late", "t": 1090.0, "mono": 140.0, "member": 3}],
           "n2": [{"type": "start", "t": 1001.0, "mono": 51.0}, {"type": "no-clock"},
                  {"type": "wall-only", "t": 1002.0}]}
    return {"nodes": {n: {"events": e, "state": states.get(n)} for n, e in evs.items()}}


NAMES = {1: "n1", 2: "n2", 3: "n3"}
SYNC = [op(9, 0, "invoke", "clock-sync"), op(11, 0, "ok", "clock-sync", {"mono": 60.0}),
        op(12, 0, "ok", "clock-sync", {"mono": 999.0})]  # only the first sync counts


@pytest.mark.parametrize(("test", "history", "states", "method"), [
    pytest.param({}, SYNC, {"n1": {"mono": 100.0}, "n2": {"mono": 90.0}}, "clock-sync",
                 id="clock-sync-cut-at-the-final-state"),
    pytest.param({}, SYNC, {}, "clock-sync", id="clock-sync-no-final-state"),
    pytest.param({"started_wall": 995.0}, [], {"n1": {"mono": 100.0}}, "test.started_wall",
                 id="started-wall"),
    pytest.param({}, [op(1, 0, "invoke", "clock-sync"), op(2, 0, "fail", "clock-sync")], {},
                 "approximate: first start = 0", id="first-start"),
])
def test_events_on_the_history_axis(test: dict[str, Any], history: list[dict[str, Any]],
                                    states: dict[str, Any], method: str, golden: Golden) -> None:
    al = align(test, history, nodes(**states), NAMES)
    golden(al)
    assert al.method == method
    if method == "clock-sync":  # mono 60 at the sync's midpoint, 10 s into the history
        first = al.events["n1"][0]
        assert first["ht"] == pytest.approx(0.0) and "member_name" not in first
        assert al.events["n1"][1]["member_name"] == "n2" and al.events["n1"][2]["member_name"] == "9"
        assert [e["type"] for e in al.events["n2"]] == ["start"]  # no mono: off the axis
        cut = bool(states)
        assert ("late" in [e["type"] for e in al.events["n1"]]) is not cut
        assert al.end == (pytest.approx(50.0) if cut else None)
    elif method == "test.started_wall":
        assert al.events["n1"][0]["ht"] == pytest.approx(5.0) and al.end is None
        assert [e["type"] for e in al.events["n2"]] == ["start", "wall-only"]
    else:
        assert al.events["n1"][0]["ht"] == 0.0 and [(e["type"], e["ht"]) for e in al.events["n2"]] == [
            ("start", 1.0), ("wall-only", 2.0)]


def test_a_one_way_cut_that_relays_go_around_excuses_only_the_answers_loss() -> None:
    # n1 -> n2 cut alone: n1's probe of n2 goes around through n3/n4 (answered directly,
    # n2 -> n1 works), so n1 suspecting n2 is not excused; n2's probe of n1 is answered over
    # the cut link, so n2 suspecting n1 is
    tl = build_timeline(fault(10, "start-partition", {"cut": [["n1", "n2"]]}) +
                        fault(20, "stop-partition", None), NODES)
    assert not tl.separated("n1", "n2", 12, 13) and tl.separated("n2", "n1", 12, 13)
    assert not tl.separated("n2", "n1", 21, 22)  # healed
    # n1 isolated one way (n1 -> everyone): no relay either, so both excused
    out = [["n1", k] for k in NODES[1:]]
    tl = build_timeline(fault(10, "start-partition", {"cut": out}), NODES)
    assert tl.separated("n1", "n2", 12, 13) and tl.separated("n2", "n1", 12, 13)
    # both ways: excused, as before
    tl = build_timeline(fault(10, "start-partition", {"cut": [["n1", "n2"], ["n2", "n1"]]}),
                        NODES)
    assert tl.separated("n1", "n2", 12, 13) and not tl.separated("n3", "n4", 12, 13)
