"""2PC checks on hand-made journals that reach the paths the simulator's bugs do not: two
commits that share a version without a recorded overlap, a node that went active again
without a sync, and stale local reads. Whole results are pinned (golden)."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.golden import Golden

NODES = ("n1", "n2")


def obs(events: dict[str, list[dict[str, Any]]],
        kv: dict[str, Any] | None = None) -> dict[str, Any]:
    kv = kv if kv is not None else {}
    return {"nodes": {n: {"events": [{"seq": i, "t": float(i), **e}
                                     for i, e in enumerate(events.get(n, []))],
                          "state": {"state": "active", "kv": kv}, "missing": []}
                      for n in NODES}}


def update(i: int, proc: int, uid: str, key: str, value: Any, outcome: str = "ok"
           ) -> list[dict[str, Any]]:
    v = [key, value, uid]
    return [{"index": i, "process": proc, "type": "invoke", "f": "update", "value": v},
            {"index": i + 1, "process": proc, "type": outcome, "f": "update", "value": v}]


def read(i: int, proc: int, key: str, got: Any, outcome: str = "ok") -> list[dict[str, Any]]:
    return [{"index": i, "process": proc, "type": "invoke", "f": "read", "value": [key, None]},
            {"index": i + 1, "process": proc, "type": outcome, "f": "read", "value": got}]


def committed(uid: str, key: str, value: Any, version: int) -> list[dict[str, Any]]:
    """Both nodes vote yes (each release before the next vote: no overlap), one decides."""
    vote = {"type": "vote", "uid": uid, "key": key, "vote": "yes", "syncing": False}
    return [vote, {"type": "release", "uid": uid, "key": key},
            {"type": "apply", "uid": uid, "key": key, "value": value, "version": version}]


def kinds(r: Any) -> list[str]:
    return [a.kind for a in r.anomalies]


def test_two_commits_that_share_a_version_never_saw_each_other(golden: Golden) -> None:
    h = update(0, 0, "u1", "k", "a") + update(2, 1, "u2", "k", "b")
    evs = committed("u1", "k", "a", 1) + committed("u2", "k", "b", 1)
    kv = {"k": {"value": "b", "version": 1, "uid": "u2"}}
    r = check({}, h, obs({"n1": evs, "n2": evs}, kv))
    golden(r)
    assert kinds(r) == ["conflicting-commits"], r.explain()
    a = r.anomalies[0]
    assert "['u1', 'u2'] of key k all committed as version 1" in a.message
    assert a.witness["key"] == "k" and a.witness["version"] == 1
    assert [o["uid"] for o in a.witness["ops"]] == ["u1", "u2"]


def test_going_active_without_a_sync_after_inactive_or_a_restart(golden: Golden) -> None:
    evs = {"n1": [{"type": "state", "state": "inactive"},
                  {"type": "state", "state": "active", "reason": "heartbeat"}],
           "n2": [{"type": "start", "fresh": False, "state": "inactive"},
                  {"type": "sync-done"}, {"type": "state", "state": "active"},
                  {"type": "start", "fresh": True, "state": "active"}]}
    h = update(0, 0, "u1", "k", 1)
    for n in NODES:
        evs[n] += committed("u1", "k", 1, 1)
    r = check({}, h, obs(evs, {"k": {"value": 1, "version": 1, "uid": "u1"}}))
    golden(r)
    assert kinds(r) == ["sync-skipped"], r.explain()
    assert r.anomalies[0].witness["cause"]["node"] == "n1"
    assert "became inactive (seq 0) and went active at seq 1" in r.anomalies[0].message


def test_stale_reads_are_counted_against_acknowledged_updates(golden: Golden) -> None:
    h = (update(0, 0, "u1", "k", "a") + update(2, 0, "u2", "k", "b")
         + read(4, 1, "k", ["k", "a", 1])           # stale: v2 was acknowledged at index 3
         + read(6, 1, "k", ["k", "b", 2])           # fresh
         + read(8, 1, "j", ["j", None, 0])          # another key: nothing acknowledged
         + read(10, 1, "k", None, outcome="fail")   # not a read that happened
         + read(12, 1, "k", ["k", "a"]))            # malformed: no version
    h = read(-2, 2, "k", ["k", None, 0]) + h        # before any ack: not stale
    evs = committed("u1", "k", "a", 1) + committed("u2", "k", "b", 2)
    r = check({}, h, obs({"n1": evs, "n2": evs}, {"k": {"value": "b", "version": 2, "uid": "u2"}}))
    golden(r)
    assert r.valid is True, r.explain()
    sr = r.stats["stale_reads"]
    assert (sr["reads"], sr["stale"]) == (4, 1)
    assert sr["example"]["read"]["index"] == 5 and sr["example"]["newest_acknowledged_version"] == 2


def test_an_acknowledged_update_that_no_node_journaled_committing(golden: Golden) -> None:
    h = update(0, 0, "u1", "k", "a") + update(2, 1, "u2", "k", "b")
    evs = committed("u2", "k", "b", 1)
    r = check({}, h, obs({"n1": evs, "n2": evs}, {"k": {"value": "b", "version": 1, "uid": "u2"}}))
    golden(r)
    assert kinds(r) == ["missing-commit"], r.explain()
    assert r.anomalies[0].witness["op"]["uid"] == "u1"
    assert "u1 was acknowledged to its client, but no node journaled" in r.anomalies[0].message


def test_with_no_node_evidence_an_acknowledged_update_is_a_missing_commit(golden: Golden) -> None:
    r = check({"nodes": ["n1", "n2"]}, update(0, 0, "u1", "k", 1), {"nodes": {}})
    golden(r)
    assert r.valid is False and kinds(r) == ["missing-commit"]
    assert r.examined == {"updates": 1, "commits": 0, "votes": 0, "decisions": 0,
                          "nodes_with_state": 0}


def test_a_commit_over_a_no_vote_and_an_unheard_yes(golden: Golden) -> None:
    h = update(0, 0, "u1", "k", 1)
    evs = {"n1": [{"type": "vote", "uid": "u1", "key": "k", "vote": "yes", "syncing": False},
                  {"type": "decide", "uid": "u1", "key": "k", "outcome": "commit",
                   "voters": ["n1"], "missing": ["n2", "n3"]},
                  {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1}],
           "n2": [{"type": "vote", "uid": "u1", "key": "k", "vote": "no", "syncing": False},
                  {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1}]}
    r = golden(check({"nodes": list(NODES)}, h, obs(evs, {"k": {"value": 1, "version": 1,
                                                                 "uid": "u1"}})))
    a = next(a for a in r.anomalies if a.kind == "commit-without-all-yes")
    assert a.message == ("n1 committed u1 (key k) but ['n2'] voted no; ['n2'] never voted yes; "
                         "it decided without a vote from ['n3'] (their yes never reached it)")
    assert a.witness["votes"] == {"n1": "yes", "n2": "no"}


def test_a_node_that_ended_inactive_is_left_out_of_agreement_and_said(golden: Golden) -> None:
    h = update(0, 0, "u1", "k", 1)
    evs = committed("u1", "k", 1, 1)
    o = obs({"n1": evs, "n2": evs}, {"k": {"value": 1, "version": 1, "uid": "u1"}})
    o["nodes"]["n2"]["state"]["state"] = "inactive"  # it holds the data, but is not serving
    r = golden(check({}, h, o))
    assert r.valid == "unknown" and r.stats["not_active_at_end"] == ["n2"]
    assert "n2: ended inactive, not active: excluded from agreement" in r.note
