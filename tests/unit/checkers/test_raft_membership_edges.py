"""raft.membership-safety at the edges of its two rules: a change whose previous
configuration is committed exactly at the leader's commit index is not overlapping, and two
agreed configurations one server apart are one ordinary step (mutation survivors, issue 14)."""

from __future__ import annotations

from checkers.raft import leader_completeness, membership_safety
from tests.unit.checkers.gf_builders import digest, ev, healthy_cluster
from tests.unit.checkers.test_raft_membership_checker import _add, with_change


def test_a_change_from_a_configuration_committed_at_the_commit_index_passes() -> None:
    r = membership_safety({}, [], with_change(prev=5, commit=5))
    assert r.valid is True, r.explain()


def test_one_server_removed_after_one_added_is_two_ordinary_steps() -> None:
    obs = with_change()
    for name in obs["nodes"]:
        _add(obs, name, ev("commit", index=8, term=2, digest="cfg8"),
             ev("config", index=8, servers=[1, 2, 3]))
    r = membership_safety({}, [], obs)
    assert r.valid is True, r.explain()
    assert r.examined["committed_configs"] == 2


def test_a_leader_missing_one_entry_committed_before_its_term_fails() -> None:
    """n3 journals index 5 committed again in term 3 (a replay after a restart); the entry
    was committed by term 2 on every node, so n3's term-3 log without it is a violation, and
    one missing entry is reported like several."""
    obs = healthy_cluster()
    _add(obs, "n3", ev("role", role="follower", term=3, leader=None),
         ev("commit", index=5, term=2, digest=digest(5, 2, "x5")),
         ev("role", role="leader", term=3, leader=3),
         ev("leader-log", term=3, last_index=4, snapshot_index=0, runs=[[1, 1], [3, 2]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is False and {a.kind for a in r.anomalies} == {"leader-missing-committed-entry"}
    w = r.anomalies[0].witness
    assert w["count"] == 1 and w["indexes"] == [[5, 5]] and w["first"]["by_term"] == 2


def test_an_entry_committed_but_never_applied_is_still_required() -> None:
    """Index 6 is journaled committed in term 2 and applied nowhere (every node stopped
    first): a term-3 leader without it misses a committed entry."""
    obs = healthy_cluster()
    for name in obs["nodes"]:
        _add(obs, name, ev("commit", index=6, term=2, digest=digest(6, 2, "x6")))
    _add(obs, "n3", ev("role", role="leader", term=3, leader=3),
         ev("leader-log", term=3, last_index=5, snapshot_index=0, runs=[[1, 1], [3, 2]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is False and r.anomalies[0].witness["indexes"] == [[6, 6]]


def test_each_committed_entry_is_judged_on_its_own_commit_term() -> None:
    """Index 6 is journaled committed only in term 3, index 7 already in term 2 (journals
    need not show commits in index order): the term-3 leader is excused 6, not 7."""
    obs = healthy_cluster()
    _add(obs, "n1", ev("commit", index=7, term=2, digest=digest(7, 2, "x7")))
    _add(obs, "n2", ev("role", role="follower", term=3, leader=3),
         ev("commit", index=6, term=2, digest=digest(6, 2, "x6")))
    _add(obs, "n3", ev("role", role="leader", term=3, leader=3),
         ev("leader-log", term=3, last_index=5, snapshot_index=0, runs=[[1, 1], [3, 2]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is False and r.anomalies[0].witness["indexes"] == [[7, 7]]
