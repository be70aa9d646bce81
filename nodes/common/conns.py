"""Connection limits for an aiohttp server: at most ``max_conns`` open connections per port,
and a connection whose first request head has not fully arrived within ``head_timeout_s`` of
connecting is closed.

aiohttp 3.x has neither knob (``keepalive_timeout`` covers only idle keep-alive connections,
``client_max_size`` only bodies), so `ConnGuard` wraps the server's protocol factory
(``AppRunner.server``) and is handed to ``loop.create_server`` in place of a ``TCPSite``.
Each connection's protocol is a `_Guarded` that forwards everything to aiohttp's own.
On a TLS port ``connection_made`` comes after the handshake, so the count covers
established connections; a handshake that never ends is the ``ssl_handshake_timeout`` of
``create_server`` (60 s by default; the DRiP server sets its own).

`Listener` accepts on its own socket instead of ``create_server``, so that a new connection
can be refused by its source address *before* its TLS handshake (`SourceBuckets`: per source
address and port, a token bucket spent by the refusals the server makes to that source). A
sender whose requests keep being refused while it opens one connection per request (issue
26's hostile flood) made the node pay a whole handshake each time; a correct peer is refused
nothing and is admitted however often it reconnects. A refused connection is reset at once:
no handshake on either side.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("conns")

#: a request head is cut off by aiohttp long before this (max_field_size 8190 per line)
_HEAD_SCAN = 64 * 1024


@dataclass
class ConnGuard:
    """Protocol factory; ``on_refuse(reason)`` counts what it closed (`nodes.common.refusals`)."""

    factory: Callable[[], asyncio.Protocol]
    max_conns: int
    head_timeout_s: float
    on_refuse: Callable[[str], None]
    open: int = 0

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self, self.factory())


class _Guarded(asyncio.Protocol):
    def __init__(self, guard: ConnGuard, inner: Any) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.head = b""  # what arrived of the first head; None-like once it is complete
        self.watching = True
        self.counted = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.guard.open >= self.guard.max_conns:
            self.guard.on_refuse("too-many-connections")
            transport.abort()
            return
        self.guard.open += 1
        self.counted = True
        self.timer = asyncio.get_running_loop().call_later(
            self.guard.head_timeout_s, self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        if self.watching and self.transport is not None:
            self.guard.on_refuse("head-timeout")
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.watching:
            self.head = (self.head + data)[-_HEAD_SCAN:]
            if b"\r\n\r\n" in self.head:
                self.watching = False
                self.head = b""
                if self.timer is not None:
                    self.timer.cancel()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.counted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.counted:
            self.counted = False
            self.guard.open -= 1
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


@dataclass
class SourceBuckets:
    """What one port holds against each source address: a token bucket that refills at
    ``rate`` a second up to ``burst``, spent by `charge` (a refused request, a failed TLS
    handshake), not by connecting. A new connection is admitted while its source holds a
    token (`admits`), so a correct peer, refused nothing, always is, however often it
    reconnects (a partition, a restart), while a source whose requests keep being refused
    gets ``rate`` connections a second. At most ``max_sources`` addresses are remembered:
    past that, those whose bucket has refilled are forgotten first (a forgotten one starts
    full, as it would have been), then the longest unseen."""

    rate: float
    burst: float
    max_sources: int = 4096
    _b: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError(f"a connection bucket needs rate > 0 and burst >= 1, got "
                             f"{self.rate} and {self.burst}")

    def __len__(self) -> int:
        """Sources remembered (each a bucket)."""
        return len(self._b)

    def _tokens(self, source: str, now: float) -> float:
        tokens, t = self._b.get(source, (self.burst, now))
        return min(self.burst, tokens + max(0.0, now - t) * self.rate)

    def admits(self, source: str, now: float) -> bool:
        """Whether a new connection from ``source`` is admitted at ``now`` (monotonic s)."""
        return source not in self._b or self._tokens(source, now) >= 1.0

    def charge(self, source: str, now: float) -> None:
        """One refusal of ``source`` at ``now``: a token less (none below zero)."""
        tokens = self._tokens(source, now)
        if source not in self._b and len(self._b) >= self.max_sources:
            self._forget(now)
        self._b[source] = (max(0.0, tokens - 1.0), now)

    def _forget(self, now: float) -> None:
        full = [a for a, (k, t) in self._b.items() if k + (now - t) * self.rate >= self.burst]
        for a in full:
            del self._b[a]
        if len(self._b) >= self.max_sources:
            for a, _ in sorted(self._b.items(), key=lambda kv: kv[1][1])[:len(self._b) // 2]:
                del self._b[a]


@dataclass
class Listener:
    """Serves ``guard`` on ``host:port``: accepts each connection itself, resets one whose
    source has no token left in its `SourceBuckets` (``on_refuse("connection-rate")``)
    before any TLS, and hands the rest to asyncio (``connect_accepted_socket``: the
    handshake, bounded by ``handshake_timeout_s``, then the guard's protocol); a failed
    handshake is charged to its source. The server charges the refusals it makes
    (`charge`). `close` stops accepting and drops handshakes under way; open connections
    belong to the server behind the guard."""

    guard: ConnGuard
    host: str
    port: int
    ssl_ctx: ssl.SSLContext | None
    handshake_timeout_s: float
    buckets: SourceBuckets | None = None
    _sock: socket.socket | None = field(default=None, init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _pending: set[asyncio.Task[Any]] = field(default_factory=set, init=False, repr=False)

    def start(self) -> None:
        """Listen now (a port in use raises OSError here, as ``create_server`` would)."""
        self._sock = socket.create_server((self.host, self.port), backlog=128)
        self._sock.setblocking(False)
        self._task = asyncio.get_running_loop().create_task(self._accept(),
                                                            name=f"accept-{self.port}")

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        while True:
            try:
                conn, addr = await loop.sock_accept(self._sock)
            except OSError as e:  # out of descriptors: wait for some to close, go on
                log.warning("port %d: accept failed: %s", self.port, e)
                await asyncio.sleep(0.1)
                continue
            if self.buckets is not None and not self.buckets.admits(addr[0], loop.time()):
                self.guard.on_refuse("connection-rate")
                # reset, not a FIN: nothing more is read or sent on it
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                continue
            conn.setblocking(False)
            t = loop.create_task(self._connect(conn, addr[0]))
            self._pending.add(t)
            t.add_done_callback(self._pending.discard)

    def charge(self, source: str | None) -> None:
        """A refusal of a request (or handshake) from ``source``: its bucket pays."""
        if self.buckets is not None and source:
            self.buckets.charge(source, asyncio.get_running_loop().time())

    async def _connect(self, conn: socket.socket, source: str) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self.guard, conn, ssl=self.ssl_ctx,
                ssl_handshake_timeout=self.handshake_timeout_s if self.ssl_ctx else None)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
            log.debug("port %d: connection not set up: %s", self.port, e)
            # a handshake TLS refused (no or a bad certificate), not a client that gave up
            # or a connection that waited in the backlog while the node was stalled
            if isinstance(e, ssl.SSLError) and not isinstance(
                    e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
                self.charge(source)
            conn.close()
        except asyncio.CancelledError:  # closing: a handshake under way leaves no socket
            conn.close()
            raise

    def close(self) -> None:
        for t in [*([self._task] if self._task else []), *self._pending]:
            t.cancel()
        self._task = None
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
