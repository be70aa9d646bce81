"""vote-safety on journals written by hand: a vote lost across a restart, a double vote with
the restart between its two ballots, and the three sources of a ballot (a granted vote, the
node's own candidacy, its final state)."""

from __future__ import annotations

from checkers.raft import vote_safety
from tests.unit.checkers.gf_builders import ev, node, state
from tests.unit.golden import Golden


def test_a_vote_forgotten_across_a_restart_and_then_cast_again(golden: Golden) -> None:
    events = [ev("start", term=0, voted_for=None),
              ev("vote", term=3, candidate=1, granted=True),
              ev("vote", term=3, candidate=1, granted=False),  # refused: not a ballot
              ev("start", term=3, voted_for=None),              # the stored vote is gone
              ev("vote", term=3, candidate=3, granted=True)]
    r = golden(vote_safety({}, [], {"nodes": {"n2": node(events, state(2, [], term=3))}}))
    assert sorted(a.kind for a in r.anomalies) == ["double-vote", "vote-forgotten"]
    double = next(a for a in r.anomalies if a.kind == "double-vote")
    assert double.message == "n2 voted for 1, 3 in term 3 (restarted 1x in between)"
    assert double.witness["restarts_between"] == [
        {"node": "n2", "seq": 3, "t": 1003.0, "term": 3, "voted_for": None}]
    assert all("pos" not in v for v in double.witness["votes"])
    forgot = next(a for a in r.anomalies if a.kind == "vote-forgotten")
    assert forgot.message == ("n2 voted for 1 in term 3 (seq 1) but restarted in that term with "
                              "voted_for=None (seq 3)")
    assert r.examined == {"votes": 2, "vote_events": 3}


def test_a_restart_that_kept_its_vote_or_came_back_in_a_later_term(golden: Golden) -> None:
    events = [ev("vote", term=3, candidate=1, granted=True), ev("start", term=3, voted_for=1),
              ev("vote", term=4, candidate=1, granted=True), ev("start", term=5, voted_for=None)]
    r = golden(vote_safety({}, [], {"nodes": {"n2": node(events, state(2, [], term=4))}}))
    assert r.valid is True and not r.anomalies


def test_own_candidacy_and_final_state_are_ballots(golden: Golden) -> None:
    """n1 stood in term 2 (a vote for itself), and its final state says it voted for 3 then:
    two candidates in one term, without a second vote event."""
    events = [ev("role", role="candidate", term=2), ev("role", role="follower", term=2)]
    st = state(1, [], term=2, voted_for=3)
    r = golden(vote_safety({}, [], {"nodes": {"n1": node(events, st)}}))
    a = r.anomalies[0]
    assert a.kind == "double-vote" and a.message == "n1 voted for 1, 3 in term 2"
    assert [v["source"] for v in a.witness["votes"]] == ["own candidacy", "final state"]
    assert a.witness["restarts_between"] == []
