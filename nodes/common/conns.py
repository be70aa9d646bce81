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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
