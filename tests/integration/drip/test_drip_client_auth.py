"""Issue 26 "optional authentication on the client API": with ``client_token_file`` set, a
node's /client/update and /client/read answer 401 (counted ``client-unauthorized``) unless the
request carries ``Authorization: Bearer <token>``; the library client sends it. Real node
processes over real sockets; off by default (every other DRiP test runs without it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

from nodes.drip.client import DripClient, DripRefused


def test_the_client_api_asks_for_its_bearer_token_when_one_is_configured(tmp_path: Path
                                                                        ) -> None:
    token_file = tmp_path / "client-token"
    token_file.write_text("s3cret-token\n")
    m = Mesh(tmp_path / "m", 3, options={"client_token_file": str(token_file)})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            body = {"id": "u1", "key": "k", "value": 1}
            for headers in ({}, {"Authorization": "Bearer wrong"},
                            {"Authorization": "s3cret-token"}):
                async with s.post(m.client("n1") + "/client/update", json=body,
                                  headers=headers) as r:
                    assert r.status == 401, (headers, r.status)
                    assert r.headers["WWW-Authenticate"] == "Bearer"
                async with s.get(m.client("n1") + "/client/read", params={"key": "k"},
                                 headers=headers) as r:
                    assert r.status == 401, (headers, r.status)
            assert (await m.state(s, "n1"))["refused"]["client-unauthorized"] == 6
            assert (await m.state(s, "n1"))["kv"] == {}  # nothing was initiated
        c = DripClient("127.0.0.1", m.ports["n1"]["client"], token="s3cret-token")
        try:
            await c.update("k", 1, "u1")
            assert await c.read("k") == (1, 1)
        finally:
            await c.close()
        bad = DripClient("127.0.0.1", m.ports["n1"]["client"])
        try:
            try:
                await bad.read("k")
                raise AssertionError("read without the token answered")
            except DripRefused as e:
                assert "401" in str(e)
        finally:
            await bad.close()

    try:
        asyncio.run(go())
    finally:
        m.close()
