"""Each cURL example of the DRiP spec (sections 4.2-4.7), sent as written (headers and path,
no headers the example leaves out) to a real node over TLS with a real JWT.

The test speaks as n1 to n2 on the line n1 - n2 - n3, with n1's own process never started, so
nothing the test sends is contradicted by a real n1. Each example must be accepted (200) and
have its effect, seen in n2's state or journal.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from drip_mesh import Mesh

from nodes.drip import codec
from nodes.drip.auth import load_auth
from nodes.drip.material import NodeFiles, client_context
from tests.waiting import eventually


@pytest.fixture
def mesh(tmp_path: Path):
    m = Mesh(tmp_path, 3, [("n1", "n2"), ("n2", "n3")])
    yield m
    m.close()


def test_every_curl_example_of_the_spec_is_accepted(mesh: Mesh) -> None:
    m = mesh
    signer, _ = load_auth("n1", m.extra["n1"]["jwt"])
    tls = m.extra["n1"]["tls"]
    ctx = client_context(NodeFiles(Path(tls["ca"]), Path(tls["cert"]), Path(tls["key"])))
    ctx.check_hostname = False
    url = f"https://127.0.0.1:{m.ports['n2']['peer']}"

    def h(**extra: str) -> dict[str, str]:
        # the examples' headers: DRiP-Node-ID, plus what each one adds; send() signs
        return {codec.H_NODE: "n1", **extra}

    prop = {"Content-Type": "application/json", codec.H_COUNTER: "1234", codec.H_RESET: "false"}

    async def send(s: aiohttp.ClientSession, method: str, path: str, headers: dict[str, str],
                   data: bytes = b"") -> Any:
        msg = codec.decode(method, path, headers, data)  # the token signs this request
        headers = {**headers, codec.H_AUTH: signer.header(
            time.time(), codec.signed_digest(msg), once=not isinstance(msg, codec.FLOODED))}
        async with s.request(method, url + path, headers=headers, data=data, ssl=ctx) as r:
            body = await r.text()
            assert r.status == 200, (method, path, r.status, body)
            return body

    async def events(s: aiohttp.ClientSession, node: str, type_: str) -> list[dict[str, Any]]:
        async with s.get(m.admin(node) + "/admin/events?since=0") as r:
            return [e for e in (await r.json())["events"] if e["type"] == type_]

    async def go() -> None:
        for n in ("n2", "n3"):
            m.start_node(n)
        await asyncio.gather(m.wait_healthy("n2"), m.wait_healthy("n3"))
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s, nodes=["n2", "n3"])
            # 4.2.2 and 4.2.1: POST /node/nodeA/inactive, then active
            await send(s, "POST", "/node/n1/inactive", h())
            assert (await m.state(s, "n2"))["peers"]["n1"]["up"] is False
            await send(s, "POST", "/node/n1/active", h())
            assert (await m.state(s, "n2"))["peers"]["n1"]["up"] is True
            # 4.2.3: GET /state
            assert '"active"' in await send(s, "GET", "/state", h())
            # 4.7: POST /heartbeat/node/nodeA with a body
            await send(s, "POST", "/heartbeat/node/n1", h(),
                       b'{"state":"active","members":["n1","n2","n3"]}')
            # 4.5.1.1: POST /voting with no DRiP-Transaction-Type; n2 votes and asks n3
            await send(s, "POST", "/voting", h(**prop),
                       b'{"id":"spec-u1","key":"+15551234","value":{"route":"a"}}')
            async def both_voted() -> bool:  # n3 votes on n2's forward, after n2's answer
                return len([e for n in ("n2", "n3") for e in await events(s, n, "vote")
                            if e["uid"] == "spec-u1"]) >= 2

            await eventually(both_voted, 10)
            votes = [e for n in ("n2", "n3") for e in await events(s, n, "vote")
                     if e["uid"] == "spec-u1"]
            assert {e["vote"] for e in votes} == {"yes"} and len(votes) == 2, votes
            # 4.5.1.2: POST /node/nodeA/response/yes, no body: no open vote waits on n1 at n2,
            # so it is taken and ignored (journaled late-vote), never an error
            await send(s, "POST", "/node/n1/response/yes", h())
            late = await events(s, "n2", "late-vote")
            assert any(e["from"] == "n1" and e["uid"] is None for e in late), late
            # 4.5.2.1: POST /commit with no DRiP-Transaction-Type: applied on n2, passed to n3
            await send(s, "POST", "/commit", h(**{**prop, codec.H_COUNTER: "1235"}),
                       b'{"id":"spec-u1","key":"+15551234","value":{"route":"a"},"version":1}')

            async def everywhere() -> bool:
                got = [(await m.read(s, n, "+15551234")).get("value") for n in ("n2", "n3")]
                return got == [{"route": "a"}] * 2

            assert await eventually(everywhere, 10)
            # 4.6.1: POST /sync/node/nodeA (the heading says PUT; both are taken), from a node
            # that is syncing (4.6: a node in sync asks for it): a sync is served only to a
            # peer that said so or is owed one (issue 26: else 409 sync-not-needed)
            await send(s, "POST", "/heartbeat/node/n1", h(),
                       b'{"state":"sync","members":["n1","n2","n3"]}')
            await send(s, "POST", "/sync/node/n1", h())
            await asyncio.sleep(1.1)  # a new sync to one peer starts at most once a second
            await send(s, "PUT", "/sync/node/n1", h())
            for n in ("n2", "n3"):
                assert not await events(s, n, "node-error"), n
    asyncio.run(go())
