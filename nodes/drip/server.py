"""The DRiP node runtime: HTTPS peer server, plain-HTTP client endpoint, admin API, timers.

Thin by design: requests are authenticated and decoded here, then handed to
:class:`~nodes.drip.core.DripCore`; the effects it returns are performed here (HTTP requests to
peers, journal events, timers, client replies, outbox delivery).

Request checks on the peer port, in order (each failure changes nothing):

1. TLS client certificate present and naming a configured peer, else 403 (spec 4.1: requests
   from nodes that are not peers are ignored).
2. ``DRiP-Node-ID`` well formed, else 400.
3. JWT in ``Authorization`` valid, unexpired, ``iss`` == ``DRiP-Node-ID``, else 401.
4. Headers and body per the codec, else 400 (404 for an unknown endpoint).
5. For requests a node makes on its own behalf (everything but forwarded ``/voting`` and
   ``/commit``) ``DRiP-Node-ID`` must also be the TLS identity, else 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.journal import Journal
from nodes.drip import codec
from nodes.drip.auth import AuthError, Signer, Verifier, load_auth
from nodes.drip.codec import CodecError, Heartbeat, Message, Update
from nodes.drip.core import (
    ClientDone,
    CoreConfig,
    DripCore,
    Effect,
    Emit,
    Send,
    SendSeq,
    SetTimer,
    Unavailable,
    WakeOutbox,
    commit_from_payload,
)
from nodes.drip.entitlement import get_policy
from nodes.drip.material import NodeFiles, client_context, peer_identity, server_context
from nodes.drip.store import Store

log = logging.getLogger("drip.server")

#: messages a node sends on its own behalf: DRiP-Node-ID must be the TLS peer itself
_OWN_BEHALF = (codec.VoteResponse, codec.Heartbeat, codec.NodeNotice, codec.SyncRequest,
               codec.SyncBatch)


def _err(status: int, msg: str) -> web.Response:
    return web.json_response({"error": msg}, status=status)


@dataclass
class Options:
    """Protocol knobs from ``options`` (docs/drip.md)."""

    heartbeat_s: float = 0.3
    peer_timeout_s: float = 2.0
    vote_timeout_s: float = 2.0
    lock_ttl_s: float = 3.0
    sync_timeout_s: float = 5.0
    sync_batch: int = 1000
    entitlement: str = "none"

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


class DripNode:
    """One node process: start() serves, stop() closes everything."""

    def __init__(self, cfg: NodeConfig, extra: Extra) -> None:
        self.cfg = cfg
        self.me = cfg.id
        self.opts = Options.from_options(cfg.options)
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.store = Store(cfg.data_dir / "drip.sqlite3")
        self.signer: Signer
        self.verifier: Verifier
        self.signer, self.verifier = load_auth(self.me, extra.jwt)
        self.server_ssl = server_context(extra.tls)
        self.client_ssl = client_context(extra.tls)
        self.peer_urls = {}
        for name, p in cfg.peers.items():
            host, port = p.peer_addr()
            self.peer_urls[name] = f"https://{host}:{port}"
        self.core = DripCore(
            self.me, list(cfg.peers), self.store,
            CoreConfig(self.opts.vote_timeout_s, self.opts.lock_ttl_s, self.opts.sync_timeout_s,
                       self.opts.sync_batch, cfg.bugs),
            get_policy(self.opts.entitlement), extra.mesh_members)
        self.admin = AdminServer(self.me, self.core.snapshot, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self.waiters: dict[str, asyncio.Future[ClientDone]] = {}
        self.outbox_wake: dict[str, asyncio.Event] = {p: asyncio.Event() for p in cfg.peers}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.runners: list[web.AppRunner] = []
        self.session: aiohttp.ClientSession | None = None

    # ---- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.client_ssl, limit=64),
            timeout=aiohttp.ClientTimeout(total=self.opts.peer_timeout_s))
        self.perform(self.core.on_start(self.clock.monotonic()))
        peer_app = web.Application(client_max_size=64 * 1024 * 1024)
        peer_app.router.add_route("*", "/{tail:.*}", self.handle_peer)
        client_app = web.Application()
        client_app.router.add_post("/client/update", self.handle_update)
        client_app.router.add_get("/client/read", self.handle_read)
        await self._serve(peer_app, self.cfg.ports.peer, self.server_ssl)
        await self._serve(client_app, self.cfg.ports.client, None)
        await self.admin.start()
        for p in self.cfg.peers:
            self._spawn(self._outbox_loop(p))
        self._spawn(self._heartbeat_loop())
        self.admin.set_ready()
        log.info("drip node %s serving peers on %d (TLS), clients on %d", self.me,
                 self.cfg.ports.peer, self.cfg.ports.client)

    async def _serve(self, app: web.Application, port: int, ssl_ctx: Any) -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.cfg.host, port, ssl_context=ssl_ctx,
                          reuse_address=True).start()
        self.runners.append(runner)

    async def stop(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.admin.stop()
        for r in self.runners:
            await r.cleanup()
        if self.session is not None:
            await self.session.close()
        self.store.close()
        self.journal.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)
        return t

    # ---- effects ----------------------------------------------------------------------------
    def perform(self, effects: list[Effect]) -> None:
        loop = asyncio.get_running_loop()
        for e in effects:
            if isinstance(e, Emit):
                self.journal.emit(e.type, **e.fields)
            elif isinstance(e, Send):
                self._spawn(self._send_one(e.to, e.msg))
            elif isinstance(e, SendSeq):
                self._spawn(self._send_seq(e))
            elif isinstance(e, SetTimer):
                delay = max(0.0, e.at - self.clock.monotonic())
                loop.call_later(delay, self._fire, e.name)
            elif isinstance(e, ClientDone):
                fut = self.waiters.pop(e.uid, None)
                if fut is not None and not fut.done():
                    fut.set_result(e)
            elif isinstance(e, WakeOutbox):
                ev = self.outbox_wake.get(e.peer)
                if ev is not None:
                    ev.set()

    def _fire(self, name: tuple[Any, ...]) -> None:
        self.perform(self.core.on_timer(name, self.clock.monotonic()))

    # ---- outgoing ---------------------------------------------------------------------------
    def _auth_for(self, msg: Message) -> str:
        forwarded = getattr(msg, "auth", None)
        return forwarded if forwarded else self.signer.header(self.clock.wall())

    async def request(self, to: str, msg: Message, timeout: float | None = None
                      ) -> tuple[int, Any]:
        """Send one message to a peer: (HTTP status, decoded JSON body or None)."""
        assert self.session is not None
        req = codec.encode(msg)
        headers = {**req.headers, codec.H_AUTH: self._auth_for(msg)}
        if req.body is not None:
            headers["Content-Type"] = "application/json"
        async with self.session.request(
                req.method, self.peer_urls[to] + req.path, headers=headers, data=req.body_bytes(),
                server_hostname=to,
                timeout=aiohttp.ClientTimeout(total=timeout or self.opts.peer_timeout_s)) as r:
            raw = await r.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            return r.status, body

    async def peer_state(self, to: str) -> str | None:
        """GET /state of a peer (spec 4.2.3): "active", "sync", or None (inactive/unreachable)."""
        assert self.session is not None
        headers = {codec.H_NODE: self.me, codec.H_AUTH: self.signer.header(self.clock.wall())}
        try:
            async with self.session.get(self.peer_urls[to] + "/state", headers=headers,
                                        server_hostname=to) as r:
                body = await r.json(content_type=None) if r.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
        return body.get("state") if isinstance(body, dict) else None

    async def _send_one(self, to: str, msg: Message) -> bool:
        try:
            if isinstance(msg, codec.SyncRequest) and await self.peer_state(to) != "active":
                # spec 4.6: sync only from a peer that says it is active
                self.perform(self.core.on_send_failed(to, msg, self.clock.monotonic()))
                return False
            status, body = await self.request(to, msg)
            ok = status == 200
            if not ok:
                log.debug("%s -> %s %s: %s %s", self.me, to, type(msg).__name__, status, body)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.debug("%s -> %s %s failed: %s", self.me, to, type(msg).__name__, e)
            ok = False
        if not ok:
            self.perform(self.core.on_send_failed(to, msg, self.clock.monotonic()))
        return ok

    async def _send_seq(self, e: SendSeq) -> None:
        for m in e.msgs:
            try:
                status, _ = await self.request(e.to, m, timeout=max(5.0, self.opts.peer_timeout_s))
            except (aiohttp.ClientError, TimeoutError, OSError):
                return
            if status != 200:
                return
        if e.owed_gen is not None:
            self.core.on_sync_served(e.to, e.owed_gen)

    async def _outbox_loop(self, peer: str) -> None:
        """Deliver queued commits to ``peer`` in order, retrying until it answers 200."""
        wake = self.outbox_wake[peer]
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await wake.wait()
            wake.clear()
            while self.core.peer_up.get(peer):
                rows = self.store.outbox_peek(peer)
                if not rows:
                    break
                for seq, payload in rows:
                    msg = commit_from_payload(payload)
                    try:
                        status, body = await self.request(peer, msg)
                    except (aiohttp.ClientError, TimeoutError, OSError):
                        status, body = 0, None
                    if status == 200:
                        self.store.outbox_delete(seq)
                        continue
                    if status in (400, 401):  # e.g. a forwarded token now expired: owe a sync
                        self.journal.emit("owe-sync", peer=peer, why=f"commit refused: {body}",
                                          dropped=self.store.drop_outbox(peer))
                    else:
                        await asyncio.sleep(0.2)
                    break

    async def _heartbeat_loop(self) -> None:
        while True:
            results = await asyncio.gather(*(self._heartbeat(p) for p in self.cfg.peers))
            self.perform(self.core.on_heartbeat_round(dict(zip(self.cfg.peers, results,
                                                               strict=True)),
                                                      self.clock.monotonic()))
            await asyncio.sleep(self.opts.heartbeat_s)

    async def _heartbeat(self, peer: str) -> dict[str, Any] | None:
        try:
            status, body = await self.request(peer, self.core.heartbeat_for(peer))
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None
        return body if status == 200 and isinstance(body, dict) else None

    # ---- incoming from peers ----------------------------------------------------------------
    async def handle_peer(self, req: web.Request) -> web.Response:
        ident = peer_identity(req.transport.get_extra_info("peercert") if req.transport else None)
        if ident is None:
            return _err(403, "no TLS client certificate: DRiP peers authenticate with mutual TLS")
        if ident not in self.cfg.peers:
            return _err(403, f"{ident!r} is not a configured peer of {self.me}; request ignored")
        try:
            sender = codec.parse_node_id(req.headers.get(codec.H_NODE))
        except CodecError as e:
            return _err(e.status, str(e))
        auth = req.headers.get(codec.H_AUTH)
        try:
            self.verifier.verify(auth, sender, self.clock.wall())
        except AuthError as e:
            return _err(401, str(e))
        body = await req.read()
        try:
            msg = codec.decode(req.method, req.path, req.headers, body, auth)
        except CodecError as e:
            return _err(e.status, str(e))
        if (msg is None or isinstance(msg, _OWN_BEHALF)) and sender != ident:
            return _err(403, f"{codec.H_NODE} {sender!r} is not the TLS peer {ident!r}")
        now = self.clock.monotonic()
        core = self.core
        try:
            if msg is None:  # GET /state
                if core.state == "inactive":
                    return _err(503, "inactive")
                return web.json_response({"state": core.state})
            if isinstance(msg, Heartbeat):
                reply, effects = core.on_heartbeat(ident, msg, now)
                self.perform(effects)
                return web.json_response(reply)
            effects = core.receive(ident, msg, now)
        except Unavailable as e:
            return _err(503, str(e))
        self.perform(effects)
        return web.json_response({"ok": True})

    # ---- our client endpoint (not in the spec) ------------------------------------------------
    async def handle_update(self, req: web.Request) -> web.Response:
        """POST /client/update {id, key, value, owner?}: initiate an update, wait for the outcome.

        200 committed; 409 aborted (certainly not committed); 503 not initiated; 400 bad input.
        """
        try:
            up = Update.from_json(codec.decode_json(await req.read()))
        except CodecError as e:
            return _err(400, str(e))
        if up.uid in self.waiters:
            return _err(409, f"update {up.uid!r} is already in progress")
        fut: asyncio.Future[ClientDone] = asyncio.get_running_loop().create_future()
        self.waiters[up.uid] = fut
        try:
            self.perform(self.core.client_update(up, self.clock.monotonic()))
        except Unavailable as e:
            self.waiters.pop(up.uid, None)
            return web.json_response({"result": "unavailable", "error": str(e)}, status=503)
        try:
            async with asyncio.timeout(self.opts.vote_timeout_s + 5.0):
                done = await fut
        except TimeoutError:
            self.waiters.pop(up.uid, None)
            return web.json_response({"result": "unknown", "error": "no outcome in time"},
                                     status=504)
        if done.committed:
            return web.json_response({"result": "committed", **done.detail})
        return web.json_response({"result": "aborted", **done.detail}, status=409)

    async def handle_read(self, req: web.Request) -> web.Response:
        key = req.query.get("key")
        if not key:
            return _err(400, "GET /client/read?key=<key>")
        it = self.core.read(key)
        return web.json_response({"key": key, "value": None if it is None else it.value,
                                  "version": 0 if it is None else it.version,
                                  "uid": None if it is None else it.uid,
                                  "state": self.core.state})
