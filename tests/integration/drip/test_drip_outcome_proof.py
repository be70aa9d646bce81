"""A hostile peer's "aborted" does not release a lock (docs/drip.md "An `aborted` answer
carries the initiator's signature"), nor does a proof of an earlier attempt of the same id.

Only n1 runs (public-key mode, mutual TLS). The test serves n2's and n3's peer ports with
their certificates and keys. As n2 it starts update u1 on k at n1 (voting round 1) and then
says nothing of its outcome; as n3, a relay, it passes on n2's /abort token of that round
(counter 2), and n1 releases k. n2 then retries u1 (round 3), and n1 is killed and restarted
holding that lock (its round read back from the store); n3, now compromised, answers
n1's ``/outcome`` with ``aborted`` without proof, with its own statement, with n2's
statement about another update, and replays round 1's abort token and n2's statement of
round 1. n1 keeps k through several TTLs, counting each as ``unproven-outcome``; when n2
answers with its own signed statement of round 3, n1 releases k.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from drip_mesh import Mesh

from nodes.drip import abort_proof, codec
from nodes.drip.auth import load_auth
from nodes.drip.material import NodeFiles, client_context, server_context


def _files(m: Mesh, n: str) -> NodeFiles:
    t = m.extra[n]["tls"]
    return NodeFiles(Path(t["ca"]), Path(t["cert"]), Path(t["key"]))


def test_a_peers_unproven_aborted_keeps_the_lock_and_the_initiators_releases_it(
        tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, [("n1", "n2"), ("n1", "n3")],
             options={"jwt_mode": "public", "vote_timeout_s": 0.2, "lock_ttl_s": 0.3})
    signer2, _ = load_auth("n2", m.extra["n2"]["jwt"])
    signer3, _ = load_auth("n3", m.extra["n3"]["jwt"])
    n2_proves = {"on": False}
    asked: dict[str, int] = {"n2": 0, "n3": 0}
    rounds: set[int | None] = set()  # the rounds n1 named in each phase
    phase = {"round": 1}
    abort1 = codec.Abort("n2", 2, False, "u1", "k")  # n2's abort of round 1, at counter 2
    relayed = {"token": signer2.header(time.time(), codec.signed_digest(abort1)),
               "abort": {"counter": 2, "reset": False, "key": "k"}}
    lies = itertools.cycle([
        lambda: {"outcome": "aborted"},
        lambda: {"outcome": "aborted", "proof": {"token": signer3.token(
            time.time(), abort_proof.outcome_digest("u1", "n2", 3))}},
        lambda: {"outcome": "aborted", "proof": {"token": signer2.token(
            time.time(), abort_proof.outcome_digest("u0", "n2", 3))}},
        lambda: {"outcome": "aborted", "proof": relayed},  # round 1's, replayed
        lambda: {"outcome": "aborted", "proof": {"token": signer2.token(
            time.time(), abort_proof.outcome_digest("u1", "n2", 1))}},
    ])

    def fake(me: str) -> Any:
        async def handle(req: web.Request) -> web.Response:
            body = await req.read()
            if req.path != "/outcome":
                return web.json_response({"state": "active", "ok": True})
            q = codec.decode(req.method, req.path, req.headers, body)
            assert isinstance(q, codec.OutcomeQuery) and (q.uid, q.initiator) == ("u1", "n2")
            rounds.add(q.counter)
            if phase["round"] == 1:
                if me == "n3":  # a relay that took n2's abort passes its token on
                    return web.json_response({"outcome": "aborted", "proof": relayed})
                return web.json_response({"outcome": "undecided"})
            asked[me] += 1
            if me == "n3":
                return web.json_response(next(lies)())
            if not n2_proves["on"]:
                return web.json_response({"outcome": "undecided"})
            return web.json_response(abort_proof.sign({"outcome": "aborted"}, q, "n2", signer2,
                                                      time.time()))
        return handle

    def events(kind: str) -> list[dict[str, Any]]:
        path = m.root / "n1" / "data" / "events.jsonl"
        return [e for e in (json.loads(x) for x in path.read_text().splitlines() if x)
                if e["type"] == kind and e.get("uid") == "u1"]

    async def go() -> None:
        runners = []
        for n in ("n2", "n3"):
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", fake(n))
            r = web.AppRunner(app)
            await r.setup()
            await web.TCPSite(r, "127.0.0.1", m.ports[n]["peer"],
                              ssl_context=server_context(_files(m, n))).start()
            runners.append(r)
        try:
            m.start_node("n1")
            await m.wait_healthy("n1")
            async with aiohttp.ClientSession() as s:
                await m.wait_all_active(s, nodes=["n1"])
                ctx = client_context(_files(m, "n2"))
                ctx.check_hostname = False

                async def vote(counter: int) -> None:
                    v = codec.Voting("n2", counter, False, codec.Update("u1", "k", 1),
                                     budget_ms=200)
                    req = codec.encode(v)
                    h = {**req.headers, "Content-Type": "application/json",
                         codec.H_AUTH: signer2.header(time.time(), codec.signed_digest(v))}
                    async with s.post(f"https://127.0.0.1:{m.ports['n1']['peer']}{req.path}",
                                      headers=h, data=req.body_bytes(), ssl=ctx) as r:
                        assert r.status == 200, await r.text()

                deadline = time.monotonic() + 30
                await vote(1)
                while not events("release"):  # round 1: n3 relays n2's abort token
                    assert time.monotonic() < deadline, rounds
                    await asyncio.sleep(0.05)
                (rel,) = events("release")
                assert rel["why"] == "aborted (asked n3 after the lock TTL)", rel
                assert rounds == {1}, rounds
                phase["round"], rounds_1 = 3, set(rounds)
                rounds.clear()
                await vote(3)  # the client's retry of u1: round 3 locks k again
                status, body = await m.update(s, "n1", "k", 2, "mine")
                assert status == 409 and "in progress (u1)" in body["error"], body
                # n1 restarts holding the retry's lock: it reads back its round from the store
                m.kill("n1")
                m.start_node("n1")
                await m.wait_healthy("n1")
                while asked["n3"] < 5:  # every lie once, through five TTLs
                    assert len(events("release")) == 1, (rounds, events("release"))
                    assert time.monotonic() < deadline, (asked, events("release"))
                    await asyncio.sleep(0.05)
                assert len(events("release")) == 1 and rounds == {3}, (rounds_1, rounds)
                assert (await m.state(s, "n1"))["refused"]["unproven-outcome"] >= 5
                n2_proves["on"] = True
                while len(events("release")) < 2:
                    assert time.monotonic() < deadline, asked
                    await asyncio.sleep(0.05)
                rel = events("release")[1]
                assert rel["why"] == "aborted (asked n2 after the lock TTL)", rel
        finally:
            for r in runners:
                await r.cleanup()
    try:
        asyncio.run(asyncio.wait_for(go(), 50))
    finally:
        m.close()
