"""raft.membership-safety at the edges of its two rules: a change whose previous
configuration is committed exactly at the leader's commit index is not overlapping, and two
agreed configurations one server apart are one ordinary step (mutation survivors, issue 14)."""

from __future__ import annotations

from checkers.raft import membership_safety
from tests.unit.checkers.gf_builders import ev
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
