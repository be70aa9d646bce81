"""BEEP (RFC 3080, RFC 3081) as a sans-IO session: bytes in, events out; calls in, bytes out."""

from .events import (
    Answer,
    AnswersDone,
    ChannelClosed,
    ChannelCloseFailed,
    ChannelStarted,
    ChannelStartFailed,
    ErrorReply,
    Event,
    GreetingReceived,
    Message,
    Reply,
    SessionClosed,
)
from .session import INITIATOR, LISTENER, Limits, LocalProtocolError, Session

__all__ = [
    "INITIATOR", "LISTENER", "Answer", "AnswersDone", "ChannelCloseFailed", "ChannelClosed",
    "ChannelStartFailed", "ChannelStarted", "ErrorReply", "Event", "GreetingReceived", "Limits",
    "LocalProtocolError", "Message", "Reply", "Session", "SessionClosed",
]
