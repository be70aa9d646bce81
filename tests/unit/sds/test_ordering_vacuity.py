"""Each ordering leaf says what it examined, and is unknown when it had nothing to judge."""

from __future__ import annotations

from checkers import ordering
from tests.unit.golden import Golden
from tests.unit.sds.test_ordering_checker import child, good


def test_a_good_run_counts_what_each_leaf_read(golden: Golden) -> None:
    h, obs = good()
    r = ordering.check({}, h, obs)
    golden(r)
    got = {c.checker: c.examined for c in r.children}
    assert got == {
        "causal-delivery": {"deliveries": 3},
        "common-order": {"entries_compared": 3, "nodes_with_state": 2, "log_entries": 6},
        "acked-not-lost": {"ok_sends": 1, "nodes_with_state": 2},
        "no-duplicates": {"deliveries": 3},
        "convergence": {"sends": 3, "nodes_with_state": 2},
        "lamport-unique": {"sends": 3, "deliveries": 3},
        "log-order": {"log_entries": 6, "nodes_with_state": 2, "dependencies_placed": 4},
        "causal-history": {"sends": 3, "deliveries": 3},
        "lamport-rules": {"sends": 3, "deliveries": 3},
        "buffers-drain": {"buffers_read": 6, "nodes_with_state": 2},
        "same-set": {"nodes_with_state": 2, "log_entries": 6, "sends": 3},
    }


def test_journals_and_states_with_no_message_make_every_leaf_unknown(golden: Golden) -> None:
    obs = {"nodes": {n: {"events": [{"seq": 0, "t": 0.0, "type": "start"}],
                         "state": {"log": []}, "missing": []} for n in ("n1", "n2")}}
    r = ordering.check({}, [], obs)
    golden(r)
    assert r.valid == "unknown"
    for c in r.children:
        assert c.valid == "unknown" and "nothing to judge" in c.note, (c.checker, c.note)
        assert c.stats["vacuous"] is True


def test_no_ok_send_leaves_only_acked_not_lost_unknown(golden: Golden) -> None:
    h, obs = good()
    r = ordering.check({}, [o for o in h if o["type"] != "ok"], obs)
    golden(r)
    assert child(r, "acked-not-lost").valid == "unknown"
    assert "ok_sends=0" in child(r, "acked-not-lost").note
    assert all(c.valid is True for c in r.children if c.checker != "acked-not-lost")


def test_no_observations_at_all_make_every_leaf_unknown(golden: Golden) -> None:
    r = ordering.check({}, [], {})
    golden(r)
    assert r.valid == "unknown"
    for c in r.children:
        assert c.valid == "unknown" and "nothing to judge" in c.note, (c.checker, c.note)
        assert all(v == 0 for v in c.examined.values()), (c.checker, c.examined)


def test_sends_never_delivered_leave_the_delivery_leaves_unknown(golden: Golden) -> None:
    h, obs = good()
    for o in obs["nodes"].values():
        o["events"] = [{**e, "deps": []} for e in o["events"] if e["type"] != "deliver"]
    r = ordering.check({}, h, obs)
    golden(r)
    for name in ("causal-delivery", "no-duplicates"):
        c = child(r, name)
        assert c.valid == "unknown" and "deliveries=0" in c.note, (name, c.note)
    assert child(r, "lamport-unique").valid is True


def test_one_final_log_compares_no_order(golden: Golden) -> None:
    h, obs = good()
    del obs["nodes"]["n2"]
    c = child(golden(ordering.check({}, h, obs)), "common-order")
    assert c.valid == "unknown" and "entries_compared=0" in c.note
    assert c.examined == {"entries_compared": 0, "nodes_with_state": 1, "log_entries": 3}


def test_final_logs_with_nothing_in_common_compare_no_order(golden: Golden) -> None:
    h, obs = good()
    n2 = obs["nodes"]["n2"]["state"]
    n2["log"] = [{**e, "id": e["id"] + "'"} for e in n2["log"]]
    c = child(golden(ordering.check({}, h, obs)), "common-order")
    assert c.valid == "unknown" and c.examined["entries_compared"] == 0
