"""The one leaf rule: anomalies are False; missing evidence or nothing examined is unknown."""

from __future__ import annotations

from checkers.result import Anomaly, Result, compose, verdict
from tests.unit.golden import Golden


def test_a_needed_count_of_zero_is_unknown_with_its_name(golden: Golden) -> None:
    r = verdict("x", [], {}, examined={"ops": 3, "commits": 0}, needs=("ops", "commits"))
    golden(r)
    assert r.valid == "unknown" and "commits=0" in r.note and r.examined == {"ops": 3, "commits": 0}
    assert r.stats["vacuous"] is True


def test_a_needed_count_that_is_absent_counts_as_zero() -> None:
    assert verdict("x", [], {}, examined={}, needs=("ops",)).valid == "unknown"


def test_all_needed_counts_positive_is_valid(golden: Golden) -> None:
    r = verdict("x", [], {}, examined={"ops": 3, "commits": 1}, needs=("ops", "commits"))
    golden(r)
    assert r.valid is True and r.note == ""


def test_an_anomaly_is_false_even_with_nothing_examined(golden: Golden) -> None:
    r = verdict("x", [Anomaly("k", "m")], {}, examined={}, needs=("ops",))
    golden(r)
    assert r.valid is False and r.stats["anomalies"] == {"k": 1}


def test_gaps_and_empty_counts_are_both_reported(golden: Golden) -> None:
    r = verdict("x", [], {}, ["n1: no journal"], examined={"ops": 0}, needs=("ops",))
    golden(r)
    assert r.valid == "unknown" and "ops=0" in r.note and "n1: no journal" in r.note
    assert "vacuous" not in r.stats  # missing evidence is not the same as nothing to judge


def test_examined_survives_json_and_leaves_have_paths() -> None:
    leaf = verdict("vote-safety", [], {}, examined={"votes": 4}, needs=("votes",))
    top = compose("all", [compose("raft", [leaf]), Result("faults", True, examined={"n": 1})])
    back = Result.from_json(top.to_json())
    assert back.find("raft.vote-safety").examined == {"votes": 4}
    assert [p for p, _ in back.leaves()] == ["raft.vote-safety", "faults"]
    assert back.find("raft.nope") is None
    assert "[votes=0]" in compose("all", [verdict("v", [], {}, examined={"votes": 0},
                                                  needs=("votes",))]).explain()
