"""A vote tally merges every proven voter of every answer a hop sends (issue 26).

The attack: a key holder answers a real vote with a yes in a compromised member's name (for
that member alone); the member's real answer, carrying the proven yeses of everyone behind
it, comes next. Before the fix the tally stopped listening to a hop once it had answered:
the real answer was a "late vote", the initiator never heard the rest of the mesh and
aborted. The voters here stand for what `nodes.drip.admit.Gate.proven` let through (each
relayed voter's own signed statement checked); the core only merges them.
"""

from __future__ import annotations

from nodes.common.effects import Effect, Emit, Send
from nodes.drip import codec
from nodes.drip.codec import Update
from nodes.drip.core import ClientUpdate, DripCore, Inbound

MESH = ["n1", "n2", "n3", "n4", "n5"]


def _core(me: str, peers: list[str]) -> DripCore:
    c = DripCore(me, peers, mesh_members=MESH)
    c.start(0)
    c.state = "active"
    return c


def _decides(out: list[Effect]) -> list[dict]:
    return [e.fields for e in out if isinstance(e, Emit) and e.type == "decide"]


def _answer(hop: str, counter: int, voters: tuple[str, ...], yes: bool = True,
            no_voters: tuple[str, ...] = ()) -> codec.VoteResponse:
    stmts = tuple((v, f"jwt-of-{v}") for v in voters if v != hop)
    return codec.VoteResponse(hop, yes, "n1", counter, "u1", voters, no_voters,
                              statements=stmts)


def test_a_forged_early_yes_then_the_hops_real_answer_commits() -> None:
    c = _core("n1", ["n2"])
    c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    counter = c.tallies["u1"].counter
    out = c.on_message(Inbound("n2", 1), _answer("n2", counter, ("n2",)), 0.1)  # forged
    assert not _decides(out)  # n3..n5 are missing, and n2 may answer again
    out = c.on_message(Inbound("n2", 2), _answer("n2", counter, ("n2", "n3", "n4", "n5")), 0.3)
    (dec,) = _decides(out)
    assert dec["outcome"] == "commit" and dec["voters"] == MESH
    assert "k" in c.d.kv


def test_a_proven_no_in_a_later_answer_still_aborts() -> None:
    c = _core("n1", ["n2"])
    c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    counter = c.tallies["u1"].counter
    c.on_message(Inbound("n2", 1), _answer("n2", counter, ("n2",)), 0.1)  # forged
    real = _answer("n2", counter, ("n2", "n3", "n5"), yes=False, no_voters=("n4",))
    (dec,) = _decides(c.on_message(Inbound("n2", 2), real, 0.3))
    assert dec["outcome"] == "abort" and dec["no_voters"] == ["n4"]
    assert "k" not in c.d.kv


def test_an_answer_with_missing_voters_and_no_second_answer_aborts_at_the_vote_timeout() -> None:
    c = _core("n1", ["n2"])
    c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    counter = c.tallies["u1"].counter
    assert not _decides(c.on_message(Inbound("n2", 1), _answer("n2", counter, ("n2",)), 0.1))
    (dec,) = _decides(c.on_timer(("vote", "u1"), c.cfg.vote_timeout_s))
    assert dec["outcome"] == "abort" and dec["missing"] == ["n3", "n4", "n5"]
    late = _answer("n2", counter, ("n2", "n3", "n4", "n5"))
    out = c.on_message(Inbound("n2", 2), late, 2.5)  # after the decision: spec 4.5.1
    assert not _decides(out) and "k" not in c.d.kv


def test_a_relay_that_answered_passes_a_later_answer_up_again() -> None:
    """n2 relays n1's vote to n3; a forged yes in n3's name makes n2 answer n1 early with
    n2 and n3 only; n3's real answer then brings n4 and n5, and n2 answers n1 again."""
    c = _core("n2", ["n1", "n3"])
    voting = codec.Voting("n1", 1, False, Update("u1", "k", 1), budget_ms=2000)
    c.on_message(Inbound("n1", 1), voting, 0)
    ups = [e for e in c.on_message(Inbound("n3", 2), _answer("n3", 1, ("n3",)), 0.1)
           if isinstance(e, Send) and e.to == "n1"]
    assert [u.msg.voters for u in ups] == [("n2", "n3")]
    out = c.on_message(Inbound("n3", 3), _answer("n3", 1, ("n3", "n4", "n5")), 0.2)
    (again,) = [e for e in out if isinstance(e, Send) and e.to == "n1"]
    assert again.msg.voters == ("n2", "n3", "n4", "n5") and again.msg.yes
    assert dict(again.msg.statements) == {v: f"jwt-of-{v}" for v in ("n4", "n5")}
    # the same answer once more adds nobody: nothing is sent
    out = c.on_message(Inbound("n3", 4), _answer("n3", 1, ("n3", "n4", "n5")), 0.3)
    assert not [e for e in out if isinstance(e, Send) and e.to == "n1"]
    # past the vote timeout nobody upstream waits
    out = c.on_message(Inbound("n3", 5), _answer("n3", 1, ("n3", "n4", "n5")), 5.0)
    assert not [e for e in out if isinstance(e, Send) and e.to == "n1"]
    assert "u1" not in c.answered


def test_a_voters_yes_counts_once_however_often_it_is_proven() -> None:
    c = _core("n1", ["n2", "n3"])
    c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    counter = c.tallies["u1"].counter
    c.on_message(Inbound("n2", 1), _answer("n2", counter, ("n2", "n4")), 0.1)
    c.on_message(Inbound("n2", 2), _answer("n2", counter, ("n2", "n4")), 0.2)
    t = c.tallies["u1"]
    assert t.voters == {"n1", "n2", "n4"} and t.pending == {"n3"}
    (dec,) = _decides(c.on_message(Inbound("n3", 3), _answer("n3", counter, ("n3", "n5")), 0.3))
    assert dec["outcome"] == "commit" and dec["voters"] == MESH


def test_a_relay_that_has_the_commit_does_not_answer_again() -> None:
    """A later answer from below after the update's commit came helps nobody: the
    initiator decided. It is a late vote, as after an abort, not one more message up."""
    c = _core("n2", ["n1", "n3"])
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 1, False, Update("u1", "k", 1),
                                                 budget_ms=2000), 0)
    c.on_message(Inbound("n3", 2), _answer("n3", 1, ("n3",)), 0.1)  # forged: n2 answers
    commit = codec.Commit("n1", 2, False, Update("u1", "k", 1), version=1)
    c.on_message(Inbound("n1", 3), commit, 0.2)
    assert "k" in c.d.kv and "u1" not in c.answered
    out = c.on_message(Inbound("n3", 4), _answer("n3", 1, ("n3", "n4", "n5")), 0.3)
    assert not [e for e in out if isinstance(e, Send) and e.to == "n1"]
    assert [e.type for e in out if isinstance(e, Emit)] == ["late-vote"]
