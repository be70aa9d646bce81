"""The peer link's queue under latency: it waits for each answer, so what it still sends
must be worth a round trip (nodes.garlicfarm.server.unsuperseded)."""

from __future__ import annotations

from nodes.garlicfarm.codec import LogEntry, MsgType, Request, ValueType
from nodes.garlicfarm.server import unsuperseded


def vote(term: int, last: int = 0) -> Request:
    return Request(MsgType.REQUEST_VOTE_REQUEST, 1, 2, term, 0, last, 0)


def append(term: int, prev: int, value: bytes = b"x") -> Request:
    return Request(MsgType.APPEND_ENTRIES_REQUEST, 1, 2, term, term, prev, prev,
                   (LogEntry(term, ValueType.APPLICATION, value),))


def test_a_candidates_retries_of_terms_it_left_are_dropped():
    """What queued while a connection took several round trips to come up (seen with 400 ms
    each way, 3-5 s election timeouts, 1 s retries): the candidate's term-1 retries and its
    term-2 RequestVote. Sent in order, each stale one cost a round trip and the term-2 request
    arrived after the other candidates' timers had fired; only the current one is sent."""
    assert unsuperseded([vote(1), vote(1), vote(1), vote(2), vote(2)]) == [vote(2)]


def test_distinct_requests_of_the_current_term_keep_their_order():
    q = [vote(2), append(3, 5), append(3, 6, b"y")]
    assert unsuperseded(q) == [append(3, 5), append(3, 6, b"y")]
    assert unsuperseded([append(3, 5), append(3, 5)]) == [append(3, 5)]
    assert unsuperseded([]) == []
