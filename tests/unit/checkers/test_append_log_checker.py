"""The append workload checker: each rule has a history that breaks it and only it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.append_log import append_ops
from checkers.append_log import check as append_checker
from tests.unit.checkers.gf_builders import append_entry, commits_and_applies, entry, node, state
from tests.unit.golden import Golden


class H:
    """A tiny history writer: ``invoke``/``complete`` with an advancing clock."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.now = 0

    def _add(self, **op: Any) -> None:
        self.now += 10
        self.ops.append({"index": len(self.ops), "time": self.now, "f": "append",
                         "node": "n1", **op})

    def invoke(self, p: int, v: str) -> H:
        self._add(process=p, type="invoke", value=v)
        return self

    def ok(self, p: int, v: str, index: int | None = None) -> H:
        self._add(process=p, type="ok", value={"v": v, "index": index} if index else v)
        return self

    def fail(self, p: int, v: str) -> H:
        self._add(process=p, type="fail", value=v)
        return self

    def info(self, p: int, v: str) -> H:
        self._add(process=p, type="info", value=v)
        return self


def cluster(values: list[str], *, commit: int | None = None, snapshot: int = 0,
            others: int = 2) -> dict[str, Any]:
    """Leader n1 holding ``values`` at indexes 1.., followers holding the same log."""
    log = [append_entry(i + 1, 1, v) for i, v in enumerate(values)]
    kept = [e for e in log if e["index"] > snapshot]
    nodes = {"n1": node([], state(1, kept, commit_index=commit, role="leader",
                                  snapshot=(snapshot, 1 if snapshot else 0)))}
    for k in range(2, 2 + others):
        nodes[f"n{k}"] = node([], state(k, kept, commit_index=commit,
                                        snapshot=(snapshot, 1 if snapshot else 0)))
    return {"nodes": nodes}


def kinds(r: Any) -> set[str]:
    return {a.kind for a in r.anomalies}


def test_every_ack_found_once_in_order_passes(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 1).invoke(1, "b").ok(1, "b", 2).invoke(0, "c").info(0, "c")
    r = append_checker({}, h.ops, cluster(["a", "b", "c"]))
    golden(r)
    assert r.valid is True, r.explain()
    assert r.stats["acknowledged"] == 2 and r.stats["found"] == 2 and r.stats["info_found"] == 1


def test_plain_string_ok_value_and_unmatched_invoke(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(1, "b")
    ops = append_ops(h.ops)
    assert [o.outcome for o in ops] == ["ok", "info"] and ops[0].reported_index is None
    assert golden(append_checker({}, h.ops, cluster(["a"]))).valid is True


def test_lost_acknowledged_append(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 1).invoke(0, "b").ok(0, "b", 2)
    r = append_checker({}, h.ops, cluster(["a"]))
    golden(r)
    assert r.valid is False and kinds(r) == {"lost-append"}
    assert r.stats["lost"] == 1
    assert r.anomalies[0].witness["op"]["value"] == "b"


def test_duplicated_append(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 1)
    r = append_checker({}, h.ops, cluster(["a", "a"]))
    golden(r)
    assert kinds(r) == {"duplicate-append"}
    assert r.stats["duplicated"] == 1 and r.anomalies[0].witness["indexes"] == [1, 2]


def test_realtime_reorder(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(1, "b").ok(1, "b")
    r = append_checker({}, h.ops, cluster(["b", "a"]))
    golden(r)
    assert kinds(r) == {"realtime-reorder"}
    w = r.anomalies[0].witness
    assert w["earlier"]["value"] == "a" and w["earlier_index"] == 2 and w["later_index"] == 1


def test_concurrent_appends_may_commit_in_any_order(golden: Golden) -> None:
    h = H().invoke(0, "a").invoke(1, "b").ok(0, "a").ok(1, "b")
    assert golden(append_checker({}, h.ops, cluster(["b", "a"]))).valid is True


def test_wrong_reported_index(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 2).invoke(0, "b").ok(0, "b", 1)
    r = append_checker({}, h.ops, cluster(["x", "a", "b"]))
    golden(r)
    assert "wrong-index" in kinds(r)
    w = next(a for a in r.anomalies if a.kind == "wrong-index").witness
    assert w["reported_index"] == 1 and w["actual_indexes"] == [3]


def test_failed_append_present(golden: Golden) -> None:
    h = H().invoke(0, "a").fail(0, "a")
    r = append_checker({}, h.ops, cluster(["a"]))
    golden(r)
    assert kinds(r) == {"failed-append-present"}


def test_failed_append_absent_and_info_absent_is_no_violation_but_proves_nothing(golden: Golden) -> None:
    h = H().invoke(0, "a").fail(0, "a").invoke(1, "b").info(1, "b")
    r = append_checker({}, h.ops, cluster([]))
    golden(r)
    assert r.valid == "unknown" and "acknowledged=0" in r.note and not r.anomalies
    assert r.examined == {"appends": 2, "acknowledged": 0, "nodes_with_log": 3,
                          "committed_entries": 0}


def test_examined_counts_and_nothing_committed_is_unknown(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 1).invoke(1, "b").info(1, "b")
    r = append_checker({}, h.ops, cluster(["a", "b"]))
    golden(r)
    assert r.valid is True
    assert r.examined == {"appends": 2, "acknowledged": 1, "nodes_with_log": 3,
                          "committed_entries": 2}
    r = append_checker({}, [], cluster([]))
    golden(r)
    assert r.valid == "unknown" and "committed_entries=0" in r.note and r.stats["vacuous"]


@pytest.mark.parametrize(("history", "log"), [
    pytest.param(H(), [], id="empty"),
    pytest.param(H().invoke(0, "a").fail(0, "a").invoke(1, "b").fail(1, "b"), [], id="all-fail"),
    pytest.param(H().invoke(0, "a").info(0, "a").invoke(1, "b").info(1, "b"), ["a"],
                 id="all-info"),
])
def test_a_history_with_no_acknowledged_append_proves_nothing(history: H, log: list[str], golden: Golden) -> None:
    """Failed appends are absent, an info one may sit in the log: no violation, nothing proved."""
    r = append_checker({}, history.ops, cluster(log))
    golden(r)
    assert r.valid == "unknown" and "nothing to judge: acknowledged=0" in r.note, r.note
    assert r.stats["vacuous"] is True and not r.anomalies
    assert r.examined == {"appends": len(history.ops) // 2, "acknowledged": 0,
                          "nodes_with_log": 3, "committed_entries": len(log)}


def test_no_node_left_a_log_is_unknown_and_counts_no_node(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a", 1)
    r = append_checker({}, h.ops, {"nodes": {}})
    golden(r)
    assert r.valid == "unknown" and "no node's final state" in r.note and not r.anomalies
    assert r.examined == {"appends": 1, "acknowledged": 1, "nodes_with_log": 0,
                          "committed_entries": 0}


def test_phantom_append(golden: Golden) -> None:
    assert kinds(golden(append_checker({}, [], cluster(["ghost"])))) == {"phantom-append"}


def test_other_entries_are_ignored(golden: Golden) -> None:
    log = [entry(1, 1, "cfg", None, kind="config"), entry(2, 1, "kv", {"op": "put"}),
           append_entry(3, 1, "a")]
    obs = {"nodes": {"n1": node([], state(1, log, role="leader"))}}
    h = H().invoke(0, "a").ok(0, "a", 3)
    assert golden(append_checker({}, h.ops, obs)).valid is True


def test_uncommitted_ack_is_unknown_not_lost(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b")
    r = append_checker({}, h.ops, cluster(["a", "b"], commit=1))
    golden(r)
    assert r.valid == "unknown" and r.stats["unknown"] == 1


def test_compacted_without_applies_is_unknown(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b")
    r = append_checker({}, h.ops, cluster(["a", "b"], snapshot=1))
    golden(r)
    assert r.valid == "unknown" and r.stats["dark_indexes"] == 1


def test_compacted_entries_recovered_from_apply_events(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b")
    obs = cluster(["a", "b"], snapshot=1)
    obs["nodes"]["n2"]["events"] = commits_and_applies([append_entry(1, 1, "a")])
    assert golden(append_checker({}, h.ops, obs)).valid is True


def test_missing_state_makes_not_found_unknown(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b")
    obs = cluster(["a"])
    obs["nodes"]["n3"]["state"] = None
    r = append_checker({}, h.ops, obs)
    golden(r)
    assert r.valid == "unknown"
    assert any("n3" in g for g in r.stats["missing_evidence"])


def test_no_states_at_all_is_unknown(golden: Golden) -> None:
    h = H().invoke(0, "a").ok(0, "a")
    assert golden(append_checker({}, h.ops, {"nodes": {"n1": node([], None)}})).valid == "unknown"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["ok", "info", "fail"]), min_size=1, max_size=30))
def test_sequential_client_with_faithful_log_passes(outcomes: list[str]) -> None:
    """One client, ops one after another: ok and (some) info values land in order."""
    h = H()
    committed: list[str] = []
    for i, outcome in enumerate(outcomes):
        v = f"v{i}"
        h.invoke(0, v)
        if outcome == "ok":
            committed.append(v)
            h.ok(0, v, len(committed))
        elif outcome == "info":
            if i % 2:
                committed.append(v)
            h.info(0, v)
        else:
            h.fail(0, v)
    r = append_checker({}, h.ops, cluster(committed))
    assert r.valid == (True if "ok" in outcomes else "unknown")  # no ok append: nothing proved


def test_nemesis_and_other_ops_are_not_appends(golden: Golden) -> None:
    """A nemesis op named like a client op, and a read between appends, are no appends."""
    h = H().invoke(0, "a").ok(0, "a", 1)
    h.ops += [{"index": 2, "time": 25, "process": "nemesis", "type": "invoke", "f": "append",
               "value": "x"},
              {"index": 3, "time": 26, "process": "nemesis", "type": "info", "f": "append",
               "value": "x"},
              {"index": 4, "time": 27, "process": 1, "type": "invoke", "f": "read", "value": None},
              {"index": 5, "time": 28, "process": 1, "type": "ok", "f": "read", "value": ["a"]}]
    assert [(o.value, o.outcome) for o in append_ops(h.ops)] == [("a", "ok")]
    r = golden(append_checker({}, h.ops, cluster(["a"])))
    assert r.valid is True and r.examined["appends"] == 1


def test_append_ops_without_index_or_time_use_positions(golden: Golden) -> None:
    h = [{"process": 0, "type": "invoke", "f": "append", "value": "a"},
         {"process": 1, "type": "invoke", "f": "append", "value": "b"},
         {"process": 0, "type": "ok", "f": "append", "value": {"v": "a", "index": 4}},
         {"process": 1, "type": "info", "f": "append", "value": "b"},
         {"process": 2, "type": "invoke", "f": "append", "value": "c"}]
    ops = golden(append_ops(h))
    assert [(o.value, o.invoke_index, o.complete_index, o.outcome, o.reported_index)
            for o in ops] == [("a", 0, 2, "ok", 4), ("b", 1, 3, "info", None),
                              ("c", 4, None, "info", None)]  # never completed: info
    assert [(o.invoke_time, o.complete_time) for o in ops] == [(0, 0), (0, 0), (0, None)]


@pytest.mark.parametrize(("data", "kind", "want"), [
    ({"op": "append", "v": 7}, "app", "7"), ('{"op": "append", "v": "x"}', None, "x"),
    (b'{"op": "append", "v": "y"}', "app", "y"), ("not json", "app", None),
    ({"op": "append"}, "app", None), ({"op": "write", "v": "x"}, "app", None),
    ({"op": "append", "v": "x"}, "config", None), (["append", "x"], "app", None),
])
def test_append_value_reads_only_append_entries(data: Any, kind: Any, want: Any) -> None:
    from checkers.append_log import append_value
    from checkers.observations import LogEntry

    assert append_value(LogEntry(1, 1, "d", kind, data)) == want


def test_acknowledged_appends_only_other_nodes_hold_are_unknown_not_lost(golden: Golden) -> None:
    """The leader's committed log lacks b and c; a follower holds both beyond the leader's
    commit: not proven lost (it may still commit), so counted unknown, twice."""
    h = H().invoke(0, "a").ok(0, "a", 1).invoke(0, "b").ok(0, "b").invoke(0, "c").ok(0, "c")
    obs = cluster(["a"])
    obs["nodes"]["n2"]["state"]["log"] += [append_entry(2, 1, "b"), append_entry(3, 1, "c")]
    r = golden(append_checker({}, h.ops, obs))
    assert r.stats["unknown"] == 2 and r.stats["lost"] == 0, r.stats
