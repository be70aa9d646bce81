"""Lane frames under a per-lane key (nodes/drip/lane.py, session 47): each frame carries its
direction's seq and an HMAC-SHA256 under the key its lane's signed upgrade carried
(`codec.LaneOpen`); a frame with a wrong MAC, seq, key or direction is refused."""

from __future__ import annotations

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
    assert lane.unpack_answer(KEY, seq, lane.pack_answer(KEY, seq, status, body)) == (status,
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
    assert "MAC" in _refused(lane.unpack_answer, KEY, 3, f)
    for short in (b"", bytes(39)):
        assert "shorter" in _refused(lane.unpack_exchange, KEY, 0, short)
        assert "shorter" in _refused(lane.unpack_answer, KEY, 0, short)
    assert "status" in _refused(lane.unpack_answer, KEY, 0, lane._seal(KEY, lane.ANSWER, 0,
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
    answers = [acceptor.answer(200, b"x"), acceptor.answer(409, b"y")]
    with pytest.raises(lane.LaneFrameError):
        opener.take_answer(answers[1])  # the first was dropped
    assert opener.take_answer(answers[0]) == (200, b"x")
    assert opener.take_answer(answers[1]) == (409, b"y")
    assert (opener.sent, opener.taken, acceptor.sent, acceptor.taken) == (2, 2, 2, 2)
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
