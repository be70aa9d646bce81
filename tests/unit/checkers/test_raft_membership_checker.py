"""raft.membership-safety and raft.leader-completeness: each rule can fail on a hand-made
journal, a correct one passes, nothing to judge is unknown; and on the simulator, Ongaro's
scenario under ``unsafe-config-change`` fails both the membership check and the commits."""

from __future__ import annotations

from typing import Any

from checkers.raft import check as raft_check
from checkers.raft import leader_completeness, membership_safety
from harness.sim.garlicfarm import GfSim
from tests.unit.checkers.gf_builders import ev, healthy_cluster
from tests.unit.garlicfarm.test_gf_membership import replay_add_then_remove


def kinds(result: Any) -> set[str]:
    return {a.kind for a in result.anomalies}


def _events(obs: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return obs["nodes"][name]["events"]


def _add(obs: dict[str, Any], name: str, *events: dict[str, Any]) -> None:
    evs = _events(obs, name)
    for e in events:
        seq = len(evs)
        evs.append({"seq": seq, "t": 1000.0 + seq, **e})


def _change(index: int = 6, term: int = 2, servers: tuple[int, ...] = (1, 2, 3, 4),
            prev: int = 0, commit: int = 5, commit_term: int = 2) -> dict[str, Any]:
    return ev("config-change", index=index, term=term, servers=list(servers),
              prev_config_index=prev, commit=commit, commit_term=commit_term)


def with_change(**kw: Any) -> dict[str, Any]:
    """The healthy cluster, then n2 (leader of term 2) adds server 4 at index 6."""
    obs = healthy_cluster()
    _add(obs, "n2", _change(**kw))
    for name in obs["nodes"]:
        _add(obs, name, ev("commit", index=6, term=2, digest="cfg6"),
             ev("config", index=6, servers=[1, 2, 3, 4]))
    return obs


# ----------------------------------------------------------------- membership safety


def test_a_safe_change_passes() -> None:
    r = membership_safety({}, [], with_change())
    assert r.valid is True, r.explain()
    assert r.examined["config_changes"] == 1 and r.examined["committed_configs"] == 1


def test_change_before_the_leader_committed_its_term_fails() -> None:
    r = membership_safety({}, [], with_change(commit=2, commit_term=1))
    assert r.valid is False and kinds(r) == {"config-change-before-term-commit"}
    assert "term 2 before committing" in r.anomalies[0].message


def test_second_change_while_one_is_uncommitted_fails() -> None:
    r = membership_safety({}, [], with_change(prev=6, commit=5))
    assert r.valid is False and kinds(r) == {"overlapping-config-change"}


def test_configuration_histories_that_are_not_one_sequence_fail() -> None:
    obs = with_change()
    _add(obs, "n3", ev("config", index=7, servers=[1, 2, 3, 4, 5]))
    _add(obs, "n1", ev("config", index=7, servers=[1, 2, 3]))
    r = membership_safety({}, [], obs)
    assert r.valid is False and "config-history-divergence" in kinds(r)


def test_two_servers_changed_in_one_step_fails() -> None:
    """Ongaro's outcome: {1..5} committed on one side, {1, 2, 3} next on the other."""
    obs = with_change()
    _add(obs, "n1", ev("config", index=8, servers=[1, 2]))
    r = membership_safety({}, [], obs)
    assert r.valid is False and kinds(r) == {"config-step-too-large"}
    assert r.anomalies[0].witness["after"] == {"index": 8, "servers": [1, 2]}


def test_one_index_committed_twice_names_each_sides_configuration() -> None:
    obs = with_change()
    _add(obs, "n3", ev("commit", index=7, term=3, digest="a"))
    _add(obs, "n1", ev("commit", index=7, term=2, digest="b"))
    r = membership_safety({}, [], obs)
    assert r.valid is False and kinds(r) == {"commit-divergence-across-configs"}
    assert "(config [1, 2, 3, 4])" in r.anomalies[0].message


def test_nothing_committed_is_unknown() -> None:
    obs = healthy_cluster()
    for name in obs["nodes"]:
        obs["nodes"][name]["events"] = [e for e in _events(obs, name) if e["type"] != "commit"]
    r = membership_safety({}, [], obs)
    assert r.valid == "unknown" and "committed_indexes=0" in r.note


def test_torn_config_change_event_is_unknown_not_pass() -> None:
    obs = with_change()
    _add(obs, "n2", ev("config-change", index=9, term=2))
    r = membership_safety({}, [], obs)
    assert r.valid == "unknown" and "lacks" in r.note


# ----------------------------------------------------------------- leader completeness


def test_every_later_leader_holding_the_committed_entries_passes() -> None:
    obs = healthy_cluster()
    _add(obs, "n3", ev("role", role="leader", term=3, leader=3),
         ev("leader-log", term=3, last_index=5, snapshot_index=0, runs=[[1, 1], [3, 2]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is True, r.explain()
    assert r.examined["checks"] == 5


def test_a_later_leader_missing_a_committed_entry_fails() -> None:
    obs = healthy_cluster()
    # n3 leads term 3 with index 4 of term 2 replaced: a log of terms 1,1,2 then 3
    _add(obs, "n3", ev("leader-log", term=3, last_index=3, snapshot_index=0,
                       runs=[[1, 1], [3, 2]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is False and kinds(r) == {"leader-missing-committed-entry"}
    w = r.anomalies[0].witness
    assert w["indexes"] == [[4, 5]] and w["first"]["by_term"] == 2


def test_a_different_term_at_the_index_is_missing_too() -> None:
    obs = healthy_cluster()
    _add(obs, "n3", ev("leader-log", term=3, last_index=5, snapshot_index=0,
                       runs=[[1, 1], [4, 3]]))
    r = leader_completeness({}, [], obs)
    assert r.valid is False and r.anomalies[0].witness["indexes"] == [[3, 5]]


def test_entries_in_the_leaders_snapshot_count_as_held() -> None:
    obs = healthy_cluster()
    _add(obs, "n3", ev("leader-log", term=3, last_index=5, snapshot_index=5, runs=[]))
    assert leader_completeness({}, [], obs).valid is True


def test_an_entry_committed_only_later_is_not_required_of_an_earlier_leader() -> None:
    """By the time n3 led term 3, no node had journaled index 6 committed in term <= 2."""
    obs = healthy_cluster()
    _add(obs, "n3", ev("leader-log", term=3, last_index=5, snapshot_index=0,
                       runs=[[1, 1], [3, 2]]))
    for name in obs["nodes"]:
        _add(obs, name, ev("role", role="follower", term=4, leader=1),
             ev("commit", index=6, term=2, digest="late"))
    r = leader_completeness({}, [], obs)
    assert r.valid is True, r.explain()


def test_no_leader_log_is_unknown() -> None:
    obs = healthy_cluster()
    for name in obs["nodes"]:
        obs["nodes"][name]["events"] = [e for e in _events(obs, name)
                                        if e["type"] != "leader-log"]
    r = leader_completeness({}, [], obs)
    assert r.valid == "unknown" and "leaders=0" in r.note


# ----------------------------------------------------------------- on the simulator


def sim_observations(sim: GfSim) -> dict[str, Any]:
    """The simulator's journal as the harness would load it (no final states)."""
    nodes: dict[str, Any] = {f"n{i}": {"events": [], "state": None, "missing": []}
                             for i in sim.nodes}
    for e in sim.events:
        evs = nodes[f"n{e.node}"]["events"]
        evs.append({"seq": len(evs), "t": e.t, "type": e.type, **e.fields})
    return {"nodes": nodes}


def test_ongaros_scenario_is_caught_under_the_bug_and_passes_fixed() -> None:
    bad, _ = replay_add_then_remove(("unsafe-config-change",))
    r = raft_check({}, [], sim_observations(bad))
    ms = r.find("membership-safety")
    assert ms is not None and ms.valid is False
    assert {"config-change-before-term-commit", "commit-divergence-across-configs",
            "config-step-too-large"} <= kinds(ms)
    good, _ = replay_add_then_remove()
    r = raft_check({}, [], sim_observations(good))
    for name in ("membership-safety", "leader-completeness", "state-machine-safety"):
        leaf = r.find(name)
        assert leaf is not None and leaf.valid is True, leaf.explain() if leaf else name
