"""A client library for a DRiP node's client endpoint (ours, not the spec's).

Plain HTTP on ``ports.client``: ``POST /client/update`` makes the node initiate an update and
answers with its outcome; ``GET /client/read?key=`` reads the node's local store. Errors are
this module's own: :class:`DripRefused` when the update certainly never commits (the node
aborted it or refused to initiate it), :class:`DripUnsure` when it may have (a 5xx other than
503). Timeouts and lost connections are aiohttp's and mean "maybe". History shapes and how the
harness records each outcome: docs/drip.md.
"""

from __future__ import annotations

from typing import Any

import aiohttp


class DripRefused(Exception):
    """The node answered that the update did not and will not commit (or the read failed)."""


class DripUnsure(Exception):
    """The node answered, but whether the update commits is not known."""


#: the statuses with which the node says an update certainly never commits
REFUSED = (400, 409, 503)


class DripClient:
    """One connection to one node's client endpoint, ``http://host:port``."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0,
                 token: str | None = None) -> None:
        self.base = f"http://{host}:{port}"
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            headers={"Authorization": f"Bearer {token}"} if token else None)

    async def update(self, key: str, value: Any, uid: str) -> None:
        """Initiate update ``uid`` (key := value) and wait for its outcome: returns once it
        committed."""
        async with self.session.post(self.base + "/client/update",
                                     json={"id": uid, "key": key, "value": value}) as r:
            body = await r.json(content_type=None)
        if r.status == 200:
            return
        if r.status in REFUSED:
            raise DripRefused(f"{body.get('result', r.status)}: {body.get('error')}")
        raise DripUnsure(f"HTTP {r.status}: {body}")

    async def read(self, key: str) -> tuple[Any, int]:
        """The node's local (value, version) of ``key``."""
        async with self.session.get(self.base + "/client/read", params={"key": key}) as r:
            body = await r.json(content_type=None)
        if r.status != 200:
            raise DripRefused(f"read failed: HTTP {r.status}: {body}")
        return body["value"], body["version"]

    async def close(self) -> None:
        await self.session.close()
