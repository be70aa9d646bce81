"""The linearizable leaf says what it examined, and a history with no ok op proves nothing."""

from __future__ import annotations

from typing import Any

from checkers.linearizable import checker
from reports.checks import kv_linearizable

LIN = checker("kv", time_s=5.0)


def op(p: int, t: str, f: str, v: Any) -> dict[str, Any]:
    return {"process": p, "type": t, "f": f, "value": v}


GOOD = [op(0, "invoke", "write", ["k", 1]), op(0, "ok", "write", ["k", 1]),
        op(1, "invoke", "read", ["k", None]), op(1, "ok", "read", ["k", 1]),
        op(2, "invoke", "write", ["j", 2]), op(2, "info", "write", ["j", 2]),
        op(3, "invoke", "cas", ["k", [5, 6]]), op(3, "fail", "cas", ["k", [5, 6]])]


def test_a_valid_history_counts_ops_ok_info_and_keys() -> None:
    r = LIN({}, GOOD, {})
    assert r.valid is True and r.examined == {"ops": 3, "ok": 2, "info": 1, "keys": 2}


def test_empty_all_fail_and_all_info_histories_are_unknown() -> None:
    all_fail = [op(0, "invoke", "write", ["k", 1]), op(0, "fail", "write", ["k", 1])]
    all_info = [op(0, "invoke", "write", ["k", 1]), op(0, "info", "write", ["k", 1])]
    for h in ([], all_fail, all_info):
        r = LIN({}, h, {})
        assert r.valid == "unknown" and "nothing to judge: ok=0" in r.note, (h, r.note)
        assert "no order to check" in r.note
        assert r.stats["vacuous"] is True


def test_a_violation_stays_false_with_its_counts() -> None:
    bad = [op(0, "invoke", "write", ["k", 1]), op(0, "ok", "write", ["k", 1]),
           op(1, "invoke", "read", ["k", None]), op(1, "ok", "read", ["k", 7])]
    r = LIN({}, bad, {})
    assert r.valid is False and r.examined["ok"] == 2 and r.anomalies


def test_the_report_per_key_check_counts_the_same_way() -> None:
    r = kv_linearizable({}, [o for o in GOOD if o["value"][0] == "k"], {})
    assert r.valid is True and r.examined == {"ops": 2, "ok": 2, "info": 0, "keys": 1}
    r = kv_linearizable({}, [o for o in GOOD if o["value"][0] == "j"], {})
    assert r.valid == "unknown" and r.stats["vacuous"] is True


def test_a_history_the_model_cannot_read_is_unknown_with_what_was_paired() -> None:
    h = [op(0, "invoke", "enqueue", 1), op(0, "ok", "enqueue", 1)]
    r = LIN({}, h, {})
    assert r.valid == "unknown" and "cannot read this history" in r.note
    assert r.examined == {"ops": 1, "ok": 1, "info": 0, "keys": 0}
