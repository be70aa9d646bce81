"""The harness's client for an SDS node: JSON over UDP to ``ports.client`` (via the relay).

``invoke({"f": "send", "value": "c3:17:9f2a"})`` asks the node to broadcast that payload and
completes ``ok`` with ``{"v": payload, "id": message id, "lamport": t}`` once the node has it
in its durable log. Requests are retried every ``retry_s`` (the node dedups by content hash);
the runner's op timeout turns silence into ``info``. A node's explicit refusal is ``fail``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from harness.spec import DefiniteFailure, NodeAddr

Op = dict[str, Any]


class _Proto(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            reply = json.loads(data)
            fut = self.waiting.get(reply.get("req"))
        except (ValueError, AttributeError):
            return
        if fut is not None and not fut.done():
            fut.set_result(reply)

    def error_received(self, exc: Exception) -> None:
        pass


class SdsClient:
    def __init__(self, addr: NodeAddr, process: int, retry_s: float = 0.5) -> None:
        self.node: str | None = addr.node
        self.addr = (addr.host, addr.port)
        self.retry_s = retry_s
        self._ids = itertools.count(process * 1_000_000)
        self._transport: asyncio.DatagramTransport | None = None
        self._proto = _Proto()

    async def _open(self) -> asyncio.DatagramTransport:
        if self._transport is None:
            loop = asyncio.get_running_loop()
            self._transport, _ = await loop.create_datagram_endpoint(
                lambda: self._proto, remote_addr=self.addr)
        return self._transport

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        t = await self._open()
        req = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._proto.waiting[req] = fut
        data = json.dumps({**body, "req": req}).encode()
        try:
            while True:
                t.sendto(data)
                try:
                    return await asyncio.wait_for(asyncio.shield(fut), self.retry_s)
                except TimeoutError:
                    continue
        finally:
            self._proto.waiting.pop(req, None)

    async def invoke(self, op: Op) -> Op:
        if op["f"] not in ("send", "ephemeral"):
            raise DefiniteFailure(f"unknown op {op['f']!r}")
        reply = await self.request({"op": op["f"], "payload": op["value"]})
        if not reply.get("ok"):
            raise DefiniteFailure(str(reply.get("error")))
        if op["f"] == "send":
            return {"type": "ok", "value": {"v": op["value"], "id": reply.get("id"),
                                            "lamport": reply.get("lamport")}}
        return {"type": "ok", "value": op["value"]}

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
