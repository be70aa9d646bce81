"""The ANTACID node process: BEEP listeners and links, durable records, admin API around `ArsCore`.

Transport: BEEP (`nodes.antacid.beep`) with the ARS profile. The node listens on
``ports.peer`` (servers) and ``ports.client`` (clients); both serve the same handler. A peer
server opens its channel with its node id as the start's piggybacked content, so requests on
that channel are ``on_message(node_id, ArsRequest)`` and the core's ``Send(node_id,
ArsResponse)`` goes back as the RPY (an ``ArsError`` result as an ERR carrying a top-level
ARSError, docs/antacid.md decision 2). A channel opened without content is a client's: its
``SubmitUpdate`` is ``on_command`` and the core's ``Reply`` is the RPY/ERR.

Requests the core sends (``Send(node_id | NotifyDest, ArsRequest)``) go over one outgoing
session per destination (`_Link`), opened on demand to the peer's configured address (the
harness's proxy) or the client's NotifyHost/NotifyPort; each ends in exactly one
``on_message(dest, ArsResponse | CallFailed)``: the RPY or ERR, or ``CallFailed`` when the
connection cannot be made, is lost, or no answer comes within ``call_timeout_s``.

Topology (node options): ``zone`` (default ``zone.test``), ``primary`` (default the first
node id in sorted order), ``upstream`` ``{node: [upstream, ...]}`` (default: every other node
pulls from the primary); more zones in ``zones`` ``{zone: {"primary", "upstream"}}`` (same
defaults), each with its own primary and DAG (`nodes.antacid.zones`). Durability: every ``Persist("ars", record)`` is written to the
SQLite store ``ars.sqlite`` (`nodes.antacid.store`, WAL) and committed before anything
leaves; the records of one batch of effects are one transaction. Admin: ``GET /antacid/zone[?zone=Z]`` (the
zone's documents and last CSN, a ``ReadZone`` command), ``POST /antacid/truncate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from nodes.antacid import beep
from nodes.antacid import messages as m
from nodes.antacid.beep.runtime import BeepConnection, connect, serve
from nodes.antacid.core import ArsOptions, CallFailed, NotifyDest, ReadZone, TruncateLog
from nodes.antacid.state import Topology
from nodes.antacid.store import Store
from nodes.antacid.zones import ZonedCore
from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig, split_addr
from nodes.common.journal import Journal
from nodes.common.loop import Answers, CoreLoop, JournalingHost
from nodes.common.refusals import Refusals
from nodes.common.tasks import Background

log = logging.getLogger("antacid")

PROFILE = "http://xml.resource.org/profiles/ARS"
STORE_FILE = "ars.sqlite"
CALL_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
#: the address of a node in the zone's DAG that this node has no link to (never dialled)
UNLINKED = ("", 0)


def topology_of(cfg: NodeConfig, zone: str | None = None,
                spec: dict[str, Any] | None = None) -> Topology:
    """A zone's DAG from the node options (module docstring): the default zone from
    ``zone``/``primary``/``upstream``, another from its ``zones`` entry ``spec``; a bad one is
    a ConfigError."""
    ids = sorted([cfg.id, *cfg.peers])
    where = "options" if spec is None else f"options.zones.{zone}"
    opts = cfg.options if spec is None else spec
    primary = str(opts.get("primary", ids[0]))
    raw = opts.get("upstream", None)
    if raw is None:
        raw = {n: [primary] for n in ids if n != primary}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.upstream: expected {{node: [upstream node, ...]}}")
    servers = {cfg.id: (cfg.host, cfg.ports.peer)}
    for p, peer in cfg.peers.items():
        if peer.peer is None:
            raise ConfigError(f"config.peers.{p}.peer: ANTACID needs each peer's address")
        servers[p] = split_addr(peer.peer, f"config.peers.{p}.peer")
    named = {str(n) for k, v in raw.items() for n in (k, *v)}
    for n in sorted(named - set(servers)):
        servers[n] = UNLINKED  # in the DAG, but no link from here (harness --topology)
    try:
        return Topology(str(zone if zone is not None else cfg.option("zone", "zone.test")),
                        primary, servers,
                        {str(k): tuple(str(u) for u in v) for k, v in raw.items()})
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where} (zone topology): {e}") from e


def topologies_of(cfg: NodeConfig) -> dict[str, Topology]:
    """Every zone this node serves: the default zone first (``zone``, ``primary``,
    ``upstream``, unchanged from one-zone configs), then each of ``zones`` ``{zone:
    {"primary": node, "upstream": {node: [upstream, ...]}}}`` (same defaults)."""
    first = topology_of(cfg)
    out = {first.zone: first}
    extra = cfg.option("zones", {}) or {}
    if not isinstance(extra, dict) or not all(isinstance(v, dict) for v in extra.values()):
        raise ConfigError('options.zones: expected {zone: {"primary": node, "upstream": '
                          '{node: [upstream node, ...]}}}')
    for z, spec in extra.items():
        if str(z) in out:
            raise ConfigError(f"options.zones: {z!r} is the default zone (options.zone): "
                              "give each zone once")
        out[str(z)] = topology_of(cfg, str(z), spec)
    return out


def ars_options(cfg: NodeConfig) -> ArsOptions:
    o = ArsOptions()
    for k in vars(o):
        if k in cfg.options:
            want, v = type(getattr(o, k)), cfg.options[k]
            if want is bool and not isinstance(v, bool):  # bool("false") would be True
                raise ConfigError(f"options.{k}: expected true or false, got {v!r}")
            setattr(o, k, want(v))
    return o


@dataclass(frozen=True)
class _Route:
    """Where an answer to a request that came in over BEEP goes."""

    conn: BeepConnection
    channel: int
    msgno: int
    req_num: int


def answer(conn: BeepConnection, channel: int, msgno: int, req_num: int,
           result: m.ArsAnswer | m.ArsError) -> None:
    """RPY with an ARSResponse, or ERR with a top-level ARSError (framed, not yet written)."""
    if isinstance(result, m.ArsError):
        conn.session.send_err(channel, msgno, m.encode(result))
    else:
        conn.session.send_rpy(channel, msgno, m.encode(m.ArsResponse(req_num, result)))


class _Link:
    """One outgoing BEEP session to ``dest`` with one ARS channel; requests are MSGs on it."""

    def __init__(self, node: AntacidNode, dest: Any, host: str, port: int) -> None:
        self.node, self.dest, self.host, self.port = node, dest, host, port
        self.queue: asyncio.Queue[m.ArsRequest] = asyncio.Queue()
        self.waiting: dict[int, tuple[int, asyncio.TimerHandle]] = {}  # msgno -> req_num, timer
        self.holding: int | None = None  # the req_num taken from the queue and not yet sent
        self.task = node.background.spawn(self._run())

    def submit(self, req: m.ArsRequest) -> None:
        self.queue.put_nowait(req)

    def _fail(self, req_num: int) -> None:
        self.node.loop.message(self.dest, CallFailed(req_num))

    def _timeout(self, msgno: int) -> None:
        got = self.waiting.pop(msgno, None)
        if got is not None:
            self.node.io["calls_failed"] += 1
            self._fail(got[0])

    async def _open(self) -> tuple[BeepConnection, int]:
        conn = await asyncio.wait_for(connect(self.host, self.port), CONNECT_TIMEOUT_S)
        try:
            ch = conn.session.start_channel(PROFILE, self.node.cfg.id
                                            if isinstance(self.dest, str) else "")
            await conn.flush()
            while True:
                ev = await asyncio.wait_for(conn.next_event(), CONNECT_TIMEOUT_S)
                if isinstance(ev, beep.ChannelStarted) and ev.channel == ch:
                    return conn, ch
                if isinstance(ev, beep.ChannelStartFailed | beep.SessionClosed):
                    raise ConnectionError(f"ARS channel refused: {ev}")
        except BaseException:
            await conn.aclose()
            raise

    async def _run(self) -> None:
        try:
            await self._serve_queue()
        except asyncio.CancelledError:
            raise
        except BaseException:
            # whatever killed this link (Background journals it as node_error): every request
            # it holds fails, so the core retries, and the next one opens a fresh link
            if self.node.links.get(self.dest) is self:
                del self.node.links[self.dest]
            if self.holding is not None:
                self._fail(self.holding)
            while not self.queue.empty():
                self._fail(self.queue.get_nowait().req_num)
            for msgno in list(self.waiting):
                self._timeout(msgno)
            raise

    async def _serve_queue(self) -> None:
        while True:
            req = await self.queue.get()
            self.holding = req.req_num  # taken, not yet sent: fails with the link
            try:
                conn, ch = await self._open()
            except (OSError, EOFError, TimeoutError, ConnectionError, beep.LocalProtocolError):
                self.node.io["connect_failures"] += 1
                self.holding = None
                self._fail(req.req_num)
                while not self.queue.empty():  # the destination is down: fail all, the core retries
                    self._fail(self.queue.get_nowait().req_num)
                continue
            reader = asyncio.get_running_loop().create_task(self._read(conn))
            try:
                while True:
                    self._send(conn, ch, req)
                    await conn.flush()
                    req = await self.queue.get()
                    self.holding = req.req_num
                    if reader.done():
                        self.queue.put_nowait(req)  # reopen with this one first
                        self.holding = None
                        break
            except (OSError, EOFError, ConnectionError, beep.LocalProtocolError):
                pass
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
                await conn.aclose()
                for msgno in list(self.waiting):
                    self._timeout(msgno)

    def _send(self, conn: BeepConnection, ch: int, req: m.ArsRequest) -> None:
        try:
            msgno = conn.session.send_msg(ch, m.encode(req))
        except beep.LocalProtocolError:
            self.holding = None
            self._fail(req.req_num)  # every request ends in an answer or CallFailed
            raise
        timer = asyncio.get_running_loop().call_later(CALL_TIMEOUT_S, self._timeout, msgno)
        self.waiting[msgno] = (req.req_num, timer)
        self.holding = None

    async def _read(self, conn: BeepConnection) -> None:
        try:
            await self._read_events(conn)
        finally:  # the session is over: what it still owes us will not come
            for msgno in list(self.waiting):
                self._timeout(msgno)

    async def _read_events(self, conn: BeepConnection) -> None:
        while True:
            ev = await conn.next_event()
            if isinstance(ev, beep.Reply | beep.ErrorReply):
                got = self.waiting.pop(ev.msgno, None)
                if got is None:
                    continue
                req_num, timer = got
                timer.cancel()
                try:
                    msg = m.parse(ev.body)
                except m.ArsProtocolError as e:
                    self.node.journal.emit("ars-refused", peer=str(self.dest), why=str(e))
                    self._fail(req_num)
                    continue
                if isinstance(msg, m.ArsError):
                    msg = m.ArsResponse(req_num, msg)
                self.node.loop.message(self.dest, msg)
            elif isinstance(ev, beep.SessionClosed):
                return

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        for _, timer in self.waiting.values():
            timer.cancel()


class AntacidNode(JournalingHost):
    logger = log

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.topologies = topologies_of(cfg)
        self.topology = next(iter(self.topologies.values()))  # the default zone's
        self.store = Store(cfg.data_dir / STORE_FILE, default_zone=self.topology.zone)
        dropped = sorted(set(self.store.zones()) - set(self.topologies))
        if dropped:
            self.store.close()
            raise ConfigError(f"the data dir {cfg.data_dir} holds zone(s) {dropped} that "
                              "options no longer name: add them back to options.zones, or "
                              "start from an empty data dir")
        incarn = max(1, self.clock.wall_ms())
        self.core = ZonedCore(cfg.id, self.topologies,
                              {z: self.store.load(incarn, z) for z in self.topologies},
                              ars_options(cfg), bugs=cfg.bugs)
        self.loop = CoreLoop(self.core, self, self.clock.monotonic)
        self.answers = Answers()
        self._tokens = itertools.count(1)
        self.routes: dict[tuple[Any, int], _Route] = {}
        #: result notifications sent on a client's submission channel, awaiting its RPY:
        #: (id(conn), channel, msgno) -> (destination, req_num, timeout)
        self.on_channel: dict[tuple[int, int, int], tuple[NotifyDest, int, asyncio.TimerHandle]] = {}
        self.links: dict[Any, _Link] = {}
        self.servers: list[asyncio.Server] = []
        self.conns: set[BeepConnection] = set()
        #: outgoing links and reply flushes: tracked (stop ends them) and guarded (a task that
        #: raises is journaled as node_error, not lost)
        self.background = Background(self)
        self.io = {"requests_in": 0, "submissions": 0, "malformed_in": 0, "connect_failures": 0,
                   "calls_failed": 0, "sessions_in": 0, "notify_on_channel": 0}
        self.refused = Refusals()  # what peers sent that we refused, by reason (hostile runs)
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self.admin.app.router.add_get("/antacid/zone", self._zone_h)
        self.admin.app.router.add_post("/antacid/truncate", self._truncate_h)

    # ---- effects (the Host of nodes.common.loop) --------------------------------------------

    def persist(self, what: str, record: Any) -> None:
        if what != "ars":
            raise ValueError(f"ANTACID keeps no durable {what!r}")
        self.store.write(record)

    def sync(self) -> None:
        self.store.commit()  # one transaction per batch of effects (synchronous=FULL)

    def send(self, to: Any, msg: Any) -> None:
        if isinstance(msg, m.ArsResponse):
            route = self.routes.pop((to, msg.req_num), None)
            if route is not None:
                self._answer(route, msg.result)
            return
        if isinstance(to, NotifyDest) and isinstance(to.via, _Route) and self._on_channel(to, msg):
            return
        link = self.links.get(to)
        if link is None:
            if isinstance(to, NotifyDest):
                host, port = to.host, to.port
            elif self._addr(to) != UNLINKED and to != self.cfg.id:
                host, port = self._addr(to)
            else:
                self.journal.emit("ars-refused", peer=str(to), why="no such destination")
                self.loop.message(to, CallFailed(msg.req_num))
                return
            link = self.links[to] = _Link(self, to, host, port)
        link.submit(msg)

    def _addr(self, node: Any) -> tuple[str, int]:
        """A server's address in any zone's topology (UNLINKED: none we have a link to)."""
        for t in self.topologies.values():
            if t.servers.get(node, UNLINKED) != UNLINKED:
                return t.servers[node]
        return UNLINKED

    def _on_channel(self, to: NotifyDest, msg: m.ArsRequest) -> bool:
        """NotifyOkOnCurrentChannel (3.2.1.1): the notification goes on the submission channel
        while it is open; False (then host and port) once it is not."""
        route: _Route = to.via
        if route.conn not in self.conns:
            return False
        try:
            msgno = route.conn.session.send_msg(route.channel, m.encode(msg))
        except beep.LocalProtocolError:
            return False
        timer = asyncio.get_running_loop().call_later(
            CALL_TIMEOUT_S, self._on_channel_done, route.conn, route.channel, msgno, None)
        self.on_channel[(id(route.conn), route.channel, msgno)] = (to, msg.req_num, timer)
        self.io["notify_on_channel"] += 1
        self._flush(route.conn)
        return True

    def _on_channel_done(self, conn: BeepConnection, channel: int, msgno: int,
                         body: bytes | None) -> None:
        """The client's answer (``body``) to a notification sent on its channel, or None: no
        answer in time, or the session ended (the core retries, by host and port then)."""
        got = self.on_channel.pop((id(conn), channel, msgno), None)
        if got is None:
            return
        dest, req_num, timer = got
        timer.cancel()
        try:
            msg = m.parse(body) if body is not None else None
        except m.ArsProtocolError:
            msg = None
        if isinstance(msg, m.ArsError):
            msg = m.ArsResponse(req_num, msg)
        self.loop.message(dest, msg if isinstance(msg, m.ArsResponse) else CallFailed(req_num))

    def reply(self, token: Any, value: Any) -> None:
        if isinstance(token, _Route):
            self._answer(token, value)
        else:
            self.answers.give(token, value)

    def _answer(self, route: _Route, result: m.ArsAnswer | m.ArsError) -> None:
        if isinstance(result, m.ArsError):
            self._refuse(f"ars-error:{result.code}", specifics=result.specifics)
        try:
            answer(route.conn, route.channel, route.msgno, route.req_num, result)
        except beep.LocalProtocolError:
            return  # the session or channel is gone: the asker sees its call fail
        self._flush(route.conn)

    def _refuse(self, reason: str, **detail: Any) -> None:
        fields = self.refused.note(reason, self.clock.monotonic(), **detail)
        if fields is not None:
            self.journal.emit("ars-input-refused", **fields)

    def _flush(self, conn: BeepConnection) -> None:
        self.background.spawn(self._flush_one(conn))

    @staticmethod
    async def _flush_one(conn: BeepConnection) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            await conn.flush()

    # ---- inputs -------------------------------------------------------------------------

    async def _session(self, conn: BeepConnection) -> None:
        """One accepted session: each channel's MSGs go to the core, from the peer named in
        the channel's start content, or as client commands when it named none."""
        self.io["sessions_in"] += 1
        self.conns.add(conn)
        names: dict[int, str | None] = {}
        try:
            while True:
                ev = await conn.next_event()
                if isinstance(ev, beep.ChannelStarted):
                    name = ev.content.strip()
                    names[ev.channel] = name if any(
                        name in t.servers for t in self.topologies.values()) else None
                elif isinstance(ev, beep.Message):
                    self._request(conn, names.get(ev.channel), ev)
                elif isinstance(ev, beep.Reply | beep.ErrorReply):
                    self._on_channel_done(conn, ev.channel, ev.msgno, ev.body)
                elif isinstance(ev, beep.SessionClosed):
                    if ev.error is not None and not ev.error.startswith("connection closed"):
                        self._refuse("beep-session-failed", error=ev.error)
                    return
        except (EOFError, OSError, ConnectionError):
            return
        finally:
            self.conns.discard(conn)
            for key in [k for k in self.on_channel if k[0] == id(conn)]:
                self._on_channel_done(conn, key[1], key[2], None)

    def _request(self, conn: BeepConnection, peer: str | None, ev: beep.Message) -> None:
        self.io["requests_in"] += 1
        try:
            msg = m.parse(ev.body)
            if not isinstance(msg, m.ArsRequest):
                raise m.ArsProtocolError(m.MALFORMED_ANY, f"expected ARSRequest, got {type(msg).__name__}")
        except m.ArsProtocolError as e:
            self.io["malformed_in"] += 1
            self._refuse(f"malformed:{e.code}", specifics=e.specifics)
            err = m.ArsError.of(e.code, self.core.server, e.specifics[:200])
            answer(conn, ev.channel, ev.msgno, 0, err)
            self._flush(conn)
            return
        if isinstance(msg.body, m.SubmitUpdate):
            self.io["submissions"] += 1
            self.loop.command(msg.body, _Route(conn, ev.channel, ev.msgno, msg.req_num))
            return
        if peer is None:
            self._refuse("server-request-without-server-name")
            err = m.ArsError.of(m.MALFORMED_ANY, self.core.server,
                                "server requests need a channel started with the node id")
            answer(conn, ev.channel, ev.msgno, msg.req_num, err)
            self._flush(conn)
            return
        self.routes[(peer, msg.req_num)] = _Route(conn, ev.channel, ev.msgno, msg.req_num)
        self.loop.message(peer, msg)

    # ---- admin --------------------------------------------------------------------------

    async def _command(self, cmd: Any) -> Any:
        token = ("admin", next(self._tokens))
        fut = self.answers.wait(token)
        self.loop.command(cmd, token)
        try:
            return await asyncio.wait_for(fut, 5.0)
        finally:
            self.answers.drop(token)

    def _zone_arg(self, zone: Any) -> str | None:
        if zone is not None and zone not in self.topologies:
            raise web.HTTPBadRequest(text=f"zone {zone!r} is not served here; zones: "
                                     f"{list(self.topologies)}")
        return None if zone is None else str(zone)

    async def _zone_h(self, req: web.Request) -> web.Response:
        return web.json_response(await self._command(ReadZone(
            self._zone_arg(req.query.get("zone")))))

    async def _truncate_h(self, req: web.Request) -> web.Response:
        try:
            body = await req.json()
            through = int(body["through_csn"])
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": 'expected JSON body {"through_csn": <int>, '
                                      '"zone": <zone, optional>}'}, status=400)
        return web.json_response(await self._command(TruncateLog(
            through, self._zone_arg(body.get("zone")))))

    def state(self) -> dict[str, Any]:
        zones = {}
        for z, core in self.core.zones.items():
            d = core.durable
            zones[z] = {"zone": z, "primary": core.primary, "upstreams": list(core.upstreams),
                        "incarn": d.incarn, "last_csn": d.last_csn, "last_ssn": d.last_ssn,
                        # the ReadZone shape: the final state the ordering checker compares
                        "docs": {n: {"content": c, "csn": csn}
                                 for n, (c, csn) in d.docs.items()},
                        "log_len": len(d.log), "pending": len(d.pending)}
        # the default zone's fields at the top (one-zone readers), every zone under "zones"
        return {"id": self.cfg.id, **zones[self.topology.zone], "zones": zones,
                "io": dict(self.io), "refused": self.refused.snapshot()}

    # ---- life ---------------------------------------------------------------------------

    async def start(self) -> None:
        for port in (self.cfg.ports.peer, self.cfg.ports.client):
            self.servers.append(await serve(self.cfg.host, port, (PROFILE,), self._session))
        await self.admin.start()
        self.loop.start()
        self.admin.set_ready()

    async def stop(self) -> None:
        self.loop.close()
        for s in self.servers:
            s.close()
        for link in list(self.links.values()):
            await link.close()
        for conn in list(self.conns):
            await conn.aclose()
        for _, _, timer in self.on_channel.values():
            timer.cancel()
        await self.background.close()
        await self.admin.stop()
        self.store.commit()
        self.store.close()
        self.journal.close()
