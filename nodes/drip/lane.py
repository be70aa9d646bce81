"""WebSocket lanes (ours, not in the spec): one WebSocket per peer link that carries the
``POST /batch`` exchanges of that link, each as one binary frame and its answer as one
binary frame (docs/drip.md "WebSocket lanes, session 46").

Why: what a batch costs beyond its items is the HTTP request around it (aiohttp's client and
server request handling, a response object, headers parsed and written both ways): about
230 us of CPU per request against about 63 us per WebSocket exchange (session 42's
micro-bench). The lane changes the envelope only. Each frame carries exactly what a
``POST /batch`` carries (its ``DRiP-Node-ID``, its ``Authorization`` token binding
``codec.batch_digest`` of the body bytes, the body bytes), the receiver runs the same checks
and the same handling on it as on the request (`DripNode._peer_exchange`), and the answer
frame carries the status and the same JSON answer body, sent only once the records behind
it are durable (as the HTTP answer).

Frames (binary; anything else closes the lane):

* exchange: ``len(node) (1 byte) | node id (UTF-8) | len(token) (2 bytes, big-endian) |
  token (ASCII, the whole Authorization value) | body bytes``;
* answer: ``status (2 bytes, big-endian) | JSON body``.

Answers come in the order of the exchanges (FIFO), so a lane needs no exchange ids; an
exchange that gets no answer in time ends the lane (the answers after it could no longer
be matched), and everything waiting on that lane fails as a POST /batch with no answer does.

Nothing here does I/O beyond the WebSocket it is given; the node does the rest.
"""

from __future__ import annotations

import asyncio
import collections

import aiohttp

#: the peer-port path of the WebSocket upgrade
PATH = "/lane"
#: the most bytes of a frame's node id and token fields (beyond these it is malformed)
MAX_NODE = 255
MAX_TOKEN = 65535
#: exchanges a receiver handles on one lane at once, answers not yet sent included; past
#: them it stops reading the lane until the oldest answer has left (ours send one at a time,
#: ``peer_pipeline``)
MAX_IN_FLIGHT = 32


class LaneFrameError(ValueError):
    """A frame that is not one of ours (the lane is closed: its framing cannot be trusted)."""


class LaneClosed(ConnectionError):
    """The lane ended (closed, reset, a frame we cannot read) before this exchange's answer."""


def pack_exchange(node: str, token: str, body: bytes) -> bytes:
    n = node.encode()
    t = token.encode("ascii")
    if len(n) > MAX_NODE or len(t) > MAX_TOKEN:
        raise ValueError("node id or token too long for a lane frame")
    return b"".join((len(n).to_bytes(1, "big"), n, len(t).to_bytes(2, "big"), t, body))


def unpack_exchange(data: bytes) -> tuple[str, str, bytes]:
    """(node id, token, body) of an exchange frame; LaneFrameError if it is not one."""
    mv = memoryview(data)
    if len(mv) < 3:
        raise LaneFrameError(f"lane frame of {len(mv)} bytes: shorter than its header")
    nl = mv[0]
    if len(mv) < 1 + nl + 2:
        raise LaneFrameError("lane frame: its node id runs past its end")
    tl = int.from_bytes(mv[1 + nl:3 + nl], "big")
    if len(mv) < 3 + nl + tl:
        raise LaneFrameError("lane frame: its token runs past its end")
    try:
        node = bytes(mv[1:1 + nl]).decode()
        token = bytes(mv[3 + nl:3 + nl + tl]).decode("ascii")
    except UnicodeDecodeError as e:
        raise LaneFrameError(f"lane frame: node id or token not text: {e}") from None
    return node, token, bytes(mv[3 + nl + tl:])


def pack_answer(status: int, body: bytes) -> bytes:
    return status.to_bytes(2, "big") + body


def unpack_answer(data: bytes) -> tuple[int, bytes]:
    if len(data) < 2:
        raise LaneFrameError(f"lane answer of {len(data)} bytes: shorter than its status")
    return int.from_bytes(data[:2], "big"), data[2:]


class Outbound:
    """Our end of a lane to one peer: `exchange` sends a frame and waits for its answer;
    `run` (a task the node owns) reads the answers in order until the lane ends."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.waiting: collections.deque[asyncio.Future[tuple[int, bytes]]] = collections.deque()
        self.dead = False
        self.why = "lane closed"

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not self.waiting:
                    self.why = f"lane: unexpected {msg.type.name} frame from the peer"
                    break
                fut = self.waiting.popleft()
                try:
                    answer = unpack_answer(msg.data)
                except LaneFrameError as e:
                    self.why = str(e)
                    if not fut.done():
                        fut.set_exception(LaneClosed(self.why))
                    break
                if not fut.done():
                    fut.set_result(answer)
        finally:
            self.end(self.why)
            await self.ws.close()

    def end(self, why: str) -> None:
        """No more exchanges on this lane; those still waiting fail now."""
        if not self.dead:
            self.dead, self.why = True, why
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_exception(LaneClosed(why))

    async def exchange(self, frame: bytes, timeout: float) -> tuple[int, bytes]:
        """Send one exchange frame; its answer (status, body bytes). Raises LaneClosed, or
        TimeoutError after ``timeout`` (the caller then drops the lane)."""
        if self.dead:
            raise LaneClosed(self.why)
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        try:
            async with asyncio.timeout(timeout):
                await self.ws.send_bytes(frame)
                return await fut
        finally:
            if not fut.done():  # timed out or cancelled: the FIFO is out of step for good
                fut.cancel()
                self.end("lane: an exchange got no answer in time")

    async def close(self) -> None:
        self.end("lane closed by this node")
        await self.ws.close()
