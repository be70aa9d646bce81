"""Lane frames under a per-lane key (nodes/drip/lane.py, session 47): each frame carries its
direction's seq and an HMAC-SHA256 under the key its lane's signed upgrade carried
(`codec.LaneOpen`); a frame with a wrong MAC, seq, key or direction is refused."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.drip import codec, lane
from nodes.drip.codec import CodecError

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


@given(st.binary(max_size=512), st.integers(0, 2**64 - 1), st.integers(100, 599))
def test_frames_round_trip(body: bytes, seq: int, status: int) -> None:
    assert lane.unpack_exchange(KEY, seq, lane.pack_exchange(KEY, seq, body)) == body
    assert lane.unpack_answer(KEY, lane.pack_answer(KEY, seq, status, body)) == (seq, status,
                                                                                 body)


def test_the_frame_layout_is_seq_mac_content() -> None:
    f = lane.pack_exchange(KEY, 7, b"{}")
    assert f[:8] == (7).to_bytes(8, "big") and f[40:] == b"{}" and len(f) == 42
    a = lane.pack_answer(KEY, 7, 401, b"{}")
    assert a[:8] == f[:8] and a[40:] == b"\x01\x91{}"
    assert f[8:40] != a[8:40]


def _refused(fn, *args) -> str:  # noqa: ANN001
    with pytest.raises(lane.LaneFrameError) as e:
        fn(*args)
    return str(e.value)


def test_a_wrong_mac_seq_key_or_direction_is_refused() -> None:
    f = lane.pack_exchange(KEY, 3, b'{"items":[]}')
    for bad in (f[:-1] + b"]",  # the body altered
                f[:8] + bytes(32) + f[40:],  # the MAC zeroed
                f[:20] + bytes([f[20] ^ 1]) + f[21:],  # one bit of the MAC
                (4).to_bytes(8, "big") + f[8:]):  # the seq altered, its MAC kept
        assert "MAC" in _refused(lane.unpack_exchange, KEY, 3, bad)
    assert "MAC" in _refused(lane.unpack_exchange, OTHER, 3, f)  # another lane's key
    assert "seq 3 where 4" in _refused(lane.unpack_exchange, KEY, 4, f)  # replayed
    assert "seq 3 where 2" in _refused(lane.unpack_exchange, KEY, 2, f)  # one skipped
    # reflection: an answer taken as an exchange, an exchange as an answer
    a = lane.pack_answer(KEY, 3, 200, b'{"items":[]}')
    assert "MAC" in _refused(lane.unpack_exchange, KEY, 3, a)
    assert "MAC" in _refused(lane.unpack_answer, KEY, f)
    assert "MAC" in _refused(lane.unpack_answer, KEY, (4).to_bytes(8, "big") + a[8:])
    for short in (b"", bytes(39)):
        assert "shorter" in _refused(lane.unpack_exchange, KEY, 0, short)
        assert "shorter" in _refused(lane.unpack_answer, KEY, short)
    assert "status" in _refused(lane.unpack_answer, KEY, lane._seal(KEY, lane.ANSWER, 0,
                                                                      b"\x01"))
    with pytest.raises(ValueError):
        lane.pack_exchange(KEY, 2**64, b"")


def test_a_seal_counts_each_direction_and_moves_on_only_past_a_good_frame() -> None:
    opener, acceptor = lane.Seal(KEY), lane.Seal(KEY)
    frames = [opener.exchange(b"a"), opener.exchange(b"b")]
    assert acceptor.take_exchange(frames[0]) == b"a"
    with pytest.raises(lane.LaneFrameError):
        acceptor.take_exchange(frames[0])  # replayed
    assert acceptor.taken == 1
    assert acceptor.take_exchange(frames[1]) == b"b"
    answers = [acceptor.answer(200, b"x"), acceptor.answer(409, b"y"),
               acceptor.answer(200, b"z")]
    # answers come on two connections (riders), so the opener takes them in any order
    assert opener.open_answer(answers[1]) == (1, 409, b"y")
    assert opener.open_answer(answers[0]) == (0, 200, b"x")
    assert "only 2 exchanges" in _refused(opener.open_answer, answers[2])  # never asked
    assert (opener.sent, acceptor.sent, acceptor.taken) == (2, 3, 2)
    assert KEY.hex() not in repr(opener)
    assert len(lane.new_key()) == 32 and lane.new_key() != lane.new_key()


def test_the_lane_key_is_a_signed_header_of_the_upgrade() -> None:
    k = KEY.hex()
    req = codec.encode(codec.LaneOpen("n2", k))
    assert req.headers == {codec.H_NODE: "n2", codec.H_LANE_KEY: k}
    assert codec.decode(req.method, req.path, req.headers, b"") == codec.LaneOpen("n2", k)
    # the upgrade's token binds the key: another key is another signed digest
    assert codec.signed_digest(codec.LaneOpen("n2", k)) != codec.signed_digest(
        codec.LaneOpen("n2", OTHER.hex()))
    for bad in (None, "", k[:-2], k + "00", k.upper(), "zz" * 32, " " + k[1:]):
        h = {codec.H_NODE: "n2"} if bad is None else {codec.H_NODE: "n2", codec.H_LANE_KEY: bad}
        with pytest.raises(CodecError) as e:
            codec.decode("GET", "/lane", h, b"")
        assert e.value.status == 400 and codec.H_LANE_KEY in str(e.value)
    assert k not in repr(codec.LaneOpen("n2", k))  # a secret: never in a journal or error


class _FakeWs:
    """The opener's side of a WebSocket: yields the given frames, records sends."""

    def __init__(self, frames: list[Any]) -> None:
        self.frames = frames
        self.sent: list[bytes] = []
        self.closed = False

    def __aiter__(self) -> _FakeWs:
        return self

    async def __anext__(self) -> Any:
        await asyncio.sleep(0)
        if not self.frames:
            raise StopAsyncIteration
        return self.frames.pop(0)

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self) -> None:
        self.closed = True


def _binary(data: bytes) -> Any:
    return SimpleNamespace(type=aiohttp.WSMsgType.BINARY, data=data)


@pytest.mark.parametrize("answer", ["forged", "replayed", "text", "unasked"])
def test_an_answer_frame_not_ours_ends_the_openers_lane_and_is_told_why(answer: str) -> None:
    """The opener checks each answer as the acceptor checks each exchange: a forged or
    replayed answer, a text frame or an answer to no exchange fails what waits, ends the
    lane and is kept as ``bad_frame`` (which the node counts as a ``lane-frame`` refusal)."""
    acceptor = lane.Seal(KEY)
    good = acceptor.answer(200, b"{}")
    frames = {"forged": [_binary(lane.Seal(OTHER).answer(200, b"{}"))],
              "replayed": [_binary(good), _binary(good)],
              "text": [SimpleNamespace(type=aiohttp.WSMsgType.TEXT, data="hi")],
              "unasked": [_binary(good), _binary(acceptor.answer(200, b"{}"))]}[answer]

    async def go() -> tuple[lane.Outbound, list[Any]]:
        ws = _FakeWs(frames)
        ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
        runner = asyncio.ensure_future(ln.run())
        got: list[Any] = []
        for _ in range(1 if answer in ("forged", "text", "unasked") else 2):
            try:
                got.append(await ln.exchange(b"batch", 5.0))
            except lane.LaneClosed as e:
                got.append(e)
        await runner
        assert ws.closed and ln.dead
        return ln, got

    ln, got = asyncio.run(go())
    assert ln.bad_frame is not None and ln.why == ln.bad_frame
    if answer in ("replayed", "unasked"):
        assert got[0] == (200, b"{}")  # the good answer still went to its exchange
    if answer == "unasked":
        assert "only 1 exchanges were sent" in ln.bad_frame
    else:
        assert isinstance(got[-1], lane.LaneClosed)
    if answer == "replayed":
        assert "no exchange waits" in ln.bad_frame


def test_a_lane_closed_by_its_peer_is_not_a_bad_frame() -> None:
    async def go() -> lane.Outbound:
        ln = lane.Outbound(_FakeWs([]), lane.Seal(KEY))  # type: ignore[arg-type]
        await ln.run()
        return ln

    ln = asyncio.run(go())
    assert ln.dead and ln.bad_frame is None


def test_the_node_counts_a_bad_answer_frame_as_a_lane_frame_refusal() -> None:
    from nodes.drip.server import DripNode

    noted: list[tuple[str, dict[str, Any]]] = []
    ws = _FakeWs([_binary(lane.Seal(OTHER).answer(200, b"{}"))])
    ln = lane.Outbound(ws, lane.Seal(KEY))  # type: ignore[arg-type]
    n = SimpleNamespace(_lanes={"n2": ln},
                        _note_refusal=lambda reason, **kw: noted.append((reason, kw)))

    async def go() -> None:
        runner = asyncio.ensure_future(DripNode._run_lane(n, "n2", ln))  # type: ignore[arg-type]
        with pytest.raises(lane.LaneClosed):
            await ln.exchange(b"batch", 5.0)
        await runner

    asyncio.run(go())
    assert n._lanes == {}
    assert [(r, kw["peer"]) for r, kw in noted] == [("lane-frame", "n2")]
    assert "MAC" in noted[0][1]["error"]
