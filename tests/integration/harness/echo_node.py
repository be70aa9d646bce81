"""A minimal node for testing the harness's plumbing (not a protocol under test).

Peer port: a line-echo TCP server; every 100 ms the node pings each peer through its
proxy and records which ones answered, so tests can see partitions really cut node links.
Client port: HTTP ``POST /write {"value": v}`` and ``GET /read``. Uses nodes/common for the
admin API, journal, clock and config, like every reference node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import NodeConfig
from nodes.common.journal import Journal
from nodes.common.runtime import main


class EchoNode:
    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.value: Any = None
        self.seen: dict[str, float] = {}
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host, cfg.ports.admin)
        self._tasks: list[asyncio.Task[None]] = []

    def state(self) -> dict[str, Any]:
        now = time.monotonic()
        return {"id": self.cfg.id, "value": self.value,
                "reachable": {p: now - self.seen.get(p, -1e9) < 0.5 for p in self.cfg.peers}}

    async def _echo(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while line := await r.readline():
                w.write(line)
                await w.drain()
        w.close()

    async def _ping(self, name: str) -> None:
        host, port = self.cfg.peers[name].peer_addr()
        while True:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 0.3)
                while True:
                    w.write(f"ping {self.cfg.id}\n".encode())
                    await w.drain()
                    await asyncio.wait_for(r.readline(), 0.3) or (_ for _ in ()).throw(EOFError())
                    self.seen[name] = time.monotonic()
                    await asyncio.sleep(0.1)
            except Exception:
                await asyncio.sleep(0.1)

    async def _write(self, req: web.Request) -> web.Response:
        self.value = (await req.json())["value"]
        self.journal.emit("write", value=self.value)
        return web.json_response({"ok": True})

    async def _read(self, _req: web.Request) -> web.Response:
        return web.json_response({"value": self.value})

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._echo, self.cfg.host, self.cfg.ports.peer)
        app = web.Application()
        app.router.add_post("/write", self._write)
        app.router.add_get("/read", self._read)
        self._app = web.AppRunner(app, access_log=None)
        await self._app.setup()
        await web.TCPSite(self._app, self.cfg.host, self.cfg.ports.client).start()
        self._tasks = [asyncio.create_task(self._ping(p)) for p in self.cfg.peers]
        await self.admin.start()
        self.journal.emit("start")
        self.admin.set_ready()

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self.admin.stop()
        await self._app.cleanup()
        self._server.close()
        self.journal.close()


if __name__ == "__main__":
    raise SystemExit(main(None, "echo-node", (), EchoNode))
