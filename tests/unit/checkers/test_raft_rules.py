"""Raft rules one at a time: a journal line lacking a field a check needs is a gap (the check
is unknown, it neither passes nor fails on it), a node's latest apply is its word, restarts
after a vote are each judged, and a Meta LS publisher computed as of index 1 is compared."""

from __future__ import annotations

import copy
from typing import Any

import pytest

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


def with_event(event: dict[str, Any], at: str = "n3") -> dict[str, Any]:
    obs = healthy_cluster()
    events = obs["nodes"][at]["events"]
    events.append({"seq": len(events), "t": 1000.0 + len(events), **event})
    return obs


@pytest.mark.parametrize(("check", "event"), [
    pytest.param(election_safety, ev("role", role="follower"), id="role-without-term"),
    pytest.param(vote_safety, ev("role", role="follower"), id="vote-safety-role-without-term"),
    pytest.param(vote_safety, ev("vote", term=2, granted=False), id="vote-without-candidate"),
    pytest.param(log_matching, ev("apply", index=3, digest=digest(3, 2, "x3")),
                 id="apply-without-term"),
    pytest.param(state_machine_safety, ev("apply", index=3, term=2, digest=None),
                 id="apply-with-a-null-digest"),
    pytest.param(committed_not_lost, ev("commit", index=3, term=2, digest=None),
                 id="commit-with-a-null-digest"),
])
def test_a_line_lacking_a_needed_field_is_a_gap_not_a_verdict(check: Any, event: dict[str, Any]
                                                               ) -> None:
    assert check({}, [], healthy_cluster()).valid is True
    r = check({}, [], with_event(event))
    assert r.valid == "unknown" and not r.anomalies, r.explain()


def test_an_apply_without_a_digest_says_nothing_about_a_compacted_entry() -> None:
    """committed-not-lost cross-checks compacted entries against the node's applies; an apply
    line that lacks its digest is no such evidence (and is not a commit: no gap here)."""
    log = [entry(i, 1, f"x{i}") for i in range(1, 4)]
    nodes = {f"n{k}": node(commits_and_applies(log), state(k, log, role="leader" if k == 1
                                                           else "follower"))
             for k in (1, 2)}
    nodes["n3"] = node([ev("apply", index=2, term=1, digest=None)],
                       state(3, log[2:], snapshot=(2, 1)))
    assert committed_not_lost({}, [], {"nodes": nodes}).valid is True


def test_a_nodes_latest_apply_of_an_index_is_its_log() -> None:
    """n3 left no final state; it applied index 3 once with another digest, then again with
    the cluster's. Its log is the latest word, so the logs match; the changed apply is
    state-machine-safety's finding, not log-matching's."""
    obs = healthy_cluster()
    good = entry(3, 2, "x3")
    obs["nodes"]["n3"] = node([ev("apply", index=3, term=2, digest=digest(3, 2, "other")),
                               ev("apply", index=3, term=2, digest=good["digest"])], None)
    lm = log_matching({}, [], obs)
    assert not lm.anomalies and lm.valid == "unknown"  # unknown only for n3's missing state
    assert state_machine_safety({}, [], obs).valid is False
    swapped = copy.deepcopy(obs)
    swapped["nodes"]["n3"]["events"].reverse()  # now the odd digest is the latest
    assert {a.kind for a in log_matching({}, [], swapped).anomalies} == {"log-divergence"}


def test_every_restart_after_a_vote_is_judged_once() -> None:
    """A node that voted in term 1, then restarted twice in later terms, forgot nothing."""
    obs = healthy_cluster()
    events = obs["nodes"]["n3"]["events"]
    for extra in (ev("start", term=2, voted_for=2), ev("start", term=3, voted_for=None)):
        events.append({"seq": len(events), "t": 1000.0 + len(events), **extra})
    r = vote_safety({}, [], obs)
    assert r.valid is True and not r.anomalies, r.explain()


def test_publishers_computed_as_of_index_one_are_compared() -> None:
    obs = healthy_cluster()
    for k, publisher in ((1, 3), (2, 1), (3, 3)):
        obs["nodes"][f"n{k}"]["state"]["metals"] = {"publisher": publisher, "as_of_index": 1}
    r = metals_agreement({}, [], obs)
    assert r.valid is False and {a.kind for a in r.anomalies} == {"metals-disagreement"}
