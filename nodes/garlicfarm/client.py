"""Clients for a Garlic Farm node: the KV HTTP client and the raw-wire client.

Error types say what the harness must record: ``*Fail`` = the operation certainly did not
happen (history ``fail``); ``*Indeterminate`` = it may have happened (history ``info``:
timeouts, or the connection was lost after the request was sent).

Also here: ``WireConnection``, one handshaken TCP connection carrying one request at a time
(the node's own outbound peer links and forwarding use it too), and the frame reader.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid
from typing import Any

import aiohttp

from nodes.garlicfarm import codec
from nodes.garlicfarm.codec import (
    REQ_HEADER,
    RESP,
    ClusterServer,
    CodecError,
    LogEntry,
    Message,
    MsgType,
    Request,
    Response,
    ValueType,
    encode_cluster_server,
)
from nodes.garlicfarm.handshake import (
    DEFAULT_CACHE,
    DEFAULT_CLUSTER,
    DEFAULT_PASSWORD,
    DEFAULT_USER,
    MAX_HEAD,
    ClientHandshake,
    CredentialCache,
    HandshakeError,
)

# ---------------------------------------------------------------- frames over streams


async def read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise HandshakeError(f"HTTP head longer than {MAX_HEAD} bytes") from None
    except asyncio.IncompleteReadError as e:
        raise ConnectionError("connection closed during handshake") from e


async def read_frame(reader: asyncio.StreamReader, max_entries: int = codec.MAX_ENTRIES_SIZE) -> Message:
    """Read exactly one frame. CodecError for malformed input, IncompleteReadError at EOF."""
    first = await reader.readexactly(1)
    n = codec.frame_length(first)
    if n == RESP.size:
        return codec.decode(first + await reader.readexactly(RESP.size - 1))
    head = first + await reader.readexactly(REQ_HEADER.size - 1)
    total = codec.frame_length(head, max_entries)
    assert total is not None
    body = await reader.readexactly(total - REQ_HEADER.size) if total > REQ_HEADER.size else b""
    return codec.decode(head + body)


# ---------------------------------------------------------------- errors


class ClientError(Exception):
    """Base of client errors."""


class WireFail(ClientError):
    """Raw wire: the request certainly was not appended (never sent, refused, redirected)."""


class WireIndeterminate(ClientError):
    """Raw wire: the request was sent but no answer came (it may still commit)."""


class KVError(ClientError):
    """Base of KV client errors; ``error`` is a short machine-readable reason."""

    def __init__(self, error: str, value: Any = None) -> None:
        super().__init__(error)
        self.error = error
        self.value = value


class KVFail(KVError):
    """The KV operation certainly did not take effect (e.g. cas-mismatch, no-leader)."""


class KVIndeterminate(KVError):
    """The KV operation may or may not have taken effect (timeout, connection lost)."""


# ---------------------------------------------------------------- one connection


class WireConnection:
    """One handshaken connection; ``request`` sends a request and awaits its response."""

    def __init__(self, host: str, port: int, *, cluster: str = DEFAULT_CLUSTER,
                 username: str = DEFAULT_USER, password: str = DEFAULT_PASSWORD,
                 cache: CredentialCache | None = None, connect_timeout: float = 3.0,
                 tls: ssl.SSLContext | None = None, server_name: str | None = None) -> None:
        self.hs = ClientHandshake(host, port, cluster, username, password, cache=cache or DEFAULT_CACHE)
        self.tls = tls
        #: the name the server's certificate must carry (the peer's node id; its address if None)
        self.server_name = server_name
        self.connect_timeout = connect_timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used_request1 = False

    @property
    def connected(self) -> bool:
        return self.writer is not None and not self.writer.is_closing()

    async def _exchange(self, data: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        name = (self.server_name or self.hs.host) if self.tls else None
        r, w = await asyncio.open_connection(self.hs.host, self.hs.port, limit=MAX_HEAD * 4, ssl=self.tls,
                                             server_hostname=name)
        w.write(data)
        await w.drain()
        return r, w, await read_head(r)

    async def open(self) -> None:
        """Connect and run the handshake (straight to request 2 with cached credentials)."""
        await asyncio.wait_for(self._open(), self.connect_timeout)

    async def _open(self) -> None:
        for _attempt in range(2):
            ch = self.hs.cached()
            if ch is None:
                self.used_request1 = True
                r, w, head = await self._exchange(self.hs.request1())
                w.close()
                ch = self.hs.handle_response1(head)
            r, w, head = await self._exchange(self.hs.request2(ch))
            if self.hs.handle_response2(head):
                self.reader, self.writer = r, w
                return
            w.close()
        raise HandshakeError("server refused our Digest credentials (401)", 401)

    async def request(self, msg: Request, timeout: float) -> Response:
        """Send ``msg`` and wait for one response. Raises WireFail if it could not be sent,
        WireIndeterminate if it was sent but no well-formed response came."""
        try:
            if not self.connected:
                await self.open()
        except (TimeoutError, OSError, HandshakeError, ConnectionError) as e:  # ssl.SSLError is an OSError
            self.close()
            raise WireFail(f"connect to {self.hs.server} failed: {e!r}") from e
        assert self.writer is not None and self.reader is not None
        try:
            self.writer.write(codec.encode(msg))
        except (OSError, RuntimeError) as e:
            self.close()
            raise WireFail(f"write to {self.hs.server} failed: {e!r}") from e
        try:
            await asyncio.wait_for(self.writer.drain(), timeout)
            resp = await asyncio.wait_for(read_frame(self.reader), timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, CodecError) as e:
            self.close()
            raise WireIndeterminate(f"no answer from {self.hs.server}: {e!r}") from e
        if not isinstance(resp, Response):
            self.close()
            raise WireIndeterminate(f"{self.hs.server} answered with a request")
        return resp

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def parse_endpoint(ep: str) -> tuple[str, int]:
    """'tcp://host:port' or 'host:port' -> (host, port)."""
    if "://" in ep:
        ep = ep.split("://", 1)[1]
    host, _, port = ep.rstrip("/").rpartition(":")
    return host, int(port)


# ---------------------------------------------------------------- raw wire client


class WireClient:
    """The harness's raw-wire client: ClientRequest with Application entries.

    ``servers`` maps Raft num_id -> "host:port" (the peer port, or its proxy). Requests go to
    ``prefer`` (or the last known leader); a non-leader answers Is Accepted 0 with the leader's
    id as Destination and the client follows it (at most ``max_redirects``); Destination -1
    (``NO_LEADER``, as JRaft) means it knows no leader: the call returns that refusal.
    ``tls`` is a client context (``nodes.garlicfarm.tls.client_context(ca)``; None only for
    nodes run with ``tls: false``); ``names`` gives each server's node id, the name its
    certificate carries.
    """

    def __init__(self, servers: dict[int, str], *, cluster: str = DEFAULT_CLUSTER,
                 username: str = DEFAULT_USER, password: str = DEFAULT_PASSWORD,
                 timeout: float = 5.0, max_redirects: int = 5,
                 cache: CredentialCache | None = None, tls: ssl.SSLContext | None = None,
                 names: dict[int, str] | None = None) -> None:
        self.servers = dict(servers)
        self.names = dict(names or {})
        self.kw = dict(cluster=cluster, username=username, password=password, cache=cache, tls=tls)
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.leader_hint: int | None = None
        self._conns: dict[int, WireConnection] = {}

    def _conn(self, sid: int) -> WireConnection:
        c = self._conns.get(sid)
        if c is None:
            host, port = parse_endpoint(self.servers[sid])
            c = self._conns[sid] = WireConnection(host, port, server_name=self.names.get(sid),
                                                  **self.kw)  # type: ignore[arg-type]
        return c

    async def call(self, msg: Request, prefer: int | None = None) -> tuple[int, Response]:
        """Send to the leader (following redirects); returns (server id answered, response)."""
        target = prefer if prefer is not None else self.leader_hint
        if target is None or target not in self.servers:
            target = next(iter(self.servers))
        last: Response | None = None
        for _ in range(self.max_redirects + 1):
            resp = await self._conn(target).request(msg, self.timeout)
            last = resp
            if resp.accepted or resp.destination in (target, codec.NO_LEADER):
                if resp.destination == target:
                    self.leader_hint = target
                return target, resp
            self.leader_hint = resp.destination
            if resp.destination not in self.servers:
                raise WireFail(f"leader {resp.destination} has no known address")
            target = resp.destination
        assert last is not None
        return target, last

    async def append(self, value: Any, prefer: int | None = None) -> int:
        """Append one Application entry (JSON-encoded ``value``, or raw bytes); returns its
        log index once committed. WireFail: certainly not appended. WireIndeterminate: unknown."""
        data = value if isinstance(value, bytes) else json.dumps(value).encode()
        msg = Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=(LogEntry(0, ValueType.APPLICATION, data),))
        sid, resp = await self.call(msg, prefer)
        if not resp.accepted:
            raise WireFail(f"node {sid} refused: no leader known (destination {resp.destination})")
        return resp.next_index - 1

    async def find_leader(self, prefer: int | None = None) -> int | None:
        """Empty ClientRequest probe; returns the leader id or None."""
        msg = Request(MsgType.CLIENT_REQUEST, 0, 0, 0)
        sid, resp = await self.call(msg, prefer)
        return sid if resp.accepted else None

    async def add_server(self, sid: int, endpoint: str) -> bool:
        ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(sid, endpoint)))
        _, resp = await self.call(Request(MsgType.ADD_SERVER_REQUEST, 0, 0, 0, entries=(ent,)))
        return resp.accepted

    async def remove_server(self, sid: int) -> bool:
        ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(sid)))
        _, resp = await self.call(Request(MsgType.REMOVE_SERVER_REQUEST, 0, 0, 0, entries=(ent,)))
        return resp.accepted

    async def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---------------------------------------------------------------- KV HTTP client


class KVClient:
    """HTTP client for one node's KV endpoint (``POST /kv/read|write|cas`` on ports.client).

    ``read`` returns the value (None if unset); ``write``/``cas`` return None. Raises
    ``KVFail`` (definitely not applied: cas-mismatch, no-leader, connection refused) or
    ``KVIndeterminate`` (maybe applied: timeout, connection lost after sending, node
    answered "info").
    """

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _s(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def _call(self, f: str, body: dict[str, Any]) -> Any:
        body = {**body, "rid": uuid.uuid4().hex}
        try:
            async with self._s().post(f"{self.base_url}/kv/{f}", json=body) as r:
                res = await r.json(content_type=None)
        except aiohttp.ClientConnectorError as e:
            raise KVFail("connect-failed", str(e)) from e
        except (TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise KVIndeterminate(f"{type(e).__name__}", str(e)) from e
        t = res.get("type") if isinstance(res, dict) else None
        if t == "ok":
            return res.get("value")
        if t == "fail":
            raise KVFail(res.get("error", "fail"), res.get("value"))
        raise KVIndeterminate(res.get("error", "unknown") if isinstance(res, dict) else "bad-response")

    async def read(self, key: str) -> Any:
        return await self._call("read", {"key": key})

    async def write(self, key: str, value: Any) -> None:
        await self._call("write", {"key": key, "value": value})

    async def cas(self, key: str, old: Any, new: Any) -> None:
        await self._call("cas", {"key": key, "old": old, "new": new})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> KVClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
