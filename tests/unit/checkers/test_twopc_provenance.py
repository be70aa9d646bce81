"""The 2PC provenance leaves of issue 26, each on a hand-made journal shaped like
nodes/drip/core.py's events, with the legal twin that must stay valid: a commit applied with
no vote round (``commit-without-vote``, also the hostile commit naming another initiator),
sync data nobody asked for (``sync-unsolicited``), a unanimous decision listing voters that
never said yes (``forged-voters``) and an id the configuration never had (``ghost-member``)."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.drip.test_twopc_evidence import kinds, obs, update

TEST = {"nodes": ["n1", "n2"]}
FINAL = {"k": {"value": 1, "version": 1, "uid": "u1"}}
H = update(0, 0, "u1", "k", 1)


def vote(node: str, hop: str | None, initiator: str = "n1", v: str = "yes") -> dict[str, Any]:
    return {"type": "vote", "uid": "u1", "key": "k", "initiator": initiator, "vote": v,
            "from": hop, "syncing": False, "counter": 1 if hop else None}


def decide(voters: list[str], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "decide", "uid": "u1", "key": "k", "outcome": "commit", "version": 1,
            "voters": voters, "no_voters": [], "missing": [], "epoch": 0,
            "required": required if required is not None else ["n1", "n2"]}


def apply(hop: str | None, initiator: str = "n1", via: str = "update") -> dict[str, Any]:
    return {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1,
            "initiator": initiator, "via": via, "from": hop, "changed": True,
            "counter": 2 if via == "update" and hop else None}


RELEASE = {"type": "release", "uid": "u1", "key": "k", "why": "commit"}
INITIATOR = [vote("n1", None), decide(["n1", "n2"]), apply(None), RELEASE]


def judge(n2: list[dict[str, Any]], n1: list[dict[str, Any]] | None = None,
          test: dict[str, Any] | None = None) -> Any:
    return check(test or TEST, H, obs({"n1": INITIATOR if n1 is None else n1, "n2": n2}, FINAL))


def test_the_correct_round_is_valid() -> None:
    r = judge([vote("n2", "n1"), apply("n1"), RELEASE])
    assert r.valid is True, r.explain()


def test_a_commit_applied_with_no_vote_round() -> None:
    """The hostile ``commit-without-vote``: a /commit for an update nobody voted on or
    decided (n1, whose name it carries, never journaled it)."""
    r = judge([apply("n1")], n1=[])
    assert kinds(r) == ["commit-without-vote"], r.explain()
    a = r.anomalies[0]
    assert a.message == ("n2 applied u1 (key k) committed by n1 via n1, with no vote on it at "
                         "all in its journal")
    assert a.witness["applied"]["node"] == "n2" and a.witness["vote"] is None


def test_a_commit_naming_another_initiator_than_the_vote() -> None:
    """The hostile ``commit-other-initiator``: n2 voted on u1 for n1, but the commit it
    applied names n2 as initiator: a vote for one initiator licenses no other's commit."""
    r = judge([vote("n2", "n1"), apply("n1", initiator="n2"), RELEASE])
    assert kinds(r) == ["commit-without-vote"], r.explain()
    assert "a vote for it from initiator n1, but the commit names n2" in r.anomalies[0].message


def test_a_node_not_required_by_the_decision_needs_no_vote() -> None:
    """A member added after the decision (not in its ``required``) takes the commit later."""
    one = {"type": "members", "epoch": 1, "members": ["n1"], "via": "update"}
    two = {"type": "members", "epoch": 2, "members": ["n1", "n2"], "via": "update"}
    n1 = [one, vote("n1", None), {**decide(["n1"], required=["n1"]), "epoch": 1},
          apply(None), RELEASE, two]
    r = judge([two, apply("n1")], n1=n1, test={"nodes": ["n1"]})
    assert r.valid is True, r.explain()


def test_sync_data_nobody_asked_for() -> None:
    batch = apply("n1", via="sync")
    bad = judge([vote("n2", "n1"), RELEASE, batch])
    assert kinds(bad) == ["sync-unsolicited"], bad.explain()
    assert bad.anomalies[0].witness["asked"] == []
    asked = {"type": "sync-start", "source": "n1", "reason": "owed"}
    done = {"type": "sync-done", "source": "n1", "batches": 1, "changed": 1}
    ok = judge([vote("n2", "n1"), RELEASE, asked, batch, done])
    assert ok.valid is True, ok.explain()
    # after its sync-done, or after a restart, the old request licenses nothing
    start = {"type": "start", "fresh": False, "state": "sync"}
    for late in ([asked, done, batch], [asked, start, batch]):
        r = judge([vote("n2", "n1"), RELEASE, *late])
        assert "sync-unsolicited" in kinds(r), (late, r.explain())
    # asked of another peer is not asked of this one
    other = judge([vote("n2", "n1"), RELEASE, {**asked, "source": "n3"}, batch],
                  test={"nodes": ["n1", "n2", "n3"]})
    assert kinds(other) == ["sync-unsolicited"], other.explain()


def test_a_unanimous_decision_with_voters_that_never_said_yes() -> None:
    """The hostile ``vote-response-forged-voters``: n1 took a relay's list [n1, n2] although
    n2 journaled no yes (here: a no; and, separately, no vote at all)."""
    for n2 in ([vote("n2", "n1", v="no"), apply("n1")], [apply("n1")]):
        r = judge(n2)
        assert "forged-voters" in kinds(r), r.explain()
        a = next(a for a in r.anomalies if a.kind == "forged-voters")
        assert a.message == ("n1 decided u1 (key k) as unanimous, listing ['n2'] as yes "
                             "voters, but none of them journaled its own yes on it")
    # the initiator too must journal its own yes
    r = judge([vote("n2", "n1"), apply("n1"), RELEASE], n1=INITIATOR[1:])
    assert "forged-voters" in kinds(r), r.explain()


def test_a_member_the_configuration_never_had() -> None:
    """``ghost`` as a decision's missing voter (issue 26 item 1), as the initiator of a vote
    (``voting-unknown-node``) and in an epoch-0 member list (``heartbeat-ghost``)."""
    abort = {"type": "decide", "uid": "u2", "key": "j", "outcome": "abort",
             "reason": "no vote from ['ghost']", "voters": ["n1", "n2"], "no_voters": [],
             "missing": ["ghost"], "epoch": 0, "required": ["ghost", "n1", "n2"]}
    r = judge([vote("n2", "n1"), apply("n1"), RELEASE], n1=[*INITIATOR, abort])
    assert kinds(r) == ["ghost-member"], r.explain()  # one report per ghost per node
    assert r.anomalies[0].witness["event"]["ids"] == ["ghost"]
    assert r.anomalies[0].witness["event"]["field"] == "required"
    unknown = {**vote("n2", "ghost", initiator="ghost"), "uid": "u3", "key": "j"}
    r = judge([vote("n2", "n1"), apply("n1"), RELEASE, unknown])
    assert kinds(r) == ["ghost-member"], r.explain()
    assert "n2 journaled ['ghost'] as vote initiator" in r.anomalies[0].message
    hb = {"type": "members", "epoch": 0, "members": ["ghost", "n1", "n2"], "via": "heartbeat"}
    assert kinds(judge([hb, vote("n2", "n1"), apply("n1"), RELEASE])) == ["ghost-member"]


def test_an_agreed_membership_makes_a_member() -> None:
    """n3 joined by an agreed epoch: not a ghost, though the configuration did not list it."""
    agreed = {"type": "members", "epoch": 1, "members": ["n1", "n2", "n3"], "via": "update"}
    hb = {"type": "members", "epoch": 0, "members": ["n1", "n2", "n3"], "via": "heartbeat"}
    r = judge([hb, agreed, vote("n2", "n1"), apply("n1"), RELEASE],
              n1=[agreed, *INITIATOR])
    assert r.valid is True, r.explain()
    assert kinds(judge([hb, vote("n2", "n1"), apply("n1"), RELEASE])) == ["ghost-member"]
