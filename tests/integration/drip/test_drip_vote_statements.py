"""A relay cannot invent a yes: a real n1 asks its only peer for votes, and that peer (this
test, holding n2's certificate and key) answers for itself and for n3 behind it. n3's yes counts
only with n3's own signed statement about this very vote.

Line n1 - n2 - n3 in public-key mode; only n1 runs. The test serves n2's peer port over TLS
with n2's certificate, keeps n1 active by answering its heartbeats, and answers its /voting
with a vote response signed by n2.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from drip_mesh import Mesh

from nodes.drip import codec
from nodes.drip.auth import Signer, load_auth
from nodes.drip.material import NodeFiles, client_context, server_context


def _files(m: Mesh, n: str) -> NodeFiles:
    t = m.extra[n]["tls"]
    return NodeFiles(Path(t["ca"]), Path(t["cert"]), Path(t["key"]))


def _n3_says(signer3: Signer, uid: str, counter: int) -> str:
    return signer3.token(time.time(), codec.vote_digest(uid, "n1", counter))


CASES = {
    "n3-signed-this-vote": (lambda s2, s3, uid, c: s3 and _n3_says(s3, uid, c), True),
    "no-statement": (lambda s2, s3, uid, c: None, False),
    "relay-signed-as-n3": (lambda s2, s3, uid, c: Signer("n3", "public", s2.key).token(
        time.time(), codec.vote_digest(uid, "n1", c)), False),
    "n3-signed-another-vote": (lambda s2, s3, uid, c: _n3_says(s3, "other", c), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_relayed_yes_counts_only_with_the_voters_own_statement(tmp_path: Path,
                                                                   case: str) -> None:
    statement, commits = CASES[case]
    m = Mesh(tmp_path, 3, [("n1", "n2"), ("n2", "n3")], options={"jwt_mode": "public"})
    signer2, _ = load_auth("n2", m.extra["n2"]["jwt"])
    signer3, _ = load_auth("n3", m.extra["n3"]["jwt"])
    n1_url = f"https://127.0.0.1:{m.ports['n1']['peer']}"
    ctx = client_context(_files(m, "n2"))
    ctx.check_hostname = False

    async def answer_vote(vote: codec.Voting) -> None:
        uid = vote.update.uid
        st = statement(signer2, signer3, uid, vote.counter)
        resp = codec.VoteResponse("n2", True, "n1", vote.counter, uid, ("n2", "n3"), (), 0,
                                  statements=(("n3", st),) if st else ())
        req = codec.encode(resp)
        h = {**req.headers, "Content-Type": "application/json",
             codec.H_AUTH: signer2.header(time.time(), codec.signed_digest(resp), once=True)}
        async with aiohttp.ClientSession() as s, s.post(
                n1_url + req.path, headers=h, data=req.body_bytes(), ssl=ctx) as r:
            assert r.status == 200, await r.text()

    tasks: set[asyncio.Task[Any]] = set()

    async def fake_n2(req: web.Request) -> web.Response:
        body = await req.read()
        msg = codec.decode(req.method, req.path, req.headers, body, req.headers.get("Authorization"))
        if isinstance(msg, codec.Voting):
            tasks.add(asyncio.ensure_future(answer_vote(msg)))
        return web.json_response({"state": "active", "ok": True})

    async def go() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake_n2)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", m.ports["n2"]["peer"],
                           ssl_context=server_context(_files(m, "n2")))
        await site.start()
        try:
            m.start_node("n1")
            await m.wait_healthy("n1")
            async with aiohttp.ClientSession() as s:
                await m.wait_all_active(s, nodes=["n1"])
                status, body = await m.update(s, "n1", "k", 1, "u1")
                if commits:
                    assert status == 200 and body["result"] == "committed", body
                else:
                    assert status == 409 and "no vote from ['n3']" in body["error"], body
                    refused = (await m.state(s, "n1"))["refused"]
                    assert refused.get("unproven-vote") == 1, refused
        finally:
            await runner.cleanup()
            await asyncio.gather(*tasks, return_exceptions=True)
    try:
        asyncio.run(go())
    finally:
        m.close()


def test_a_reply_nested_100000_deep_is_refused_and_the_node_goes_on(tmp_path: Path) -> None:
    """Issue 26 item 8: such a reply raised RecursionError out of n1's request task (only
    ValueError was caught), so the core never heard how the send ended. Now it is a refused
    reply (``malformed-reply``), the send counts as answered without a body, and n1's
    heartbeats go on: it sees n2 reachable again once n2 answers sanely."""
    m = Mesh(tmp_path, 2, [("n1", "n2")], options={"jwt_mode": "public"})
    deep = b"[" * 100_000 + b"]" * 100_000
    hostile = {"on": True}

    async def fake_n2(req: web.Request) -> web.Response:
        await req.read()
        if hostile["on"]:
            return web.Response(body=deep, content_type="application/json")
        return web.json_response({"state": "active", "ok": True})

    async def go() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake_n2)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", m.ports["n2"]["peer"],
                          ssl_context=server_context(_files(m, "n2"))).start()
        try:
            m.start_node("n1")
            await m.wait_healthy("n1")
            async with aiohttp.ClientSession() as s:
                async def refused() -> dict[str, int]:
                    return (await m.state(s, "n1"))["refused"]

                deadline = time.monotonic() + 10
                while (await refused()).get("malformed-reply", 0) < 3:
                    assert time.monotonic() < deadline, await refused()
                    await asyncio.sleep(0.2)
                hostile["on"] = False  # n1's heartbeats go on: it sees n2 answer again
                while not (await m.state(s, "n1"))["peers"]["n2"]["reachable"]:
                    assert time.monotonic() < deadline + 10, await m.state(s, "n1")
                    await asyncio.sleep(0.2)
            assert "RecursionError" not in m.log("n1")
        finally:
            await runner.cleanup()
    try:
        asyncio.run(go())
    finally:
        m.close()
