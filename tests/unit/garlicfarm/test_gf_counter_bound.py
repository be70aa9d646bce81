"""Raft refuses a peer's counter above ``MAX_COUNTER`` (terms, indices, commit index, entry
terms, next index) before it changes any state: the hostile search found that a term of
2^64-1, once taken, made the next election ask for 2^64, which the u64 wire cannot encode."""

from __future__ import annotations

import random

import pytest

from nodes.common.effects import Emit, Reply, Send
from nodes.garlicfarm import codec as C
from nodes.garlicfarm import raft as R
from nodes.garlicfarm.codec import LogEntry, MsgType, Request, Response, ValueType

EP = {i: f"tcp://127.0.0.1:{18600 + i}" for i in range(1, 4)}
TOP = R.MAX_COUNTER
V, A = MsgType.REQUEST_VOTE_REQUEST, MsgType.APPEND_ENTRIES_REQUEST


def follower() -> R.Raft:
    r = R.Raft(1, dict(EP), R.StoredState(term=3), random.Random(1))
    r.start(0.0)
    return r


def state(r: R.Raft) -> tuple:
    return (r.term, r.voted_for, r.role, r.leader, r.commit, r.last_index, r.election_at)


@pytest.mark.parametrize("field_name,req", [
    ("term", Request(V, 2, 1, 2**64 - 1, 0, 0)),
    ("term", Request(A, 2, 1, TOP + 1)),
    ("last log term", Request(V, 2, 1, 4, TOP + 1, 0)),
    ("last log index", Request(A, 2, 1, 4, 0, TOP + 1)),
    ("commit index", Request(A, 2, 1, 4, 0, 0, 2**64 - 1)),
    ("entry term", Request(A, 2, 1, 4, 0, 0, 0, (LogEntry(TOP + 1, ValueType.APPLICATION, b"x"),))),
])
def test_a_request_above_the_bound_is_refused_and_changes_nothing(field_name, req) -> None:
    r = follower()
    before = state(r)
    out = r.on_request(C.decode(C.encode(req)), "tok", 1.0)
    assert out[0] == Reply("tok", None)  # no answer: the runtime closes the link
    (ev,) = [e for e in out if isinstance(e, Emit)]
    assert ev.type == "refused" and ev.fields["field"] == field_name
    assert state(r) == before and r.status()["refused"] == {"counter-out-of-range": 1}


def test_a_response_above_the_bound_is_refused_and_a_max_term_never_reaches_an_election() -> None:
    r = follower()
    before = state(r)
    out = r.on_response(Response(MsgType.REQUEST_VOTE_RESPONSE, 2, 1, 2**64 - 1, 0, True), 1.0)
    assert [e.type for e in out if isinstance(e, Emit)] == ["refused"] and state(r) == before
    r.on_response(Response(MsgType.APPEND_ENTRIES_RESPONSE, 2, 1, 3, TOP + 1, True), 1.0)
    assert r.status()["refused"] == {"counter-out-of-range": 2}
    asks = [e.msg for e in r.on_timer("election", 10.0) if isinstance(e, Send)]
    assert r.term == 4 and len(asks) == 2  # the election that used to ask for 2^64
    assert all(C.decode(C.encode(m)).term == 4 for m in asks)


def test_the_bound_itself_is_accepted_and_leaves_headroom_in_a_java_long() -> None:
    assert TOP + 2**32 == 2**63 - 1
    r = follower()
    out = r.on_request(Request(V, 2, 1, TOP, 0, 0), "tok", 1.0)
    assert r.term == TOP and isinstance(out[-1], Reply) and out[-1].value is not None
    assert r.status()["refused"] == {}


def test_bug_no_term_bound_is_off_by_default_and_takes_a_max_term_when_named() -> None:
    """Bug ``no-term-bound`` (declared for suites and the sim, off unless named): the same
    vote request at term 2^64-1 is refused by a default node; with the mode it becomes the
    node's term, and its next election asks for a term the u64 wire cannot carry (the wedge)."""
    from harness.sim.gf_search import TARGET
    from nodes.garlicfarm.core import BUGS

    assert "no-term-bound" in BUGS and "no-term-bound" in TARGET.bugs
    assert TARGET.needs["no-term-bound"] == ("hostile",)
    ask = Request(V, 2, 1, 2**64 - 1, 0, 0)
    assert follower().bounded and follower().on_request(ask, "tok", 1.0)[0] == Reply("tok", None)
    r = R.Raft(1, dict(EP), R.StoredState(term=3), random.Random(1),
               bugs=frozenset({"no-term-bound"}))
    r.start(0.0)
    out = r.on_request(C.decode(C.encode(ask)), "tok", 1.0)
    assert r.term == 2**64 - 1 and "refused" not in [e.type for e in out if isinstance(e, Emit)]
    asks = [e.msg for e in r.on_timer("election", 10.0) if isinstance(e, Send)]
    assert asks and all(m.term == 2**64 for m in asks)
    with pytest.raises(C.CodecError):
        C.encode(asks[0])
