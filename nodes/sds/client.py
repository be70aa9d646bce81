"""A client library for an SDS node: JSON over UDP to ``ports.client``.

``send("c3:17:9f2a")`` asks the node to broadcast that payload and returns
``{"id": message id, "lamport": t}`` once the node has it in its durable log; ``ephemeral``
broadcasts without keeping it. Requests are retried every ``retry_s`` until the node answers
(it answers a retry of the same request id from the same address with the first
answer; a retry after a node restart may make a second entry): bound the wait with a timeout of your own. A node's explicit
refusal raises :class:`SdsRefused`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any


class SdsRefused(Exception):
    """The node answered that it will not broadcast the payload."""


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
    """One UDP endpoint talking to one node; ``process`` keeps request ids of concurrent
    clients apart."""

    def __init__(self, host: str, port: int, process: int = 0, retry_s: float = 0.5) -> None:
        self.addr = (host, port)
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

    async def send(self, payload: str) -> dict[str, Any]:
        """Broadcast ``payload`` durably: its ``{"id", "lamport"}``."""
        reply = await self._ok({"op": "send", "payload": payload})
        return {"id": reply.get("id"), "lamport": reply.get("lamport")}

    async def ephemeral(self, payload: str) -> None:
        """Broadcast ``payload`` without keeping it (best effort, no repair)."""
        await self._ok({"op": "ephemeral", "payload": payload})

    async def _ok(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = await self.request(body)
        if not reply.get("ok"):
            raise SdsRefused(str(reply.get("error")))
        return reply

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
