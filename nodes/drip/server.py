"""The DRiP node runtime: HTTPS peer server, plain-HTTP client endpoint, admin API, timers.

Thin by design: a `Host` of the common runtime loop (`nodes.common.loop.CoreLoop`) around
:class:`~nodes.drip.core.DripCore`. Requests are authenticated and decoded here and handed to
the core as ``Inbound(tls_identity, conn)``; its ``Send(Inbound, Answer)`` is the HTTP answer.
Each ``Send(peer, msg)`` is one HTTPS request, and how it ended goes back to the core as an
``Outcome``. ``Persist`` records go to the SQLite store (`nodes.drip.store`), committed by the
loop before the next send or answer. Timers, heartbeat rounds, the commit outbox and sync are
the core's.

Request checks on the peer port, in order (each failure changes nothing; 1-6 are
`nodes.drip.admit.Gate`'s, which the simulator's DRiP transport runs too):

0. Connections: at most ``max_conns`` per port, the first head within ``head_timeout_s``
   (`nodes.common.conns`); the TLS handshake requires a client certificate. Before the
   handshake, a source address whose refusals spent its bucket (``conn_rate``,
   ``conn_burst``: each refusal below and each certificate the handshake refused) is reset.
1. TLS client certificate naming a configured peer, else 403 (spec 4.1: requests from nodes
   that are not peers are ignored).
2. ``DRiP-Node-ID`` well formed, else 400.
3. From the head and the node's state alone, refusals the core would make anyway: a sync
   request from a peer that needs none (409), a counter header malformed or beyond its
   initiator's window (400). Nothing before this reads the body or checks a signature.
4. Headers and body per the codec, with its bounds (docs/drip.md "Limits and refusals"),
   else 400 (404 for an unknown endpoint); any decode failure is a 400, never a 500.
   Then the JWT in ``Authorization``: valid, unexpired, ``iss`` == ``DRiP-Node-ID``, else 401.
5. The JWT signs this very request (its ``req`` digest), and a token of a request made on the
   sender's own behalf is not a replay (its ``jti``), else 401 (`nodes.drip.auth`).
6. For requests a node makes on its own behalf (everything but forwarded ``/voting``,
   ``/commit`` and ``/abort``) ``DRiP-Node-ID`` must also be the TLS identity, else 403.

A lane (``GET /lane``, ours) is opened by an upgrade that passes 1-6 like any request (its
token binds its ``DRiP-Lane-Key``); each exchange frame on it must then carry the next seq
and a MAC under that key (else ``lane-frame``, and the lane is closed), and its batch passes
1-6 except the batch token, which the MAC stands for (`Gate.body`'s ``laned``).

Every refusal is counted by reason (``refused`` in ``/admin/state``) and journaled as a
``refused`` event, at most one per reason per 10 s (`nodes.common.refusals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import itertools
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from nodes.common import fastjson
from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.conns import ConnGuard, Listener, SourceBuckets
from nodes.common.journal import Journal
from nodes.common.loop import Answers, CoreLoop, JournalingHost
from nodes.common.runtime import EVENT_LOOPS
from nodes.common.tasks import Background
from nodes.drip import abort_proof, codec, lane
from nodes.drip.admission import Admission
from nodes.drip.admit import Gate, Refusal
from nodes.drip.auth import MAX_GROUP, Signer, Verifier, load_auth
from nodes.drip.codec import CodecError, Message, Update
from nodes.drip.core import (
    DUPLICATE,
    OK,
    Answer,
    ClientMembers,
    ClientRead,
    ClientUpdate,
    CoreConfig,
    DripCore,
    Inbound,
    Outcome,
    _remember,
)
from nodes.drip.entitlement import get_policy
from nodes.drip.floodauth import Cell, FloodTokens
from nodes.drip.material import NodeFiles, client_context, peer_identity, server_context
from nodes.drip.membership import dial_address, operator_entry, parse_peer
from nodes.drip.peerslots import PEER_CONNS, PeerSlots
from nodes.drip.records import Delivered
from nodes.drip.sizes import node_sizes
from nodes.drip.store import Store

log = logging.getLogger("drip.server")

#: delivery marks carried at most, waiting for a durable group (then written on their own)
_MAX_CARRIED = 4096

def _cert_sha256(req: web.Request) -> str | None:
    """The SHA-256 of the TLS client certificate (DER) of ``req``'s connection."""
    ssl_obj = req.transport.get_extra_info("ssl_object") if req.transport else None
    der = ssl_obj.getpeercert(binary_form=True) if ssl_obj is not None else None
    return hashlib.sha256(der).hexdigest() if der else None


def _url(peer_urls: dict[str, str], to: str) -> str:
    url = peer_urls.get(to)
    if url is None:  # decommissioned while this send waited: it fails like a dead link
        raise OSError(f"no address for {to!r}: not a peer any more")
    return url


def _json(body: Any, status: int = 200) -> web.Response:
    """A JSON answer encoded by orjson (aiohttp's ``json_response`` uses ``json.dumps``, ~1 %
    of a node's CPU at 32 clients in session 45's profile)."""
    return web.Response(body=fastjson.dumps(body), status=status, content_type="application/json")


def _err(status: int, msg: str) -> web.Response:
    return _json({"error": msg}, status=status)


def _client_token(path: str) -> str | None:
    """The client API's bearer token from ``client_token_file`` (None: no file, API open)."""
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError(f"options.client_token_file: cannot read {path}: {e}") from None
    if not token or not token.isprintable() or not token.isascii():
        raise ConfigError(f"options.client_token_file {path}: the token must be one line of "
                          "printable ASCII, not empty")
    return token


@dataclass
class Options:
    """Protocol knobs from ``options`` (docs/drip.md)."""

    heartbeat_s: float = 0.3
    peer_timeout_s: float = 2.0
    vote_timeout_s: float = 2.0
    lock_ttl_s: float = 3.0
    sync_timeout_s: float = 5.0
    sync_batch: int = 1000
    #: a sync batch's JSON, at most (nodes/drip/sync.py); bounds the peer port's body size
    sync_batch_bytes: int = 4 * 1024 * 1024
    entitlement: str = "none"
    #: the largest value a node takes, its JSON in bytes (docs/drip.md "Limits and refusals")
    max_value_bytes: int = codec.MAX_VALUE_BYTES
    #: open connections per port (peer, client); one more is closed at once
    max_conns: int = 256
    #: a connection's first request head (and a TLS handshake) must arrive within this
    head_timeout_s: float = 5.0
    #: an idle keep-alive connection is closed after this (aiohttp keepalive_timeout)
    keepalive_s: float = 30.0
    #: per source address of the peer port, a bucket of conn_burst tokens refilled at
    #: conn_rate a second, spent by each request the gate refuses and each failed TLS
    #: handshake; with none left a new connection is reset before its handshake
    #: (`connection-rate`). A correct peer is refused nothing; conn_rate 0: no limit
    conn_rate: float = 2.0
    conn_burst: float = 32.0
    #: the bucket is also spent by what passed the gate but was refused further on, for a
    #: request made in the TLS peer's own name: a 4xx from the core (a commit with no vote,
    #: a re-vote of an applied update, an unsolicited sync batch) and a yes naming voters it
    #: cannot prove. False: only the gate's refusals (session 42)
    charge_core_refusals: bool = True
    #: vote rounds of one initiator this node takes part in at once (keys locked for it);
    #: a /voting past them is refused from its head, 429 ``initiator-rounds``. 0: twice
    #: max_initiating (a correct initiator has at most max_initiating updates open)
    initiator_rounds: int = 0
    #: a fresh data directory joining a running mesh: sync before going active (docs/drip.md)
    join: bool = False
    #: client updates this node has in 2PC at once; more wait for a slot. Without a cap an
    #: overloaded mesh collapses: once a round outlasts vote_timeout_s every update in it
    #: aborts, and the aborts are more work (32-client bench: 0 commits/s at high load).
    #: The cap adapts between min_ and max_initiating (nodes/drip/admission.py): it grows
    #: while updates are decided within slow_commit_s and halves when one is not
    max_initiating: int = 64
    min_initiating: int = 4
    #: 0: a quarter of vote_timeout_s
    slow_commit_s: float = 0.0
    #: send the vote-path messages a turn releases to one peer as one POST /batch (ours;
    #: docs/drip.md "Batches"); a peer answering 404 to it gets single requests from then on
    batch: bool = True
    #: carry those batches over one WebSocket per peer link (``GET /lane``, ours; docs/drip.md
    #: "WebSocket lanes"): the same frames' checks and answers as POST /batch, less CPU per
    #: exchange. False: this node neither opens lanes nor accepts them (404), so its peers
    #: send it POST /batch
    lane: bool = True
    #: a lane's life, seconds: past it, its opener closes it at its first idle moment and
    #: opens a new one (a new key, a new signed upgrade); the acceptor closes one still open
    #: ``peer_timeout_s`` + 1 s later (docs/drip.md "Lane frames under a per-lane key").
    #: As long as a flooded message's token lives (``Signer.ttl_s``)
    lane_max_age_s: float = 600.0
    #: answers for a peer's lane ride on our next exchange to that peer when one goes in the
    #: same turn (`lane.pack_riders`), instead of a frame of their own; and while the answers
    #: to a peer's exchange are on their way through our pass, what waits for that peer waits
    #: for them, so that both go as one frame (docs/drip.md "Riders, session 49")
    lane_riders: bool = True
    #: commits on their way to one peer at once (the core's outbox window)
    outbox_window: int = 64
    #: vote-path requests (a /batch or a single one) on their way to one peer at once; what
    #: is released meanwhile waits for one to end and goes in the next batch, so batches grow
    #: with the load instead of one request per group commit per peer (docs/drip.md "Batches").
    #: 1: bigger batches, 9-14 % less CPU per update at 32 clients than 2 (docs/drip.md)
    peer_pipeline: int = 1
    #: a file holding the bearer token the client API asks for (``Authorization: Bearer T``
    #: on /client/update and /client/read); empty: the client API is open (the default)
    client_token_file: str = ""
    #: the node process's event loop (`nodes.common.runtime.EVENT_LOOPS`): uvloop spends
    #: 10-20 % less CPU per committed update than asyncio's own (docs/drip.md "uvloop")
    event_loop: str = "uvloop"

    def __post_init__(self) -> None:
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(f"options.event_loop {self.event_loop!r}: one of "
                              f"{', '.join(EVENT_LOOPS)}")

    @classmethod
    def from_options(cls, o: dict[str, Any]) -> Options:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: type(getattr(cls, k))(v) for k, v in o.items() if k in known})


@dataclass
class Extra:
    """The config keys beyond docs/contracts.md that ``harness.suites.drip.node_extra`` writes."""

    tls: NodeFiles
    jwt: dict[str, Any]
    mesh_members: list[str] = field(default_factory=list)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Extra:
        try:
            t = raw["tls"]
            return cls(NodeFiles(Path(t["ca"]), Path(t["cert"]), Path(t["key"])), dict(raw["jwt"]),
                       list(raw.get("mesh_members") or []))
        except (KeyError, TypeError) as e:
            raise ConfigError(f"drip config needs tls {{ca, cert, key}} and jwt {{mode, ...}}: "
                              f"missing {e}") from None


#: a lane exchange's answer: (status, JSON body) now, or a future of it
Pending = tuple[int, Any] | asyncio.Future[tuple[int, Any]]


class _Gathered:
    """A batch's item answers, in item order; ``fut`` gets (200, {answers}) once the last is
    in. An item the core failed on (answer None) is a 500 of its own."""

    __slots__ = ("answers", "left", "fut", "failed")

    def __init__(self, n: int, fut: asyncio.Future[tuple[int, Any]], failed: str) -> None:
        self.answers: list[Any] = [None] * n
        self.left = n
        self.fut = fut
        self.failed = failed

    def put(self, i: int, a: Answer | None) -> None:
        if a is None:
            a = Answer(500, {"error": self.failed})
        self.answers[i] = {"status": a.status, "body": a.body}
        self.left -= 1
        if not self.left and not self.fut.done():
            self.fut.set_result((200, {"answers": self.answers}))


class DripNode(JournalingHost):
    """One node process: start() serves, stop() closes everything."""

    logger = log

    def __init__(self, cfg: NodeConfig, extra: Extra) -> None:
        self.cfg = cfg
        self.me = cfg.id
        self.opts = Options.from_options(cfg.options)
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.store = Store(cfg.data_dir / "drip.sqlite3", lean=True)  # values stay on disk
        self.signer: Signer
        self.verifier: Verifier
        self.signer, self.verifier = load_auth(self.me, extra.jwt)
        self.server_ssl = server_context(extra.tls)
        self.client_ssl = client_context(extra.tls)
        self.peer_urls = {}
        for name, p in cfg.peers.items():
            host, port = p.peer_addr()
            self.peer_urls[name] = f"https://{host}:{port}"
        o = self.opts
        self.core = DripCore(
            self.me, list(cfg.peers), self.store.load(),
            CoreConfig(vote_timeout_s=o.vote_timeout_s, lock_ttl_s=o.lock_ttl_s,
                       sync_timeout_s=o.sync_timeout_s, sync_batch=o.sync_batch, bugs=cfg.bugs,
                       sync_batch_bytes=o.sync_batch_bytes,
                       heartbeat_s=o.heartbeat_s, peer_timeout_s=o.peer_timeout_s,
                       outbox_window=o.outbox_window),
            get_policy(o.entitlement), extra.mesh_members, join=o.join,
            values=self.store)
        self.core.new_sync_id = lambda: secrets.token_hex(16)  # unguessable: see the core
        #: address entries of members added at run time that we dial and trust (`_rewire`)
        self._wired: dict[str, dict[str, Any]] = {}
        self._rewire()
        self.loop = CoreLoop(self.core, self, self.clock.monotonic)
        self.limits = codec.node_limits(o.max_value_bytes, o.vote_timeout_s, cfg.bugs)
        self.client_token = _client_token(o.client_token_file)
        self.refusals = self.core.refusals  # the core counts sync refusals in the same place
        #: the checks before the core (nodes/drip/admit.py, shared with the simulator)
        self.gate = Gate(self.me, self.verifier, self.limits, lambda: self.core.peers,
                         lambda: self.core.epoch,
                         lambda n: self._wired.get(n, {}).get("cert_sha256"),
                         self._note_refusal, cfg.bugs, lambda: self.core,
                         o.initiator_rounds or 2 * o.max_initiating)
        self.admin = AdminServer(self.me, self._snapshot, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self.admin.app.router.add_post("/admin/members", self.handle_members)
        self.answers = Answers()
        self._slots = Admission(self.opts.min_initiating, self.opts.max_initiating,
                                self.opts.slow_commit_s or self.opts.vote_timeout_s / 4)
        self._ids = itertools.count()
        self._inbox: list[tuple[tuple[Any, Any, Any], int | None]] = []
        self._records: list[Any] = []  # persisted this turn, not yet committed
        self._held: list[tuple[Any, Any]] = []  # sent or replied this turn, not yet released
        self._unanswered: list[int] = []  # peer requests of this turn
        self._flush_soon = False
        self._groups: list[tuple[list[Any], list[tuple[Any, Any]], list[int]]] = []
        self._committing = False  # the committer is due (`_flush`)
        #: outbox delivery marks of groups that held nothing else, for the next durable group
        self._carried: list[Delivered] = []
        self._no_batch: set[str] = set()  # peers that answered 404 to /batch
        #: our lanes to peers (at most one each), the peers that answered 404 to GET /lane,
        #: one lock per peer so that one lane is opened at a time; the lanes peers opened to us
        self._lanes: dict[str, lane.Outbound] = {}
        self._no_lane: set[str] = set()
        self._lane_locks: dict[str, asyncio.Lock] = {}
        self._lanes_in: dict[str, lane.Inbound] = {}
        #: the membership epoch the lanes' views (`_lane_trust`) were last compared at
        self._lanes_epoch = self.core.epoch
        #: vote-path messages waiting for a free pipeline slot to each peer, with the token
        #: cell of a flooded one of ours (floodauth.py); the requests on their way to each peer
        self._outq: dict[str, list[tuple[Message, Cell | None]]] = {}
        self._flood_tokens = FloodTokens(lambda digests: "Bearer " + self.signer.group_token(
            self.clock.wall(), digests))
        self._flying: dict[str, int] = {}
        #: the flooded /voting and /commit each peer sent us, newest last: one of ours still
        #: waiting for that peer is not sent back to it (docs/drip.md "Duplicates spared")
        self._peer_has: dict[str, dict[tuple[Any, ...], None]] = {}
        self._asking = PeerSlots()  # outcome questions on their way, per peer
        #: a batch's body stays under what a peer takes (its client_max_size, set in start)
        self._batch_bytes = self.opts.sync_batch_bytes
        #: the largest peer request body (a sync batch: its byte bound, or one largest value
        #: alone); a lane frame's body too
        self._peer_body_max = self.opts.sync_batch_bytes + self.opts.max_value_bytes + 64 * 1024
        #: /batch requests sent and taken, and the messages in them (docs/drip.md "Batches")
        #: and the lanes': opened (ours, their upgrade answered), exchanges sent and their
        #: items, exchanges that failed (and dropped their lane); lanes accepted from peers,
        #: exchanges taken on them and their items; lanes closed (either way) because their
        #: peer's membership entry changed or they reached ``lane_max_age_s``; answers
        #: sealed for peers' lanes, those sent as frames of their own (the rest rode on our
        #: exchanges), and answers that rode to us for a lane of ours since replaced
        self.batch_stats = {"sent": 0, "sent_items": 0, "taken": 0, "taken_items": 0,
                            "spared": 0, "lane_opened": 0, "lane_exchanges": 0,
                            "lane_items": 0, "lane_failed": 0, "lane_accepted": 0,
                            "lane_taken": 0, "lane_taken_items": 0, "lane_retired": 0,
                            "lane_answers": 0, "lane_answer_frames": 0,
                            "lane_stale_riders": 0}
        #: TLS connections this node opened to peers, and requests it sent: with keep-alive
        #: reuse the first stays near the peer count while the second grows with the load
        self.conn_stats = {"opened": 0, "requests": 0}
        #: every background task (peer requests, the committer), guarded (nodes.common.tasks)
        self.background = Background(self)
        self.runners: list[web.AppRunner] = []
        self.servers: list[Listener] = []
        #: the peer port's: what its gate refuses is charged to the request's source address
        self._peer_listener: Listener | None = None
        self.session: aiohttp.ClientSession | None = None

    # ---- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        # connections and requests are counted here (a socket factory) and at the two call
        # sites, not with aiohttp trace hooks: a trace config costs every request a Trace per
        # config and an await per signal, 7-10 % of a node's CPU per update at 8 clients
        # (docs/drip.md, session 44)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.client_ssl, limit=64,
                                           limit_per_host=PEER_CONNS,
                                           socket_factory=self._new_socket),
            timeout=aiohttp.ClientTimeout(total=self.opts.peer_timeout_s))
        # the largest peer body is a sync batch: its byte bound, or one largest value alone
        peer_app = web.Application(client_max_size=self._peer_body_max)
        peer_app.router.add_get(lane.PATH, self.handle_lane, allow_head=False)
        peer_app.router.add_route("*", "/{tail:.*}", self.handle_peer)
        client_app = web.Application(client_max_size=self.opts.max_value_bytes + 64 * 1024)
        client_app.router.add_post("/client/update", self.handle_update)
        client_app.router.add_get("/client/read", self.handle_read)
        o = self.opts
        await self._serve(peer_app, self.cfg.ports.peer, self.server_ssl,
                          SourceBuckets(o.conn_rate, o.conn_burst) if o.conn_rate > 0 else None)
        await self._serve(client_app, self.cfg.ports.client, None)
        await self.admin.start()
        self.loop.start()
        self.admin.set_ready()
        log.info("drip node %s serving peers on %d (TLS), clients on %d", self.me,
                 self.cfg.ports.peer, self.cfg.ports.client)

    def _new_socket(self, addr_info: Any) -> socket.socket:
        """A peer connection's socket (aiohttp's ``socket_factory``), counted."""
        self.conn_stats["opened"] += 1
        family, type_, proto, _, _ = addr_info
        return socket.socket(family=family, type=type_, proto=proto)

    async def _serve(self, app: web.Application, port: int, ssl_ctx: Any,
                     buckets: SourceBuckets | None = None) -> None:
        """Serve ``app`` through a `ConnGuard` (connection limit, head-read timeout) and a
        `Listener` (new connections per source, before TLS): aiohttp has no knob for any of
        them, so not a ``TCPSite``."""
        o = self.opts
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=o.keepalive_s)
        await runner.setup()
        self.runners.append(runner)
        assert runner.server is not None
        guard = ConnGuard(runner.server, o.max_conns, o.head_timeout_s,
                          lambda reason: self._note_refusal(reason, port=port))
        listener = Listener(guard, self.cfg.host, port, ssl_ctx, o.head_timeout_s, buckets)
        listener.start()
        self.servers.append(listener)
        if ssl_ctx is not None:
            self._peer_listener = listener

    async def stop(self) -> None:
        self.loop.close()
        if self._committing:  # what waits for the committer goes now
            self._committer()
        if self._carried:  # delivery marks still waiting for a durable group
            try:
                self.store.commit_records(self._carried)
            except Exception as e:  # noqa: BLE001 - costs redeliveries only
                self.failed("writing delivery marks at stop", e)
            self._carried = []
        await self._close_lanes()
        await self.background.close()
        await self.admin.stop()
        for srv in self.servers:
            srv.close()
        for r in self.runners:
            await r.cleanup()
        if self.session is not None:
            await self.session.close()
        self.store.close()
        self.journal.close()

    async def _close_lanes(self) -> None:
        """Close every lane, ours and our peers' (their tasks end with them)."""
        ours, self._lanes = list(self._lanes.values()), {}
        theirs = [ln.ws for ln in self._lanes_in.values()]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await asyncio.gather(*(ln.close() for ln in ours),
                                     *(ws.close() for ws in theirs), return_exceptions=True)

    # ---- Host: what the loop performs --------------------------------------------------------
    def send(self, to: Any, msg: Any) -> None:
        self._hold((to, msg))

    def persist(self, what: str, record: Any) -> None:
        self._records.append(record)
        self._hold(None)

    def sync(self) -> None:
        """Nothing here: the committer commits every record of the turn before anything the
        turn sent or replied leaves."""

    def reply(self, token: Any, value: Any) -> None:
        self._hold((None, (token, value)))

    def _waiter(self) -> tuple[int, asyncio.Future[Any]]:
        key = next(self._ids)
        return key, self.answers.wait(key)

    # ---- outgoing ---------------------------------------------------------------------------
    def _snapshot(self) -> dict[str, Any]:
        return {**self.core.snapshot(), "refused": self.refusals.snapshot(),
                "batches": dict(self.batch_stats), "peer_connections": dict(self.conn_stats),
                "group_commits": dict(self.store.commit_stats),
                "jwt": {"signed": self.signer.signed, "checked": self.verifier.checked},
                "admission": {"cap": round(self._slots.cap, 1), "active": self._slots.active},
                "sizes": node_sizes(self),
                # what runs the node (`Options.event_loop`): "uvloop" or "asyncio"
                "event_loop": type(asyncio.get_running_loop()).__module__.split(".")[0]}

    def _note_refusal(self, reason: str, **detail: Any) -> None:
        """Count a refusal; journal it as ``refused`` within the per-reason budget."""
        ev = self.refusals.note(reason, self.clock.monotonic(), **detail)
        if ev is not None:
            self.journal.emit("refused", **ev)

    def _refuse(self, status: int, reason: str, msg: str, ident: str | None) -> web.Response:
        self._note_refusal(reason, peer=ident, status=status, error=msg)
        return _err(status, msg)

    def _needs_statement(self, msg: Message, to: str) -> bool:
        """Whether our answer to a vote carries our own signed yes: only when it goes to a
        relay, which passes it up. The initiator counts the yes of the peer that answers it
        by how the answer came (its token, or its lane's MAC: `admit.Gate.proven`), so a
        statement to it would cost a signature and a check for nothing."""
        return (isinstance(msg, codec.VoteResponse) and msg.uid is not None
                and msg.initiator != to
                and self.me in msg.voters and not any(v == self.me for v, _ in msg.statements))

    def _with_statements(self, msgs: list[Message], to: str) -> list[Message]:
        """Our answers to votes going to ``to`` carry our own signed yes when ``to`` relays
        them upward: one group token (auth.MAX_GROUP votes) for the answers that leave
        together."""
        todo = [i for i, m in enumerate(msgs) if self._needs_statement(m, to)]
        out = list(msgs)
        for at in range(0, len(todo), MAX_GROUP):
            part = todo[at:at + MAX_GROUP]
            digests = []
            for i in part:
                m = msgs[i]
                assert isinstance(m, codec.VoteResponse) and m.uid is not None
                assert m.initiator is not None and m.counter is not None
                digests.append(codec.vote_digest(m.uid, m.initiator, m.counter))
            mine = self.signer.group_token(self.clock.wall(), digests)
            for i in part:
                m = msgs[i]
                assert isinstance(m, codec.VoteResponse)
                out[i] = replace(m, statements=tuple(sorted((*m.statements, (self.me, mine)))))
        return out

    def _auth_for(self, msg: Message) -> str:
        forwarded = getattr(msg, "auth", None)
        return forwarded if forwarded else self.signer.header(
            self.clock.wall(), codec.signed_digest(msg), once=not isinstance(msg, codec.FLOODED))

    def _batch_auth(self, data: bytes) -> str:
        """A POST /batch's own token: it binds the body bytes we send (`codec.batch_digest`).
        A lane's exchange has none: its frame's MAC under the lane key stands for it."""
        return self.signer.header(self.clock.wall(), codec.batch_digest(self.me, data),
                                  once=True)

    async def _request(self, to: str, msg: Message, auth: str | None = None) -> int:
        """One HTTPS request to a peer; how it ended goes back to the core. ``auth``: the
        Authorization made for it already (a flooded message's, shared by all peers)."""
        assert self.session is not None
        sent = self._with_statements([msg], to)[0]
        req = codec.encode(sent)
        headers = {**req.headers, codec.H_AUTH: auth or self._auth_for(sent)}
        if req.body is not None:
            headers["Content-Type"] = "application/json"
        timeout = self.opts.peer_timeout_s
        if isinstance(msg, codec.SyncBatch):
            timeout = max(5.0, timeout)
        status, body = 0, None
        try:
            self.conn_stats["requests"] += 1
            async with self.session.request(
                    req.method, _url(self.peer_urls, to) + req.path, headers=headers,
                    data=req.body_bytes(), server_hostname=to,
                    timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                raw = await r.read()
                status = r.status
                body = self._reply_body(to, raw)
                if isinstance(msg, codec.OutcomeQuery):  # only the initiator's word aborts
                    body, why = abort_proof.check(body, msg, self.verifier, self.clock.wall())
                    if why is not None:
                        self._note_refusal("unproven-outcome", peer=to, uid=msg.uid, error=why)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.debug("%s -> %s %s failed: %s", self.me, to, type(msg).__name__, e)
            body = f"{type(e).__name__}: {e}"
        finally:  # the core hears how every send ended, whatever it raised (its outbox waits)
            if status not in (0, 200):
                log.debug("%s -> %s %s: %s %s", self.me, to, type(msg).__name__, status, body)
            self._queue((None, to, Outcome(msg, status, body)))
        return status

    def _reply_body(self, to: str, raw: bytes) -> Any:
        """A peer's JSON answer, or None when it is malformed or too deep (noted as a
        ``malformed-reply``); the answer's status still counts."""
        try:
            return codec.decode_json(raw)
        except CodecError as e:
            self._note_refusal("malformed-reply", peer=to, error=str(e))
            return None

    async def _ask(self, to: str, msg: codec.OutcomeQuery) -> None:
        """An outcome question, at most OUTCOME_PER_PEER at once per peer (peerslots.py)."""
        async with self._asking.slot(to):
            await self._request(to, msg)

    def _send_batches(self, batches: dict[str, list[Message]]) -> None:
        """Queue the vote-path messages of a group for each peer. A flooded message we
        initiate gets one token cell, shared by every peer's copy and signed when the first
        copy leaves, with every other one of ours still waiting then (floodauth.py)."""
        cells: dict[int, Cell] = {}
        for to, msgs in batches.items():
            q = self._outq.setdefault(to, [])
            for m in msgs:
                c = None
                if isinstance(m, codec.FLOODED) and not m.auth:
                    c = cells.get(id(m))
                    if c is None:
                        c = cells[id(m)] = self._flood_tokens.cell(codec.signed_digest(m))
                q.append((m, c))
            self._pump_peer(to)

    def _pump_peer(self, to: str) -> None:
        """Send what waits for ``to`` while fewer than ``peer_pipeline`` requests to it are
        on their way: all of it in one request (up to codec.MAX_BATCH items)."""
        q = self._outq.get(to)
        if q and self._answers_coming(to):
            return  # they go together once our answers are sealed (`_lane_answers`)
        if q and self._flying.get(to, 0) < self.opts.peer_pipeline:
            self._spare(to, q)
        while q and self._flying.get(to, 0) < self.opts.peer_pipeline:
            n, size = 0, 0
            while n < min(len(q), codec.MAX_BATCH) and (n == 0 or size < self._batch_bytes):
                up = getattr(q[n][0], "update", None)  # values dominate an item's size
                size += 1024 + (up.json_size() if up is not None else 0)
                n += 1
            chunk = q[:n]
            del q[:n]
            self._flying[to] = self._flying.get(to, 0) + 1
            self.background.spawn(self._send_chunk(to, chunk))

    def _answers_coming(self, to: str) -> bool:
        """Whether our answers to an exchange ``to`` sent us are on their way through our
        pass (none sealed yet) while our lane to ``to`` is open: an exchange of ours sent now
        would go without them, and they would need a frame of their own. They are sealed
        within the pass's commit, which waits on nothing else, so holding costs a turn."""
        if not self.opts.lane_riders:
            return False
        inbound, ln = self._lanes_in.get(to), self._lanes.get(to)
        return (inbound is not None and inbound.unanswered > 0 and not inbound.ready
                and ln is not None and not ln.dead)

    def _spare(self, to: str, q: list[tuple[Message, Cell | None]]) -> None:
        """Drop from ``q`` the flooded messages ``to`` sent us itself while they waited: it
        has them (it records a /voting's counter, and applies a commit, before forwarding),
        so the answer it would give is known: a /voting's ``duplicate``, a commit's 200."""
        has = self._peer_has.get(to)
        if not has:
            return
        keep = []
        for m, tok in q:
            k = _flood_key(m)
            if k is None or k not in has:
                keep.append((m, tok))
                continue
            self.batch_stats["spared"] += 1
            body = DUPLICATE if isinstance(m, codec.Voting) else OK
            self._queue((None, to, Outcome(m, 200, body)))
        q[:] = keep

    async def _send_chunk(self, to: str, chunk: list[tuple[Message, Cell | None]]) -> None:
        """One request for ``chunk``; when it got no answer at all (timeout, refused, reset),
        what waits for the same peer fails with it at once, as it would have had it been sent
        alongside, instead of reaching a peer that comes back long after its vote is over."""
        status = 0
        try:
            if any(c is not None and c.auth is None for _, c in chunk):
                self._flood_tokens.settle()
            tokens = {id(m): c.auth for m, c in chunk if c is not None and c.auth is not None}
            laned = None
            if self.opts.lane and to not in self._no_lane and to not in self._no_batch:
                laned = await self._request_lane(to, [m for m, _ in chunk], tokens)
            if laned is not None:
                status = laned
            elif len(chunk) == 1 or to in self._no_batch:
                for m, _ in chunk:
                    status = await self._request(to, m, tokens.get(id(m)))
            else:
                status = await self._request_batch(to, [m for m, _ in chunk], tokens)
        finally:
            self._flying[to] -= 1
            if status == 0:
                for m, _ in self._outq.pop(to, []):
                    self._queue((None, to, Outcome(m, 0, "not sent: the request before it to "
                                                   "this peer got no answer")))
            self._pump_peer(to)

    async def _request_batch(self, to: str, msgs: list[Message], tokens: dict[int, str]
                             ) -> int:
        """One POST /batch to a peer; each message's outcome goes back to the core on its own,
        whatever ended the request (as `_request`: a commit left in flight would stall the
        peer's outbox for good)."""
        assert self.session is not None
        status, body = 0, None
        try:
            req, data = self._batch_body(to, msgs, tokens)
            self.batch_stats["sent"] += 1
            self.batch_stats["sent_items"] += len(msgs)
            headers = {**req.headers, "Content-Type": "application/json",
                       codec.H_AUTH: self._batch_auth(data)}
            self.conn_stats["requests"] += 1
            async with self.session.post(
                    _url(self.peer_urls, to) + req.path, headers=headers, data=data,
                    server_hostname=to,
                    timeout=aiohttp.ClientTimeout(total=self.opts.peer_timeout_s)) as r:
                raw = await r.read()
                status = r.status
                body = self._reply_body(to, raw)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            body = f"{type(e).__name__}: {e}"
        finally:
            if status == 404:  # a peer without our extension: single requests from now on
                self._no_batch.add(to)
                for m in msgs:
                    self.background.spawn(self._request(to, m, tokens.get(id(m))))
            else:
                self._batch_outcomes(to, msgs, status, body)
        return status

    def _batch_body(self, to: str, msgs: list[Message], tokens: dict[int, str]
                    ) -> tuple[codec.HttpRequest, bytes]:
        """The POST /batch of ``msgs`` to ``to`` and its body bytes, encoded once: its token
        binds these very bytes (`_batch_auth`), or a lane frame's MAC does."""
        items: list[Message] = []
        for m in self._with_statements(msgs, to):
            if isinstance(m, codec.FLOODED) and not m.auth:
                if id(m) not in tokens:
                    tokens[id(m)] = self._auth_for(m)
                m = replace(m, auth=tokens[id(m)])
            items.append(m)
        req = codec.encode(codec.Batch(self.me, tuple(items)))
        return req, req.body_bytes()

    async def _request_lane(self, to: str, msgs: list[Message], tokens: dict[int, str]
                            ) -> int | None:
        """One batch exchange on our lane to ``to`` (opened if need be); its outcomes as a
        POST /batch's (`_batch_outcomes`), and its status. A lane that closes, errs or gives
        no answer in ``peer_timeout_s`` fails the exchange as a batch with no answer (status
        0) and is dropped. None: the upgrade was answered without one, so the caller sends
        ``msgs`` as it would without lanes (POST /batch or single requests), whose answer
        says why; a peer that answered 404 (or 2xx/3xx: a server with no WebSocket there,
        another implementation) gets no more upgrades."""
        status, body, ln, fallback = 0, None, None, False
        try:
            try:
                ln = self._lanes.get(to)
                if ln is None or not self._lane_usable(ln):
                    ln = await self._lane_to(to)
            except aiohttp.WSServerHandshakeError as e:
                if e.status == 404 or e.status < 400:
                    self._no_lane.add(to)
                    self.journal.emit("lane-unsupported", peer=to, status=e.status)
                fallback = True
                return None
            _, data = self._batch_body(to, msgs, tokens)
            self.batch_stats["lane_exchanges"] += 1
            self.batch_stats["lane_items"] += len(msgs)
            riders = self._lanes_in.get(to) if self.opts.lane_riders else None
            status, raw = await ln.exchange(data, self.opts.peer_timeout_s,  # sealed: lane key
                                            riders)
            body = self._reply_body(to, raw)
        except (lane.LaneClosed, aiohttp.ClientError, TimeoutError, OSError) as e:
            body = f"lane: {type(e).__name__}: {e}"
            self.batch_stats["lane_failed"] += 1
            if ln is not None:
                self._drop_lane(to, ln)
        finally:  # whatever ended it (as `_request_batch`: a commit left in flight would
            if not fallback:  # stall the peer's outbox for good)
                self._batch_outcomes(to, msgs, status, body)
        return status

    def _lane_usable(self, ln: lane.Outbound) -> bool:
        """Whether an exchange may go on ``ln`` now: it is open, and young or busy."""
        return not ln.dead and (bool(ln.waiting) or self.clock.monotonic() - ln.opened
                                < self.opts.lane_max_age_s)

    async def _lane_to(self, to: str) -> lane.Outbound:
        """Our open lane to ``to``, or a new one: a fresh key (`lane.new_key`) in the upgrade's
        ``DRiP-Lane-Key``, the upgrade signed as any request on our own behalf (its token binds
        the key), on the peer session (same TLS client certificate and server name). A lane
        past ``lane_max_age_s`` is closed and replaced at its first idle moment (no exchange
        waiting: with ``peer_pipeline`` 1, the next exchange), so that no exchange on it fails:
        the acceptor closes its old lane as it takes the new."""
        async with self._lane_locks.setdefault(to, asyncio.Lock()):
            ln = self._lanes.get(to)
            if ln is not None and not ln.dead:
                if self._lane_usable(ln):
                    return ln
                self._retire_lane(to, ln, f"lane older than lane_max_age_s "
                                          f"({self.opts.lane_max_age_s:g} s): a new one opens")
            assert self.session is not None
            url = _url(self.peer_urls, to) + lane.PATH
            key = lane.new_key()
            opening = codec.LaneOpen(self.me, key.hex())
            headers = {**codec.encode(opening).headers, codec.H_AUTH: self._auth_for(opening)}
            trust, opened = self._lane_trust(to), self.clock.monotonic()
            self.conn_stats["requests"] += 1
            async with asyncio.timeout(self.opts.peer_timeout_s):
                ws = await self.session.ws_connect(
                    url, headers=headers, server_hostname=to, autoping=True, compress=0,
                    max_msg_size=self._peer_body_max + lane.HEAD + 2,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=1.0))
            ln = lane.Outbound(ws, lane.Seal(key), opened, trust)
            self._lanes[to] = ln
            self.batch_stats["lane_opened"] += 1
            self.background.spawn(self._run_lane(to, ln))
            if trust != self._lane_trust(to):  # the membership changed while it opened
                self._retire_lane(to, ln, "lane opened under a membership entry since changed")
            return ln

    async def _run_lane(self, to: str, ln: lane.Outbound) -> None:
        try:
            await ln.run()
        finally:
            if self._lanes.get(to) is ln:
                del self._lanes[to]
            if ln.bad_frame is not None:  # as the acceptor counts a bad exchange frame
                self._note_refusal("lane-frame", peer=to, error=ln.bad_frame)

    def _drop_lane(self, to: str, ln: lane.Outbound,
                   why: str = "lane dropped: an exchange on it failed") -> None:
        if self._lanes.get(to) is ln:
            del self._lanes[to]
        ln.end(why)
        self.background.spawn(ln.ws.close())

    def _retire_lane(self, to: str, ln: lane.Outbound, why: str) -> None:
        """Close our lane ``ln`` to ``to`` for ``why`` (its age, or a change of the trust it
        was opened under: what still waits on it then fails, as on a dropped lane)."""
        self.batch_stats["lane_retired"] += 1
        self.journal.emit("lane-retired", peer=to, way="out", why=why)
        self._drop_lane(to, ln, why)

    def _lane_trust(self, peer: str) -> Any:
        """What a lane with ``peer`` is opened under: whether it is a peer and a member, and
        its agreed membership entry (address, pinned certificate, JWT key). When it changes
        the lanes both ways close (`_retire_lanes`): their key was taken under the old."""
        return (peer in self.core.peers, peer in self.core.members,
                self.core.addresses.get(peer))

    def _retire_lanes(self) -> None:
        """After an agreed membership change: close every lane, ours and our peers', whose
        peer's view (`_lane_trust`) is no longer the one it was opened under (decommissioned,
        re-addressed, another certificate or JWT key). Checked once per epoch."""
        if self.core.epoch == self._lanes_epoch:
            return
        self._lanes_epoch = self.core.epoch
        why = "the peer's membership entry changed"
        for to, ln in list(self._lanes.items()):
            if ln.trust != self._lane_trust(to):
                self._retire_lane(to, ln, why)
        for peer, inbound in list(self._lanes_in.items()):
            if inbound.trust != self._lane_trust(peer):
                self._close_lane_in(peer, inbound.ws, why)

    def _forget_lane_in(self, peer: str, ws: web.WebSocketResponse) -> None:
        """``peer``'s lane to us is no longer ``ws`` (unless a newer one replaced it)."""
        inbound = self._lanes_in.get(peer)
        if inbound is not None and inbound.ws is ws:
            del self._lanes_in[peer]
            if inbound.unanswered:  # what waited for its answers (`_answers_coming`) goes
                self._pump_peer(peer)

    def _close_lane_in(self, peer: str, ws: web.WebSocketResponse, why: str) -> None:
        """Close the lane ``peer`` opened to us (its serving loop ends with it)."""
        self._forget_lane_in(peer, ws)
        self.batch_stats["lane_retired"] += 1
        self.journal.emit("lane-retired", peer=peer, way="in", why=why)
        self.background.spawn(ws.close())

    def _batch_outcomes(self, to: str, msgs: list[Message], status: int, body: Any) -> None:
        """Each item's answer, or the whole request's failure as each item's own."""
        answers = body.get("answers") if status == 200 and isinstance(body, dict) else None
        if not isinstance(answers, list) or len(answers) != len(msgs) or not all(
                isinstance(a, dict) for a in answers):
            answers = [{"status": status if status != 200 else 0, "body": body}] * len(msgs)
        for m, a in zip(msgs, answers, strict=True):
            st = a.get("status")
            o = Outcome(m, st if isinstance(st, int) else 0, a.get("body"))
            if self.core.acts_on(o):  # (an answer that is nothing to the core costs no pass)
                self._queue((None, to, o))

    # ---- group commit -------------------------------------------------------------------------
    # Durability rule (unchanged): nothing a peer or client hears leaves before every record
    # persisted up to it is fsynced. How: inputs that arrive in one event-loop turn go to the
    # core together (`CoreLoop.inputs`); the records of a turn (and of timers) are buffered,
    # and the sends and replies of that turn are held. A committer task, run once the loop's
    # ready callbacks are done, writes and commits the buffered records of every turn queued
    # by then in one transaction and one fsync, then releases their held sends and replies
    # in order. It commits on the event loop, not in a worker thread: the thread hand-off
    # (executor submit, the GIL passed back and forth, the loop woken through its self-pipe)
    # cost more CPU than the fsync it freed the loop from (0.13-0.17 ms here; docs/drip.md,
    # "Commit speed, session 44", has the figures). While the
    # fsync runs, what arrives waits in the socket buffers and goes to the core in the next
    # turn together, so a slow disk makes groups bigger, not the promise weaker.
    def _queue(self, item: tuple[Any, Any, Any], answered_at_once: int | None = None) -> None:
        """An input for the core's next pass; ``answered_at_once``: a peer request's key,
        answered None if the core gives no answer in that pass (it failed on it)."""
        self._inbox.append((item, answered_at_once))
        peer, msg = item[1], item[2]
        if isinstance(peer, Inbound) and (k := _flood_key(msg)) is not None:
            _remember(self._peer_has.setdefault(peer.hop, {}), k, None, PEER_HAS_MAX)
        if len(self._inbox) == 1:
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        batch, self._inbox = self._inbox, []
        with self.journal.held():  # the turn's events in one write; its effects wait anyway
            self.loop.inputs(item for item, _ in batch)
        self._rewire()  # before the pass's sends leave: they may go to a member just added
        self._retire_lanes()
        self._unanswered.extend(key for _, key in batch if key is not None)
        self._hold(None)

    def _hold(self, item: tuple[Any, Any] | None) -> None:
        if item is not None:
            self._held.append(item)
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """End of a turn: its records, sends and replies become one group for the committer."""
        self._flush_soon = False
        group = (self._records, self._held, self._unanswered)
        self._records, self._held, self._unanswered = [], [], []
        self._groups.append(group)
        if not self._committing:
            self._committing = True
            asyncio.get_running_loop().call_soon(self._committer)

    def _committer(self) -> None:
        """The committer: a callback, not a task (it never waits: the commit runs on the
        loop), so a turn costs no task of its own; guarded as a task is, so that whatever
        raises is journaled and the next turn still gets its committer."""
        try:
            self._commit_groups()
        except Exception as e:  # noqa: BLE001 - a bug of ours: journal it, go on
            self.journal.node_error("group committer", e, evidence=False, logger=log)
        finally:
            self._committing = False

    def _commit_groups(self) -> None:
        while self._groups:
            groups, self._groups = self._groups, []
            records = [r for g in groups for r in g[0]]
            if records and len(self._carried) < _MAX_CARRIED and \
                    all(isinstance(r, Delivered) for r in records):
                # only delivery marks: they need no fsync (a lost one costs an idempotent
                # redelivery), so they ride in the next durable group instead of a SQLite
                # transaction and a thread trip of their own (docs/drip.md)
                self._carried += records
                records = []
            elif records:
                records, self._carried = self._carried + records, []
            ok = True
            if records:
                try:
                    self.store.commit_records(records)  # on the loop: see above
                except Exception as e:  # a full disk: promise nothing that is not durable
                    log.exception("group commit failed")
                    self.failed("group commit", e)
                    ok = False
            if not ok:
                self._storage_failed(groups)
                continue
            for _, held, unanswered in groups:
                batches: dict[str, list[Message]] = {}
                for to, msg in held if ok else ():
                    if to is None:
                        self.answers.give(*msg)
                    elif isinstance(to, Inbound):
                        self.answers.give(to.conn, msg)
                    elif self.opts.batch and to not in self._no_batch \
                            and isinstance(msg, codec.BATCHED):
                        batches.setdefault(to, []).append(msg)
                    elif isinstance(msg, codec.OutcomeQuery):  # a burst waits its turn
                        self.background.spawn(self._ask(to, msg))
                    else:
                        self.background.spawn(self._request(to, msg))
                self._send_batches(batches)
                for key in unanswered:
                    self.answers.give(key, None)  # not answered: the core failed on it

    def _storage_failed(self, groups: list[tuple[list[Any], list[tuple[Any, Any]], list[int]]]
                        ) -> None:
        """Records could not be made durable: every turn since the failing one rests on
        them, so none of their sends or answers leaves. Each client waiting on them gets an
        error now (409 for an update: rolled back and sent nowhere, so it never commits),
        each peer request a 500, each dropped send its failed ``Outcome`` (so the outbox and
        votes move on); then the core goes back to what the store holds."""
        groups = [*groups, *self._groups, (self._records, self._held, self._unanswered)]
        self._groups, self._records, self._held, self._unanswered = [], [], [], []
        why = f"storage failure on node {self.me}: the outcome could not be made durable"
        for _, held, unanswered in groups:
            for to, msg in held:
                if to is None:
                    token, value = msg
                    two_pc = isinstance(value, Answer) and value.body.get("result") in (
                        "committed", "aborted")
                    self.answers.give(token, Answer(409, {"result": "aborted", "error": why
                                                          + "; rolled back, retry"})
                                      if two_pc else Answer(500, {"error": why}))
                elif not isinstance(to, Inbound):
                    self._queue((None, to, Outcome(msg, 0, why)))
            for key in unanswered:
                self.answers.give(key, None)
        try:
            disk = self.store.load()
        except Exception as e:  # noqa: BLE001 - journaled; the node goes on as it can
            self.failed("reloading the store after a storage failure", e)
            return
        self.loop.perform(self.core.storage_failed(disk))

    # ---- incoming from peers ----------------------------------------------------------------
    async def handle_peer(self, req: web.Request) -> web.Response:
        ident = peer_identity(req.transport.get_extra_info("peercert") if req.transport else None)
        # only a member added at run time has its certificate pinned (`_rewire`)
        cert = _cert_sha256(req) if ident in self._wired else None
        status, body = await self._peer_exchange(ident, cert, req.method, req.path,
                                                 req.headers, req.read, self.clock.wall(),
                                                 req.remote)
        return _json(body, status=status)

    async def _admit(self, ident: str | None, cert: str | None, method: str, path: str,
                     headers: Mapping[str, str], body: bytes | Callable[[], Awaitable[bytes]],
                     now: float, source: str | None) -> Message | tuple[int, Any]:
        """Every check on one peer request (`nodes.drip.admit.Gate`): the message for the
        core, or the refusal's (status, body), counted, journaled and charged. ``body``: the
        bytes, or how to read them (only once the head passed). The one way in for a
        request and a lane's upgrade; a lane's exchange takes `_admit_now` (its bytes are
        in hand)."""
        head = self.gate.head(ident, cert, headers, now, method, path)
        if isinstance(head, Refusal):
            return self._refused(head, ident, source, headers)
        raw = body if isinstance(body, bytes) else await body()
        return self._admit_body(head, ident, method, path, headers, raw, now, source, False)

    def _admit_now(self, ident: str | None, cert: str | None, method: str, path: str,
                   headers: Mapping[str, str], raw: bytes, now: float, source: str | None,
                   laned: bool) -> Message | tuple[int, Any]:
        """`_admit` of a request whose body is in hand (``laned``: a batch whose frame's MAC
        under the lane's key checked out, so it has no token of its own)."""
        head = self.gate.head(ident, cert, headers, now, method, path)
        if isinstance(head, Refusal):
            return self._refused(head, ident, source, headers)
        return self._admit_body(head, ident, method, path, headers, raw, now, source, laned)

    def _admit_body(self, head: Any, ident: str | None, method: str, path: str,
                    headers: Mapping[str, str], raw: bytes, now: float, source: str | None,
                    laned: bool) -> Message | tuple[int, Any]:
        unproven = self.refusals.counts.get("unproven-vote", 0)
        msg = self.gate.body(head, method, path, headers, raw, now, laned=laned)
        if isinstance(msg, Refusal):
            return self._refused(msg, ident, source, headers)
        if self.refusals.counts.get("unproven-vote", 0) > unproven:
            self._charge(source, ident, headers)  # a yes naming voters it cannot prove
        return msg

    async def _peer_exchange(self, ident: str | None, cert: str | None, method: str, path: str,
                             headers: Mapping[str, str],
                             body: bytes | Callable[[], Awaitable[bytes]], now: float,
                             source: str | None) -> tuple[int, Any]:
        """One peer request: checked by `_admit`, handled, answered as (status, JSON body)
        once what it answers is durable."""
        msg = await self._admit(ident, cert, method, path, headers, body, now, source)
        if isinstance(msg, tuple):
            return msg
        assert ident is not None  # the gate refuses a request without a peer certificate
        if isinstance(msg, codec.Batch):
            return await self._take_batch(ident, msg, now, False)
        if isinstance(msg, codec.LaneOpen):  # a WebSocket upgrade, not a request
            return 400, {"error": f"GET {lane.PATH} opens a lane: a WebSocket upgrade"}
        key, fut = self._waiter()
        self._queue((None, Inbound(ident, key), msg), key)
        answer = await fut
        if answer is None:  # the core failed on it (journaled as a node error)
            return 500, {"error": f"node {self.me} could not handle {type(msg).__name__}; "
                                  "see its journal"}
        assert isinstance(answer, Answer)
        if 400 <= answer.status < 500:
            self._charge(source, ident, headers)  # refused by the core (its own count, journal)
        if isinstance(msg, codec.OutcomeQuery):  # our "aborted" as initiator goes out signed
            return answer.status, abort_proof.sign(answer.body, msg, self.me, self.signer,
                                                   self.clock.wall())
        return answer.status, answer.body

    def _refused(self, r: Refusal, ident: str | None, source: str | None,
                 headers: Mapping[str, str] | None) -> tuple[int, Any]:
        """A request the gate refused: counted, journaled, answered; charged to its source
        address's connection bucket (``conn_rate``) unless a peer relayed it in another
        member's name (a correct relay passes on what its own checks let through)."""
        self._note_refusal(r.reason, peer=ident, status=r.status, error=r.error)
        self._charge_source(source, ident, headers)
        return r.status, r.body()

    def _charge(self, source: str | None, ident: str | None,
                headers: Mapping[str, str] | None) -> None:
        """What passed the gate but was refused further on (``charge_core_refusals``):
        charged to its source like a gate refusal. The flood's commits with no vote, re-votes
        and unproven yeses were admitted free and so kept the attacker's connections coming
        (a TLS handshake each)."""
        if self.opts.charge_core_refusals:
            self._charge_source(source, ident, headers)

    def _charge_source(self, source: str | None, ident: str | None,
                       headers: Mapping[str, str] | None) -> None:
        """One token off the source address's connection bucket, unless a peer relayed the
        request in another member's name (``headers`` None: never relayed)."""
        if self._peer_listener is not None and not (headers is not None
                                                    and self._relayed(headers, ident)):
            self._peer_listener.charge(source)

    @staticmethod
    def _relayed(headers: Mapping[str, str], ident: str | None) -> bool:
        """Whether a request carries another member's message (a well-formed DRiP-Node-ID
        other than the TLS peer's)."""
        try:
            return codec.parse_node_id(headers.get(codec.H_NODE)) != ident
        except CodecError:
            return False

    # ---- lanes: batches over one WebSocket per link (nodes/drip/lane.py) ----------------------
    async def handle_lane(self, req: web.Request) -> web.StreamResponse:
        """GET /lane: a peer opens its lane to us. The upgrade is admitted as any request
        (`_admit`: its token binds its ``DRiP-Lane-Key``); each frame then is a POST /batch
        from that peer, authenticated by its MAC under that key (`_serve_lane`)."""
        if not self.opts.lane:  # as a node without the extension: the sender uses /batch
            return _err(404, f"no DRiP endpoint GET {lane.PATH} on {self.me} (option lane off)")
        ident = peer_identity(req.transport.get_extra_info("peercert") if req.transport else None)
        cert = _cert_sha256(req) if ident in self._wired else None
        got = await self._admit(ident, cert, req.method, req.path, req.headers, b"",
                                self.clock.wall(), req.remote)
        if isinstance(got, tuple):
            return _json(got[1], status=got[0])
        if not isinstance(got, codec.LaneOpen) or ident is None:
            return _err(400, f"{req.method} {req.path}: not a lane upgrade")
        ws = web.WebSocketResponse(compress=False, autoping=True,
                                   max_msg_size=self._peer_body_max + lane.HEAD
                                   + lane.RIDERS_MAX_OVERHEAD)
        if not ws.can_prepare(req).ok:
            return _err(400, f"GET {lane.PATH} must be a WebSocket upgrade")
        trust = self._lane_trust(ident)
        await ws.prepare(req)
        old = self._lanes_in.get(ident)
        if old is not None:  # at most one lane per peer: the newest replaces the old
            self.background.spawn(old.ws.close())
        # (got.sender is ident: the gate's own-behalf check on a LaneOpen)
        seal = lane.Seal(bytes.fromhex(got.key))
        inbound = self._lanes_in[ident] = lane.Inbound(ws, trust, seal.tag)
        self.batch_stats["lane_accepted"] += 1
        if trust != self._lane_trust(ident):  # the membership changed while it opened
            self._close_lane_in(ident, ws, "lane opened under a membership entry since changed")
        try:
            async with asyncio.timeout(self.opts.lane_max_age_s + self.opts.peer_timeout_s
                                       + 1.0):
                await self._serve_lane(inbound, ident, cert, req.remote, seal)
        except TimeoutError:  # its opener should have opened a new one by now
            self.batch_stats["lane_retired"] += 1
            self.journal.emit("lane-retired", peer=ident, way="in",
                              why="lane older than lane_max_age_s")
        finally:
            self._forget_lane_in(ident, ws)
            await ws.close()
        return ws

    async def _serve_lane(self, inbound: lane.Inbound, ident: str, cert: str | None,
                          source: str | None, seal: lane.Seal) -> None:
        """Each exchange frame whose MAC and seq check out (``seal``) handled as a POST /batch
        from ``ident`` (concurrently, as requests on several connections would be), its
        answer sent in order (`_lane_answers`); the answers riding on it go to our own lane
        to ``ident`` (`_take_riders`). At most `lane.MAX_IN_FLIGHT` exchanges wait for their
        answer to leave; past them the lane is not read (TCP pushes back), as a peer cannot
        send a request on a connection whose previous answer it has not read. A frame that
        is not one of ours (framing, MAC, seq, riders) ends the lane: it can no longer be
        trusted."""
        ws = inbound.ws
        order: asyncio.Queue[Pending] = asyncio.Queue(maxsize=lane.MAX_IN_FLIGHT)
        writer = self.background.spawn(self._lane_answers(ident, inbound, order, seal))
        headers = {codec.H_NODE: ident}
        try:
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING,
                                aiohttp.WSMsgType.CLOSED):
                    return
                why = None
                if msg.type != aiohttp.WSMsgType.BINARY:
                    why = (f"a {msg.type.name} frame on a lane: only binary exchange frames "
                           f"({msg.data if msg.type == aiohttp.WSMsgType.ERROR else 'text'})")
                else:
                    try:  # (max_msg_size bounds it: a POST /batch body's, and riders)
                        tag, riders, body = lane.split_riders(seal.take_exchange(msg.data))
                        if len(body) > self._peer_body_max:
                            why = (f"lane frame: a batch of {len(body)} bytes, over the "
                                   f"{self._peer_body_max} a POST /batch body may have")
                    except lane.LaneFrameError as e:
                        why = str(e)
                if why is not None:  # the channel cannot be trusted: the lane ends
                    self._note_refusal("lane-frame", peer=ident, status=400, error=why)
                    self._charge_source(source, ident, None)
                    return
                self.batch_stats["lane_taken"] += 1
                if riders:
                    self._take_riders(ident, tag, riders)
                inbound.unanswered += 1
                pending = self._lane_exchange(ident, cert, headers, body, source)
                if not order.full():
                    order.put_nowait(pending)
                    continue
                put = asyncio.ensure_future(order.put(pending))
                await asyncio.wait({put, writer}, return_when=asyncio.FIRST_COMPLETED)
                if not put.done():  # the answers stopped: the lane is gone
                    put.cancel()
                    return
        finally:
            writer.cancel()

    def _lane_exchange(self, ident: str, cert: str | None, headers: Mapping[str, str],
                       body: bytes, source: str | None) -> Pending:
        """A lane's exchange checked and handed to the core as a POST /batch from ``ident``
        would be (`_admit_now`, `_take_batch`), in this turn: no task of its own. Its answer:
        (status, body) now when refused, else a future of it."""
        try:
            msg = self._admit_now(ident, cert, "POST", "/batch", headers, body,
                                  self.clock.wall(), source, True)
            if isinstance(msg, tuple):
                return msg
            if not isinstance(msg, codec.Batch):  # a lane's frames are batches by routing
                return 400, {"error": f"a lane carries batches, not {type(msg).__name__}"}
            return self._take_batch(ident, msg, self.clock.wall(), True)
        except Exception as e:  # noqa: BLE001 - a bug of ours, never a peer's way to kill us
            self.journal.node_error("lane exchange", e, evidence=False, logger=log)
            return 500, {"error": f"node {self.me} could not handle it; see its journal"}

    async def _lane_answers(self, ident: str, inbound: lane.Inbound,
                            order: asyncio.Queue[Pending], seal: lane.Seal) -> None:
        """The answers to ``ident``'s exchanges, sealed in order; each rides on an exchange of
        ours to ``ident`` if one leaves in the next turn (the pump is asked now: what waited
        for these answers goes with them), else goes as an answer frame of its own."""
        while True:
            got = await order.get()
            status, body = got if isinstance(got, tuple) else await got
            inbound.ready.append(seal.answer(status, fastjson.dumps(body)))
            inbound.unanswered -= 1
            self.batch_stats["lane_answers"] += 1
            if self.opts.lane_riders:
                self._pump_peer(ident)  # a task: its frame is sealed in the next turn
                await asyncio.sleep(0)  # (after it) what it did not take goes on its own
            while inbound.ready:
                try:
                    await inbound.ws.send_bytes(inbound.ready.pop(0))
                except ConnectionError:  # the peer went: its exchanges fail at its end
                    return
                self.batch_stats["lane_answer_frames"] += 1

    def _take_riders(self, ident: str, tag: bytes | None, answers: list[bytes]) -> None:
        """Answers that rode on ``ident``'s exchange, to our lane they answer (``tag``). A
        lane of ours since replaced is not theirs: its exchanges failed with it, so they are
        dropped (``lane_stale_riders``). One that is not ours ends that lane, as a bad answer
        on its own socket does (counted ``lane-frame`` when its reader stops)."""
        ln = self._lanes.get(ident)
        if ln is None or ln.seal.tag != tag:
            self.batch_stats["lane_stale_riders"] += len(answers)
            return
        for a in answers:
            try:
                ln.take(a)
            except lane.LaneFrameError:
                self._drop_lane(ident, ln, ln.why)
                return

    def _take_batch(self, ident: str, batch: codec.Batch, now: float, lane_: bool
                    ) -> asyncio.Future[tuple[int, Any]]:
        """Each item judged on its own; all go to the core in one pass (one fsync). The
        batch's answer: a future of (200, {answers}), set when the core has answered every
        item (`_Gathered`)."""
        if lane_:  # (the lane's exchanges are counted as they are read: ``lane_taken``)
            self.batch_stats["lane_taken_items"] += len(batch.items)
        else:
            self.batch_stats["taken"] += 1
            self.batch_stats["taken_items"] += len(batch.items)
        fut: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()
        gathered = _Gathered(len(batch.items), fut, f"node {self.me} could not handle it; "
                                                    "see its journal")
        for i, m in enumerate(batch.items):
            admitted = self.gate.item(ident, m, now)
            if isinstance(admitted, Refusal):
                self._note_refusal(admitted.reason, peer=ident, status=admitted.status,
                                   error=admitted.error)
                gathered.put(i, Answer(admitted.status, {"error": admitted.error}))
                continue
            key = next(self._ids)
            self.answers.then(key, functools.partial(gathered.put, i))
            self._queue((None, Inbound(ident, key), admitted), key)
        return fut

    # ---- our client endpoint (not in the spec) ------------------------------------------------
    async def handle_update(self, req: web.Request) -> web.Response:
        """POST /client/update {id, key, value, owner?}: initiate an update, wait for the outcome.

        200 committed; 409 aborted (certainly not committed); 503 not initiated; 400 bad input;
        504 no outcome in time (unknown).
        """
        if (refused := self._client_auth(req)) is not None:
            return refused
        try:
            up = Update.from_json(codec.decode_json(await req.read()), self.limits)
        except CodecError as e:
            return self._refuse(400, "client-malformed", str(e), None)
        except web.HTTPRequestEntityTooLarge as e:
            return self._refuse(400, "client-too-large", f"{e.text}: the maximum value size is "
                                f"{self.opts.max_value_bytes} bytes (option max_value_bytes)",
                                None)
        try:
            async with asyncio.timeout(self.opts.vote_timeout_s + 5.0):
                await self._slots.acquire()
        except TimeoutError:
            return _err(503, f"node {self.me} is busy: {self._slots.active} updates "
                             "in flight for longer than the client timeout; not initiated, "
                             "retry later")
        t0 = self.clock.monotonic()
        try:
            return await self._decided(ClientUpdate(up))
        finally:
            now = self.clock.monotonic()
            self._slots.release(now - t0, now)

    def _client_auth(self, req: web.Request) -> web.Response | None:
        """None when the client API is open or the request carries its bearer token; else
        the 401 (counted as ``client-unauthorized``), before the body is read."""
        if self.client_token is None:
            return None
        given = req.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), b"Bearer " + self.client_token.encode()):
            return None
        resp = self._refuse(401, "client-unauthorized", "the client API needs "
                            "'Authorization: Bearer <token>' (option client_token_file)", None)
        resp.headers["WWW-Authenticate"] = "Bearer"
        return resp

    async def handle_members(self, req: web.Request) -> web.Response:
        """POST /admin/members {id, add?: [ids], remove?: [ids]}: a membership change, agreed
        by 2PC like an update and answered the same way (docs/drip.md "Membership")."""
        try:
            body = codec.decode_json(await req.read())
            uid, add, rm = body["id"], body.get("add") or [], body.get("remove") or []
            raw = body.get("addresses") or {}
            if not isinstance(uid, str) or not isinstance(add, list) or not isinstance(rm, list) \
                    or not isinstance(raw, dict):
                raise TypeError("id must be a string, add and remove lists of node ids, "
                                "addresses an object")
            addresses = {str(n): operator_entry(str(n), a) for n, a in raw.items()}
            self._check_reachable(add, addresses)
        except (CodecError, KeyError, TypeError, AttributeError, ValueError) as e:
            return _err(400, f'POST /admin/members {{"id", "add": [ids], "remove": [ids], '
                             f'"addresses": {{id: {{"peer", "cert", "jwt_key"}}}}}}: {e}')
        return await self._decided(ClientMembers(uid, tuple(add), tuple(rm), addresses))

    def _check_reachable(self, add: list[Any], addresses: dict[str, dict[str, Any]]) -> None:
        """An added member nobody could dial or authenticate would block every update:
        refuse it unless it is configured (a peer or `mesh_members`), already addressed, or
        given an address (and, with public-key JWTs, a key)."""
        for n in add:
            known = n in self.cfg.peers or n in self.core.addresses or n in self.core.d.members \
                or n == self.me  # d.members: the configured mesh, reached through its peers
            if not known and n not in addresses:
                raise ValueError(f"{n!r} is not a configured peer of {self.me}: give its "
                                 "address (addresses.{id}.peer, cert, jwt_key)")
            if not known and self.verifier.mode == "public" and n not in \
                    self.verifier.public_keys and "jwt_key" not in addresses[n]:
                raise ValueError(f"no JWT public key known for {n!r}: give addresses.{n}.jwt_key")

    def _rewire(self) -> None:
        """Dial and trust the members added at run time as the agreed membership says (their
        address, pinned certificate, JWT key): never anything a peer said of itself."""
        want = {n: a for n, a in self.core.addresses.items()
                if n != self.me and n not in self.cfg.peers}
        if want == self._wired:
            return
        for n, a in self._wired.items():
            if want.get(n) != a:
                self.peer_urls.pop(n, None)
                if "jwt_key" in a:
                    self.verifier.trust(n, None)
        for n, a in want.items():
            if self._wired.get(n) != a:
                host, port = parse_peer(dial_address(a, self.me))
                self.peer_urls[n] = f"https://{host}:{port}"
                if "jwt_key" in a and self.verifier.mode == "public":
                    self.verifier.trust(n, a["jwt_key"])
        self._wired = want
        self.journal.emit("wired", peers=sorted(want))

    async def _decided(self, cmd: Any) -> web.Response:
        """Run a client command that initiates 2PC and wait for its decision."""
        key, fut = self._waiter()
        self._queue((key, cmd, None))
        try:
            async with asyncio.timeout(self.opts.vote_timeout_s + 5.0):
                answer = await fut
        except TimeoutError:
            self.answers.drop(key)
            return _json({"result": "unknown", "error": "no outcome in time"}, status=504)
        return _json(answer.body, status=answer.status)

    async def handle_read(self, req: web.Request) -> web.Response:
        if (refused := self._client_auth(req)) is not None:
            return refused
        key = req.query.get("key")
        if not key:
            return _err(400, "GET /client/read?key=<key>")
        token, fut = self._waiter()
        self._queue((token, ClientRead(key), None), token)
        answer = await fut  # after what it read is durable (group commit)
        if answer is None:
            return _err(500, f"node {self.me} could not read {key!r}; see its journal")
        return _json(answer.body, status=answer.status)


#: flooded messages remembered per peer for `DripNode._spare` (a few seconds of traffic)
PEER_HAS_MAX = 4096


def _flood_key(msg: Any) -> tuple[Any, ...] | None:
    """What identifies a flooded /voting or /commit (spec 4.4: initiator and counter)."""
    if isinstance(msg, codec.Voting | codec.Commit):
        return (type(msg).__name__, msg.initiator, msg.counter, msg.reset, msg.update.uid)
    return None
