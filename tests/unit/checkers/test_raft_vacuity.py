"""Each Raft leaf says what it examined, and is unknown (never a pass) when it had nothing
to judge: no leader, no vote, no log entry, no apply, no commit, no Meta LS status."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.raft import RAFT_CHECKS
from checkers.raft import check as raft_check
from tests.unit.checkers.gf_builders import healthy_cluster, node, state
from tests.unit.golden import Golden


def idle_cluster(n: int = 3) -> dict[str, Any]:
    """Nodes that started and were captured, but never elected, voted, logged or applied."""
    return {"nodes": {f"n{k}": node([], state(k, [], term=0, commit_index=0))
                      for k in range(1, n + 1)}}


#: leaf -> the needed count its vacuous note names
NEEDED = {"election-safety": "leader_terms=0", "vote-safety": "votes=0",
          "state-machine-safety": "applied_indexes=0",
          "committed-not-lost": "committed_indexes=0", "metals-agreement": "indexes_compared=0"}


@pytest.mark.parametrize("leaf", sorted(NEEDED))
def test_an_idle_cluster_is_unknown_with_the_reason(leaf: str, golden: Golden) -> None:
    r = RAFT_CHECKS[leaf]({}, [], idle_cluster())
    golden(r)
    assert r.valid == "unknown", r.explain()
    assert NEEDED[leaf] in r.note and r.stats.get("vacuous") is True


def test_log_matching_needs_final_logs_not_uncompacted_entries(golden: Golden) -> None:
    """Logs all compacted into snapshots are judged (True); no final log at all is unknown."""
    assert RAFT_CHECKS["log-matching"]({}, [], idle_cluster()).valid is True
    r = RAFT_CHECKS["log-matching"]({}, [], {"nodes": {}})
    golden(r)
    assert r.valid == "unknown"


def test_the_composed_raft_result_of_an_idle_cluster_is_unknown(golden: Golden) -> None:
    assert golden(raft_check({}, [], idle_cluster())).valid == "unknown"


def test_examined_counts_of_a_healthy_cluster(golden: Golden) -> None:
    r = raft_check({}, [], healthy_cluster(n=3, length=5))
    golden(r)
    assert r.valid is True, r.explain()
    seen = {path: leaf.examined for path, leaf in r.leaves()}
    assert seen == {
        # term 1 led by n1, term 2 by n2 (journal and final state)
        "election-safety": {"leader_terms": 2, "role_events": 9},
        # each node votes once in terms 1 and 2 (own candidacies included)
        "vote-safety": {"votes": 6, "vote_events": 4},
        "log-matching": {"logs": 3, "entries": 15, "entries_compared": 15},
        "state-machine-safety": {"applied_indexes": 5, "apply_events": 15},
        "committed-not-lost": {"committed_indexes": 5, "checks": 15},
        "metals-agreement": {"nodes_with_status": 3, "indexes_compared": 1},
        # no configuration change: the commits are still judged under the bootstrap one
        "membership-safety": {"committed_indexes": 5, "config_changes": 0,
                              "committed_configs": 0},
        # n2 led term 2, but everything was committed by term 2: no earlier-term entry to hold
        "leader-completeness": {"leaders": 2, "committed_entries": 5, "checks": 0},
    }


def _without(obs: dict[str, Any], *types: str) -> dict[str, Any]:
    for n in obs["nodes"].values():
        n["events"] = [e for e in n["events"] if e["type"] not in types]
    return obs


def test_no_leader_ever_elected_is_unknown_while_votes_still_count() -> None:
    obs = _without(healthy_cluster(), "role")
    obs["nodes"]["n2"]["state"]["role"] = "follower"
    assert RAFT_CHECKS["election-safety"]({}, [], obs).valid == "unknown"
    assert RAFT_CHECKS["vote-safety"]({}, [], obs).valid is True


def test_no_vote_cast_is_unknown(golden: Golden) -> None:
    obs = _without(healthy_cluster(), "vote", "role")
    for n in obs["nodes"].values():
        n["state"]["voted_for"] = None
    r = RAFT_CHECKS["vote-safety"]({}, [], obs)
    golden(r)
    assert r.valid == "unknown" and "votes=0" in r.note


def test_nothing_committed_is_unknown_while_the_logs_still_match(golden: Golden) -> None:
    obs = _without(healthy_cluster(), "commit", "apply")
    for n in obs["nodes"].values():
        n["state"]["commit_index"] = 0
    r = RAFT_CHECKS["committed-not-lost"]({}, [], obs)
    golden(r)
    assert r.valid == "unknown" and "committed_indexes=0" in r.note
    assert RAFT_CHECKS["state-machine-safety"]({}, [], obs).valid == "unknown"
    assert RAFT_CHECKS["log-matching"]({}, [], obs).valid is True


def test_metals_before_any_status_entry_compares_nothing(golden: Golden) -> None:
    obs = healthy_cluster()
    for n in obs["nodes"].values():
        n["state"]["metals"] = {"publisher": None, "as_of_index": 0}
    r = RAFT_CHECKS["metals-agreement"]({}, [], obs)
    golden(r)
    assert r.valid == "unknown" and r.examined["nodes_with_status"] == 0


def test_metals_of_one_node_alone_compares_nothing(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n1"]["state"]["metals"]["as_of_index"] = 4
    obs["nodes"]["n2"]["state"]["metals"]["as_of_index"] = 3
    r = RAFT_CHECKS["metals-agreement"]({}, [], obs)
    golden(r)
    assert r.valid == "unknown" and r.examined == {"nodes_with_status": 3, "indexes_compared": 0}
