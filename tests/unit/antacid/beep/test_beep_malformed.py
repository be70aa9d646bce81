"""A poorly formed frame ends the session with a reason (RFC 3080 2.2.1.1), never an exception."""

from __future__ import annotations

import pytest
from beep_helpers import pump

from nodes.antacid.beep import (
    INITIATOR,
    LISTENER,
    ErrorReply,
    Limits,
    LocalProtocolError,
    Message,
    Session,
    SessionClosed,
)

PROFILE = "urn:test:p"


def _greeted(limits: Limits | None = None) -> Session:
    """A listener that has read a valid (empty) greeting and opened channel 1 for the initiator."""
    listener = Session(LISTENER, [PROFILE], limits)
    initiator = Session(INITIATOR, [])
    pump(initiator, listener)
    initiator.start_channel(PROFILE)
    pump(initiator, listener)
    listener.data_to_send()
    assert listener.open_channels() == {1: PROFILE} and not listener.closed
    return listener


def frame(kind: str, ch: int, msgno: int, seqno: int, body: bytes, more: str = ".") -> bytes:
    return f"{kind} {ch} {msgno} {more} {seqno} {len(body)}\r\n".encode() + body + b"END\r\n"


def _closed(session: Session, data: bytes, reason: str) -> None:
    events = session.receive_data(data)
    assert len(events) >= 1 and isinstance(events[-1], SessionClosed), events
    assert events[-1].error is not None and reason in events[-1].error, events[-1].error
    assert session.closed
    assert session.receive_data(frame("MSG", 1, 9, 0, b"\r\n")) == []  # nothing after the end


@pytest.mark.parametrize(("data", "reason"), [
    (b"FOO 1 0 . 0 0\r\nEND\r\n", "unknown frame type"),
    (b"MSG 1 0 . 0\r\n", "wants 5"),
    (b"MSG 1 0 . 0 2 7\r\n", "wants 5"),
    (b"MSG  1 0 . 0 2\r\n", "wants 5"),
    (b"MSG 1 -1 . 0 2\r\n", "not a decimal"),
    (b"MSG 1 +1 . 0 2\r\n", "not a decimal"),
    (b"MSG 2147483648 0 . 0 2\r\n", "out of range"),
    (b"MSG 1 0 . 4294967296 2\r\n", "out of range"),
    (b"MSG 1 0 x 0 2\r\n", "continuation indicator"),
    (b"MSG 1 0 . 0 2\r\n\r\nEND\r\r", "trailer"),
    (b"MSG 1 0 . 0 2\r\n\r\nFIN\r\n", "trailer"),
    (b"MSG 1 0 . 0 2\n", "CRLF"),
    (b"M" * 200, "CRLF"),
    (b"NUL 1 0 . 0 2\r\n\r\nEND\r\n", "NUL frame"),
    (b"ANS 1 0 . 0 2\r\n\r\nEND\r\n", "wants 6"),
    (b"SEQ 1 0\r\n", "wants 3"),
    (frame("MSG", 1, 0, 5, b"\r\n"), "expected 0"),
    (frame("MSG", 3, 0, 0, b"\r\n"), "not open"),
    (frame("RPY", 1, 0, 0, b"\r\n"), "answers no MSG"),
    (frame("MSG", 1, 0, 0, b"no headers"), "empty line"),
    (frame("MSG", 1, 0, 0, b"Bad header\r\n\r\n"), "Name: value"),
    (frame("MSG", 1, 1, 0, b"ab", "*") + frame("MSG", 1, 2, 2, b"\r\n"), "interrupts"),
    (frame("MSG", 1, 1, 0, b"\r\n") + frame("MSG", 1, 1, 2, b"\r\n"), "reuses a msgno"),
    (b"SEQ 1 10 4096\r\n", "beyond the 0 sent"),
    (b"SEQ 5 0 4096\r\n", "not open"),
    (frame("MSG", 1, 0, 0, b"x" * 5000), "exceeds the limit"),
])
def test_poorly_formed_input_closes_the_session(data: bytes, reason: str) -> None:
    _closed(_greeted(), data, reason)


def test_a_frame_beyond_the_granted_window_closes_the_session() -> None:
    _closed(_greeted(Limits(max_frame=8192)), frame("MSG", 1, 0, 0, b"\r\n" + b"x" * 4200), "window")


def test_an_oversize_message_closes_the_session() -> None:
    listener = _greeted(Limits(max_message=200))
    data = frame("MSG", 1, 0, 0, b"x" * 120, "*") + frame("MSG", 1, 0, 120, b"x" * 120)
    _closed(listener, data, "exceeds 200 octets")


def test_the_first_frame_must_be_the_greeting() -> None:
    _closed(Session(LISTENER, [PROFILE]), frame("MSG", 0, 1, 0, b"\r\n"), "greeting")


def test_a_refused_greeting_ends_the_session() -> None:
    body = b"Content-Type: application/beep+xml\r\n\r\n<error code='421'>busy</error>"
    _closed(Session(INITIATOR, []), frame("ERR", 0, 0, 0, body), "421 busy")


def test_connection_lost_is_an_error_close() -> None:
    session = Session(INITIATOR, [])
    assert session.connection_lost() == [SessionClosed("connection closed before the session was closed")]
    assert session.connection_lost() == []


@pytest.mark.parametrize(("xml", "code"), [
    (b"<start number='1'><profile uri='urn:x'/>", b"500"),
    (b"<!DOCTYPE x [<!ENTITY a 'b'><!ENTITY c '&a;&a;'>]><start number='1'>&c;</start>", b"500"),
    (b"<hello/>", b"500"),
    (b"<start number='one'><profile uri='urn:x'/></start>", b"500"),
    (b"<start number='2'><profile uri='urn:test:p' /></start>", b"501"),  # the initiator's are odd
    (b"<start number='1'><profile uri='urn:other' /></start>", b"550"),
    (b"<close number='9' code='200' />", b"550"),
])
def test_bad_channel_management_gets_an_error_reply_and_the_session_goes_on(xml: bytes, code: bytes) -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [PROFILE])
    pump(initiator, listener)
    ch0 = initiator._channels[0]  # a raw MSG in the initiator's own channel 0 numbering
    payload = b"Content-Type: application/beep+xml\r\n\r\n" + xml
    assert listener.receive_data(frame("MSG", 0, 5, ch0.out_seq, payload)) == []
    reply = listener.data_to_send()
    assert reply.startswith(b"ERR 0 5 . ") and b"<error code='" + code + b"'>" in reply, reply
    assert not listener.closed and listener.open_channels() == {}


def test_local_misuse_raises_and_changes_nothing() -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [PROFILE])
    pump(initiator, listener)
    with pytest.raises(LocalProtocolError, match="not open"):
        initiator.send_msg(1, b"x")
    with pytest.raises(LocalProtocolError, match="channel 0"):
        initiator.send_msg(0, b"x")
    ch = initiator.start_channel(PROFILE)
    pump(initiator, listener)
    first = initiator.send_msg(ch, b"1")
    second = initiator.send_msg(ch, b"2")
    events = [e for who, e in pump(initiator, listener) if isinstance(e, Message)]
    assert [e.msgno for e in events] == [first, second]
    with pytest.raises(LocalProtocolError, match="MSG order"):
        listener.send_rpy(ch, second, b"out of order")
    listener.send_err(ch, first, b"no")
    listener.send_rpy(ch, second, b"yes")
    replies = [e for who, e in pump(initiator, listener)]
    assert isinstance(replies[0], ErrorReply) and replies[1].body == b"yes"
    with pytest.raises(LocalProtocolError):
        Limits(window=100)
