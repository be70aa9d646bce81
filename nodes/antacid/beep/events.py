"""What a BEEP session reports (Session.receive_data returns these, in order)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GreetingReceived:
    """The peer's greeting: the profiles it serves."""

    profiles: tuple[str, ...]
    features: str = ""
    localize: str = ""


@dataclass(frozen=True)
class ChannelStarted:
    """A channel is open; `by_peer` when the peer asked for it; `content` is piggybacked data."""

    channel: int
    profile: str
    content: str
    by_peer: bool


@dataclass(frozen=True)
class ChannelStartFailed:
    """The peer refused our start request for `channel`."""

    channel: int
    code: int
    text: str


@dataclass(frozen=True)
class ChannelClosed:
    channel: int
    code: int
    by_peer: bool


@dataclass(frozen=True)
class ChannelCloseFailed:
    channel: int
    code: int
    text: str


@dataclass(frozen=True)
class Message:
    """A whole MSG from the peer; answer it with send_rpy/send_err or send_ans...send_nul."""

    channel: int
    msgno: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    """The RPY to our MSG `msgno`."""

    channel: int
    msgno: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class ErrorReply:
    """The ERR to our MSG `msgno`."""

    channel: int
    msgno: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    """One ANS of a one-to-many reply to our MSG `msgno`."""

    channel: int
    msgno: int
    ansno: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class AnswersDone:
    """The NUL ending the answers to our MSG `msgno`."""

    channel: int
    msgno: int


@dataclass(frozen=True)
class SessionClosed:
    """The session is over. `error` is None for an orderly close (close of channel 0 agreed),
    else why: a poorly formed frame, the peer's refusal, the connection lost. Nothing follows."""

    error: str | None


Event = (GreetingReceived | ChannelStarted | ChannelStartFailed | ChannelClosed | ChannelCloseFailed
         | Message | Reply | ErrorReply | Answer | AnswersDone | SessionClosed)
