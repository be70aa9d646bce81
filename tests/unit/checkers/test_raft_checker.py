"""Raft safety checkers: a healthy cluster passes; each bug's signature fails with its kind."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.raft import check as raft_check
from checkers.raft import (
    committed_not_lost,
    election_safety,
    log_matching,
    metals_agreement,
    state_machine_safety,
    vote_safety,
)
from tests.unit.checkers.gf_builders import (
    commits_and_applies,
    digest,
    entry,
    ev,
    healthy_cluster,
    node,
    state,
)
from tests.unit.golden import Golden


def kinds(result: Any) -> set[str]:
    return {a.kind for a in result.anomalies}


def passes(result: Any) -> bool:
    """True, or unknown only because it had nothing to examine (drawn logs may be empty)."""
    return result.valid is True or (result.valid == "unknown" and result.stats.get("vacuous"))


def test_healthy_cluster_passes_every_check(golden: Golden) -> None:
    r = raft_check({}, [], healthy_cluster())
    golden(r)
    assert r.valid is True, r.explain()
    assert len(r.children) == 8


def test_no_observations_is_unknown_not_pass(golden: Golden) -> None:
    r = raft_check({}, [], {"nodes": {}})
    golden(r)
    assert r.valid == "unknown"
    assert all(c.valid == "unknown" for c in r.children)


# ----------------------------------------------------------------- election safety


def test_two_leaders_in_term_3(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n1"]["events"].append({"seq": 99, "t": 5.0, "type": "role", "role": "leader",
                                         "term": 3, "leader": 1})
    obs["nodes"]["n3"]["events"].append({"seq": 98, "t": 6.0, "type": "role", "role": "leader",
                                         "term": 3, "leader": 3})
    r = election_safety({}, [], obs)
    golden(r)
    assert r.valid is False
    (a,) = r.anomalies
    assert a.kind == "two-leaders"
    assert a.witness["term"] == 3
    assert {w["node"] for w in a.witness["leaders"]} == {"n1", "n3"}
    assert {w["seq"] for w in a.witness["leaders"]} == {98, 99}


def test_final_states_with_two_leaders_in_one_term() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"]["state"]["role"] = "leader"
    assert kinds(election_safety({}, [], obs)) == {"two-leaders"}


def test_torn_role_event_makes_election_safety_unknown() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n2"]["missing"] = [{"what": "event", "type": "role", "detail": "torn"}]
    assert election_safety({}, [], obs).valid == "unknown"
    # a torn event of another type does not touch this check
    obs["nodes"]["n2"]["missing"] = [{"what": "event", "type": "apply", "detail": "torn"}]
    assert election_safety({}, [], obs).valid is True


# ----------------------------------------------------------------- vote safety


def test_double_vote_after_restart_names_the_restart(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"] = node([
        ev("vote", term=4, candidate=1, granted=True),
        ev("start", term=4, voted_for=None, last_index=5),
        ev("vote", term=4, candidate=2, granted=True),
    ], state(3, [entry(1, 1, "x1")], term=4, voted_for=2))
    r = vote_safety({}, [], obs)
    golden(r)
    assert r.valid is False
    assert kinds(r) == {"double-vote", "vote-forgotten"}
    (a,) = [x for x in r.anomalies if x.kind == "double-vote"]
    assert a.witness["node"] == "n3" and a.witness["term"] == 4
    assert {v["candidate"] for v in a.witness["votes"]} == {1, 2}
    assert a.witness["restarts_between"][0]["voted_for"] is None


def test_vote_forgotten_across_restart_even_without_a_second_vote(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"] = node([
        ev("vote", term=4, candidate=1, granted=True),
        ev("start", term=4, voted_for=None, last_index=5),
    ], state(3, [entry(1, 1, "x1")], term=4, voted_for=None))
    r = vote_safety({}, [], obs)
    golden(r)
    assert kinds(r) == {"vote-forgotten"}
    w = r.anomalies[0].witness
    assert w["node"] == "n3" and w["term"] == 4 and w["restart"]["voted_for"] is None


def test_vote_kept_across_restart_or_newer_term_is_fine() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"] = node([
        ev("vote", term=4, candidate=1, granted=True),
        ev("start", term=4, voted_for=1, last_index=5),
        ev("vote", term=5, candidate=2, granted=True),
        ev("start", term=6, voted_for=None, last_index=5),  # moved on to a later term: no vote owed
    ], state(3, [entry(1, 1, "x1")], term=6, voted_for=None))
    assert vote_safety({}, [], obs).valid is True


def test_rejected_votes_do_not_count() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"]["events"].append(
        {"seq": 50, "t": 1.0, "type": "vote", "term": 1, "candidate": 2, "granted": False})
    assert vote_safety({}, [], obs).valid is True


def test_candidate_voting_for_another_in_its_own_term(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n1"]["events"].append(
        {"seq": 50, "t": 1.0, "type": "vote", "term": 1, "candidate": 3, "granted": True})
    r = vote_safety({}, [], obs)
    golden(r)
    assert kinds(r) == {"double-vote"}
    assert {v["source"] for v in r.anomalies[0].witness["votes"]} == {"own candidacy", "vote"}


# ----------------------------------------------------------------- log matching


def test_diverging_logs_at_one_index(golden: Golden) -> None:
    obs = healthy_cluster()
    log = obs["nodes"]["n3"]["state"]["log"]
    log[2] = {**log[2], "digest": digest(3, log[2]["term"], "other")}
    r = log_matching({}, [], obs)
    golden(r)
    assert r.valid is False
    assert "log-divergence" in kinds(r)
    a = next(a for a in r.anomalies if a.kind == "log-divergence")
    assert a.witness["index"] == 3 and "n3" in a.witness["nodes"]


def test_prefix_mismatch_below_a_matching_entry(golden: Golden) -> None:
    a = [entry(1, 1), entry(2, 1), entry(3, 3)]
    b = [entry(1, 1), entry(2, 2), entry(3, 3)]
    obs = {"nodes": {"n1": node([], state(1, a)), "n2": node([], state(2, b))}}
    r = log_matching({}, [], obs)
    golden(r)
    assert kinds(r) == {"log-prefix-mismatch"}
    w = r.anomalies[0].witness
    assert w["index"] == 2 and w["anchor"]["index"] == 3


def test_uncommitted_divergent_suffix_is_fine() -> None:
    a = [entry(1, 1), entry(2, 1), entry(3, 2)]
    b = [entry(1, 1), entry(2, 1), entry(3, 3), entry(4, 3)]
    obs = {"nodes": {"n1": node([], state(1, a, commit_index=2)),
                     "n2": node([], state(2, b, commit_index=2))}}
    assert log_matching({}, [], obs).valid is True


def test_snapshot_hides_compacted_disagreement() -> None:
    a = [entry(3, 2), entry(4, 2)]
    b = [entry(1, 9), entry(2, 9), entry(3, 2), entry(4, 2)]  # nonsense below a's snapshot
    obs = {"nodes": {"n1": node([], state(1, a, snapshot=(2, 1))),
                     "n2": node([], state(2, [entry(1, 1), *b[2:]], snapshot=(0, 0)))}}
    assert log_matching({}, [], obs).valid is True


def test_log_term_regression() -> None:
    obs = {"nodes": {"n1": node([], state(1, [entry(1, 2), entry(2, 1)]))}}
    assert kinds(log_matching({}, [], obs)) == {"log-term-regression"}


def test_missing_state_makes_log_matching_unknown(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"]["state"] = None
    r = log_matching({}, [], obs)
    golden(r)
    assert r.valid == "unknown"
    assert any("n3" in g for g in r.stats["missing_evidence"])


def _prefix_consistent_logs(draw: Any) -> dict[str, Any]:
    """A base log and per-node copies: a prefix, a private divergent tail, a snapshot."""
    terms = draw(st.lists(st.integers(1, 4), min_size=0, max_size=25).map(sorted))
    base = [entry(i + 1, t, "base") for i, t in enumerate(terms)]
    nodes = {}
    for k in range(1, draw(st.integers(2, 5)) + 1):
        keep = draw(st.integers(0, len(base)))
        tail = [entry(keep + j + 1, 100 + 10 * k, f"n{k}")
                for j in range(draw(st.integers(0, 4)))]
        snap = draw(st.integers(0, keep))
        log = [e for e in base[:keep] + tail if e["index"] > snap]
        snap_term = base[snap - 1]["term"] if snap else 0
        nodes[f"n{k}"] = node(commits_and_applies(base[:keep]),
                              state(k, log, commit_index=keep, snapshot=(snap, snap_term)))
    return {"nodes": nodes}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_prefix_consistent_set_of_logs_passes(data: st.DataObject) -> None:
    obs = _prefix_consistent_logs(data.draw)
    for check in (log_matching, state_machine_safety, committed_not_lost):
        assert passes(check({}, [], obs)), check({}, [], obs).explain()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_changed_digest_in_a_shared_entry_is_caught(data: st.DataObject) -> None:
    obs = _prefix_consistent_logs(data.draw)
    pairs = [(a, b) for a in obs["nodes"] for b in obs["nodes"] if a < b]
    shared = [(b, i) for a, b in pairs
              for i, e in enumerate(obs["nodes"][b]["state"]["log"])
              if e in obs["nodes"][a]["state"]["log"]]
    if not shared:
        return
    name, i = data.draw(st.sampled_from(shared))
    log = obs["nodes"][name]["state"]["log"]
    log[i] = {**log[i], "digest": "f" * 16}
    assert log_matching({}, [], obs).valid is False


# ----------------------------------------------------------------- state machine safety


def test_different_digests_applied_at_one_index(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n2"]["events"].append({"seq": 77, "t": 9.0, "type": "apply", "index": 4,
                                         "term": 2, "digest": "deadbeefdeadbeef", "kind": "app",
                                         "data": None})
    r = state_machine_safety({}, [], obs)
    golden(r)
    assert r.valid is False
    (a,) = r.anomalies
    assert a.kind == "apply-divergence" and a.witness["index"] == 4
    assert "deadbeefdeadbeef" in a.witness["applies"]


def test_reapply_after_restart_with_same_digest_is_fine(golden: Golden) -> None:
    obs = healthy_cluster()
    evs = obs["nodes"]["n2"]["events"]
    again = [dict(e) for e in evs if e["type"] == "apply"]
    evs += [{"seq": 200, "t": 1.0, "type": "start", "term": 2, "voted_for": 2, "last_index": 5},
            *again]
    r = state_machine_safety({}, [], obs)
    golden(r)
    assert r.valid is True
    assert r.stats["reapplied"] == 5


def test_torn_journal_line_of_unknown_type_makes_sms_unknown() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n1"]["missing"] = [{"what": "event", "type": None, "detail": "line 7 torn"}]
    assert state_machine_safety({}, [], obs).valid == "unknown"


# ----------------------------------------------------------------- committed, not lost


def _after_restart_lost_entry() -> dict[str, Any]:
    """n1 led term 1 and committed 1..3; after kill -9 and re-election, index 3 is gone."""
    full = [entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "c")]
    short = full[:2] + [entry(3, 2, "d")]
    return {"nodes": {
        "n1": node(commits_and_applies(full) + [ev("start", term=1, voted_for=1, last_index=2)],
                   state(1, short, commit_index=3, term=2)),
        "n2": node([], state(2, short, commit_index=3, term=2, role="leader")),
        "n3": node([], state(3, short[:2], commit_index=2, term=2)),
    }}


def test_committed_entry_overwritten_after_restart(golden: Golden) -> None:
    r = committed_not_lost({}, [], _after_restart_lost_entry())
    golden(r)
    assert r.valid is False
    assert "committed-entry-overwritten" in kinds(r)
    assert "commit-divergence" in kinds(r)
    a = next(a for a in r.anomalies if a.kind == "committed-entry-overwritten")
    assert a.witness["first"]["index"] == 3 and a.witness["first"]["found"]["term"] == 2


def test_committed_entry_missing_from_the_leader(golden: Golden) -> None:
    full = [entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "c")]
    obs = {"nodes": {
        "n1": node(commits_and_applies(full), state(1, full, commit_index=3, term=1)),
        "n2": node([], state(2, full[:2], commit_index=2, term=2, role="leader")),
        "n3": node([], state(3, full[:2], commit_index=2, term=2)),
    }}
    r = committed_not_lost({}, [], obs)
    golden(r)
    assert kinds(r) == {"committed-entry-lost"}
    (a,) = r.anomalies
    assert a.witness["node"] == "n2" and a.witness["indexes"] == [[3, 3]]


def test_lagging_follower_without_the_entry_is_fine() -> None:
    full = [entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "c")]
    obs = {"nodes": {
        "n1": node(commits_and_applies(full), state(1, full, commit_index=3, role="leader")),
        "n2": node([], state(2, full, commit_index=3)),
        "n3": node([], state(3, full[:1], commit_index=1)),
    }}
    assert committed_not_lost({}, [], obs).valid is True


def test_no_up_to_date_node_and_no_leader_is_unknown(golden: Golden) -> None:
    full = [entry(1, 1, "a"), entry(2, 1, "b")]
    obs = {"nodes": {
        "n1": node(commits_and_applies(full), state(1, full, commit_index=0)),
        "n2": node([], state(2, full, commit_index=0)),
    }}
    r = committed_not_lost({}, [], obs)
    golden(r)
    assert r.valid == "unknown" and r.stats["unverified"] == 2


def test_compacted_committed_entry_counts_as_kept(golden: Golden) -> None:
    full = [entry(i, 1, str(i)) for i in range(1, 6)]
    obs = {"nodes": {
        "n1": node(commits_and_applies(full), state(1, full[3:], commit_index=5,
                                                     snapshot=(3, 1), role="leader")),
    }}
    r = committed_not_lost({}, [], obs)
    golden(r)
    assert r.valid is True and r.stats["compacted"] == 3


def test_missing_state_makes_committed_not_lost_unknown() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n1"]["state"] = None
    assert committed_not_lost({}, [], obs).valid == "unknown"


# ----------------------------------------------------------------- metals


def test_metals_disagreement(golden: Golden) -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"]["state"]["metals"] = {"publisher": 1, "as_of_index": 5}
    r = metals_agreement({}, [], obs)
    golden(r)
    assert r.valid is False
    (a,) = r.anomalies
    assert a.kind == "metals-disagreement" and a.witness["publishers"]["n3"] == 1


def test_metals_at_different_indexes_are_not_compared() -> None:
    obs = healthy_cluster()
    obs["nodes"]["n3"]["state"]["metals"] = {"publisher": 1, "as_of_index": 4}
    assert metals_agreement({}, [], obs).valid is True


def test_metals_unknown_when_a_state_is_missing() -> None:
    obs = copy.deepcopy(healthy_cluster())
    obs["nodes"]["n2"]["state"] = None
    assert metals_agreement({}, [], obs).valid == "unknown"


def test_composed_result_is_false_when_one_check_fails(golden: Golden) -> None:
    r = raft_check({}, [], _after_restart_lost_entry())
    golden(r)
    assert r.valid is False
    assert {c.checker for c in r.children if c.valid is False} >= {"committed-not-lost"}
