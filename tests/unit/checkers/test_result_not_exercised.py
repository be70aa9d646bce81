"""The not-exercised notion (checkers.result): a leaf whose run had nothing of its kind is
unknown with the reason, never True; compose judges by the exercised children and lists the
rest, and a composite with nothing exercised is itself not exercised (unknown)."""

from __future__ import annotations

from checkers.result import Anomaly, Result, compose, is_not_exercised, not_exercised


def idle(name: str) -> Result:
    return not_exercised(name, f"no {name} in this run", examined={"journals": 3, name: 0})


def test_a_not_exercised_leaf_is_unknown_with_its_reason() -> None:
    r = idle("leave")
    assert r.valid == "unknown" and is_not_exercised(r)
    assert r.note == "not exercised: no leave in this run"
    assert r.examined == {"journals": 3, "leave": 0}
    assert not is_not_exercised(Result("x", "unknown", note="evidence missing"))
    assert is_not_exercised(Result.from_json(r.to_json()))  # survives the run's result.json


def test_every_leaf_unexercised_is_unknown() -> None:
    top = compose("membership", [idle("leave"), idle("detection")])
    assert top.valid == "unknown" and is_not_exercised(top)
    assert top.stats["unexercised"] == ["leave", "detection"]
    assert "leave, detection" in top.note


def test_exercised_and_valid_beside_unexercised_is_valid_and_lists_them() -> None:
    top = compose("membership", [Result("accuracy", True, examined={"deaths": 2}),
                                 idle("leave"), idle("refutation")])
    assert top.valid is True and top.stats["unexercised"] == ["leave", "refutation"]
    assert top.note == "not exercised: leave, refutation"


def test_an_exercised_failure_or_unknown_still_wins() -> None:
    bad = Result("accuracy", False, [Anomaly("false-positive", "n1 declared n2 dead")])
    assert compose("m", [bad, idle("leave")]).valid is False
    gap = Result("accuracy", "unknown", note="journal gaps")
    assert compose("m", [gap, idle("leave")]).valid == "unknown"
    assert compose("m", [Result("a", True)]).stats == {}  # nothing unexercised: as before


def test_nested_composites_list_dotted_paths_and_propagate() -> None:
    inner_idle = compose("lifecycle", [idle("leave"), idle("detection")])
    inner_mixed = compose("swim", [Result("accuracy", True), idle("refutation")])
    top = compose("all", [inner_idle, inner_mixed])
    assert top.valid is True
    assert top.stats["unexercised"] == ["lifecycle.leave", "lifecycle.detection",
                                        "swim.refutation"]
    assert compose("all", [inner_idle]).valid == "unknown"
