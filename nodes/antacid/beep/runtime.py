"""A thin asyncio runtime for a BEEP Session: it only moves bytes between a stream and the session.

Pull-style, as h11 is used: `await conn.next_event()` reads until the session has an event;
the send methods call the session and write what it framed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from .events import Event, SessionClosed
from .session import INITIATOR, LISTENER, Limits, Session

READ_SIZE = 65536


class BeepConnection:
    """One session on one TCP connection."""

    def __init__(self, session: Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.session = session
        self._reader = reader
        self._writer = writer
        self._events: deque[Event] = deque()
        self._ended = False

    async def flush(self) -> None:
        """Write what the session has framed (a peer that stopped reading blocks us here)."""
        data = self.session.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)
            await self._writer.drain()

    async def next_event(self) -> Event:
        """The next event; after SessionClosed the connection is closed and this raises EOFError."""
        while not self._events:
            if self._ended:
                raise EOFError("the BEEP session is over")
            await self.flush()
            try:
                data = await self._reader.read(READ_SIZE)
            except (ConnectionError, OSError):
                data = b""
            self._events.extend(self.session.receive_data(data) if data else self.session.connection_lost())
        event = self._events.popleft()
        if isinstance(event, SessionClosed):
            self._ended = True
            await self.aclose()
        else:
            await self.flush()
        return event

    async def call(self, send: Callable[..., object], *args: object) -> object:
        """Run one of the session's send methods and write its bytes; returns what it returned."""
        result = send(*args)
        await self.flush()
        return result

    async def aclose(self) -> None:
        """Flush what is due (an <ok /> to a close) and close the socket."""
        try:
            await self.flush()
        except (ConnectionError, OSError):
            pass
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def connect(host: str, port: int, profiles: tuple[str, ...] = (), limits: Limits | None = None) -> BeepConnection:
    """Open a connection as the initiator and send our greeting."""
    reader, writer = await asyncio.open_connection(host, port)
    conn = BeepConnection(Session(INITIATOR, profiles, limits), reader, writer)
    await conn.flush()
    return conn


async def serve(host: str, port: int, profiles: tuple[str, ...], handler: Callable[[BeepConnection], Awaitable[None]],
                limits: Limits | None = None) -> asyncio.Server:
    """Listen; each accepted connection gets a listener session and `handler(conn)`, closed after."""

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = BeepConnection(Session(LISTENER, profiles, limits), reader, writer)
        try:
            await conn.flush()
            await handler(conn)
        finally:
            await conn.aclose()

    return await asyncio.start_server(accepted, host, port)
