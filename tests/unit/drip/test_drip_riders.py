"""Answers riding on an exchange the other way (nodes/drip/lane.py "Riders", session 49): how
they are framed and split, how the opener takes answers that come on either connection, and
how the node holds a peer's link for the answers it is about to seal and routes the riders
it gets to the lane they answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.drip import lane
from nodes.drip.server import DripNode

KEY = bytes(range(32))
TAG = lane.lane_tag(KEY)


@given(st.lists(st.binary(min_size=lane.HEAD, max_size=300), max_size=20),
       st.binary(max_size=200).map(lambda b: b"{" + b))
def test_riders_split_back_into_the_answers_and_the_batch(answers: list[bytes],
                                                           body: bytes) -> None:
    content = lane.pack_riders(TAG, answers, body)
    assert lane.split_riders(content) == ((TAG, answers, body) if answers else
                                          (None, [], body))


def test_a_batch_alone_is_unchanged_and_the_tag_is_not_the_key() -> None:
    assert lane.pack_riders(TAG, [], b'{"items":[]}') == b'{"items":[]}'
    assert lane.split_riders(b'{"items":[]}') == (None, [], b'{"items":[]}')
    assert len(TAG) == lane.TAG_BYTES and TAG not in KEY and TAG != lane.lane_tag(bytes(32))
    assert lane.Seal(KEY).tag == TAG


def _refused(content: bytes) -> str:
    with pytest.raises(lane.LaneFrameError) as e:
        lane.split_riders(content)
    return str(e.value)


def test_riders_not_framed_as_ours_are_refused() -> None:
    a = lane.pack_answer(KEY, 0, 200, b"{}")
    good = lane.pack_riders(TAG, [a], b"{}")
    assert "head" in _refused(lane.RIDERS + TAG[:3])
    assert "overruns" in _refused(good[:-5])  # the rider cut short
    assert "overruns" in _refused(lane.RIDERS + TAG + b"\x02" + good[10:])  # one too many
    short = lane.RIDERS + TAG + b"\x01" + (3).to_bytes(4, "big") + b"abc{}"
    assert "shorter than an answer" in _refused(short)
    big = [lane.pack_answer(KEY, i, 200, b" " * 30_000) for i in range(3)]
    assert "bytes of riders" in _refused(lane.pack_riders(TAG, big, b"{}"))


def test_an_inbound_lane_gives_its_ready_answers_oldest_first_within_the_bound() -> None:
    inbound = lane.Inbound(ws=None, trust=None, tag=TAG)  # type: ignore[arg-type]
    inbound.ready = [b"a" * 30_000, b"b" * 30_000, b"c" * 30_000]
    assert inbound.riders() == [b"a" * 30_000, b"b" * 30_000]
    assert inbound.ready == [b"c" * 30_000]
    assert inbound.riders() == [b"c" * 30_000] and inbound.riders() == []


class _Ws:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self) -> None:
        self.closed = True


def test_the_opener_takes_answers_from_either_connection_in_any_order() -> None:
    """Exchanges 0 and 1 on their way (two in flight); 1's answer rides on the peer's
    exchange before 0's comes on the lane's socket: each gets its own. A rider that answers
    an exchange already answered ends the lane (a replay), as on the socket."""
    acceptor = lane.Seal(KEY)

    async def go() -> tuple[list[Any], lane.Outbound]:
        ws = _Ws()
        ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
        first = asyncio.ensure_future(ln.exchange(b"{0}", 5.0))
        second = asyncio.ensure_future(ln.exchange(b"{1}", 5.0))
        await asyncio.sleep(0)
        assert [acceptor.take_exchange(f) for f in ws.sent] == [b"{0}", b"{1}"]
        a0, a1 = acceptor.answer(200, b"zero"), acceptor.answer(409, b"one")
        ln.take(a1)  # rode on the peer's exchange
        ln.take(a0)  # came on the socket
        got = [await first, await second]
        with pytest.raises(lane.LaneFrameError):
            ln.take(a1)
        return got, ln

    got, ln = asyncio.run(go())
    assert got == [(200, b"zero"), (409, b"one")]
    assert ln.dead and "no exchange waits" in (ln.bad_frame or "")


def test_an_answer_to_a_lane_already_ended_is_moot_not_a_bad_frame() -> None:
    """An exchange that timed out ended its lane (its exchanges failed); its answer may still
    come, on the socket or riding, before the lane is closed: not the peer's fault."""
    acceptor = lane.Seal(KEY)

    async def go() -> lane.Outbound:
        ws = _Ws()
        ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
        with pytest.raises(TimeoutError):
            await ln.exchange(b"{0}", 0.01)
        acceptor.take_exchange(ws.sent[0])
        ln.take(acceptor.answer(200, b"late"))
        return ln

    ln = asyncio.run(go())
    assert ln.dead and ln.bad_frame is None and "no answer in time" in ln.why


def test_an_exchange_carries_the_ready_answers_of_the_peers_lane() -> None:
    peer_key = bytes(range(100, 132))  # the lane the peer opened to us
    inbound = lane.Inbound(ws=None, trust=None, tag=lane.lane_tag(peer_key))  # type: ignore
    ours = lane.Seal(peer_key)
    ours.taken = 1
    inbound.ready = [ours.answer(200, b'{"answers":[]}')]

    async def go() -> bytes:
        ws = _Ws()
        ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
        ex = asyncio.ensure_future(ln.exchange(b'{"items":[]}', 5.0, inbound))
        await asyncio.sleep(0)
        ex.cancel()
        return ws.sent[0]

    frame = asyncio.run(go())
    tag, riders, body = lane.split_riders(lane.Seal(KEY).take_exchange(frame))
    assert (tag, body) == (inbound.tag, b'{"items":[]}') and not inbound.ready
    peer_end = lane.Seal(peer_key)
    peer_end.sent = 1
    assert peer_end.open_answer(riders[0]) == (0, 200, b'{"answers":[]}')


def _node(**opts: Any) -> SimpleNamespace:
    n = SimpleNamespace(opts=SimpleNamespace(lane_riders=True, peer_pipeline=1, **opts),
                        _lanes={}, _lanes_in={}, batch_stats=Counter(), _outq={}, _flying={})
    n._answers_coming = lambda to: DripNode._answers_coming(n, to)  # type: ignore[arg-type]
    return n


def test_a_link_waits_for_the_answers_being_sealed_and_only_then() -> None:
    n = _node()
    inbound = lane.Inbound(ws=None, trust=None, tag=TAG)  # type: ignore[arg-type]
    ln = SimpleNamespace(dead=False)
    n._lanes_in["n2"], n._lanes["n2"] = inbound, ln
    assert not DripNode._answers_coming(n, "n2")  # nothing of n2's waits for an answer
    inbound.unanswered = 1
    assert DripNode._answers_coming(n, "n2")  # its answer is on its way through our pass
    inbound.ready.append(b"sealed")
    assert not DripNode._answers_coming(n, "n2")  # sealed: the next exchange takes it
    inbound.ready.clear()
    ln.dead = True
    assert not DripNode._answers_coming(n, "n2")  # no lane of ours to ride on
    ln.dead = False
    n.opts.lane_riders = False
    assert not DripNode._answers_coming(n, "n2")


def test_the_pump_holds_a_link_while_its_answers_are_sealed() -> None:
    n = _node()
    spawned: list[Any] = []
    n.background = SimpleNamespace(spawn=lambda c: spawned.append(c) or c.close())
    n._spare = lambda to, q: None
    n._send_chunk = lambda to, chunk: DripNode._send_chunk(n, to, chunk)  # type: ignore
    n._batch_bytes = 1 << 20
    inbound = lane.Inbound(ws=None, trust=None, tag=TAG, unanswered=1)  # type: ignore
    n._lanes_in["n2"], n._lanes["n2"] = inbound, SimpleNamespace(dead=False)
    n._outq["n2"] = [(SimpleNamespace(), None)]
    DripNode._pump_peer(n, "n2")  # type: ignore[arg-type]
    assert not spawned and n._outq["n2"]
    inbound.unanswered, inbound.ready = 0, [b"sealed"]
    DripNode._pump_peer(n, "n2")  # type: ignore[arg-type]
    assert len(spawned) == 1 and not n._outq["n2"] and n._flying["n2"] == 1


class _Lane:
    def __init__(self, tag: bytes, fail: bool = False) -> None:
        self.seal = SimpleNamespace(tag=tag)
        self.taken: list[bytes] = []
        self.fail = fail
        self.why = "lane answer 3: no exchange waits for it"

    def take(self, data: bytes) -> None:
        if self.fail:
            raise lane.LaneFrameError(self.why)
        self.taken.append(data)


def test_riders_go_to_the_lane_they_answer_and_a_stale_lanes_are_dropped() -> None:
    n = _node()
    dropped: list[Any] = []
    n._drop_lane = lambda to, ln, why: dropped.append((to, ln, why))
    ln = n._lanes["n2"] = _Lane(TAG)
    DripNode._take_riders(n, "n2", TAG, [b"a", b"b"])  # type: ignore[arg-type]
    assert ln.taken == [b"a", b"b"] and not n.batch_stats["lane_stale_riders"]
    DripNode._take_riders(n, "n2", lane.lane_tag(bytes(32)), [b"c"])  # type: ignore
    DripNode._take_riders(n, "n3", TAG, [b"d"])  # type: ignore[arg-type]  (no lane to n3)
    assert ln.taken == [b"a", b"b"] and n.batch_stats["lane_stale_riders"] == 2
    assert not dropped
    bad = n._lanes["n2"] = _Lane(TAG, fail=True)
    DripNode._take_riders(n, "n2", TAG, [b"x", b"y"])  # type: ignore[arg-type]
    assert dropped == [("n2", bad, bad.why)]


def test_riders_are_not_taken_onto_a_closed_socket() -> None:
    """A lane whose WebSocket has closed (and not yet ended) refuses the exchange before
    taking riders: they stay ready for the peer's own lane instead of being lost with it."""
    inbound = lane.Inbound(ws=None, trust=None, tag=TAG, ready=[b"answer"])  # type: ignore

    async def go() -> None:
        ws = _Ws()
        ws.closed = True
        ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
        with pytest.raises(lane.LaneClosed):
            await ln.exchange(b"{}", 5.0, inbound)
        assert not ws.sent

    asyncio.run(go())
    assert inbound.ready == [b"answer"]


@pytest.mark.parametrize("unanswered", [1, 0])
def test_a_peers_lane_that_ends_releases_the_hold_on_our_link(unanswered: int) -> None:
    n = _node()
    pumped: list[str] = []
    n._pump_peer = pumped.append
    ws = object()
    n._lanes_in["n2"] = lane.Inbound(ws=ws, trust=None, tag=TAG,  # type: ignore[arg-type]
                                     unanswered=unanswered)
    DripNode._forget_lane_in(n, "n2", ws)  # type: ignore[arg-type]
    assert "n2" not in n._lanes_in
    assert pumped == (["n2"] if unanswered else [])  # (no hold was in force: nothing to do)
