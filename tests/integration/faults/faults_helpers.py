"""Helpers for the fault integration tests: process and port checks, tiny TCP peers."""

from __future__ import annotations

import asyncio
import socket

from tests.proc_state import gone


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    return not gone(pid)


def port_listening(port: int, kind: int = socket.SOCK_STREAM) -> bool:
    """Is something bound to 127.0.0.1:port? (SO_REUSEADDR: TIME_WAIT does not count.)"""
    with socket.socket(socket.AF_INET, kind) as s:
        if kind == socket.SOCK_STREAM:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


class Recorder:
    """A TCP server that hands every accepted connection to the test, to read/write by hand."""

    def __init__(self) -> None:
        self.conns: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = \
            asyncio.Queue()
        self.server: asyncio.base_events.Server | None = None
        self.addr = ""

    async def start(self) -> Recorder:
        async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await self.conns.put((r, w))
        self.server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        self.addr = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def accept(self, timeout: float = 2.0) -> tuple[asyncio.StreamReader,
                                                          asyncio.StreamWriter]:
        return await asyncio.wait_for(self.conns.get(), timeout)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def echo_server() -> tuple[asyncio.base_events.Server, str]:
    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(4096):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def connect(addr: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    return await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2.0)


async def read_within(r: asyncio.StreamReader, n: int, timeout: float) -> bytes | None:
    """``n`` bytes, or None if they do not arrive within ``timeout`` (b"" on EOF)."""
    try:
        return await asyncio.wait_for(r.read(n), timeout)
    except TimeoutError:
        return None
