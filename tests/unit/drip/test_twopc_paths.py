"""Two more 2PC paths: a node restarted with data that goes active without finishing a sync
(from its start event, not from an inactive state), and a commit without every yes that comes
after an update whose recorded decision was not a commit."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.drip.test_twopc_evidence import NODES, committed, kinds, obs, update


def u1_everywhere(evs: dict[str, list[dict[str, Any]]]) -> tuple[list[Any], dict[str, Any]]:
    """Update u1 (k = 1) invoked, committed on every node: its history and final state."""
    for n in NODES:
        evs[n] += committed("u1", "k", 1, 1)
    return update(0, 0, "u1", "k", 1), {"k": {"value": 1, "version": 1, "uid": "u1"}}


def test_restarted_with_data_then_active_without_a_sync_done() -> None:
    evs = {"n1": [{"type": "start", "fresh": False, "state": "sync"},
                  {"type": "state", "state": "active", "reason": "sync abandoned"}],
           "n2": []}
    h, final = u1_everywhere(evs)
    r = check({}, h, obs(evs, final))
    assert kinds(r) == ["sync-skipped"], r.explain()
    assert r.anomalies[0].witness["cause"]["node"] == "n1"
    evs["n1"].insert(1, {"type": "sync-done"})
    assert check({}, h, obs(evs, final)).valid is True


def test_the_vote_rule_goes_on_past_a_decision_that_was_no_commit() -> None:
    h = update(0, 0, "u1", "k", 1) + update(2, 1, "u2", "j", 2)
    evs = {n: committed("u1", "k", 1, 1) + committed("u2", "j", 2, 1) for n in NODES}
    evs["n2"][3]["vote"] = "no"  # n2 voted no on u2
    evs["n1"] += [{"type": "decide", "uid": "u1", "key": "k", "outcome": "abort",
                   "voters": list(NODES), "missing": []},
                  {"type": "decide", "uid": "u2", "key": "j", "outcome": "commit",
                   "voters": list(NODES), "missing": []}]
    final = {"k": {"value": 1, "version": 1, "uid": "u1"}, "j": {"value": 2, "version": 1,
                                                                 "uid": "u2"}}
    r = check({}, h, obs(evs, final))
    bad = [a for a in r.anomalies if a.kind == "commit-without-all-yes"]
    assert r.valid is False and [a.witness["op"]["uid"] for a in bad] == ["u2"], r.explain()


def test_a_fresh_node_going_active_needs_no_sync() -> None:
    # nothing to sync from a fresh start: active without a sync-done is the normal path
    evs = {"n1": [{"type": "start", "fresh": True, "state": "inactive"},
                  {"type": "state", "state": "active"}],
           "n2": [{"type": "state", "state": "active"}]}
    h, final = u1_everywhere(evs)
    r = check({}, h, obs(evs, final))
    assert r.valid is True, r.explain()


def test_a_restart_straight_into_active_is_one_skipped_sync_not_two() -> None:
    evs = {"n1": [{"type": "start", "fresh": False, "state": "active"},
                  {"type": "state", "state": "active"}],
           "n2": []}
    h, final = u1_everywhere(evs)
    r = check({}, h, obs(evs, final))
    assert kinds(r) == ["sync-skipped"] and len(r.anomalies) == 1, r.explain()


def test_validity_goes_on_past_an_unknown_update() -> None:
    # "u0" was applied but never invoked; "u1" was applied with another value than asked
    h = update(0, 0, "u1", "k", 1)
    evs = {n: committed("u0", "j", 7, 1) + committed("u1", "k", 2, 1) for n in NODES}
    final = {"j": {"value": 7, "version": 1, "uid": "u0"},
             "k": {"value": 2, "version": 1, "uid": "u1"}}
    r = check({}, h, obs(evs, final))
    assert {"unknown-update", "wrong-value"} <= set(kinds(r)), r.explain()
