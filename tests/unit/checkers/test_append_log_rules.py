"""The append rules one at a time: which ops are appends, that every op is judged, when a
missing node state matters, and what real-time order means (strictly before, by
completion time, acknowledged ops only)."""

from __future__ import annotations

from typing import Any

from checkers.append_log import check as append_checker
from tests.unit.checkers.gf_builders import append_entry, node, state
from tests.unit.checkers.test_append_log_checker import H, cluster, kinds


def op(process: int, type_: str, v: Any, time: int, f: str = "append") -> dict[str, Any]:
    return {"process": process, "type": type_, "f": f, "value": v, "time": time, "node": "n1"}


def test_appends_after_other_ops_are_judged() -> None:
    h = [op(1, "invoke", None, 5, "read"), op(1, "ok", [], 6, "read"),
         *H().invoke(0, "a").ok(0, "a", 1).ops]
    r = append_checker({}, h, cluster(["a"]))
    assert r.valid is True and r.examined["acknowledged"] == 1, r.explain()


def test_a_lost_append_is_reported_whatever_comes_after_it() -> None:
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b", 1)
    r = append_checker({}, h.ops, cluster(["b"]))
    assert r.valid is False and kinds(r) == {"lost-append"}


def test_a_node_without_a_final_state_does_not_matter_when_every_ack_is_placed() -> None:
    obs = cluster(["a"])
    obs["nodes"]["n3"]["state"] = None
    r = append_checker({}, H().invoke(0, "a").ok(0, "a", 1).ops, obs)
    assert r.valid is True, r.explain()


def test_an_info_append_orders_nothing() -> None:
    """An append that ended ``info`` may commit after its completion: a later append can sit
    before it."""
    h = H().invoke(0, "a").info(0, "a").invoke(1, "b").ok(1, "b")
    assert append_checker({}, h.ops, cluster(["b", "a"])).valid is True


def test_an_append_invoked_at_the_instant_another_completed_is_concurrent() -> None:
    h = [op(0, "invoke", "a", 10), op(0, "ok", "a", 20), op(1, "invoke", "b", 20),
         op(1, "ok", "b", 30)]
    assert append_checker({}, h, cluster(["b", "a"])).valid is True
    h[2]["time"] = 21  # strictly after a's completion: b must follow a
    assert kinds(append_checker({}, h, cluster(["b", "a"]))) == {"realtime-reorder"}


def test_real_time_follows_completion_order_not_invocation_order() -> None:
    """b completes first (30), then c is invoked (40), then a completes (60): c must follow
    b, whatever a's slow completion does."""
    h = [op(0, "invoke", "a", 10), op(1, "invoke", "b", 20), op(1, "ok", "b", 30),
         op(2, "invoke", "c", 40), op(2, "ok", "c", 50), op(0, "ok", "a", 60)]
    r = append_checker({}, h, cluster(["a", "c", "b"]))
    assert kinds(r) == {"realtime-reorder"}
    w = r.anomalies[0].witness
    assert (w["earlier"]["value"], w["later"]["value"]) == ("b", "c")
    assert append_checker({}, h, cluster(["a", "b", "c"])).valid is True


def test_the_latest_placed_of_several_earlier_appends_decides() -> None:
    """a then b completed before c was invoked; b sits after c: a reorder, though a does not."""
    h = H().invoke(0, "a").ok(0, "a").invoke(0, "b").ok(0, "b").invoke(0, "c").ok(0, "c")
    assert kinds(append_checker({}, h.ops, cluster(["a", "c", "b"]))) == {"realtime-reorder"}


def test_a_value_another_node_committed_where_the_top_log_differs_is_unknown() -> None:
    """n2 committed x at index 2 where the most advanced node (n1) has y: a divergence of
    committed logs (the raft checker's verdict), so the append cannot be called lost."""
    h = (H().invoke(0, "a").ok(0, "a").invoke(0, "x").ok(0, "x").invoke(0, "y").ok(0, "y")
         .invoke(0, "z").ok(0, "z"))
    obs = {"nodes": {
        "n1": node([], state(1, [append_entry(1, 1, "a"), append_entry(2, 1, "y"),
                                 append_entry(3, 1, "z")], role="leader")),
        "n2": node([], state(2, [append_entry(1, 1, "a"), append_entry(2, 1, "x")]))}}
    r = append_checker({}, h.ops, obs)
    assert r.valid == "unknown" and r.stats["unknown"] == 1 and r.stats["lost"] == 0
