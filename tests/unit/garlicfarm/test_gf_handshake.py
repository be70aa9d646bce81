import asyncio

import pytest

from nodes.garlicfarm import codec
from nodes.garlicfarm.client import WireConnection, read_frame
from nodes.garlicfarm.codec import MsgType, Request, Response
from nodes.garlicfarm.handshake import (
    ClientHandshake,
    CredentialCache,
    HandshakeError,
    Outcome,
    ServerHandshake,
    parse_digest_params,
    parse_head,
)


def pair(password="farm", cache=None):
    return ServerHandshake(), ClientHandshake("127.0.0.1", 9001, password=password, cache=cache or CredentialCache())


def test_wrong_path_404():
    srv, _ = pair()
    resp, out = srv.respond(b"GET /GarlicFarm/other/1/websocket HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out == Outcome.NOT_FOUND and resp.startswith(b"HTTP/1.1 404 Not Found\r\n")
    resp, out = srv.respond(b"GET /GarlicFarm/farm/2/websocket HTTP/1.1\r\n\r\n")
    assert out == Outcome.NOT_FOUND


def test_request1_challenge_then_101():
    srv, cli = pair()
    r1 = cli.request1()
    assert r1.startswith(b"GET /GarlicFarm/farm/1/websocket HTTP/1.1\r\n") and b"Connection: close\r\n" in r1
    resp, out = srv.respond(r1)
    assert out == Outcome.CHALLENGE and resp.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
    h = parse_head(resp).headers["www-authenticate"]
    assert h.startswith("Digest ") and 'qop="auth"' in h and "nonce=" in h
    ch = cli.handle_response1(resp)
    r2 = cli.request2(ch)
    assert b"Upgrade: websocket\r\n" in r2 and b"Authorization: Digest " in r2
    resp, out = srv.respond(r2)
    assert out == Outcome.UPGRADE and resp.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert cli.handle_response2(resp)


def test_wrong_password_401_and_basic_refused():
    srv, cli = pair(password="wrong")
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    resp, out = srv.respond(cli.request2(ch))
    assert out == Outcome.CHALLENGE and resp.startswith(b"HTTP/1.1 401")
    assert not cli.handle_response2(resp)
    basic = (b"GET /GarlicFarm/farm/1/websocket HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
             b"Authorization: Basic ZmFybTpmYXJt\r\n\r\n")
    assert srv.respond(basic)[1] == Outcome.CHALLENGE


def test_cached_credentials_skip_request1_and_expire():
    cache = CredentialCache()
    srv, cli = pair(cache=cache)
    cli.handle_response1(srv.respond(cli.request1())[0])
    cli2 = ClientHandshake("127.0.0.1", 9001, cache=cache)  # a later connection
    ch = cli2.cached()
    assert ch is not None
    for _ in range(3):
        assert srv.respond(cli2.request2(ch))[1] == Outcome.UPGRADE
    assert cache.get("127.0.0.1:9001", now=ch.obtained + 3500) is not None  # kept >= ~1 h
    assert cache.get("127.0.0.1:9001", now=ch.obtained + 3601) is None
    # a restarted server (a new process secret) finds the nonce stale: nothing to replay
    assert not ServerHandshake().nonce_ok(ch.nonce)
    assert srv.nonce_ok(ch.nonce, now=ch.obtained + 3599)
    assert not srv.nonce_ok(ch.nonce, now=ch.obtained + 3601)  # the spec's 1 h cache period


def test_over_sockets_second_connection_goes_to_request2():
    asyncio.run(_sockets())


async def _sockets():
    srv = ServerHandshake()
    heads: list[bytes] = []

    async def handle(r, w):
        head = await r.readuntil(b"\r\n\r\n")
        heads.append(head)
        resp, out = srv.respond(head)
        w.write(resp)
        await w.drain()
        if out == Outcome.UPGRADE:
            req = await read_frame(r)
            w.write(codec.encode(Response(MsgType.APPEND_ENTRIES_RESPONSE, 9, 9, req.term, 1, True)))
            await w.drain()
        w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cache = CredentialCache()
    try:
        c1 = WireConnection("127.0.0.1", port, cache=cache)
        r = await c1.request(Request(MsgType.CLIENT_REQUEST, 0, 0, 5), 2)
        assert r.accepted and r.term == 5 and c1.used_request1 and len(heads) == 2
        c1.close()
        c2 = WireConnection("127.0.0.1", port, cache=cache)
        await c2.request(Request(MsgType.CLIENT_REQUEST, 0, 0, 6), 2)
        assert not c2.used_request1 and len(heads) == 3 and b"Authorization: Digest" in heads[2]
        c2.close()
    finally:
        server.close()
        await server.wait_closed()


def _authorized(srv, cli):
    """A valid request 2 (fresh nc) for ``srv``."""
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    return cli.request2(ch)


def _status(resp: bytes) -> int:
    return parse_head(resp).status


def test_replayed_request2_refused_and_fresh_count_still_works():
    srv, cli = pair()
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    r2 = cli.request2(ch)
    assert srv.respond(r2)[1] == Outcome.UPGRADE
    resp, out = srv.respond(r2)  # the same bytes again: same (nonce, nc)
    assert out == Outcome.CHALLENGE and _status(resp) == 401
    assert srv.respond(cli.request2(ch))[1] == Outcome.UPGRADE  # nc + 1 on the same nonce


def test_nc_counts_accepted_out_of_order_but_once():
    srv, cli = pair()
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    a, b = cli.request2(ch), cli.request2(ch)
    assert srv.respond(b)[1] == Outcome.UPGRADE and srv.respond(a)[1] == Outcome.UPGRADE
    assert srv.respond(a)[1] == Outcome.CHALLENGE and srv.respond(b)[1] == Outcome.CHALLENGE


def test_response_without_qop_refused():
    """RFC 2069 digest (no qop, nc, cnonce) when qop="auth" was offered: 401."""
    import hashlib

    srv, cli = pair()
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    md5 = lambda x: hashlib.md5(x.encode()).hexdigest()  # noqa: E731
    ha1, ha2 = md5(f"farm:{ch.realm}:farm"), md5(f"GET:{cli.path}")
    auth = (f'Digest username="farm", realm="{ch.realm}", nonce="{ch.nonce}", uri="{cli.path}", '
            f'response="{md5(f"{ha1}:{ch.nonce}:{ha2}")}"')
    head = (f"GET {cli.path} HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n"
            f"Authorization: {auth}\r\n\r\n").encode()
    resp, out = srv.respond(head)
    assert out == Outcome.CHALLENGE and _status(resp) == 401


@pytest.mark.parametrize("swap", [
    (b"Upgrade: websocket\r\n", b""),
    (b"Upgrade: websocket\r\n", b"Upgrade: h2c\r\n"),
    (b"Connection: keep-alive, Upgrade\r\n", b"Connection: keep-alive\r\n"),
    (b"Connection: keep-alive, Upgrade\r\n", b""),
])
def test_request2_upgrade_headers_checked_and_nothing_consumed(swap):
    srv, cli = pair()
    good = _authorized(srv, cli)
    bad = good.replace(*swap)
    assert bad != good
    resp, out = srv.respond(bad)
    assert out == Outcome.NOT_FOUND and _status(resp) == 400
    assert srv.respond(good)[1] == Outcome.UPGRADE  # the refused attempt used up nothing


def test_header_names_and_tokens_case_insensitive():
    srv, cli = pair()
    r2 = _authorized(srv, cli).replace(b"Connection: keep-alive, Upgrade", b"connection: Keep-Alive,upgrade")
    assert srv.respond(r2.replace(b"Upgrade: websocket", b"upgrade: WebSocket"))[1] == Outcome.UPGRADE


@pytest.mark.parametrize("field,value", [("nc", "1"), ("nc", "zzzzzzzz"), ("cnonce", ""),
                                         ("nonce", "")])
def test_malformed_digest_400_and_nothing_consumed(field, value):
    srv, cli = pair()
    good = _authorized(srv, cli)
    p = parse_digest_params(parse_head(good).headers["authorization"])
    old = f'{field}="{p[field]}"' if f'{field}="' in good.decode() else f"{field}={p[field]}"
    bad = good.replace(old.encode(), f'{field}="{value}"'.encode())
    assert bad != good
    resp, out = srv.respond(bad)
    assert _status(resp) == 400 and out == Outcome.NOT_FOUND
    assert srv.respond(good)[1] == Outcome.UPGRADE


def test_stale_nonce_after_cache_period_and_client_recovers():
    t = [1_000_000.0]
    srv = ServerHandshake(clock=lambda: t[0])
    cache = CredentialCache(clock=lambda: t[0])
    cli = ClientHandshake("127.0.0.1", 9001, cache=cache)
    ch = cli.handle_response1(srv.respond(cli.request1())[0])
    t[0] += 3601
    resp, out = srv.respond(cli.request2(ch))
    assert out == Outcome.CHALLENGE and b"stale=true" in resp
    assert not cli.handle_response2(resp)  # takes the fresh challenge
    assert srv.respond(cli.request2(cli.cached()))[1] == Outcome.UPGRADE


def test_used_counts_forgotten_with_their_nonce():
    t = [1_000_000.0]
    srv = ServerHandshake(clock=lambda: t[0])
    cli = ClientHandshake("127.0.0.1", 9001, cache=CredentialCache(clock=lambda: t[0]))
    assert srv.respond(_authorized(srv, cli))[1] == Outcome.UPGRADE
    t[0] += 3700
    cli.cache.drop(cli.server)
    assert srv.respond(_authorized(srv, cli))[1] == Outcome.UPGRADE
    assert len(srv._used) == 1  # the expired nonce's record is gone


def test_client_refuses_challenge_without_qop():
    _, cli = pair()
    resp = (b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm="GarlicFarm", '
            b'nonce="abc"\r\n\r\n')
    with pytest.raises(HandshakeError, match="qop"):
        cli.handle_response1(resp)


def test_nonces_unique_within_a_second():
    """Two clients challenged in the same second must not share (nonce, nc) space."""
    srv = ServerHandshake(clock=lambda: 1_000_000.0)
    a, b = (ClientHandshake("127.0.0.1", 9001, cache=CredentialCache()) for _ in range(2))
    cha = a.handle_response1(srv.respond(a.request1())[0])
    chb = b.handle_response1(srv.respond(b.request1())[0])
    assert cha.nonce != chb.nonce
    assert srv.respond(a.request2(cha))[1] == Outcome.UPGRADE
    assert srv.respond(b.request2(chb))[1] == Outcome.UPGRADE  # its nc=1 is its own


def test_the_replay_record_is_bounded_and_a_dropped_nonce_is_stale_not_replayable(monkeypatch):
    """Every handshake leaves its (nonce, count) behind for the nonce's hour: a flood of
    handshakes must not grow it for ever. The oldest nonce makes room by turning stale."""
    from nodes.garlicfarm import handshake

    monkeypatch.setattr(handshake, "MAX_LIVE_NONCES", 3)
    now = [1_800_000_000.0]
    srv = ServerHandshake(clock=lambda: now[0])
    sent = []
    for _ in range(5):
        now[0] += 1  # one nonce per second: each eviction retires exactly one
        cli = ClientHandshake("127.0.0.1", 9001, cache=CredentialCache())
        r2 = cli.request2(cli.handle_response1(srv.respond(cli.request1())[0]))
        assert srv.respond(r2)[1] == Outcome.UPGRADE
        sent.append(r2)
        assert len(srv._used) <= 3
    resp, out = srv.respond(sent[0])  # replayed after its nonce was dropped
    assert out == Outcome.CHALLENGE and b"stale=true" in resp
    assert srv.respond(sent[-1])[1] == Outcome.CHALLENGE  # a live nonce: still a replay
