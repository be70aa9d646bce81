"""The linearizable leaf says what it examined, and a history that never showed an invoked
function take effect proves nothing about it (Jepsen's ``stats`` rule), across the whole
history: a function needs one ``ok`` op somewhere, not on every key."""

from __future__ import annotations

from typing import Any

from checkers.linearizable import checker
from reports.checks import KV_LINEARIZABLE, kv_key, kv_linearizable, run_checker
from tests.unit.golden import Golden

LIN = checker("kv", time_s=5.0)


def op(p: int, t: str, f: str, v: Any) -> dict[str, Any]:
    return {"process": p, "type": t, "f": f, "value": v}


def done(p: int, t: str, f: str, v: Any, out: Any = None) -> list[dict[str, Any]]:
    """An invocation and its completion (``out`` is the completion's value, else ``v``)."""
    return [op(p, "invoke", f, v), op(p, t, f, v if out is None else out)]


#: k: written 1, read 1, cas 1->2 ok, cas 5->6 failed its precondition; j: a write left open
GOOD = [*done(0, "ok", "write", ["k", 1]), *done(1, "ok", "read", ["k", None], ["k", 1]),
        *done(2, "info", "write", ["j", 2]), *done(3, "ok", "cas", ["k", [1, 2]]),
        *done(3, "fail", "cas", ["k", [5, 6]])]


def test_a_valid_history_counts_ops_ok_per_function_info_and_keys(golden: Golden) -> None:
    r = LIN({}, GOOD, {})
    golden(r)
    assert r.valid is True, r.note
    assert r.examined == {"ops": 4, "ok": 3, "info": 1, "keys": 2,
                          "ok_cas": 1, "ok_read": 1, "ok_write": 1}


def test_empty_all_fail_and_all_info_histories_are_unknown() -> None:
    all_fail = done(0, "fail", "write", ["k", 1])
    all_info = done(0, "info", "write", ["k", 1])
    for h in ([], all_fail, all_info):
        r = LIN({}, h, {})
        assert r.valid == "unknown" and "nothing to judge: ok=0" in r.note, (h, r.note)
        assert "no order to check" in r.note
        assert r.stats["vacuous"] is True
    assert LIN({}, all_info, {}).examined == {"ops": 1, "ok": 0, "info": 1, "keys": 1,
                                              "ok_write": 0}
    assert LIN({}, all_fail, {}).examined == {"ops": 0, "ok": 0, "info": 0, "keys": 0,
                                              "ok_write": 0}


def test_a_kv_run_where_no_write_ever_succeeded_is_unknown(golden: Golden) -> None:
    h = [*done(0, "fail", "write", ["k", 1]), *done(1, "info", "write", ["k", 2]),
         *done(2, "ok", "read", ["k", None], ["k", None])]
    r = LIN({}, h, {})
    golden(r)
    assert r.valid == "unknown" and "ok_write=0" in r.note and "no write completed ok" in r.note
    assert r.examined["ok_read"] == 1 and r.examined["ok_write"] == 0


def test_every_cas_failing_its_precondition_leaves_cas_untested(golden: Golden) -> None:
    h = [*done(0, "ok", "write", ["k", 1]), *done(1, "ok", "read", ["k", None], ["k", 1]),
         *done(2, "fail", "cas", ["k", [5, 6]]), *done(2, "fail", "cas", ["k", [7, 8]])]
    r = LIN({}, h, {})
    golden(r)
    assert r.valid == "unknown" and "ok_cas=0" in r.note and "no cas completed ok" in r.note
    assert "ok_read=0" not in r.note and "ok_write=0" not in r.note


def test_a_function_needs_one_ok_op_in_the_whole_history_not_on_every_key(golden: Golden) -> None:
    # j's only write failed; k's succeeded: writes were tested, so the run is judged
    h = [*done(0, "ok", "write", ["k", 1]), *done(1, "fail", "write", ["j", 2]),
         *done(1, "ok", "read", ["j", None], ["j", None])]
    r = LIN({}, h, {})
    golden(r)
    assert r.valid is True, r.note
    assert r.examined == {"ops": 2, "ok": 2, "info": 0, "keys": 2, "ok_read": 1, "ok_write": 1}


def test_a_violation_stays_false_with_its_counts(golden: Golden) -> None:
    bad = [*done(0, "ok", "write", ["k", 1]), *done(1, "ok", "read", ["k", None], ["k", 7]),
           *done(2, "fail", "cas", ["k", [5, 6]])]
    r = LIN({}, bad, {})
    golden(r)
    assert r.valid is False and r.anomalies
    assert r.examined["ok"] == 2 and r.examined["ok_cas"] == 0


def test_the_report_per_key_check_counts_the_same_way(golden: Golden) -> None:
    r = kv_linearizable({}, [o for o in GOOD if o["value"][0] == "k"], {})
    golden(r)
    assert r.valid is True and r.examined == {"ops": 3, "ok": 3, "info": 0, "keys": 1,
                                              "ok_cas": 1, "ok_read": 1, "ok_write": 1}
    r = kv_linearizable({}, [o for o in GOOD if o["value"][0] == "j"], {})
    golden(r)
    assert r.valid == "unknown" and r.stats["vacuous"] is True


def test_a_history_the_model_cannot_read_is_unknown_with_what_was_paired(golden: Golden) -> None:
    h = done(0, "ok", "enqueue", 1)
    r = LIN({}, h, {})
    golden(r)
    assert r.valid == "unknown" and "cannot read this history" in r.note
    assert r.examined == {"ops": 1, "ok": 1, "info": 0, "keys": 0, "ok_enqueue": 1}


def test_the_report_per_key_merge_agrees_with_the_harness_when_no_cas_ever_succeeded(golden: Golden) -> None:
    """Each key is judged alone in the report: a key with no ok cas proves nothing about cas,
    and when no key has one the merged verdict is unknown, as the harness's."""
    h = [*done(0, "ok", "write", ["k", 1]), *done(0, "fail", "cas", ["k", [5, 6]]),
         *done(1, "ok", "write", ["j", 2]), *done(1, "fail", "cas", ["j", [7, 8]])]
    merged = run_checker(KV_LINEARIZABLE, {}, h, [kv_key(o) for o in h])
    golden(merged)
    assert LIN({}, h, {}).valid == merged.valid == "unknown"
    assert merged.examined["ok_cas"] == 0 and merged.examined["ok_write"] == 2
    h += done(2, "ok", "cas", ["j", [2, 3]])
    merged = run_checker(KV_LINEARIZABLE, {}, h, [kv_key(o) for o in h])
    golden(merged)
    assert LIN({}, h, {}).valid is merged.valid is True


def test_the_merge_applies_the_function_rule_to_the_summed_counts(golden: Golden) -> None:
    """k never saw a cas and passes alone; j's only cas failed and is dropped as vacuous: the
    parts alone would say valid, the whole run never showed a cas take effect."""
    h = [*done(0, "ok", "write", ["k", 1]), *done(0, "ok", "read", ["k", None], ["k", 1]),
         *done(1, "ok", "write", ["j", 2]), *done(1, "fail", "cas", ["j", [7, 8]])]
    merged = run_checker(KV_LINEARIZABLE, {}, h, [kv_key(o) for o in h])
    golden(merged)
    assert LIN({}, h, {}).valid == merged.valid == "unknown"
    assert "no cas completed ok" in merged.note and merged.examined["ok_cas"] == 0
