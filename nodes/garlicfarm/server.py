"""The Garlic Farm node runtime: asyncio sockets, durable storage, timers, apps, admin API.

Thin by design: it moves effects between ``RaftCore`` and the world. Per effect batch:
Persist* effects are written and fsynced first (``RaftStorage.sync``), then Sends, Replies,
Applies and journal events are performed in order.

Listeners: ``ports.peer`` (TCP: HTTP digest handshake then frames, for Raft peers AND
raw-wire clients; one request at a time per connection, answered in order), ``ports.client``
(aiohttp: ``POST /kv/read|write|cas``), ``ports.admin`` (admin API + ``POST /admin/leave``).
Outbound: one ``WireConnection`` per peer, addressed through ``peers[*].peer`` (the proxy),
falling back to the endpoint in the Raft configuration for servers not in the config file.
Transport: plain TCP by default (deviation from the spec's SSL sockets, fine through
Toxiproxy on loopback); ``options.tls: true`` serves TLS with a self-signed cert (tls.py).

KV requests on a follower are forwarded to the leader as raw-wire ClientRequests; the
answer is read from this node's own state machine once it has applied the committed index.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import uuid
from typing import Any

from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.journal import Journal
from nodes.garlicfarm import codec, metals, tls
from nodes.garlicfarm.client import (
    WireConnection,
    WireFail,
    WireIndeterminate,
    parse_endpoint,
    read_frame,
)
from nodes.garlicfarm.codec import (
    ClusterServer,
    CodecError,
    LogEntry,
    MsgType,
    Request,
    Response,
    ValueType,
    decode_config,
    encode_cluster_server,
)
from nodes.garlicfarm.core import (
    Apply,
    Emit,
    InstallState,
    Options,
    PersistAppend,
    PersistSnapshot,
    PersistState,
    PersistTruncate,
    RaftCore,
    Reply,
    Role,
    Send,
    SetTimer,
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
from nodes.garlicfarm.kv import KVStateMachine
from nodes.garlicfarm.storage import RaftStorage

log = logging.getLogger("garlicfarm")


def digest(e: LogEntry) -> str:
    return hashlib.sha256(e.term.to_bytes(8, "big") + bytes([int(e.vtype)]) + e.value).hexdigest()[:16]


def entry_view(e: LogEntry) -> tuple[str, Any]:
    """(kind, data) as the journal and /admin/state show an entry."""
    if e.vtype == ValueType.APPLICATION:
        try:
            return "app", json.loads(e.value)
        except ValueError:
            return "app", None
    if e.vtype == ValueType.CONFIGURATION:
        try:
            return "config", {"servers": decode_config(e.value).ids()}
        except CodecError:
            return "config", None
    return ValueType(e.vtype).name.lower(), None


class _Indeterminate(Exception):
    pass


class _NoLeader(Exception):
    pass


class GarlicFarmNode:
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
        self.opts = Options(election_min=el[0] / 1000, election_max=el[1] / 1000, heartbeat=hb,
                            rpc_timeout=float(o.get("rpc_timeout_ms", max(1000, el[1] * 2))) / 1000,
                            snapshot_chunk=int(o.get("snapshot_chunk", 16 * 1024)))
        self.snapshot_threshold = int(o.get("snapshot_threshold", 1000))
        self.request_timeout = float(o.get("request_timeout_ms", 5000)) / 1000
        self.meta_interval = float(o.get("meta_interval_ms", 2000)) / 1000
        self.join = bool(o.get("join", False))
        self.tls = bool(o.get("tls", False))
        self.advertise = str(o.get("advertise", f"tcp://{cfg.host}:{cfg.ports.peer}"))
        members = o.get("members")
        self.name_of: dict[int, str] = {cfg.num_id: cfg.id}
        self.addr_of: dict[int, tuple[str, int]] = {}
        for p in cfg.peers.values():
            if p.num_id is None or p.peer is None:
                raise ConfigError(f"config.peers.{p.name}: garlicfarm needs num_id and peer")
            self.name_of[p.num_id] = p.name
            self.addr_of[p.num_id] = p.peer_addr()
        bootstrap = {cfg.num_id: self.advertise}
        bootstrap.update({i: f"tcp://{h}:{pt}" for i, (h, pt) in self.addr_of.items()})
        if members is not None:
            bootstrap = {i: ep for i, ep in bootstrap.items() if i in set(members)}
        if self.join:
            bootstrap = {}
        self.bootstrap = bootstrap
        self.clock = Clock()
        self.started_mono = self.clock.monotonic()
        #: the Meta LS publisher's jitter: seeded, so a run's schedule of status entries replays
        self.meta_rng = random.Random(f"{cfg.seed}:{cfg.num_id}:metals")
        self.cache = CredentialCache()
        self.hs = ServerHandshake(self.cluster, self.username, self.password, clock=self.clock.wall)
        self.kv = KVStateMachine()
        self.metals = metals.MetaLS()
        self.timers: dict[str, float] = {}
        self._timer_wake = asyncio.Event()
        self.links: dict[int, _PeerLink] = {}
        self.apply_waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.forward_pool: dict[int, list[WireConnection]] = {}
        self.tasks: list[asyncio.Task[Any]] = []
        self.conns: set[asyncio.StreamWriter] = set()
        self._runners: list[web.AppRunner] = []
        self._server: asyncio.AbstractServer | None = None
        self.core: RaftCore  # set in start

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
        self.core = RaftCore(cfg.num_id, self.bootstrap, stored, random.Random(cfg.seed * 7919 + cfg.num_id),
                             self.opts, cfg.bugs)
        if stored.snapshot.data:
            self._restore_apps(stored.snapshot.data)
        self.journal.emit("start", term=stored.term, voted_for=stored.voted_for, last_index=self.core.last_index,
                          snapshot_index=stored.snapshot.last_index, bugs=sorted(cfg.bugs),
                          repaired_bytes=(rep.log.dropped_bytes + rep.meta.dropped_bytes) if rep else 0)
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host, cfg.ports.admin)
        self.admin.app.router.add_post("/admin/leave", self._admin_leave)
        await self.admin.start()
        self._client_tls = tls.client_context() if self.tls else None
        server_tls = tls.server_context(cfg.data_dir / "tls", cfg.id) if self.tls else None
        self._server = await asyncio.start_server(self._on_conn, cfg.host, cfg.ports.peer, limit=MAX_HEAD * 4,
                                                  reuse_address=True, ssl=server_tls)
        app = web.Application()
        for f in ("read", "write", "cas"):
            app.router.add_post(f"/kv/{f}", self._kv_handler(f))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, cfg.host, cfg.ports.client, reuse_address=True).start()
        self._runners.append(runner)
        self._run(self.core.start(self.now()))
        self.tasks.append(asyncio.create_task(self._timer_loop()))
        if "ack-before-fsync" in cfg.bugs:
            self.tasks.append(asyncio.create_task(self._deferred_flush_loop()))
        if self.meta_interval > 0:
            self.tasks.append(asyncio.create_task(self._meta_loop()))
        if self.join:
            self.tasks.append(asyncio.create_task(self._join_loop()))
        self.admin.set_ready()
        log.info("serving peer=%s client=%s admin=%s servers=%s", cfg.ports.peer, cfg.ports.client,
                 cfg.ports.admin, sorted(self.core.servers))

    async def stop(self) -> None:
        self.admin.set_ready(False)
        for t in self.tasks:
            t.cancel()
        for link in self.links.values():
            link.stop()
        for conns in self.forward_pool.values():
            for c in conns:
                c.close()
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

    # ------------------------------------------------------------ effects

    def _run(self, effects: list[Any]) -> None:
        for e in effects:
            if isinstance(e, PersistState | PersistAppend | PersistTruncate | PersistSnapshot):
                self.storage.persist(e)
        self.storage.sync()
        compact = False
        for e in effects:
            if isinstance(e, Send):
                self._link(e.to).send(e.msg)
            elif isinstance(e, Reply):
                if isinstance(e.token, asyncio.Future) and not e.token.done():
                    e.token.set_result(e.msg)
            elif isinstance(e, SetTimer):
                self.timers[e.name] = e.at
                self._timer_wake.set()
            elif isinstance(e, Apply):
                compact |= self._apply(e.index, e.entry)
            elif isinstance(e, InstallState):
                self._restore_apps(e.data)
                self._wake_applied()
            elif isinstance(e, Emit):
                self.journal.emit(e.type, **e.fields)
        for where, err in self.core.take_errors():
            self.journal.node_error(where, err, evidence=True, logger=log)
        if compact:
            c = self.core
            if c.applied - c.snap.last_index >= self.snapshot_threshold:
                self._run(c.compact(c.applied, self._app_snapshot()))

    def _apply(self, index: int, e: LogEntry) -> bool:
        kind, data = entry_view(e)
        d = digest(e)
        self.journal.emit("commit", index=index, term=e.term, digest=d)
        self.journal.emit("apply", index=index, term=e.term, digest=d, kind=kind, data=data)
        if kind == "config" and data is not None:
            self.journal.emit("config", index=index, servers=data["servers"])
        elif isinstance(data, dict):
            if "kv" in data:
                self.kv.apply(data)
            elif metals.is_status(data):
                try:
                    self.metals.apply(index, data)
                except (KeyError, ValueError, TypeError) as err:  # metals-agreement reads this
                    self.journal.node_error(f"Meta LS status at index {index} not applied", err,
                                            evidence=True, logger=log)
        self._wake_applied()
        return index - self.core.snap.last_index >= self.snapshot_threshold

    def _wake_applied(self) -> None:
        applied = self.core.applied
        for idx in [i for i in self.apply_waiters if i <= applied]:
            for f in self.apply_waiters.pop(idx):
                if not f.done():
                    f.set_result(None)

    async def wait_applied(self, index: int, timeout: float) -> None:
        if self.core.applied >= index:
            return
        f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.apply_waiters.setdefault(index, []).append(f)
        await asyncio.wait_for(f, timeout)

    def _app_snapshot(self) -> bytes:
        return json.dumps({"kv": self.kv.snapshot(), "metals": self.metals.snapshot()}).encode()

    def _restore_apps(self, data: bytes) -> None:
        try:
            d = json.loads(data)
        except ValueError:
            log.error("unreadable application snapshot")
            return
        self.kv.restore(d.get("kv", {}))
        self.metals.restore(d.get("metals", {}))

    async def _timer_loop(self) -> None:
        while True:
            self._timer_wake.clear()
            now = self.now()
            due = sorted((at, n) for n, at in self.timers.items() if at <= now)
            for _at, name in due:
                self.timers.pop(name, None)
                self._run(self.core.on_timer(name, now))
            if due:
                continue
            nxt = min(self.timers.values(), default=now + 1.0)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._timer_wake.wait(), max(0.0, nxt - now))

    async def _deferred_flush_loop(self) -> None:
        interval = float(self.cfg.options.get("deferred_flush_ms", 60_000)) / 1000
        while True:
            await asyncio.sleep(interval)
            self.storage.flush_deferred()

    # ------------------------------------------------------------ peers

    def address(self, sid: int) -> tuple[str, int] | None:
        if sid in self.addr_of:
            return self.addr_of[sid]
        ep = self.core.endpoint_of(sid)
        if ep:
            try:
                return parse_endpoint(ep)
            except ValueError:
                return None
        return None

    def _wire(self, host: str, port: int) -> WireConnection:
        return WireConnection(host, port, cluster=self.cluster, username=self.username,
                              password=self.password, cache=self.cache, tls=self._client_tls)

    def _link(self, sid: int) -> _PeerLink:
        link = self.links.get(sid)
        if link is None:
            link = self.links[sid] = _PeerLink(self, sid)
        return link

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conns.add(writer)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            resp, outcome = self.hs.respond(head)
            writer.write(resp)
            await writer.drain()
            if outcome != Outcome.UPGRADE:
                return
            while True:
                msg = await read_frame(reader)
                if not isinstance(msg, Request):
                    log.warning("response frame on an inbound connection: closing")
                    return
                fut: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
                self._run(self.core.on_request(msg, fut, self.now()))
                timeout = self.request_timeout if msg.type == MsgType.CLIENT_REQUEST else 10.0
                try:
                    out = await asyncio.wait_for(fut, timeout)
                except TimeoutError:
                    return  # outcome unknown: close without an answer
                if out is None:
                    return
                writer.write(codec.encode(out))
                await writer.drain()
        except (CodecError, ValueError, asyncio.LimitOverrunError) as e:  # a peer's bad input
            self.journal.node_error("peer frame refused, connection closed", e, evidence=False,
                                    logger=log)
        except (TimeoutError, asyncio.IncompleteReadError, OSError):
            pass  # the peer went away or went quiet: an ordinary close, nothing was refused
        finally:
            self.conns.discard(writer)
            writer.close()

    # ------------------------------------------------------------ submitting through Raft

    async def submit(self, value: bytes, timeout: float) -> int:
        """Commit one Application entry; returns its index. _NoLeader: certainly not
        appended. _Indeterminate: maybe appended."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            c = self.core
            if c.role == Role.LEADER:
                fut: asyncio.Future[Response | None] = loop.create_future()
                self._run(c.propose(value, fut, self.now()))
                if fut.done() and (fut.result() is None or not fut.result().accepted):
                    await asyncio.sleep(0.05)
                    continue
                try:
                    resp = await asyncio.wait_for(fut, max(0.01, deadline - loop.time()))
                except TimeoutError:
                    raise _Indeterminate("timeout waiting for commit") from None
                if resp is None:
                    raise _Indeterminate("leadership lost before commit")
                return resp.next_index - 1
            leader = c.leader
            addr = self.address(leader) if leader is not None and leader != c.me else None
            if addr is None:
                await asyncio.sleep(0.05)
                continue
            pool = self.forward_pool.setdefault(leader, [])
            conn = pool.pop() if pool else self._wire(*addr)
            msg = Request(MsgType.CLIENT_REQUEST, c.me, leader, c.term,
                          entries=(LogEntry(0, ValueType.APPLICATION, value),))
            try:
                resp = await conn.request(msg, max(0.05, deadline - loop.time()))
            except WireFail:
                await asyncio.sleep(0.05)
                continue
            except WireIndeterminate as e:
                raise _Indeterminate(str(e)) from None
            pool.append(conn)
            if resp.accepted:
                return resp.next_index - 1
            await asyncio.sleep(0.02)
        raise _NoLeader("no leader reachable before the deadline")

    def _kv_handler(self, f: str) -> Any:
        async def handle(req: web.Request) -> web.Response:
            try:
                body = await req.json()
                key = str(body["key"])
            except (ValueError, KeyError, TypeError):
                return web.json_response({"type": "fail", "error": "bad-request"}, status=400)
            op: dict[str, Any] = {"kv": f, "key": key, "rid": str(body.get("rid") or uuid.uuid4().hex)}
            if f == "write":
                op["value"] = body.get("value")
            elif f == "cas":
                op["old"], op["new"] = body.get("old"), body.get("new")
            if f == "read" and "local-reads" in self.cfg.bugs:
                return web.json_response({"type": "ok", "value": self.kv.data.get(key)})
            try:
                index = await self.submit(json.dumps(op).encode(), self.request_timeout)
                await self.wait_applied(index, max(0.5, self.request_timeout))
            except _NoLeader as e:
                return web.json_response({"type": "fail", "error": "no-leader", "detail": str(e)})
            except (TimeoutError, _Indeterminate) as e:
                return web.json_response({"type": "info", "error": "indeterminate", "detail": str(e)})
            res = self.kv.results.get(op["rid"])
            if res is None:
                return web.json_response({"type": "info", "error": "result-unknown", "index": index})
            return web.json_response({**res, "index": index})

        return handle

    # ------------------------------------------------------------ Meta LS, join, leave

    async def _meta_loop(self) -> None:
        while True:
            await asyncio.sleep(self.meta_interval * (0.75 + 0.5 * self.meta_rng.random()))
            if self.cfg.num_id not in self.core.servers:
                continue
            st = metals.make_status(self.cluster, self.cfg.num_id, self.clock.wall_ms(),
                                    int((self.clock.monotonic() - self.started_mono) * 1000),
                                    self.metals.publisher == self.cfg.num_id,
                                    str(self.cfg.options.get("publish_config", "auto")))
            with contextlib.suppress(_NoLeader, _Indeterminate):
                await self.submit(json.dumps(st).encode(), self.request_timeout)

    async def _join_loop(self) -> None:
        """Establishment sequence: probe (ClientRequest) -> leader -> AddServerRequest; the
        leader then sends JoinCluster and SyncLog/InstallSnapshot. Retries until a member."""
        ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(self.cfg.num_id, self.advertise)))
        while self.cfg.num_id not in self.core.servers:
            for sid in list(self.addr_of):
                if self.cfg.num_id in self.core.servers:
                    return
                conn = self._wire(*self.addr_of[sid])
                try:
                    probe = await conn.request(Request(MsgType.CLIENT_REQUEST, self.cfg.num_id, sid, 0), 3)
                    if not probe.accepted:
                        conn.close()
                        if probe.destination == sid or probe.destination not in self.addr_of:
                            continue
                        conn = self._wire(*self.addr_of[probe.destination])
                    resp = await conn.request(Request(MsgType.ADD_SERVER_REQUEST, self.cfg.num_id, probe.destination, 0,
                                                      entries=(ent,)), 3)
                    self.journal.emit("join-request", leader=probe.destination, accepted=resp.accepted)
                    if resp.accepted:
                        for _ in range(50):
                            if self.cfg.num_id in self.core.servers:
                                return
                            await asyncio.sleep(0.1)
                except (WireFail, WireIndeterminate):
                    pass
                finally:
                    conn.close()
            await asyncio.sleep(0.5)

    async def _admin_leave(self, _req: web.Request) -> web.Response:
        """Disconnect sequence: RemoveServerRequest to the leader (it sends LeaveCluster)."""
        leader = self.core.leader
        if leader == self.cfg.num_id or leader is None:
            return web.json_response({"ok": False, "error": "this node is the leader or no leader known"}, status=409)
        addr = self.address(leader)
        if addr is None:
            return web.json_response({"ok": False, "error": f"no address for leader {leader}"}, status=409)
        ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(self.cfg.num_id)))
        conn = self._wire(*addr)
        try:
            resp = await conn.request(Request(MsgType.REMOVE_SERVER_REQUEST, self.cfg.num_id, leader, self.core.term,
                                              entries=(ent,)), 5)
        except (WireFail, WireIndeterminate) as e:
            return web.json_response({"ok": False, "error": str(e)}, status=503)
        finally:
            conn.close()
        return web.json_response({"ok": resp.accepted, "leader": resp.destination})

    # ------------------------------------------------------------ observation

    def state(self) -> dict[str, Any]:
        c = self.core
        entries = []
        for k, e in enumerate(c.log):
            kind, data = entry_view(e)
            entries.append({"index": c.snap.last_index + 1 + k, "term": e.term, "kind": kind,
                            "digest": digest(e), "data": data})
        st = c.status()
        return {
            "id": self.cfg.id, "num_id": self.cfg.num_id, **st,
            "log": entries, "kv": self.kv.data,
            "metals": {"publisher": self.metals.publisher, "as_of_index": self.metals.as_of_index},
            "bugs": sorted(self.cfg.bugs), "clock_offset_s": self.clock.offset_s,
        }


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
                self.conn = self.node._wire(*addr)
            try:
                return await self.conn.request(msg, self.node.opts.rpc_timeout)
            except (WireFail, WireIndeterminate):
                continue
        return None

    async def _loop(self) -> None:
        backoff = 0.05
        while True:
            msg = await self.queue.get()
            addr = self.node.address(self.sid)
            if addr is None:
                continue
            if self.conn is None or (self.conn.hs.host, self.conn.hs.port) != addr:
                if self.conn is not None:
                    self.conn.close()
                self.conn = self.node._wire(*addr)
            resp = await self._request(msg, addr)
            if resp is None:
                while not self.queue.empty():  # stale now; the core resends on its timers
                    self.queue.get_nowait()
                await asyncio.sleep(backoff)
                backoff = min(1.0, backoff * 2)
                continue
            backoff = 0.05
            self.node._run(self.node.core.on_response(resp, self.node.now()))
