"""The example exchanges of RFC 3080 section 2.3 as golden vectors, byte for byte.

The payloads are the RFC's, with its CRLF line ends; their sizes are the RFC's own figures
(52, 110, 120, 71, 46), which pins the layout. The RFC's examples are separate snippets whose
seqnos do not chain, so the seqnos here are the ones a single session gives.
"""

from __future__ import annotations

from beep_helpers import rfc

from nodes.antacid.beep import (
    INITIATOR,
    LISTENER,
    ChannelClosed,
    ChannelStarted,
    GreetingReceived,
    Session,
    SessionClosed,
)

TLS = "http://iana.org/beep/TLS"
OTP = "http://iana.org/beep/SASL/OTP"
XML_HEADER = ["Content-Type: application/beep+xml", ""]

LISTENER_GREETING = rfc(["RPY 0 0 . 0 110", *XML_HEADER, "<greeting>", f"   <profile uri='{TLS}' />",
                         "</greeting>", "END"])
INITIATOR_GREETING = rfc(["RPY 0 0 . 0 52", *XML_HEADER, "<greeting />", "END"])
START = rfc(["MSG 0 1 . 52 120", *XML_HEADER, "<start number='1'>", f"   <profile uri='{OTP}' />",
             "</start>", "END"])
START_OK = rfc(["RPY 0 1 . 110 87", *XML_HEADER, f"<profile uri='{OTP}' />", "END"])
CLOSE = rfc(["MSG 0 2 . 172 71", *XML_HEADER, "<close number='1' code='200' />", "END"])
CLOSE_OK = rfc(["RPY 0 2 . 197 46", *XML_HEADER, "<ok />", "END"])
START_REFUSED = rfc(["ERR 0 1 . 110 104", *XML_HEADER,
                     "<error code='550'>all requested profiles are unsupported</error>", "END"])


def test_greetings_are_the_rfc_bytes() -> None:
    assert Session(LISTENER, [TLS]).data_to_send() == LISTENER_GREETING
    assert Session(INITIATOR, []).data_to_send() == INITIATOR_GREETING


def test_greetings_are_read() -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [TLS])
    assert initiator.receive_data(LISTENER_GREETING) == [GreetingReceived((TLS,))]
    assert listener.receive_data(INITIATOR_GREETING) == [GreetingReceived(())]
    assert initiator.peer_profiles == (TLS,)


def test_start_and_close_exchange_is_the_rfc_bytes() -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [OTP])
    initiator.receive_data(listener.data_to_send())
    listener.receive_data(initiator.data_to_send())
    # the listener's greeting here names OTP (115 octets), so the RFC's reply seqno 110 is 115 here
    assert initiator.start_channel(OTP) == 1
    assert initiator.data_to_send() == START
    assert listener.receive_data(START) == [ChannelStarted(1, OTP, "", by_peer=True)]
    start_ok = START_OK.replace(b"RPY 0 1 . 110 87", b"RPY 0 1 . 115 87")
    assert listener.data_to_send() == start_ok
    assert initiator.receive_data(start_ok) == [ChannelStarted(1, OTP, "", by_peer=False)]

    initiator.close_channel(1)
    assert initiator.data_to_send() == CLOSE
    assert listener.receive_data(CLOSE) == [ChannelClosed(1, 200, by_peer=True)]
    close_ok = CLOSE_OK.replace(b"RPY 0 2 . 197 46", b"RPY 0 2 . 202 46")
    assert listener.data_to_send() == close_ok
    assert initiator.receive_data(close_ok) == [ChannelClosed(1, 200, by_peer=False)]
    assert initiator.open_channels() == {} == listener.open_channels()


def test_unsupported_profile_is_refused_with_the_rfc_error() -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [TLS])
    initiator.receive_data(listener.data_to_send())
    listener.receive_data(initiator.data_to_send())
    initiator.start_channel(OTP)
    assert listener.receive_data(initiator.data_to_send()) == []
    assert listener.data_to_send() == START_REFUSED
    [failed] = initiator.receive_data(START_REFUSED)
    assert (failed.channel, failed.code, failed.text) == (1, 550, "all requested profiles are unsupported")


def test_session_close_ends_both_sides_in_order() -> None:
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [TLS])
    initiator.receive_data(listener.data_to_send())
    listener.receive_data(initiator.data_to_send())
    initiator.close_session()
    close0 = initiator.data_to_send()
    assert b"<close number='0' code='200' />" in close0
    assert listener.receive_data(close0) == [SessionClosed(None)]
    assert initiator.receive_data(listener.data_to_send()) == [SessionClosed(None)]
    assert initiator.closed and listener.closed


def test_seq_frame_is_rfc3081_syntax() -> None:
    """RFC 3081 3.1.1: SEQ channel ackno window CRLF, sent once half the window is used."""
    initiator, listener = Session(INITIATOR, []), Session(LISTENER, [OTP])
    initiator.receive_data(listener.data_to_send())
    listener.receive_data(initiator.data_to_send())
    initiator.start_channel(OTP)
    listener.receive_data(initiator.data_to_send())
    initiator.receive_data(listener.data_to_send())
    initiator.send_msg(1, b"x" * 2046)  # 2 octets of empty MIME headers + 2046 = half of 4096
    listener.receive_data(initiator.data_to_send())
    assert listener.data_to_send() == b"SEQ 1 2048 4096\r\n"
