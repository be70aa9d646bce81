"""The peer link's queue under latency: it waits for each answer, so what it still sends
must be worth a round trip (nodes.garlicfarm.server.unsuperseded)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from nodes.garlicfarm.codec import LogEntry, MsgType, Request, Response, ValueType
from nodes.garlicfarm.server import _PeerLink, unsuperseded


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


class _SlowConn:
    """A connection whose every request takes one (simulated) round trip."""

    def __init__(self, sent: list[Request]) -> None:
        self.sent = sent
        self.connected = True

    async def request(self, msg: Request, timeout: float) -> Response:
        self.sent.append(msg)
        await asyncio.sleep(0.05)
        return Response(MsgType.REQUEST_VOTE_RESPONSE, 2, 1, msg.term, 0, False)

    def close(self) -> None:
        self.connected = False


def test_the_link_sends_only_the_current_term_after_a_slow_round_trip():
    """The link takes vote(1) and waits a round trip; meanwhile the candidate retried term 1
    twice and moved to term 2. Before unsuperseded, all four went out, one round trip each."""
    sent: list[Request] = []
    conn = _SlowConn(sent)
    node = SimpleNamespace(address=lambda sid: ("127.0.0.1", 1), _wire=lambda *a: conn,
                           opts=SimpleNamespace(raft=SimpleNamespace(rpc_timeout=1.0)),
                           loop=SimpleNamespace(message=lambda sid, resp: None),
                           cfg=SimpleNamespace(options={}))

    async def run() -> None:
        link = _PeerLink(node, 2)  # type: ignore[arg-type]
        link.conn = conn  # type: ignore[assignment]
        conn.hs = SimpleNamespace(host="127.0.0.1", port=1)  # type: ignore[attr-defined]
        link.send(vote(1))
        await asyncio.sleep(0.01)  # the link took it and awaits its answer
        for m in (vote(1), vote(1), vote(2)):
            link.send(m)
        await asyncio.sleep(0.3)
        link.stop()

    asyncio.run(run())
    assert sent == [vote(1), vote(2)]


class _DeadConn:
    """A peer that is down: every request fails at once (connection refused)."""

    connected = False
    hs = SimpleNamespace(host="127.0.0.1", port=1)

    async def request(self, msg: Request, timeout: float) -> Response:
        from nodes.garlicfarm.client import WireFail

        raise WireFail("refused")

    def close(self) -> None:
        pass


def waits_to_a_dead_peer(options: dict[str, object], tries: int = 8) -> list[float]:
    """The waits the link sleeps between its first ``tries`` failed requests (the core
    resends on its timers: a heartbeat is queued again before each wait ends)."""
    import nodes.garlicfarm.server as server

    waits: list[float] = []
    node = SimpleNamespace(address=lambda sid: ("127.0.0.1", 1), _wire=lambda *a: _DeadConn(),
                           opts=SimpleNamespace(raft=SimpleNamespace(rpc_timeout=1.0)),
                           loop=SimpleNamespace(message=lambda sid, resp: None),
                           cfg=SimpleNamespace(options=options))
    real_sleep = asyncio.sleep

    async def run() -> None:
        link = _PeerLink(node, 2)  # type: ignore[arg-type]

        async def sleep(s: float) -> None:
            waits.append(s)
            link.send(vote(1))
            await real_sleep(0)

        server.asyncio.sleep = sleep  # type: ignore[attr-defined]
        try:
            link.send(vote(1))
            while len(waits) < tries:
                await real_sleep(0.001)
        finally:
            server.asyncio.sleep = real_sleep  # type: ignore[attr-defined]
            link.stop()

    asyncio.run(run())
    return waits[:tries]


def test_the_reconnect_backoff_stops_growing_at_reconnect_max_ms():
    """A sim replay sets it under the election timeout: at the default 1 s a follower
    restarted after a long crash was reached only after it had campaigned (the sim's datagrams
    reach it at once), which hid ack-before-fsync's stale match index on real processes."""
    assert waits_to_a_dead_peer({}) == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert waits_to_a_dead_peer({"reconnect_max_ms": 100}) == [0.05, 0.1, 0.1, 0.1, 0.1, 0.1,
                                                               0.1, 0.1]
