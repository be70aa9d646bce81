"""WebSocket lanes (ours, not in the spec): one WebSocket per peer link that carries the
``POST /batch`` exchanges of that link, each as one binary frame and its answer as one
binary frame (docs/drip.md "WebSocket lanes, session 46", "Lane frames under a per-lane key,
session 47").

Why: what a batch costs beyond its items is the HTTP request around it (aiohttp's client and
server request handling, a response object, headers parsed and written both ways): about
230 us of CPU per request against about 63 us per WebSocket exchange (session 42's
micro-bench); and, until session 47, one batch token signed and checked per exchange (an
ES256 signature and check with public keys). The lane changes the envelope only: the
receiver runs a POST /batch's checks and handling on each frame's body
(`DripNode._lane_exchange`) except the batch token, and the answer frame carries the status
and the same JSON answer body, sent only once the records behind it are durable.

Authentication: the opener makes a random key per lane (`new_key`) and sends it in the
upgrade's ``DRiP-Lane-Key`` header, which the upgrade's own once-token binds
(`codec.LaneOpen`). Every frame then carries an HMAC-SHA256 under that key over a direction
label, its sequence number and its content, instead of a token:

* exchange (opener -> acceptor): ``seq (8 bytes, big-endian) | MAC(key, EXCHANGE | seq |
  body) (32 bytes) | body``;
* answer (acceptor -> opener): ``seq | MAC(key, ANSWER | seq | status | body) | status
  (2 bytes, big-endian) | JSON body``.

``seq`` counts each direction's frames from 0, up by exactly one a frame: the WebSocket
runs on one TLS connection, which keeps order, so any other seq is a replay, a drop or a
forgery. The labels differ, so a frame cannot be reflected back as the other direction's.

Answers are made in the order of the exchanges (FIFO), so the answer of exchange ``n`` is
answer ``n``; an exchange that gets no answer in time ends the lane, and everything waiting on
that lane fails as a POST /batch with no answer does.

**Riders** (session 49): a node that has answers ready for a peer's lane and an exchange to
send on its own lane to that peer sends them in one frame: the answer frames, sealed as
ever under the peer's lane key, ride at the head of the exchange's content
(`pack_riders`): ``RIDERS (1 byte) | tag of the lane they answer (8) | count (1) | count x
(length (4) | answer frame) | batch body``. A batch body is JSON (``{...}``), so the marker
byte cannot begin one. The exchange's own MAC covers them; each is then checked by the lane
it answers as if it had come on that lane's socket (`Outbound.take`). A peer's answers thus
come on either of two connections, so the opener matches them to its exchanges by seq, not
by arrival order, and refuses a seq it did not send or already had answered.

The framing functions are pure (key and seq in, bytes out, `LaneFrameError` for anything
not ours); `Seal` keeps one lane end's key and next seqs. Nothing here does I/O beyond the
WebSocket it is given; the node does the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from nodes.drip.codec import LANE_KEY_BYTES

#: the peer-port path of the WebSocket upgrade
PATH = "/lane"
#: exchanges a receiver handles on one lane at once, answers not yet sent included; past
#: them it stops reading the lane until the oldest answer has left (ours send one at a time,
#: ``peer_pipeline``)
MAX_IN_FLIGHT = 32
#: what each direction's MAC covers first: distinct, so no frame passes as the other way's
EXCHANGE = b"DRiP lane exchange\x00"
ANSWER = b"DRiP lane answer\x00"
SEQ_BYTES = 8
MAC_BYTES = 32
#: a frame's bytes before its content (seq and MAC)
HEAD = SEQ_BYTES + MAC_BYTES
SEQ_MAX = (1 << 64) - 1
#: the first byte of an exchange's content when answers ride on it (`pack_riders`)
RIDERS = b"\x00"
TAG_BYTES = 8
#: the most bytes of answer frames one exchange carries (the acceptor's frame limit allows
#: for them); what does not fit goes as answer frames of its own
MAX_RIDER_BYTES = 1 << 16
#: the most answers one exchange carries (their count is one byte)
MAX_RIDERS = 255
#: what riders may add to an exchange frame: their head, and each one's length
RIDERS_MAX_OVERHEAD = 1 + TAG_BYTES + 1 + MAX_RIDERS * 4 + MAX_RIDER_BYTES


class LaneFrameError(ValueError):
    """A frame that is not one of ours: bad framing, MAC or seq (the lane is closed: its
    channel cannot be trusted)."""


class LaneClosed(ConnectionError):
    """The lane ended (closed, reset, a frame we cannot read) before this exchange's answer."""


def new_key() -> bytes:
    """A fresh lane key: 32 random bytes (its header form is ``key.hex()``)."""
    return secrets.token_bytes(LANE_KEY_BYTES)


def _mac(key: bytes, label: bytes, seq: bytes, content: bytes) -> bytes:
    return hmac.digest(key, b"".join((label, seq, content)), "sha256")


def _seal(key: bytes, label: bytes, seq: int, content: bytes) -> bytes:
    if not 0 <= seq <= SEQ_MAX:
        raise ValueError(f"lane seq {seq} out of range: open a new lane")
    s = seq.to_bytes(SEQ_BYTES, "big")
    return b"".join((s, _mac(key, label, s, content), content))


def _open(key: bytes, label: bytes, seq: int, data: bytes, what: str) -> bytes:
    """The content of frame ``data`` if it is our frame number ``seq`` of this direction."""
    if len(data) < HEAD:
        raise LaneFrameError(f"lane {what} of {len(data)} bytes: shorter than its seq and MAC "
                             f"({HEAD} bytes)")
    content = data[HEAD:]
    if not hmac.compare_digest(data[SEQ_BYTES:HEAD], _mac(key, label, data[:SEQ_BYTES],
                                                          content)):
        raise LaneFrameError(f"lane {what}: its MAC does not check out under this lane's key "
                             "(forged, altered, another lane's, or the other direction's)")
    got = int.from_bytes(data[:SEQ_BYTES], "big")
    if got != seq:
        raise LaneFrameError(f"lane {what}: seq {got} where {seq} is next (a replayed, "
                             "dropped or reordered frame)")
    return content


def pack_exchange(key: bytes, seq: int, body: bytes) -> bytes:
    """Exchange frame number ``seq`` of a lane under ``key``, carrying a batch's body."""
    return _seal(key, EXCHANGE, seq, body)


def unpack_exchange(key: bytes, seq: int, data: bytes) -> bytes:
    """The body of exchange frame ``data``, which must be number ``seq`` under ``key``;
    LaneFrameError if it is not."""
    return _open(key, EXCHANGE, seq, data, "frame")


def pack_answer(key: bytes, seq: int, status: int, body: bytes) -> bytes:
    """Answer frame number ``seq`` (the answer to exchange ``seq``)."""
    return _seal(key, ANSWER, seq, status.to_bytes(2, "big") + body)


def unpack_answer(key: bytes, data: bytes) -> tuple[int, int, bytes]:
    """(seq, status, body bytes) of answer frame ``data`` under ``key``: the frame names its
    seq (answers come on two connections, riders and the lane's own, so not in order); the
    opener checks that it is one of its exchanges (`Outbound.take`)."""
    seq = int.from_bytes(data[:SEQ_BYTES], "big")
    content = _open(key, ANSWER, seq, data, "answer")
    if len(content) < 2:
        raise LaneFrameError(f"lane answer of {len(content)} bytes after its MAC: shorter "
                             "than its status")
    return seq, int.from_bytes(content[:2], "big"), content[2:]


def lane_tag(key: bytes) -> bytes:
    """Which lane riding answers belong to: a digest of its key (not the key, a secret)."""
    return hashlib.sha256(b"DRiP lane tag\x00" + key).digest()[:TAG_BYTES]


def pack_riders(tag: bytes, answers: list[bytes], body: bytes) -> bytes:
    """An exchange's content with ``answers`` (answer frames of the lane ``tag``) riding
    ahead of the batch ``body``; ``body`` alone when there are none."""
    if not answers:
        return body
    if len(answers) > MAX_RIDERS or len(tag) != TAG_BYTES:
        raise ValueError(f"{len(answers)} riders (at most {MAX_RIDERS}) or a tag of "
                         f"{len(tag)} bytes")
    parts = [RIDERS, tag, len(answers).to_bytes(1, "big")]
    for a in answers:
        parts += (len(a).to_bytes(4, "big"), a)
    parts.append(body)
    return b"".join(parts)


def split_riders(content: bytes) -> tuple[bytes | None, list[bytes], bytes]:
    """(tag, answer frames, batch body) of an exchange's checked content; (None, [], content)
    when nothing rides on it. LaneFrameError when its riders are not framed as ours."""
    if content[:1] != RIDERS:
        return None, [], content
    head = 1 + TAG_BYTES + 1
    if len(content) < head:
        raise LaneFrameError(f"lane frame: riders' head of {len(content)} bytes, not {head}")
    tag, n, at = content[1:1 + TAG_BYTES], content[head - 1], head
    answers = []
    for i in range(n):
        size = int.from_bytes(content[at:at + 4], "big")
        if at + 4 > len(content) or at + 4 + size > len(content) or size < HEAD:
            raise LaneFrameError(f"lane frame: rider {i + 1} of {n} overruns the frame or is "
                                 "shorter than an answer")
        answers.append(content[at + 4:at + 4 + size])
        at += 4 + size
    if at - head - 4 * n > MAX_RIDER_BYTES:
        raise LaneFrameError(f"lane frame: {at - head - 4 * n} bytes of riders, over "
                             f"{MAX_RIDER_BYTES}")
    return tag, answers, content[at:]


@dataclass
class Seal:
    """One end of a lane: its key and the seq of the next frame each way (``sent``: ours,
    ``taken``: the peer's exchanges). The opener seals exchanges and opens answers, the
    acceptor the other way round; each method moves its seq on only when it succeeds."""

    key: bytes = field(repr=False)
    sent: int = 0
    taken: int = 0
    tag: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tag = lane_tag(self.key)

    def exchange(self, body: bytes) -> bytes:
        frame = pack_exchange(self.key, self.sent, body)
        self.sent += 1
        return frame

    def take_exchange(self, data: bytes) -> bytes:
        body = unpack_exchange(self.key, self.taken, data)
        self.taken += 1
        return body

    def answer(self, status: int, body: bytes) -> bytes:
        frame = pack_answer(self.key, self.sent, status, body)
        self.sent += 1
        return frame

    def open_answer(self, data: bytes) -> tuple[int, int, bytes]:
        """(seq, status, body) of an answer to one of the exchanges sealed so far."""
        seq, status, body = unpack_answer(self.key, data)
        if seq >= self.sent:
            raise LaneFrameError(f"lane answer {seq}: only {self.sent} exchanges were sent")
        return seq, status, body


@dataclass(eq=False)
class Inbound:
    """A lane a peer opened to us: its WebSocket, and the view of that peer it was opened
    under (``trust``, `DripNode._lane_trust`), for the node to close it when that changes;
    ``tag`` (`lane_tag`) names it for the answers that ride on our exchanges, ``ready`` holds
    those answers (sealed) until one takes them or they go on their own, and ``unanswered``
    counts the exchanges read whose answer is not sealed yet."""

    ws: web.WebSocketResponse
    trust: object
    tag: bytes
    ready: list[bytes] = field(default_factory=list)
    unanswered: int = 0

    def riders(self) -> list[bytes]:
        """The ready answers that fit on one exchange (the oldest first), taken."""
        n, size = 0, 0
        while n < min(len(self.ready), MAX_RIDERS) and size + len(self.ready[n]) <= MAX_RIDER_BYTES:
            size += len(self.ready[n])
            n += 1
        got, self.ready[:n] = self.ready[:n], []
        return got


class Outbound:
    """Our end of a lane to one peer: `exchange` seals a batch's body into the next frame,
    sends it and waits for its answer; `run` (a task the node owns) reads and checks the
    answers on the lane's socket until the lane ends, and `take` checks one that rode on the
    peer's exchange. ``opened``: when (the node's monotonic clock) and ``trust``: under
    which view of the peer (`DripNode._lane_trust`) it was opened, for the node to close it
    when either is past."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, seal: Seal, opened: float = 0.0,
                 trust: object = None) -> None:
        self.ws = ws
        self.seal = seal
        self.opened = opened
        self.trust = trust
        #: the exchanges waiting for their answer, by seq (the oldest first)
        self.waiting: dict[int, asyncio.Future[tuple[int, bytes]]] = {}
        self.dead = False
        self.why = "lane closed"
        #: why the peer's answers stopped being ours (a frame not ours: framing, MAC, seq,
        #: an answer to no exchange): the node counts it as a ``lane-frame`` refusal
        self.bad_frame: str | None = None

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    self._bad(f"lane: unexpected {msg.type.name} frame from the peer")
                    break
                try:
                    self.take(msg.data)
                except LaneFrameError:
                    break
        finally:
            self.end(self.why)
            await self.ws.close()

    def take(self, data: bytes) -> None:
        """An answer frame of this lane, from its socket or riding on an exchange of the
        peer's: its exchange gets it. LaneFrameError (the lane ended, ``bad_frame`` says why)
        when it is not ours or answers no exchange that waits (answered already, or never).
        Once the lane has ended (an exchange timed out, the node dropped it) its exchanges
        have failed: an answer still coming to it is moot, not a bad frame."""
        if self.dead:
            return
        try:
            seq, status, body = self.seal.open_answer(data)
        except LaneFrameError as e:
            self._bad(str(e))
            raise
        fut = self.waiting.pop(seq, None)
        if fut is None:
            self._bad(f"lane answer {seq}: no exchange waits for it (answered already)")
            raise LaneFrameError(self.why)
        if not fut.done():
            fut.set_result((status, body))

    def _bad(self, why: str) -> None:
        self.bad_frame = why
        self.end(why)

    def end(self, why: str) -> None:
        """No more exchanges on this lane; those still waiting fail now."""
        if not self.dead:
            self.dead, self.why = True, why
        waiting, self.waiting = self.waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(LaneClosed(why))

    async def exchange(self, body: bytes, timeout: float, riders: Inbound | None = None
                       ) -> tuple[int, bytes]:
        """Send ``body`` (a batch) as the next exchange frame, with the answers ready on
        ``riders`` (the peer's lane to us) riding on it; its answer (status, body bytes).
        Raises LaneClosed, or TimeoutError after ``timeout`` (the caller then drops the
        lane). Riders are taken only onto a socket still open: on one that is closing they
        would be lost, and the peer's exchanges they answer would time out (they go on
        the peer's lane instead)."""
        if self.dead or self.ws.closed:
            raise LaneClosed(self.why if self.dead else "lane: its WebSocket is closed")
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        # sealed, recorded and written in one step: the seq and the wire keep one order
        seq = self.seal.sent
        answers = riders.riders() if riders is not None else []
        frame = self.seal.exchange(pack_riders(riders.tag, answers, body) if answers else body)
        self.waiting[seq] = fut
        try:
            async with asyncio.timeout(timeout):
                await self.ws.send_bytes(frame)
                return await fut
        finally:
            if fut.cancelled() or not fut.done():  # timed out or cancelled (which cancels
                fut.cancel()  # fut too): the lane cannot be trusted to answer
                self.end("lane: an exchange got no answer in time")

    async def close(self) -> None:
        self.end("lane closed by this node")
        await self.ws.close()
