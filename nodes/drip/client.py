"""What the harness (or a user) uses to drive a DRiP node through our client endpoint.

The client endpoint is ours, not the spec's: plain HTTP on ``ports.client`` (the harness's
client->node proxy sits in front of it). ``POST /client/update`` makes the node initiate an
update and answers with its outcome; ``GET /client/read?key=`` reads the node's local store.

History shapes (docs/drip.md): ``update`` value ``[key, value, uid]``: ok when committed, fail
when the node aborted it or refused to initiate it (both certain: it never commits), info on a
timeout or lost connection. ``read`` value ``[key, null]``: ok ``[key, value, version]``.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from harness.spec import DefiniteFailure, NodeAddr

Op = dict[str, Any]


class DripClient:
    """One harness process's connection to one node (implements harness.spec.Client)."""

    def __init__(self, addr: NodeAddr | None, process: int, timeout_s: float = 10.0) -> None:
        if addr is None:
            raise ValueError("the drip workload needs a cluster: no node address given")
        self.node: str | None = addr.node
        self.base = f"http://{addr.host}:{addr.port}"
        self.process = process
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s))

    async def invoke(self, op: Op) -> Op:
        f, value = op["f"], op.get("value")
        if f == "update":
            key, new, uid = value
            async with self.session.post(self.base + "/client/update",
                                         json={"id": uid, "key": key, "value": new}) as r:
                body = await r.json(content_type=None)
            if r.status == 200:
                return {"type": "ok", "value": value}
            if r.status in (400, 409, 503):
                raise DefiniteFailure(f"{body.get('result', r.status)}: {body.get('error')}")
            return {"type": "info", "value": value, "error": f"HTTP {r.status}: {body}"}
        if f == "read":
            key = value[0]
            async with self.session.get(self.base + "/client/read", params={"key": key}) as r:
                body = await r.json(content_type=None)
            if r.status != 200:
                raise DefiniteFailure(f"read failed: HTTP {r.status}: {body}")
            return {"type": "ok", "value": [key, body["value"], body["version"]]}
        raise DefiniteFailure(f"unknown op {f!r}: the drip client does update and read")

    async def close(self) -> None:
        await self.session.close()
