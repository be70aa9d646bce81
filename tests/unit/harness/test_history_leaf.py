"""The history leaf: a cut-off history or a run that did not complete is unknown."""

from __future__ import annotations

from harness.runner import history_result, standard_checkers
from vocabulary.history import History

OPS = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "read", "value": None}]


def test_a_whole_history_of_a_complete_run_is_valid_and_counts_its_ops() -> None:
    r = history_result({"status": "complete"}, History(ops=OPS))
    assert r.valid is True and r.examined == {"ops": 1}


def test_a_torn_history_is_unknown_with_the_reason() -> None:
    h = History(ops=OPS, complete=False, problems=["line 2: torn final line (7 bytes) dropped"])
    r = history_result({"status": "complete"}, h)
    assert r.valid == "unknown" and "torn final line" in r.note


def test_an_interrupted_or_failed_run_is_unknown() -> None:
    for status in ("interrupted", "failed", "running"):
        r = history_result({"status": status}, History(ops=OPS))
        assert r.valid == "unknown" and f"ended {status}" in r.note


def test_runs_with_a_nemesis_are_checked_for_applied_faults() -> None:
    assert "faults" in standard_checkers({"protocol": "garlicfarm", "nemesis": "partition"})
    assert "faults" in standard_checkers({"protocol": "drip", "nemesis": "custom"})
    assert list(standard_checkers({"protocol": "garlicfarm", "nemesis": "none"})) == ["stats"]
    assert standard_checkers({"protocol": None, "nemesis": "partition"}) == {}
