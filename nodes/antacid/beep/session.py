"""A sans-IO BEEP session (RFC 3080 over RFC 3081's TCP mapping), in the manner of h11.

Feed the bytes read from the connection to `receive_data` and get events back; call the send
methods and write what `data_to_send` returns. The session owns no socket and no clock.

A peer that breaks the framing (a bad header, a wrong sequence number, a frame beyond the window
we granted, a reply to nothing) ends the session: RFC 3080 2.2.1.1 says to drop it without a
response. That is reported as `SessionClosed(error)`, never raised. Misuse by our own caller
(sending on a channel that is not open, replying out of order) raises `LocalProtocolError`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from . import management as mgmt
from . import mime
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
from .frames import ANS, ERR, MAX_31, MSG, NUL, RPY, Frame, FrameError, FrameParser, Seq

INITIATOR, LISTENER = "initiator", "listener"
DEFAULT_WINDOW = 4096  # RFC 3081 3.1.2: every channel starts with a 4096-octet window
MOD = 2**32


class LocalProtocolError(ValueError):
    """Our caller asked for something BEEP does not allow; the session is unchanged."""


@dataclass(frozen=True)
class Limits:
    """What a peer may make us hold. Each bound turns into a session error when passed."""

    window: int = DEFAULT_WINDOW  # the receive window we grant each channel (RFC 3081)
    max_frame: int = DEFAULT_WINDOW  # the largest frame payload we accept
    send_frame: int = DEFAULT_WINDOW  # the largest frame payload we send (the window may cut it shorter)
    max_message: int = 1 << 20  # the largest message we reassemble
    max_channels: int = 64  # channels open at once, channel 0 included

    def __post_init__(self) -> None:
        # a peer may use the default window before it reads our SEQ: a smaller one cannot be enforced
        if self.window < DEFAULT_WINDOW or self.max_frame < 1 or self.send_frame < 1 or self.max_message < 1 or self.max_channels < 1:
            raise LocalProtocolError(f"BEEP limits need window >= {DEFAULT_WINDOW} and positive sizes: {self}")


@dataclass
class _Out:
    type: str
    msgno: int
    payload: bytes
    ansno: int | None = None
    sent: int = 0


@dataclass
class _Channel:
    number: int
    profile: str
    window: int
    in_seq: int = 0  # the seqno the peer's next frame must carry
    acked: int = 0  # the ackno we last granted the peer
    out_seq: int = 0  # the seqno of our next frame
    peer_ack: int = 0
    peer_window: int = DEFAULT_WINDOW
    next_msgno: int = 1
    queue: deque[_Out] = field(default_factory=deque)
    awaiting: deque[int] = field(default_factory=deque)  # our MSGs awaiting replies, oldest first
    unanswered: deque[int] = field(default_factory=deque)  # the peer's MSGs we owe a reply
    next_ansno: int = 0
    partial: tuple[str, int] | None = None  # (type, msgno) of a message continued by '*'
    partial_body: bytearray = field(default_factory=bytearray)
    answers: dict[int, bytearray] = field(default_factory=dict)  # ANS being reassembled, by ansno

    def idle(self) -> bool:
        return not (self.queue or self.awaiting or self.unanswered or self.partial or self.answers)


class Session:
    """One BEEP session over one connection; `role` is who opened the connection."""

    def __init__(self, role: str, profiles: tuple[str, ...] | list[str] = (),
                 limits: Limits | None = None) -> None:
        if role not in (INITIATOR, LISTENER):
            raise LocalProtocolError(f"role {role!r} is neither {INITIATOR!r} nor {LISTENER!r}")
        self.role = role
        self.profiles = tuple(profiles)
        self.limits = limits or Limits()
        self.closed = False
        self.peer_profiles: tuple[str, ...] | None = None  # set by the peer's greeting
        self._parser = FrameParser(self.limits.max_frame)
        self._out = bytearray()
        self._channels: dict[int, _Channel] = {}
        self._announcements: list[int] = []  # channels whose window SEQ waits for channel 0's queue
        self._open(0, "")
        self._next_channel = 1 if role == INITIATOR else 2
        self._requests: dict[int, mgmt.Start | mgmt.Close] = {}  # our channel 0 MSGs, by msgno
        self._channels[0].awaiting.append(0)  # the peer's greeting is the reply to an unsent MSG 0
        greeting = mgmt.encode(mgmt.Greeting(self.profiles))
        self._channels[0].queue.append(_Out(RPY, 0, mime.encode(greeting, mime.BEEP_XML)))
        self._pump()
        self._announce(0)

    # ---- the byte side -------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Every event `data` completes, in order. After SessionClosed, input is ignored."""
        events: list[Event] = []
        if self.closed or not data:
            return events
        try:
            for frame in self._parser.feed(data):
                if isinstance(frame, Seq):
                    self._on_seq(frame)
                else:
                    self._on_frame(frame, events)
                if self.closed:
                    break
        except (FrameError, mime.MimeError, mgmt.ManagementError) as exc:
            self._fail(f"poorly formed input from the peer: {exc}", events)
        return events

    def connection_lost(self) -> list[Event]:
        """The transport ended; a session not closed in order ends in error."""
        if self.closed:
            return []
        events: list[Event] = []
        self._fail("connection closed before the session was closed", events)
        return events

    def data_to_send(self) -> bytes:
        """The bytes to write now (empty when nothing is due or the window is full)."""
        out, self._out = bytes(self._out), bytearray()
        return out

    # ---- channel management --------------------------------------------------------------

    def start_channel(self, profiles: str | tuple[str, ...] | list[str], content: str = "") -> int:
        """Ask the peer to open a channel with the first profile it serves; returns its number.
        The answer is ChannelStarted or ChannelStartFailed."""
        uris = (profiles,) if isinstance(profiles, str) else tuple(profiles)
        if not uris:
            raise LocalProtocolError("start_channel needs at least one profile")
        self._check_open()
        number = self._next_channel
        if number > MAX_31:
            raise LocalProtocolError("channel numbers are exhausted; open a new session")
        self._next_channel += 2
        contents = (content,) + ("",) * (len(uris) - 1) if content else ()
        request = mgmt.Start(number, uris, contents)
        self._requests[self._send_msg(0, mime.encode(mgmt.encode(request), mime.BEEP_XML))] = request
        return number

    def close_channel(self, channel: int, code: int = 200) -> None:
        """Ask the peer to close `channel` (0: the whole session). The answer is ChannelClosed
        (SessionClosed(None) for 0) or ChannelCloseFailed."""
        self._channel(channel)
        request = mgmt.Close(channel, code)
        self._requests[self._send_msg(0, mime.encode(mgmt.encode(request), mime.BEEP_XML))] = request

    def close_session(self) -> None:
        self.close_channel(0)

    # ---- messages ------------------------------------------------------------------------

    def send_msg(self, channel: int, body: bytes, content_type: str = mime.DEFAULT_TYPE) -> int:
        """Send a MSG on an open profile channel; returns its msgno (the replies carry it)."""
        if channel == 0:
            raise LocalProtocolError("channel 0 carries only channel management; use start/close")
        return self._send_msg(channel, mime.encode(body, content_type))

    def send_rpy(self, channel: int, msgno: int, body: bytes, content_type: str = mime.DEFAULT_TYPE) -> None:
        self._finish_reply(channel, msgno, RPY, mime.encode(body, content_type))

    def send_err(self, channel: int, msgno: int, body: bytes, content_type: str = mime.DEFAULT_TYPE) -> None:
        self._finish_reply(channel, msgno, ERR, mime.encode(body, content_type))

    def send_ans(self, channel: int, msgno: int, body: bytes, content_type: str = mime.DEFAULT_TYPE) -> int:
        """One answer of a one-to-many reply; returns its ansno. End the answers with send_nul."""
        ch = self._owed(channel, msgno)
        ansno = ch.next_ansno
        ch.next_ansno = (ansno + 1) % (MAX_31 + 1)
        ch.queue.append(_Out(ANS, msgno, mime.encode(body, content_type), ansno))
        self._pump()
        return ansno

    def send_nul(self, channel: int, msgno: int) -> None:
        self._finish_reply(channel, msgno, NUL, b"")

    def window_of(self, channel: int) -> tuple[int, int]:
        """(octets in flight unacknowledged, the peer's window) for `channel`: for tests and stats."""
        ch = self._channel(channel)
        return (ch.out_seq - ch.peer_ack) % MOD, ch.peer_window

    def open_channels(self) -> dict[int, str]:
        return {n: ch.profile for n, ch in self._channels.items() if n}

    # ---- sending internals ---------------------------------------------------------------

    def _open(self, number: int, profile: str) -> None:
        self._channels[number] = _Channel(number, profile, self.limits.window)

    def _announce(self, number: int) -> None:
        """A window over the default is announced by SEQ (RFC 3081 3.1.3), but only after the
        channel 0 reply that opens the channel has left: a SEQ for a channel the peer does not
        know yet would end the session."""
        if self.limits.window != DEFAULT_WINDOW:
            self._announcements.append(number)
            self._pump()

    def _check_open(self) -> None:
        if self.closed:
            raise LocalProtocolError("the session is closed")

    def _channel(self, number: int) -> _Channel:
        self._check_open()
        ch = self._channels.get(number)
        if ch is None:
            raise LocalProtocolError(f"channel {number} is not open")
        return ch

    def _send_msg(self, channel: int, payload: bytes) -> int:
        ch = self._channel(channel)
        msgno = ch.next_msgno
        while msgno in ch.awaiting:
            msgno = (msgno + 1) % (MAX_31 + 1)
        ch.next_msgno = (msgno + 1) % (MAX_31 + 1)
        ch.awaiting.append(msgno)
        ch.queue.append(_Out(MSG, msgno, payload))
        self._pump()
        return msgno

    def _owed(self, channel: int, msgno: int) -> _Channel:
        ch = self._channel(channel)
        if not ch.unanswered or ch.unanswered[0] != msgno:
            owed = ch.unanswered[0] if ch.unanswered else None
            raise LocalProtocolError(f"channel {channel}: replies go in MSG order; the reply due is "
                                     f"to msgno {owed}, not {msgno}")
        return ch

    def _finish_reply(self, channel: int, msgno: int, kind: str, payload: bytes) -> None:
        ch = self._owed(channel, msgno)
        ch.unanswered.popleft()
        ch.next_ansno = 0
        ch.queue.append(_Out(kind, msgno, payload))
        self._pump()

    def _pump(self) -> None:
        """Frame what the peer's windows allow (RFC 3081 3.1.3: never beyond the window)."""
        for ch in self._channels.values():
            while ch.queue:
                out = ch.queue[0]
                remaining = len(out.payload) - out.sent
                room = max(0, ch.peer_window - (ch.out_seq - ch.peer_ack) % MOD)
                chunk = min(remaining, room, self.limits.send_frame)
                if remaining and not chunk:
                    break
                piece = out.payload[out.sent:out.sent + chunk]
                out.sent += chunk
                more = out.sent < len(out.payload)
                self._out += Frame(out.type, ch.number, out.msgno, more, ch.out_seq, piece, out.ansno).encode()
                ch.out_seq = (ch.out_seq + chunk) % MOD
                if not more:
                    ch.queue.popleft()
            if ch.number == 0 and not ch.queue and self._announcements:
                for number in self._announcements:
                    if (opened := self._channels.get(number)) is not None:
                        opened.acked = opened.in_seq
                        self._out += Seq(number, opened.in_seq, self.limits.window).encode()
                self._announcements.clear()

    # ---- receiving internals -------------------------------------------------------------

    def _fail(self, reason: str, events: list[Event]) -> None:
        self.closed = True
        events.append(SessionClosed(reason))

    def _on_seq(self, seq: Seq) -> None:
        ch = self._channels.get(seq.channel)
        if ch is None:
            raise FrameError(f"SEQ for channel {seq.channel}, which is not open")
        in_flight = (ch.out_seq - ch.peer_ack) % MOD
        advance = (seq.ackno - ch.peer_ack) % MOD
        if advance > in_flight:
            raise FrameError(f"SEQ on channel {seq.channel} acknowledges octet {seq.ackno}, "
                             f"beyond the {ch.out_seq} sent")
        ch.peer_ack, ch.peer_window = seq.ackno, seq.window
        self._pump()

    def _on_frame(self, frame: Frame, events: list[Event]) -> None:
        if self.peer_profiles is None and not (frame.channel == 0 and frame.msgno == 0
                                               and frame.type in (RPY, ERR)):
            raise FrameError(f"the first frame must be the greeting (RPY 0 0), not {frame.type} "
                             f"{frame.channel} {frame.msgno}")
        ch = self._channels.get(frame.channel)
        if ch is None:
            raise FrameError(f"{frame.type} on channel {frame.channel}, which is not open")
        self._check_sequence(ch, frame)
        key = (frame.type, frame.msgno)
        if frame.type == MSG:
            if ch.partial is None and frame.msgno in ch.unanswered:
                raise FrameError(f"MSG {frame.msgno} on channel {ch.number} reuses a msgno still awaiting our reply")
        elif not ch.awaiting or ch.awaiting[0] != frame.msgno:
            oldest = ch.awaiting[0] if ch.awaiting else None
            raise FrameError(f"{frame.type} {frame.msgno} on channel {ch.number} answers no MSG of ours "
                             f"(the reply due is to {oldest})")
        if frame.type == ANS:
            if ch.partial is not None:
                raise FrameError(f"ANS on channel {ch.number} interrupts a continued {ch.partial[0]}")
            body = ch.answers.setdefault(int(frame.ansno or 0), bytearray())
            self._grow(body, frame)
            if not frame.more:
                del ch.answers[int(frame.ansno or 0)]
                headers, data = mime.decode(bytes(body))
                events.append(Answer(ch.number, frame.msgno, int(frame.ansno or 0), headers, data))
            return
        if ch.partial is not None and ch.partial != key:
            raise FrameError(f"{frame.type} {frame.msgno} on channel {ch.number} interrupts a continued "
                             f"{ch.partial[0]} {ch.partial[1]}")
        if frame.type != MSG and ch.answers:
            raise FrameError(f"{frame.type} on channel {ch.number} while answers {sorted(ch.answers)} are unfinished")
        self._grow(ch.partial_body, frame)
        if frame.more:
            ch.partial = key
            return
        ch.partial = None
        payload = bytes(ch.partial_body)
        ch.partial_body.clear()
        if frame.type == MSG:
            ch.unanswered.append(frame.msgno)
        else:
            ch.awaiting.popleft()
        if frame.type == NUL:
            events.append(AnswersDone(ch.number, frame.msgno))
            return
        headers, body = mime.decode(payload)
        if ch.number == 0:
            self._on_management(frame.type, frame.msgno, body, events)
        elif frame.type == MSG:
            events.append(Message(ch.number, frame.msgno, headers, body))
        elif frame.type == RPY:
            events.append(Reply(ch.number, frame.msgno, headers, body))
        else:
            events.append(ErrorReply(ch.number, frame.msgno, headers, body))

    def _check_sequence(self, ch: _Channel, frame: Frame) -> None:
        if frame.seqno != ch.in_seq:
            raise FrameError(f"{frame.type} on channel {ch.number} has seqno {frame.seqno}, expected {ch.in_seq}")
        size = len(frame.payload)
        if (ch.in_seq - ch.acked) % MOD + size > ch.window:
            raise FrameError(f"{frame.type} on channel {ch.number} overruns the {ch.window}-octet window we granted")
        ch.in_seq = (ch.in_seq + size) % MOD
        if (ch.in_seq - ch.acked) % MOD >= ch.window // 2:
            ch.acked = ch.in_seq
            self._out += Seq(ch.number, ch.in_seq, ch.window).encode()

    def _grow(self, body: bytearray, frame: Frame) -> None:
        if len(body) + len(frame.payload) > self.limits.max_message:
            raise FrameError(f"message on channel {frame.channel} exceeds {self.limits.max_message} octets")
        body += frame.payload

    # ---- channel 0 -----------------------------------------------------------------------

    def _on_management(self, kind: str, msgno: int, body: bytes, events: list[Event]) -> None:
        if kind == MSG:
            self._on_request(msgno, body, events)
            return
        if msgno == 0 and self.peer_profiles is None:
            element = mgmt.decode(body)
            if kind == ERR:
                text = f"{element.code} {element.text}" if isinstance(element, mgmt.Error) else "no reason"
                self._fail(f"the peer refused the session: {text}", events)
            elif not isinstance(element, mgmt.Greeting):
                raise mgmt.ManagementError(f"expected <greeting>, got {type(element).__name__}")
            else:
                self.peer_profiles = element.profiles
                events.append(GreetingReceived(element.profiles, element.features, element.localize))
            return
        request = self._requests.pop(msgno)
        element = mgmt.decode(body)
        if kind == ERR:
            if not isinstance(element, mgmt.Error):
                raise mgmt.ManagementError(f"ERR on channel 0 must hold <error>, not {type(element).__name__}")
            failed = ChannelStartFailed if isinstance(request, mgmt.Start) else ChannelCloseFailed
            events.append(failed(request.number, element.code, element.text))
        elif isinstance(request, mgmt.Start):
            if not isinstance(element, mgmt.Profile) or element.uri not in request.profiles:
                raise mgmt.ManagementError(f"the answer to <start> must be a <profile> we asked for, not {element}")
            self._open(request.number, element.uri)
            self._announce(request.number)
            events.append(ChannelStarted(request.number, element.uri, element.content, by_peer=False))
        else:
            if not isinstance(element, mgmt.Ok):
                raise mgmt.ManagementError(f"the answer to <close> must be <ok />, not {element}")
            if request.number == 0:
                self.closed = True
                events.append(SessionClosed(None))
            else:
                self._channels.pop(request.number, None)
                events.append(ChannelClosed(request.number, request.code, by_peer=False))

    def _answer(self, msgno: int, element: mgmt.Element_) -> None:
        self._finish_reply(0, msgno, ERR if isinstance(element, mgmt.Error) else RPY,
                           mime.encode(mgmt.encode(element), mime.BEEP_XML))

    def _on_request(self, msgno: int, body: bytes, events: list[Event]) -> None:
        try:
            element = mgmt.decode(body)
        except mgmt.ManagementError as exc:
            self._answer(msgno, mgmt.Error(500, str(exc)[:200]))
            return
        if isinstance(element, mgmt.Start):
            answer = self._accept_start(element, events)
            self._answer(msgno, answer)
            if isinstance(answer, mgmt.Profile):
                self._announce(element.number)
        elif isinstance(element, mgmt.Close):
            answer = self._accept_close(element, events)
            self._answer(msgno, answer)
            if element.number == 0 and isinstance(answer, mgmt.Ok):
                self.closed = True  # our <ok /> is the last thing we send; the peer drops the connection
                events.append(SessionClosed(None))
        else:
            self._answer(msgno, mgmt.Error(500, f"{type(element).__name__} is not a request"))

    def _accept_start(self, start: mgmt.Start, events: list[Event]) -> mgmt.Element_:
        peer_parity = 1 if self.role == LISTENER else 0
        if start.number % 2 != peer_parity:
            return mgmt.Error(501, f"channel {start.number}: the {('listener', 'initiator')[peer_parity]} "
                                   f"numbers its channels {('even', 'odd')[peer_parity]}")
        if start.number in self._channels:
            return mgmt.Error(550, f"channel {start.number} is already open")
        if len(self._channels) >= self.limits.max_channels:
            return mgmt.Error(550, f"{len(self._channels)} channels are open, the most this peer allows")
        for uri, content in zip(start.profiles, start.contents or ("",) * len(start.profiles), strict=True):
            if uri in self.profiles:
                self._open(start.number, uri)
                events.append(ChannelStarted(start.number, uri, content, by_peer=True))
                return mgmt.Profile(uri)
        return mgmt.Error(550, "all requested profiles are unsupported")

    def _accept_close(self, close: mgmt.Close, events: list[Event]) -> mgmt.Element_:
        ch = self._channels.get(close.number)
        if ch is None:
            return mgmt.Error(550, f"channel {close.number} is not open")
        if close.number == 0:
            busy = [n for n in self._channels if n]
            if busy or ch.awaiting:
                return mgmt.Error(550, f"still working: channels {busy} are open" if busy else "still working")
            return mgmt.Ok()
        if not ch.idle():
            return mgmt.Error(550, "still working")
        del self._channels[close.number]
        events.append(ChannelClosed(close.number, close.code, by_peer=True))
        return mgmt.Ok()
