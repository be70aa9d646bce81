"""The faults leaf: a requested fault kind that was never applied leaves the run unproven."""

from __future__ import annotations

from typing import Any

from checkers.faults import check as fault_coverage
from tests.unit.golden import Golden
from vocabulary.faults import kind_of_name, nemesis_pairs, requested_kinds

Op = dict[str, Any]


def nem(f: str, value: Any = None, error: str | None = None, complete: bool = True) -> list[Op]:
    done: Op = {"process": "nemesis", "type": "info", "f": f, "value": value}
    if error:
        done["error"] = error
    inv = {"process": "nemesis", "type": "invoke", "f": f, "value": value}
    return [inv, done] if complete else [inv]


def client_ok() -> list[Op]:
    return [{"process": 0, "type": "invoke", "f": "read", "value": None},
            {"process": 0, "type": "ok", "f": "read", "value": 1}]


def test_every_requested_kind_applied_is_valid_and_counted(golden: Golden) -> None:
    h = [*nem("start-partition", {"shape": "halves"}), *client_ok(), *nem("stop-partition"),
         *nem("kill", {"node": "n2"}), *nem("restart", {"node": "n2"}),
         *nem("pause", {"node": "n1"}), *nem("resume")]
    r = fault_coverage({"nemesis": "partition-halves,kill-leader,pause"}, h, {})
    golden(r)
    assert r.valid is True
    assert r.examined == {"requested_kinds": 3, "faults_applied": 3, "faults_failed": 0}
    assert r.stats["applied"] == {"partition": 1, "kill": 1, "pause": 1}


def test_a_kind_whose_every_op_failed_is_unknown_and_named(golden: Golden) -> None:
    h = [*nem("start-partition", {"shape": "halves"}), *nem("stop-partition"),
         *nem("kill", {"node": "leader"}, error="no leader to kill"), *nem("restart")]
    r = fault_coverage({"nemesis": "partition,kill-leader"}, h, {})
    golden(r)
    assert r.valid == "unknown"
    assert "kill: never applied (1 attempts failed, first: kill: no leader to kill)" in r.note
    assert r.examined["faults_failed"] == 1 and r.examined["faults_applied"] == 1


def test_a_kind_never_attempted_within_the_time_limit_is_unknown(golden: Golden) -> None:
    h = [*nem("start-partition", {"shape": "halves"}), *nem("stop-partition")]
    r = fault_coverage({"nemesis": "partition,pause"}, h, {})
    golden(r)
    assert r.valid == "unknown" and "pause: never attempted within the time limit" in r.note


def test_a_fault_cut_off_before_its_completion_is_not_applied(golden: Golden) -> None:
    h = nem("pause", {"node": "n1"}, complete=False)
    r = fault_coverage({"nemesis": "pause"}, h, {})
    golden(r)
    assert r.valid == "unknown" and "no completion" in r.note


def test_a_custom_schedule_is_judged_by_the_kinds_it_invoked(golden: Golden) -> None:
    ok = [*nem("start-partition", {"shape": "explicit"}), *nem("stop-partition")]
    assert golden(fault_coverage({"nemesis": "isolate_in_turn"}, ok, {})).valid is True
    bad = nem("start-partition", {"shape": "explicit"}, error="proxy refused")
    assert golden(fault_coverage({"nemesis": "isolate_in_turn"}, bad, {})).valid == "unknown"


def test_a_nemesis_that_attempted_nothing_is_unknown(golden: Golden) -> None:
    r = fault_coverage({"nemesis": "custom"}, client_ok(), {})
    golden(r)
    assert r.valid == "unknown" and "no fault was ever attempted" in r.note


def test_end_ops_and_heals_are_not_faults(golden: Golden) -> None:
    h = [*nem("heal-all"), *nem("stop-partition"), *nem("resume")]
    assert golden(fault_coverage({"nemesis": "custom"}, h, {})).valid == "unknown"


def test_names_map_to_kinds() -> None:
    assert [kind_of_name(n) for n in ("partition-isolate-leader", "kill-leader", "pause-leader",
                                      "clock", "clock-skew", "reset-peer", "loss", "none",
                                      "isolate_in_turn")] == [
        "partition", "kill", "pause", "clock", "clock", "reset-peer", "loss", None, None]
    assert requested_kinds("partition,partition-halves,kill, pause") == ["partition", "kill", "pause"]


def test_nemesis_pairs_ignore_client_ops_and_keep_the_open_invocation() -> None:
    h = [*nem("kill", {"node": "n1"}), *client_ok(), *nem("restart", complete=False)]
    pairs = nemesis_pairs(h)
    assert [(i["f"], d and d["f"]) for i, d in pairs] == [("kill", "kill"), ("restart", None)]


def test_a_schedule_of_membership_changes_alone_is_judged_by_the_changes_made() -> None:
    """A sim replay of Garlic Farm ``add`` steps alone: the late node's ``join`` is what the
    nemesis did; a failed change asks for nothing, so no run with faults becomes unknown."""
    joined = fault_coverage({"nemesis": "sim replay (1 ops)"}, [*nem("join", {"node": "n6"})], {})
    assert joined.valid is True and joined.stats["applied"] == {"membership": 1}
    failed = fault_coverage({"nemesis": "custom"},
                            [*nem("join", {"node": "n6"}, error="ClusterError: boom")], {})
    assert failed.valid == "unknown" and "no fault was ever attempted" in failed.note
    mixed = fault_coverage({"nemesis": "kill"}, [*nem("kill", {"node": "n1"}),
                                                 *nem("add-member", {"node": "n5"}, error="409")],
                           {})
    assert mixed.valid is True and mixed.stats["applied"] == {"kill": 1}
