"""Session behaviour beyond the RFC snippets: windows, one-to-many replies, closes refused."""

from __future__ import annotations

import re

from beep_helpers import pump

from nodes.antacid.beep import (
    INITIATOR,
    LISTENER,
    Answer,
    AnswersDone,
    ChannelCloseFailed,
    Limits,
    Message,
    Reply,
    Session,
)
from nodes.antacid.beep.frames import FrameParser, Seq

PROFILE = "urn:test:p"
HEADER = re.compile(rb"(MSG|RPY|ERR|ANS|NUL) (\d+) (\d+) ([.*]) (\d+) (\d+)")


def _pair(limits: Limits | None = None) -> tuple[Session, Session, int]:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [PROFILE], limits)
    pump(initiator, listener)
    channel = initiator.start_channel(PROFILE)
    pump(initiator, listener)
    return initiator, listener, channel


def test_sender_never_exceeds_the_peer_window_and_resumes_on_seq() -> None:
    initiator, listener, ch = _pair()
    initiator.send_msg(ch, b"y" * 20000)
    first = initiator.data_to_send()
    frames = FrameParser(1 << 20).feed(first)
    assert sum(len(f.payload) for f in frames) == 4096  # the default window, no more
    assert initiator.window_of(ch) == (4096, 4096)
    assert initiator.data_to_send() == b""  # blocked until a SEQ
    assert listener.receive_data(first) == []
    seqs = [f for f in FrameParser(1 << 20).feed(listener.data_to_send()) if isinstance(f, Seq)]
    assert seqs and seqs[-1].channel == ch and seqs[-1].ackno == 4096
    initiator.receive_data(Seq(ch, seqs[-1].ackno, 4096).encode())
    events = pump(initiator, listener)
    [message] = [e for who, e in events if isinstance(e, Message)]
    assert message.body == b"y" * 20000


def test_a_bigger_window_is_announced_and_used() -> None:
    initiator, listener, ch = _pair(Limits(window=16384, max_frame=16384))
    assert initiator.window_of(ch) == (0, 16384)
    initiator.send_msg(ch, b"z" * 12000)
    sent = initiator.data_to_send()
    assert sum(len(f.payload) for f in FrameParser(1 << 20).feed(sent)) == 12002
    assert [type(e) for e in listener.receive_data(sent)] == [Message]


def test_every_frame_respects_sequence_and_window_over_a_long_exchange() -> None:
    initiator, listener, ch = _pair()
    for i in range(30):
        initiator.send_msg(ch, bytes([i]) * (i * 997))
    got = [e for who, e in pump(initiator, listener, rounds=500) if isinstance(e, Message)]
    assert [len(m.body) for m in got] == [i * 997 for i in range(30)]


def test_one_to_many_replies_arrive_as_answers_then_done() -> None:
    initiator, listener, ch = _pair()
    msgno = initiator.send_msg(ch, b"list")
    pump(initiator, listener)
    assert [listener.send_ans(ch, msgno, f"item {i}".encode()) for i in range(3)] == [0, 1, 2]
    listener.send_nul(ch, msgno)
    events = [e for who, e in pump(initiator, listener)]
    assert [(type(e), getattr(e, "ansno", None)) for e in events] == [
        (Answer, 0), (Answer, 1), (Answer, 2), (AnswersDone, None)]
    assert events[1].body == b"item 1"
    # the next MSG on the channel is answered normally
    second = initiator.send_msg(ch, b"one")
    pump(initiator, listener)
    listener.send_rpy(ch, second, b"only", "text/plain")
    [reply] = [e for who, e in pump(initiator, listener)]
    assert isinstance(reply, Reply) and reply.headers["content-type"] == "text/plain"


def test_interleaved_answer_frames_reassemble_by_ansno() -> None:
    """RFC 3080 2.6.2: frames of different ANS to one MSG may interleave."""
    initiator, listener, ch = _pair()
    msgno = initiator.send_msg(ch, b"q")
    pump(initiator, listener)
    seq = 0
    data = b""
    for ansno, piece, more in [(0, b"\r\na", "*"), (1, b"\r\nb", "*"), (0, b"A", "."), (1, b"B", ".")]:
        data += f"ANS {ch} {msgno} {more} {seq} {len(piece)} {ansno}\r\n".encode() + piece + b"END\r\n"
        seq += len(piece)
    data += f"NUL {ch} {msgno} . {seq} 0\r\nEND\r\n".encode()
    events = initiator.receive_data(data)
    assert [(e.ansno, e.body) for e in events[:2]] == [(0, b"aA"), (1, b"bB")]
    assert isinstance(events[2], AnswersDone) and not initiator.closed


def test_close_of_a_busy_channel_is_refused_with_550() -> None:
    initiator, listener, ch = _pair()
    initiator.send_msg(ch, b"pending")
    pump(initiator, listener)
    initiator.close_channel(ch)
    [failed] = [e for who, e in pump(initiator, listener)]
    assert failed == ChannelCloseFailed(ch, 550, "still working")
    initiator.close_session()
    [refused] = [e for who, e in pump(initiator, listener)]
    assert isinstance(refused, ChannelCloseFailed) and refused.channel == 0


def test_channel_numbers_follow_the_role() -> None:
    initiator, listener, ch = _pair()
    assert ch == 1 and initiator.start_channel(PROFILE) == 3
    assert listener.start_channel(PROFILE) == 2 and listener.start_channel(PROFILE) == 4


def test_header_numbers_stay_in_sequence_on_the_wire() -> None:
    initiator, listener, ch = _pair()
    initiator.send_msg(ch, b"a" * 3000)
    initiator.send_msg(ch, b"b" * 3000)
    wire = b""
    for _ in range(20):
        chunk = initiator.data_to_send()
        wire += chunk
        listener.receive_data(chunk)
        initiator.receive_data(listener.data_to_send())
    seqnos = [(int(m[5]), int(m[6])) for m in HEADER.finditer(wire) if int(m[2]) == ch]
    for (seq, size), (nxt, _) in zip(seqnos, seqnos[1:], strict=False):
        assert nxt == seq + size


def test_a_window_announcement_waits_for_the_reply_that_opens_the_channel() -> None:
    """With channel 0's window full, the <profile> reply is held back, and so is the new channel's SEQ."""
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [PROFILE], Limits(window=8192, max_frame=8192))
    pump(initiator, listener)
    listener._channels[0].peer_window = 0  # as if the initiator had closed channel 0's window
    initiator.start_channel(PROFILE)
    listener.receive_data(initiator.data_to_send())
    held = listener.data_to_send()
    assert b"SEQ 1 " not in held and b"RPY 0 1" not in held
    listener.receive_data(Seq(0, listener._channels[0].peer_ack, 4096).encode())
    out = listener.data_to_send()
    assert out.index(b"RPY 0 1 ") < out.index(b"SEQ 1 0 8192\r\n")
    assert [type(e).__name__ for e in initiator.receive_data(out)] == ["ChannelStarted"]
    assert initiator.window_of(1) == (0, 8192)
