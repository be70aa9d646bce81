"""Shared by the BEEP tests: RFC-shaped transcripts and a loop that pumps two sessions."""

from __future__ import annotations

from nodes.antacid.beep import Event, Session


def rfc(lines: list[str]) -> bytes:
    """An RFC 3080 example transcript (one side's lines, without the 'I: ' prefix) as wire bytes."""
    return "".join(line + "\r\n" for line in lines).encode()


def pump(a: Session, b: Session, rounds: int = 50) -> list[tuple[str, Event]]:
    """Move bytes both ways until quiet; the events as ('a'|'b', event) in arrival order."""
    seen: list[tuple[str, Event]] = []
    for _ in range(rounds):
        to_b, to_a = a.data_to_send(), b.data_to_send()
        if not to_a and not to_b:
            return seen
        seen += [("b", e) for e in b.receive_data(to_b)]
        seen += [("a", e) for e in a.receive_data(to_a)]
    raise AssertionError("sessions did not go quiet")
