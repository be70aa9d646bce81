import asyncio

from nodes.garlicfarm import codec
from nodes.garlicfarm.client import WireConnection, read_frame
from nodes.garlicfarm.codec import MsgType, Request, Response
from nodes.garlicfarm.handshake import (
    ClientHandshake,
    CredentialCache,
    Outcome,
    ServerHandshake,
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
    basic = b"GET /GarlicFarm/farm/1/websocket HTTP/1.1\r\nAuthorization: Basic ZmFybTpmYXJt\r\n\r\n"
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
    # a server restarted with the same password still accepts the nonce (stateless HMAC)
    assert ServerHandshake().nonce_ok(ch.nonce)
    assert not ServerHandshake(password="other").nonce_ok(ch.nonce)
    assert not srv.nonce_ok(ch.nonce, now=ch.obtained + 3 * 3600)


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
