"""The admin API every node serves (docs/contracts.md section 3), plain HTTP on loopback.

``/admin/health`` answers 503 ``{"ok": false}`` until the node calls ``set_ready()``, then
``{"ok": true, "id": ...}``. ``/admin/state`` calls the node's state callback (sync or
async). A node may add its own routes to ``AdminServer.app`` before ``start``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from nodes.common.clock import Clock
from nodes.common.journal import Journal

StateCallback = Callable[[], dict[str, Any] | Awaitable[dict[str, Any]]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda o: json.dumps(o, default=repr))


class AdminServer:
    """aiohttp admin endpoint; ``start``/``stop`` bracket its life."""

    def __init__(
        self,
        node_id: str,
        state: StateCallback,
        journal: Journal,
        clock: Clock,
        host: str,
        port: int,
    ) -> None:
        self.node_id = node_id
        self._state = state
        self.journal = journal
        self.clock = clock
        self.host = host
        self.port = port
        self.ready = False
        self.app = web.Application()
        self.app.router.add_get("/admin/health", self._health)
        self.app.router.add_get("/admin/state", self._state_h)
        self.app.router.add_get("/admin/events", self._events)
        self.app.router.add_post("/admin/clock", self._clock)
        self._runner: web.AppRunner | None = None

    def set_ready(self, ready: bool = True) -> None:
        self.ready = ready

    async def _health(self, _req: web.Request) -> web.Response:
        if not self.ready:
            return _json({"ok": False, "id": self.node_id}, status=503)
        return _json({"ok": True, "id": self.node_id})

    async def _state_h(self, _req: web.Request) -> web.Response:
        st = self._state()
        if inspect.isawaitable(st):
            st = await st
        return _json(st)

    async def _events(self, req: web.Request) -> web.Response:
        try:
            since = int(req.query.get("since", "0"))
            limit = int(req.query.get("limit", "10000"))
        except ValueError:
            return _json({"error": "since and limit must be integers"}, status=400)
        events, nxt = self.journal.since(since, limit)
        return _json({"events": events, "next": nxt})

    async def _clock(self, req: web.Request) -> web.Response:
        try:
            body = await req.json()
            offset = float(body["offset_s"])
        except (ValueError, KeyError, TypeError):
            return _json({"error": 'expected JSON body {"offset_s": <float>}'}, status=400)
        self.clock.set_offset(offset)
        self.journal.emit("clock", offset_s=offset)
        return _json({"ok": True, "offset_s": offset})

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
