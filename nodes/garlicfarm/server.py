"""The Garlic Farm node runtime: asyncio sockets, durable storage, apps' HTTP API, admin API.

Thin by design: it is the `Host` of `nodes.common.loop.CoreLoop`, which drives
`nodes.garlicfarm.core.GarlicFarmCore` and performs its effects (a ``Persist("raft", ...)``
is written and fsynced, ``RaftStorage.sync``, before the next send or reply). Everything the
protocol decides (Raft, applying entries, forwarding, the Meta LS publisher, join and leave)
is the core's; here are only connections, files and HTTP.

Listeners: ``ports.peer`` (TCP: HTTP digest handshake then frames, for Raft peers AND
raw-wire clients; one request at a time per connection, answered in order; each request
reaches the core from an `Inbound`), ``ports.client`` (aiohttp: ``POST /kv/read|write|cas``,
a `Kv` command), ``ports.admin`` (admin API + ``POST /admin/leave``, a `Leave` command).
Outbound: one ``WireConnection`` per peer for the replication link (``Send`` to a server
id), and pooled connections for `Call`s; addresses come from ``peers[*].peer`` (the proxy),
falling back to the endpoint in the Raft configuration for servers not in the config file.
Transport: TLS with the run's CA and verified certificates (``options.tls``, tls.py); plain
TCP only with ``options.tls: false``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import uuid
from typing import Any

from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.journal import Journal
from nodes.common.loop import Answers, CoreLoop, JournalingHost
from nodes.common.refusals import Refusals
from nodes.common.tasks import Background
from nodes.garlicfarm import codec, memtrace, tls
from nodes.garlicfarm.apps import digest, entry_view
from nodes.garlicfarm.client import (
    WireConnection,
    WireFail,
    WireIndeterminate,
    parse_endpoint,
    read_frame,
)
from nodes.garlicfarm.codec import CodecError, MsgType, Request, Response
from nodes.garlicfarm.core import (
    Call,
    CallFailed,
    GarlicFarmCore,
    Inbound,
    Kv,
    Leave,
    NodeOptions,
)
from nodes.garlicfarm.handshake import (
    DEFAULT_CLUSTER,
    DEFAULT_PASSWORD,
    DEFAULT_USER,
    MAX_HEAD,
    CredentialCache,
    Outcome,
    ServerHandshake,
)
from nodes.garlicfarm.raft import Options
from nodes.garlicfarm.storage import RaftStorage

log = logging.getLogger("garlicfarm")
#: the least time a peer connection may take to come up: TCP, TLS and the two-request Digest
#: handshake are 4-5 round trips, so a node allows twice its minimum election timeout if longer
#: (docs/garlicfarm.md: that timeout should be at least 3 round trips)
CONNECT_S = 3.0

#: idle connections kept per peer for calls (forwarded client requests, joins); a call that
#: finds none opens one. Without a cap the pool kept one TLS connection (two 128 KiB buffers
#: end to end) for every call ever concurrent to that peer, up to the client count.
MAX_POOLED_PER_PEER = 4


class CallPool:
    """Idle outbound connections per peer, at most ``cap`` each: returning a connection to a
    full pool closes it (so the peer's inbound side sees EOF and lets go of its end too)."""

    def __init__(self, cap: int = MAX_POOLED_PER_PEER) -> None:
        self.cap = cap
        self.idle: dict[int, list[WireConnection]] = {}

    def take(self, sid: int) -> WireConnection | None:
        pool = self.idle.get(sid)
        return pool.pop() if pool else None

    def give(self, sid: int, conn: WireConnection) -> None:
        pool = self.idle.setdefault(sid, [])
        if len(pool) >= self.cap:
            conn.close()
        else:
            pool.append(conn)

    def close(self) -> None:
        for pool in self.idle.values():
            for c in pool:
                c.close()
        self.idle.clear()


class GarlicFarmNode(JournalingHost):
    logger = log

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        o = cfg.options
        self.cluster = str(o.get("cluster", DEFAULT_CLUSTER))
        self.username = str(o.get("username", DEFAULT_USER))
        self.password = str(o.get("password", DEFAULT_PASSWORD))
        el = o.get("election_timeout_ms", [300, 600])
        if not (isinstance(el, list) and len(el) == 2 and 0 < el[0] <= el[1]):
            raise ConfigError("options.election_timeout_ms: expected [min_ms, max_ms]")
        hb = float(o.get("heartbeat_ms", 100)) / 1000
        raft = Options(election_min=el[0] / 1000, election_max=el[1] / 1000, heartbeat=hb,
                       rpc_timeout=float(o.get("rpc_timeout_ms", max(1000, el[1] * 2))) / 1000,
                       snapshot_chunk=int(o.get("snapshot_chunk", 16 * 1024)))
        self.tls_files = tls.parse_option(o.get("tls"))
        advertise = str(o.get("advertise", f"tcp://{cfg.host}:{cfg.ports.peer}"))
        self.opts = NodeOptions(
            raft=raft, request_timeout=float(o.get("request_timeout_ms", 5000)) / 1000,
            meta_interval=float(o.get("meta_interval_ms", 2000)) / 1000,
            publish_config=str(o.get("publish_config", "auto")),
            snapshot_threshold=int(o.get("snapshot_threshold", 1000)), cluster=self.cluster,
            join=bool(o.get("join", False)), advertise=advertise)
        members = o.get("members")
        self.name_of: dict[int, str] = {cfg.num_id: cfg.id}
        self.addr_of: dict[int, tuple[str, int]] = {}
        for p in cfg.peers.values():
            if p.num_id is None or p.peer is None:
                raise ConfigError(f"config.peers.{p.name}: garlicfarm needs num_id and peer")
            self.name_of[p.num_id] = p.name
            self.addr_of[p.num_id] = p.peer_addr()
        bootstrap = {cfg.num_id: advertise}
        bootstrap.update({i: f"tcp://{h}:{pt}" for i, (h, pt) in self.addr_of.items()})
        if members is not None:
            bootstrap = {i: ep for i, ep in bootstrap.items() if i in set(members)}
        if self.opts.join:
            bootstrap = {}
        self.bootstrap = bootstrap
        self.clock = Clock()
        self.cache = CredentialCache(clock=self.clock.wall)
        self.hs = ServerHandshake(self.cluster, self.username, self.password, clock=self.clock.wall)
        self.links: dict[int, _PeerLink] = {}
        self.call_pool = CallPool()
        self.answers = Answers()
        self._request_ids = itertools.count()
        self.background = Background(self)  # calls, flush and dump loops (guarded)
        self.conns: set[asyncio.StreamWriter] = set()
        #: what the peer port refused before the core saw it (``state()["wire_refused"]``)
        self.wire_refused = Refusals()
        self._runners: list[web.AppRunner] = []
        self._server: asyncio.AbstractServer | None = None
        self.core: GarlicFarmCore  # set in start
        self.loop: CoreLoop

    # ------------------------------------------------------------ life cycle

    async def start(self) -> None:
        cfg = self.cfg
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.storage = RaftStorage(cfg.data_dir, cfg.bugs)
        stored = self.storage.load()
        rep = self.storage.report
        if rep and (rep.log.dropped_bytes or rep.meta.dropped_bytes):
            log.warning("repaired torn tails: log %s, meta %s", rep.log, rep.meta)
        self.core = GarlicFarmCore(cfg.num_id, self.bootstrap, stored,
                                   random.Random(cfg.seed * 7919 + cfg.num_id), self.opts,
                                   cfg.bugs, seeds=tuple(self.addr_of),
                                   wall=lambda _now: self.clock.wall())
        self.loop = CoreLoop(self.core, self, self.now)
        self.journal.emit("start", term=stored.term, voted_for=stored.voted_for,
                          last_index=self.core.raft.last_index,
                          snapshot_index=stored.snapshot.last_index, bugs=sorted(cfg.bugs),
                          repaired_bytes=(rep.log.dropped_bytes + rep.meta.dropped_bytes) if rep else 0)
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host, cfg.ports.admin)
        self.admin.app.router.add_post("/admin/leave", self._admin_leave)
        await self.admin.start()
        files = self.tls_files
        self._client_tls = tls.client_context(files.ca) if files else None
        server_tls = tls.server_context(files) if files else None
        self._server = await asyncio.start_server(self._on_conn, cfg.host, cfg.ports.peer, limit=MAX_HEAD * 4,
                                                  reuse_address=True, ssl=server_tls)
        app = web.Application()
        for f in ("read", "write", "cas"):
            app.router.add_post(f"/kv/{f}", self._kv_handler(f))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, cfg.host, cfg.ports.client, reuse_address=True).start()
        self._runners.append(runner)
        self.loop.start()
        if memtrace.enabled():
            self.background.spawn(memtrace.dump_loop())
        if "ack-before-fsync" in cfg.bugs:
            self.background.spawn(self._deferred_flush_loop())
        self.admin.set_ready()
        log.info("serving peer=%s client=%s admin=%s servers=%s", cfg.ports.peer, cfg.ports.client,
                 cfg.ports.admin, sorted(self.core.raft.servers))

    async def stop(self) -> None:
        self.admin.set_ready(False)
        self.loop.close()
        await self.background.close()
        for link in self.links.values():
            link.stop()
        self.call_pool.close()
        if self._server is not None:
            self._server.close()
        for w in list(self.conns):
            w.close()
        for r in self._runners:
            await r.cleanup()
        await self.admin.stop()
        self.storage.close()
        self.journal.close()

    def now(self) -> float:
        return self.clock.monotonic()

    # ------------------------------------------------------------ Host (nodes.common.loop)

    def send(self, to: Any, msg: Any) -> None:
        if isinstance(to, Inbound):
            self.answers.give(to, msg)
        elif isinstance(to, Call):
            self.background.spawn(self._call(to, msg))
        else:
            self._link(to).send(msg)

    def persist(self, what: str, record: Any) -> None:
        self.storage.persist(record)

    def sync(self) -> None:
        self.storage.sync()

    def reply(self, token: Any, value: Any) -> None:
        self.answers.give(token, value)

    async def _deferred_flush_loop(self) -> None:
        interval = float(self.cfg.options.get("deferred_flush_ms", 60_000)) / 1000
        while True:
            await asyncio.sleep(interval)
            self.storage.flush_deferred()

    # ------------------------------------------------------------ peers

    def address(self, sid: int) -> tuple[str, int] | None:
        if sid in self.addr_of:
            return self.addr_of[sid]
        ep = self.core.raft.endpoint_of(sid)
        if ep:
            try:
                return parse_endpoint(ep)
            except ValueError:
                return None
        return None

    def _wire(self, host: str, port: int, sid: int | None = None) -> WireConnection:
        """A connection to server ``sid``, whose certificate must name its node id (its
        address when the id is not in our config: a server that joined later)."""
        return WireConnection(host, port, cluster=self.cluster, username=self.username,
                              password=self.password, cache=self.cache, tls=self._client_tls,
                              connect_timeout=max(CONNECT_S, 2 * self.opts.raft.election_min),
                              server_name=self.name_of.get(sid) if sid is not None else None)

    def _link(self, sid: int) -> _PeerLink:
        link = self.links.get(sid)
        if link is None:
            link = self.links[sid] = _PeerLink(self, sid)
        return link

    async def _call(self, call: Call, msg: Request) -> None:
        """One request on a pooled connection of its own; the outcome goes to the core."""
        addr = self.address(call.to)
        if addr is None:
            self.loop.message(call, CallFailed(False, f"no address for server {call.to}"))
            return
        conn = self.call_pool.take(call.to)
        if conn is None:
            conn = self._wire(*addr, call.to)
        try:
            resp = await conn.request(msg, call.timeout)
        except (WireFail, WireIndeterminate) as e:
            conn.close()
            self.loop.message(call, CallFailed(isinstance(e, WireIndeterminate), str(e)))
            return
        self.call_pool.give(call.to, conn)
        self.loop.message(call, resp)

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conns.add(writer)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            resp, outcome = self.hs.respond(head)
            writer.write(resp)
            await writer.drain()
            if outcome == Outcome.NOT_FOUND:
                self._refuse_wire("bad-handshake", resp.split(b"\r\n", 1)[0].decode("latin-1"))
            elif outcome == Outcome.CHALLENGE and b"\r\nauthorization:" in head.lower():
                self._refuse_wire("digest-refused", "credentials refused (401)")
            if outcome != Outcome.UPGRADE:
                return
            while True:
                msg = await read_frame(reader)
                if not isinstance(msg, Request):
                    self._refuse_wire("response-frame", "a response on an inbound connection")
                    return
                inbound = Inbound(next(self._request_ids))
                fut = self.answers.wait(inbound)
                self.loop.message(inbound, msg)
                timeout = self.opts.request_timeout if msg.type == MsgType.CLIENT_REQUEST else 10.0
                try:
                    out = await asyncio.wait_for(fut, timeout)
                except TimeoutError:
                    return  # outcome unknown: close without an answer
                finally:
                    self.answers.drop(inbound)
                if out is None:
                    return
                writer.write(codec.encode(out))
                await writer.drain()
        except (CodecError, ValueError, asyncio.LimitOverrunError) as e:  # a peer's bad input
            self._refuse_wire("bad-frame", f"{type(e).__name__}: {e}")
        except (TimeoutError, asyncio.IncompleteReadError, OSError):
            pass  # the peer went away or went quiet: an ordinary close, nothing was refused
        finally:
            self.conns.discard(writer)
            writer.close()

    def _refuse_wire(self, reason: str, detail: str) -> None:
        """Count a connection the peer port refused (and closes); journal the first of each
        reason per window (nodes/common/refusals.py), so a flood cannot grow the journal."""
        fields = self.wire_refused.note(reason, self.now(), detail=detail)
        if fields is not None:
            self.journal.emit("wire-refused", **fields)
            log.warning("peer connection refused (%s): %s", reason, fields.get("detail"))

    # ------------------------------------------------------------ client commands

    async def _command(self, cmd: Any, timeout: float) -> Any:
        token = ("cmd", next(self._request_ids))
        fut = self.answers.wait(token)
        self.loop.command(cmd, token)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.answers.drop(token)

    def _kv_handler(self, f: str) -> Any:
        async def handle(req: web.Request) -> web.Response:
            try:
                body = await req.json()
                key = str(body["key"])
            except (ValueError, KeyError, TypeError):
                return web.json_response({"type": "fail", "error": "bad-request"}, status=400)
            cmd = Kv(f, key, str(body.get("rid") or uuid.uuid4().hex), value=body.get("value"),
                     old=body.get("old"), new=body.get("new"))
            # the core answers every op by its own deadlines; this one only guards the socket
            limit = 2 * self.opts.request_timeout + 1.0
            try:
                return web.json_response(await self._command(cmd, limit))
            except TimeoutError:
                return web.json_response({"type": "info", "error": "indeterminate",
                                          "detail": "no answer from the core"})

        return handle

    async def _admin_leave(self, _req: web.Request) -> web.Response:
        """Disconnect sequence: RemoveServerRequest to the leader (it sends LeaveCluster)."""
        try:
            status, body = await self._command(Leave(), 10.0)
        except TimeoutError:
            status, body = 503, {"ok": False, "error": "no answer from the core"}
        return web.json_response(body, status=status)

    # ------------------------------------------------------------ observation

    def state(self) -> dict[str, Any]:
        c = self.core.raft
        apps = self.core.apps
        entries = []
        for k, e in enumerate(c.log):
            kind, data = entry_view(e)
            entries.append({"index": c.snap.last_index + 1 + k, "term": e.term, "kind": kind,
                            "digest": digest(e), "data": data})
        return {
            "id": self.cfg.id, "num_id": self.cfg.num_id, **c.status(),
            "log": entries, "kv": apps.kv.data,
            "metals": {"publisher": apps.metals.publisher, "as_of_index": apps.metals.as_of_index},
            "bugs": sorted(self.cfg.bugs), "clock_offset_s": self.clock.offset_s,
            "wire_refused": self.wire_refused.snapshot(),
        }


def unsuperseded(queued: list[Request]) -> list[Request]:
    """The queued requests still worth a round trip, in order: one is dropped when a later
    one carries a higher term or is the same request again. The link waits for each answer,
    so under latency a candidate's retries of a term it has already left would each cost a
    round trip ahead of its current RequestVote (an election never finishing within its
    timeout); Raft tolerates the loss, and the core resends on its timers."""
    out: list[Request] = []
    for i, m in enumerate(queued):
        later = queued[i + 1:]
        if not any(n.term > m.term or n == m for n in later):
            out.append(m)
    return out


class _PeerLink:
    """Outbound requests to one peer, one at a time; responses go to the core."""

    def __init__(self, node: GarlicFarmNode, sid: int) -> None:
        self.node = node
        self.sid = sid
        self.queue: asyncio.Queue[Request] = asyncio.Queue(maxsize=128)
        self.conn: WireConnection | None = None
        self.task = asyncio.create_task(self._loop())

    def send(self, msg: Request) -> None:
        try:
            self.queue.put_nowait(msg)
        except asyncio.QueueFull:
            pass  # the core retries on its timers

    def stop(self) -> None:
        self.task.cancel()
        if self.conn is not None:
            self.conn.close()

    async def _request(self, msg: Request, addr: tuple[str, int]) -> Response | None:
        """One request; None when it failed. A connection that had worked and then died (the
        peer restarted) gets one immediate fresh try: Raft requests are safe to repeat, and
        losing a RequestVote to a stale socket costs a split vote and a whole election timeout."""
        assert self.conn is not None
        was_open = self.conn.connected
        for attempt in range(2 if was_open else 1):
            if attempt:
                self.conn.close()
                self.conn = self.node._wire(*addr, self.sid)
            try:
                return await self.conn.request(msg, self.node.opts.raft.rpc_timeout)
            except (WireFail, WireIndeterminate):
                continue
        return None

    async def _loop(self) -> None:
        backoff = 0.05
        # the longest wait between tries to a peer that does not answer (option
        # ``reconnect_max_ms``): past the election timeout, a restarted follower campaigns
        # before its leader's next try reaches it
        cap = float(self.node.cfg.options.get("reconnect_max_ms", 1000)) / 1000
        pending: list[Request] = []
        while True:
            if not pending:
                pending.append(await self.queue.get())
            while not self.queue.empty():
                pending.append(self.queue.get_nowait())
            pending = unsuperseded(pending)
            msg = pending.pop(0)
            addr = self.node.address(self.sid)
            if addr is None:
                continue
            if self.conn is None or (self.conn.hs.host, self.conn.hs.port) != addr:
                if self.conn is not None:
                    self.conn.close()
                self.conn = self.node._wire(*addr, self.sid)
            resp = await self._request(msg, addr)
            if resp is None:
                pending.clear()
                while not self.queue.empty():  # stale now; the core resends on its timers
                    self.queue.get_nowait()
                await asyncio.sleep(backoff)
                backoff = min(cap, backoff * 2)
                continue
            backoff = 0.05
            self.node.loop.message(self.sid, resp)
