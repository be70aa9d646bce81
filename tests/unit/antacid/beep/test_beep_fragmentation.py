"""A message split across frames and across reads at any byte boundary gives the same events."""

from __future__ import annotations

from beep_helpers import pump
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.antacid.beep import INITIATOR, LISTENER, Limits, Message, Session

PROFILE = "urn:test:echo"


def _transcript() -> tuple[bytes, list]:
    """The bytes an initiator sent (messages cut into 7-octet frames) and the listener's events."""
    initiator = Session(INITIATOR, [], Limits(send_frame=7))
    listener = Session(LISTENER, [PROFILE])
    sent = bytearray()
    real_send = initiator.data_to_send

    def recording() -> bytes:
        data = real_send()
        sent.extend(data)
        return data

    initiator.data_to_send = recording  # type: ignore[method-assign]
    events = pump(initiator, listener)
    channel = initiator.start_channel(PROFILE, content="hi")
    events += pump(initiator, listener)
    for body in (b"", b"x", b"hello, world " * 12, bytes(range(256))):
        initiator.send_msg(channel, body)
    initiator.send_msg(channel, b"<a/>", "application/xml")
    events += pump(initiator, listener)
    return bytes(sent), [e for who, e in events if who == "b"]


TRANSCRIPT, EVENTS = _transcript()


def _replay(cuts: list[int]) -> list:
    listener = Session(LISTENER, [PROFILE])
    events = []
    last = 0
    for cut in sorted(set(cuts)) + [len(TRANSCRIPT)]:
        events += listener.receive_data(TRANSCRIPT[last:cut])
        last = cut
    return events


def test_transcript_is_what_it_claims() -> None:
    messages = [e for e in EVENTS if isinstance(e, Message)]
    assert [m.body for m in messages][2] == b"hello, world " * 12
    assert messages[-1].headers["content-type"] == "application/xml"
    assert messages[0].headers["content-type"] == "application/octet-stream"
    assert TRANSCRIPT.count(b"MSG 1 3 * ") > 20  # the long message really is many frames


def test_every_single_cut_gives_the_same_events() -> None:
    for cut in range(len(TRANSCRIPT) + 1):
        assert _replay([cut]) == EVENTS, cut


def test_byte_at_a_time_gives_the_same_events() -> None:
    assert _replay(list(range(len(TRANSCRIPT)))) == EVENTS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(TRANSCRIPT)), max_size=60))
def test_any_cuts_give_the_same_events(cuts: list[int]) -> None:
    assert _replay(cuts) == EVENTS
