"""The 2PC rules one path at a time (each test kills mutants that survived the others): the
syncing exemption, commits known only from a decision, aborts, loops that must go on past
an early item, the event types whose loss matters, one report per conflicting pair."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.drip.test_twopc_evidence import NODES, committed, kinds, obs, update


def vote(uid: str, key: str, syncing: bool = False, v: str = "yes") -> dict[str, Any]:
    return {"type": "vote", "uid": uid, "key": key, "vote": v, "syncing": syncing}


def kv(**versions: tuple[Any, int, str]) -> dict[str, Any]:
    return {k: {"value": v, "version": ver, "uid": uid} for k, (v, ver, uid) in versions.items()}


def overlapping(syncing: bool) -> list[dict[str, Any]]:
    """A yes on u2 while the yes on u1 (same key) is still held; both then apply."""
    return [vote("u1", "k"), vote("u2", "k", syncing=syncing),
            {"type": "apply", "uid": "u1", "key": "k", "value": "a", "version": 1},
            {"type": "apply", "uid": "u2", "key": "k", "value": "b", "version": 2}]


def test_a_syncing_nodes_yes_votes_are_exempt_from_the_overlap_rule() -> None:
    h = update(0, 0, "u1", "k", "a") + update(2, 1, "u2", "k", "b")
    final = kv(k=("b", 2, "u2"))
    exempt = check({}, h, obs({"n1": overlapping(True), "n2": overlapping(True)}, final))
    assert exempt.valid is True, exempt.explain()
    caught = check({}, h, obs({"n1": overlapping(False), "n2": overlapping(False)}, final))
    assert kinds(caught) == ["conflicting-commits"]  # one report for the pair, not one a node
    assert caught.anomalies[0].witness["vote"]["node"] == "n1"


def test_a_commit_known_only_from_its_decision_still_binds_every_store() -> None:
    """Nobody journaled applying u1, but its initiator decided commit at version 3: a store
    that ended below version 3 lacks a committed update; an abort binds nothing."""
    h = update(0, 0, "u1", "k", "a") + update(2, 1, "u2", "j", "b", outcome="fail")
    decide = {"type": "decide", "uid": "u1", "key": "k", "outcome": "commit", "version": 3,
              "voters": list(NODES), "missing": []}
    abort = {"type": "decide", "uid": "u2", "key": "j", "outcome": "abort", "version": 1,
             "voters": list(NODES), "missing": []}
    evs = {"n1": [vote("u1", "k"), vote("u2", "j"), decide, abort],
           "n2": [vote("u1", "k"), vote("u2", "j")]}
    r = check({}, h, obs(evs, kv(k=("a", 2, "u0"))))
    assert kinds(r) == ["missing-commit"], r.explain()
    w = r.anomalies[0].witness
    assert (w["uid"], w["key"], w["version"]) == ("u1", "k", 3)
    assert w["final_versions"] == {"n1": [2, "u0"], "n2": [2, "u0"]}
    assert r.examined["commits"] == 1  # the abort is not a commit
    held = check({}, h, obs(evs, kv(k=("a", 3, "u1"))))
    assert held.valid is True, held.explain()


def test_every_item_is_judged_not_only_those_before_a_clean_one() -> None:
    """Loops over updates and decisions go on past an item they skip."""
    h = update(0, 0, "u1", "k", 1) + update(2, 1, "u2", "k", 2, outcome="fail")
    evs = {n: [vote("u1", "k"), {"type": "release", "uid": "u1", "key": "k"},
               {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1},
               {"type": "apply", "uid": "u9", "key": "k", "value": 9, "version": 2},
               {"type": "apply", "uid": "u2", "key": "k", "value": 2, "version": 3}]
           for n in NODES}
    evs["n1"].insert(0, {"type": "decide", "uid": "u0", "key": "x", "outcome": "abort",
                         "voters": [], "missing": []})
    evs["n1"].append({"type": "decide", "uid": "u2", "key": "k", "outcome": "commit",
                      "voters": ["n1"], "missing": ["n2"]})
    r = check({}, h, obs(evs, kv(k=(2, 3, "u2"))))
    assert set(kinds(r)) == {"unknown-update", "failed-update-visible", "commit-without-all-yes",
                             "forged-voters"}
    assert [a.witness["applied"]["uid"] for a in r.anomalies if a.kind == "unknown-update"] \
        == ["u9"]


def test_a_failed_update_journaled_as_applied_is_visible_even_if_the_store_moved_on() -> None:
    h = update(0, 0, "u1", "k", 1, outcome="fail") + update(2, 1, "u2", "k", 2)
    evs = {n: [{"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1},
               {"type": "apply", "uid": "u2", "key": "k", "value": 2, "version": 2}]
           for n in NODES}
    r = check({}, h, obs(evs, kv(k=(2, 2, "u2"))))
    assert kinds(r) == ["failed-update-visible"]
    assert r.anomalies[0].witness["nodes"] == ["n1", "n2"]


def test_an_apply_without_a_version_is_not_a_lost_update() -> None:
    h = update(0, 0, "u1", "k", 1)
    evs = {n: [{"type": "apply", "uid": "u1", "key": "k", "value": 1}] for n in NODES}
    r = check({}, h, obs(evs, {}))
    assert "lost-after-apply" not in kinds(r), r.explain()


def test_only_the_loss_of_events_the_rules_read_makes_the_verdict_unknown() -> None:
    h = update(0, 0, "u1", "k", 1)
    evs = committed("u1", "k", 1, 1)

    def with_gap(fragment_type: str | None) -> Any:
        o = obs({"n1": evs, "n2": evs}, kv(k=(1, 1, "u1")))
        o["nodes"]["n1"]["missing"] = [{"what": "event", "type": fragment_type,
                                         "detail": f"torn {fragment_type} event"}]
        return check({}, h, o)

    assert with_gap("heartbeat").valid is True  # not an event type 2PC reads
    assert with_gap("vote").valid == "unknown"
    assert with_gap(None).valid == "unknown"  # a fragment whose type is lost counts
