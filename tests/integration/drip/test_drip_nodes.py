"""Real DRiP processes over TLS on loopback (peers wired directly, no proxy)."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from drip_mesh import Mesh

from nodes.drip import codec
from nodes.drip.auth import load_auth
from nodes.drip.codec import Commit, Update
from nodes.drip.hostile import Creds, signed
from nodes.drip.material import NodeFiles, client_context, issue_node_cert
from nodes.drip.topology import figure1
from tests.waiting import eventually

IDS5 = [f"n{i}" for i in range(1, 6)]


@pytest.fixture
def mesh_factory(tmp_path: Path):
    made: list[Mesh] = []

    def make(n: int = 5, edges=None, **kw: Any) -> Mesh:
        m = Mesh(tmp_path / f"m{len(made)}", n, edges, **kw)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("jwt_mode", ["shared", "public"])
def test_updates_commit_across_figure1_and_conflicts_abort(mesh_factory, jwt_mode: str) -> None:
    m = mesh_factory(5, figure1(IDS5), options={"jwt_mode": jwt_mode})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            status, body = await m.update(s, "n1", "+15551234", {"route": "a"}, "u1")
            assert status == 200 and body["result"] == "committed", body

            async def everywhere() -> bool:
                got = [(await m.read(s, n, "+15551234"))["value"] for n in IDS5]
                return all(v == {"route": "a"} for v in got)

            assert await eventually(everywhere, 10)
            # concurrent updates of one key: never both committed
            res = await asyncio.gather(m.update(s, "n1", "x", 1, "c1"), m.update(s, "n5", "x", 2, "c2"))
            assert not all(st == 200 for st, _ in res), res
    run(go())


def _ssl_for(m: Mesh, name: str) -> ssl.SSLContext:
    files = issue_node_cert(m.root / "tls", name) if name not in m.ids else NodeFiles(
        Path(m.extra[name]["tls"]["ca"]), Path(m.extra[name]["tls"]["cert"]),
        Path(m.extra[name]["tls"]["key"]))
    ctx = client_context(files)
    ctx.check_hostname = False
    return ctx


@pytest.mark.parametrize("jwt_mode", ["public", "shared"])
def test_bad_requests_get_clear_errors_and_change_nothing(mesh_factory, jwt_mode: str) -> None:
    m = mesh_factory(3, [("n1", "n2"), ("n2", "n3")], options={"jwt_mode": jwt_mode})
    signer, _ = load_auth("n1", m.extra["n1"]["jwt"])
    signer3, _ = load_auth("n3", m.extra["n3"]["jwt"])
    now = time.time()
    vote = codec.Voting("n1", 99, False, codec.Update("bad1", "k", 1))
    good = codec.encode(vote)
    body = good.body_bytes()
    digest = codec.signed_digest(vote)
    other_body = codec.encode(codec.Voting("n1", 99, False, codec.Update("bad1", "k", 2)))
    heartbeat = codec.encode(codec.Heartbeat("n1", "active", ("n1", "n2", "n3")))
    hb_token = signer.header(now, codec.signed_digest(codec.Heartbeat(
        "n1", "active", ("n1", "n2", "n3"))), once=True)
    cross = signer3.header(now, digest)  # n3's own token, for a request n1 initiates

    def headers(**over: Any) -> dict[str, str]:
        h = {**good.headers, codec.H_AUTH: signer.header(now, digest),
             "Content-Type": "application/json"}
        for k, v in over.items():
            k = {"node": codec.H_NODE, "counter": codec.H_COUNTER, "reset": codec.H_RESET,
                 "auth": codec.H_AUTH, "ttype": codec.H_TTYPE, "budget": codec.H_BUDGET}[k]
            if v is None:
                h.pop(k, None)
            else:
                h[k] = v
        return h

    forged = jwt.encode({"iss": "n1", "iat": int(now), "exp": int(now) + 60},
                        "x" * 40, algorithm="HS256")
    cases: list[tuple[str, str, dict[str, str], bytes, int, str]] = [
        ("n1", "/voting", headers(auth=None), body, 401, "missing Authorization"),
        ("n1", "/voting", headers(auth=signer.header(now - 7200, digest)), body, 401,
         "expired"),
        # re-targeted: n1's token for this vote, on another body, path or counter
        ("n1", "/voting", headers(), other_body.body_bytes(), 401, "signs another request"),
        ("n1", "/commit", headers(), body, 400, "body.version"),
        ("n1", "/commit", headers(), b'{"id":"bad1","key":"k","value":1,"version":1}', 401,
         "signs another request"),
        ("n1", "/voting", headers(counter="100"), body, 401, "signs another request"),
        # cross-issuer: n3's token presented for n1, or as n1
        ("n1", "/voting", headers(auth=cross), body, 401, "does not match DRiP-Node-ID"),
        ("n1", "/voting", headers(auth=cross, node="n3"), body, 401, "signs another request"),
        ("n1", "/voting", headers(auth="Bearer " + forged), body, 401, "token rejected"),
        ("n1", "/voting", headers(auth=jwt.encode({"iss": "n1", "iat": int(now)}, None,
                                                   algorithm="none")), body, 401, "token"),
        ("n1", "/voting", headers(node="n3"), body, 401, "does not match DRiP-Node-ID"),
        ("n1", "/voting", headers(counter="-5"), body, 400, "unsigned"),
        ("n1", "/voting", headers(counter="18446744073709551616"), body, 400, "64-bit"),
        ("n1", "/voting", headers(reset="maybe"), body, 400, "true or false"),
        ("n1", "/voting", headers(ttype="bulk"), body, 400, "DRiP-Transaction-Type"),
        ("n1", "/voting", headers(), b"{oops", 400, "not valid JSON"),
        ("n1", "/voting", headers(), b'{"id": "x"}', 400, "body.key"),
        # bounded numbers and sizes (issue 26): each a 400 with its reason, never a 500
        ("n1", "/commit", headers(), b'{"id":"bad1","key":"k","value":1,"version":%d}'
         % (2**63 - 1), 400, "exceeds the maximum"),
        ("n1", "/commit", headers(), b'{"id":"bad1","key":"k","value":1,"version":%d}'
         % 2**64, 400, "exceeds the maximum"),
        ("n1", "/voting", headers(budget="\u00b2"), body, 400, "ASCII digits"),
        ("n1", "/voting", headers(budget="999999999"), body, 400, "vote timeout"),
        ("n1", "/voting", headers(reset="true"), body, 400, "wrap-around"),
        ("n1", "/voting", headers(), b"[" * 100_000 + b"]" * 100_000, 400, "nested deeper"),
        ("n1", "/voting", headers(), b"[" * 40 + b"]" * 40, 400, "nested deeper"),
        ("n1", "/voting", headers(), b'{"id":"s","key":"\\ud800","value":1}', 400,
         "lone surrogate"),
        ("n1", "/voting", headers(), b'{"id":"s","key":"k","value":"%s"}' % (b"x" * 2**20),
         400, "maximum value size"),
        ("n1", "/heartbeat/node/n1", headers(), json.dumps(
            {"members": [f"g{i}" for i in range(300)]}).encode(), 400, "more than the maximum"),
    ]
    not_peers = [("n3", headers()), ("intruder", headers())]  # to n1, whose only peer is n2

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            url = f"https://127.0.0.1:{m.ports['n2']['peer']}"  # n1 is a peer of n2
            for who, path, h, b, status, text in cases:
                async with s.post(url + path, headers=h, data=b, ssl=_ssl_for(m, who)) as r:
                    got = await r.json()
                    assert r.status == status and text in got["error"], (who, h, r.status, got)
            url1 = f"https://127.0.0.1:{m.ports['n1']['peer']}"
            for who, h in not_peers:
                async with s.post(url1 + "/voting", headers=h, data=body,
                                  ssl=_ssl_for(m, who)) as r:
                    got = await r.json()
                    assert r.status == 403 and "is not a peer of n1" in got["error"], got
            plain = ssl.create_default_context(cafile=m.extra["n1"]["tls"]["ca"])
            plain.check_hostname = False
            with pytest.raises(aiohttp.ClientError):  # no client certificate: no handshake
                async with s.post(url + "/voting", headers=headers(), data=body, ssl=plain) as r:
                    await r.read()
            # a lone surrogate on the client port is refused before any waiter is made, so
            # the same update id, well formed, still commits (it answered 409 forever)
            bad = b'{"id":"sur1","key":"\\udc80","value":1}'
            async with s.post(m.client("n1") + "/client/update", data=bad) as r:
                assert r.status == 400 and "surrogate" in (await r.json())["error"]
            for n in m.ids:
                st = await m.state(s, n)
                assert st["kv"] == {} and st["locks"] == {}, (n, st)
                async with s.get(m.admin(n) + "/admin/events?since=0") as r:
                    evs = (await r.json())["events"]
                assert not [e for e in evs if e["type"] in ("vote", "apply")], (n, evs)
            # the same request, well formed and from a real peer, is accepted
            async with s.post(url + "/voting", headers=headers(), data=body,
                              ssl=_ssl_for(m, "n1")) as r:
                assert r.status == 200, await r.text()
            # a token made on the sender's own behalf is taken once: its replay is refused
            hb = {**heartbeat.headers, codec.H_AUTH: hb_token}
            for status in (200, 401):
                async with s.post(url + heartbeat.path, headers=hb, data=heartbeat.body_bytes(),
                                  ssl=_ssl_for(m, "n1")) as r:
                    assert r.status == status, await r.text()
            refused = (await m.state(s, "n2"))["refused"]
            assert refused.get("replayed") == 1 and refused.get("retargeted") == 4, refused
            assert refused.get("bad-token", 0) >= 6 and refused.get("malformed", 0) >= 6
            async with s.get(m.admin("n2") + "/admin/events?since=0") as r:
                kinds = {e["reason"] for e in (await r.json())["events"]
                         if e["type"] == "refused"}
            assert {"replayed", "retargeted", "bad-token", "malformed"} <= kinds, kinds
            status, got = await m.update(s, "n1", "sk", 1, "sur1")  # the refused id is free
            assert status == 200, got
    run(go())


def test_slow_heads_and_excess_connections_are_closed_on_both_ports(mesh_factory) -> None:
    """Issue 26 item 9: partial requests stayed open forever and nothing bounded their number.
    Now a head must arrive within head_timeout_s and a port holds at most max_conns."""
    m = mesh_factory(2, [("n1", "n2")], options={"head_timeout_s": 1.0, "max_conns": 4})
    partial = b"POST /client/update HTTP/1.1\r\nHost: x\r\n"

    async def closed(r: asyncio.StreamReader, within: float) -> bool:
        try:
            return await asyncio.wait_for(r.read(), within) == b""
        except (ConnectionError, ssl.SSLError):
            return True

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            port = m.ports["n1"]["client"]
            conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
            for _, w in conns:
                w.write(partial)
            assert await closed(conns[4][0], 1.0)  # over the limit: closed at once
            t0 = time.monotonic()
            for r, _ in conns[:4]:
                assert await closed(r, 5.0)
            assert time.monotonic() - t0 < 3.0
            # the peer port: a real peer's TLS connection with a slow head is closed too
            r, w = await asyncio.open_connection("127.0.0.1", m.ports["n1"]["peer"],
                                                 ssl=_ssl_for(m, "n2"))
            conns.append((r, w))
            w.write(partial)
            assert await closed(r, 3.0)
            for _, w in conns:
                w.close()
            status, got = await m.update(s, "n1", "k", 1, "c1")  # the ports serve again
            assert status == 200, got
            refused = (await m.state(s, "n1"))["refused"]
            assert refused.get("too-many-connections", 0) >= 1, refused
            assert refused.get("head-timeout", 0) >= 5, refused
    run(go())


def test_a_source_whose_requests_are_refused_is_reset_before_tls(mesh_factory) -> None:
    """Issue 26: each hostile request opened a new TLS connection, and the handshake was most
    of what it cost. A source whose requests the gate refuses spends its connection bucket;
    with none left its connections are reset before any handshake, while the peers (another
    source, refused nothing) keep committing."""
    m = mesh_factory(2, [("n1", "n2")], options={"conn_rate": 0.2, "conn_burst": 3})
    bad = (b"POST /voting HTTP/1.1\r\nHost: x\r\nDRiP-Node-ID: not an id\r\n"
           b"Content-Length: 0\r\nConnection: close\r\n\r\n")

    async def one(ctx: ssl.SSLContext) -> bytes:
        r, w = await asyncio.open_connection("127.0.0.1", m.ports["n1"]["peer"], ssl=ctx,
                                             local_addr=("127.0.0.2", 0))
        try:
            w.write(bad)
            return await asyncio.wait_for(r.readline(), 5.0)
        finally:
            w.close()

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            ctx = _ssl_for(m, "n2")  # a member's certificate: the gate refuses, not TLS
            for _ in range(3):
                assert b" 400 " in await one(ctx)
            with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                await one(ctx)
            status, got = await m.update(s, "n1", "k", 1, "u1")  # the peers: unaffected
            assert status == 200, got
            refused = (await m.state(s, "n1"))["refused"]
            assert refused.get("connection-rate") == 1 and refused["malformed"] == 3, refused
    run(go())


def test_a_source_whose_signed_requests_the_core_refuses_is_reset_before_tls(
        mesh_factory) -> None:
    """Session 43: a validly signed /commit with no vote passes the gate and is refused by
    the core (409 ``commit-without-vote``). Admitted free, such requests kept a key
    holder's flood connecting (a TLS handshake each); now the core's 4xx spends the source's
    bucket as a gate refusal does (``charge_core_refusals``)."""
    m = mesh_factory(2, [("n1", "n2")], options={"conn_rate": 0.2, "conn_burst": 3})

    async def one(ctx: ssl.SSLContext, raw: bytes) -> bytes:
        r, w = await asyncio.open_connection("127.0.0.1", m.ports["n1"]["peer"], ssl=ctx,
                                             local_addr=("127.0.0.2", 0))
        try:
            w.write(raw)
            return await asyncio.wait_for(r.readline(), 5.0)
        finally:
            w.close()

    async def go() -> None:
        await m.start()
        n2 = json.loads(m.configs["n2"].read_text())
        signer = Creds.load("n2", n2["tls"], n2["jwt"]).signer
        ctx = _ssl_for(m, "n2")
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for i in range(3):
                raw = signed(Commit("n2", 100_000 + i, False, Update(f"x{i}", "k", 1), 1),
                             signer)
                assert b" 409 " in await one(ctx, raw)
            raw = signed(Commit("n2", 100_010, False, Update("x9", "k", 1), 1), signer)
            with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                await one(ctx, raw)
            status, got = await m.update(s, "n1", "k", 1, "u1")  # the peers: unaffected
            assert status == 200, got
            refused = (await m.state(s, "n1"))["refused"]
            assert refused.get("connection-rate") == 1, refused
            assert refused.get("commit-without-vote") == 3, refused
    run(go())


def test_kill_9_keeps_committed_data_and_the_node_syncs_back(mesh_factory) -> None:
    m = mesh_factory(3, [("n1", "n2"), ("n2", "n3"), ("n1", "n3")])

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for i in range(5):
                st, body = await m.update(s, f"n{1 + i % 3}", f"k{i}", i, f"u{i}")
                assert st == 200, body
            await asyncio.sleep(0.5)
            m.kill("n3")
            st, body = await m.update(s, "n1", "k9", 9, "u9")
            assert st == 409 and "n3" in body["error"], body  # a member is down: abort, not split
            m.start_node("n3")
            await m.wait_healthy("n3")
            await m.wait_all_active(s)
            for i in range(5):
                assert (await m.read(s, "n3", f"k{i}"))["value"] == i
            async with s.get(m.admin("n3") + "/admin/events?since=0") as r:
                types = [e["type"] for e in (await r.json())["events"]]
            assert "sync-done" in types[types.index("start", 1):]
            await asyncio.sleep(3.5)  # the aborted u9's vote locks expire (lock_ttl_s 3)
            st, body = await m.update(s, "n3", "k9", 10, "u10")
            assert st == 200, body
    run(go())
