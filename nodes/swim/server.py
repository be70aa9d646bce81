"""The SWIM node runtime: a UDP socket, a timer loop, the admin API; the core does the rest.

Thin by design (DESIGN.md): it decodes datagrams, maps the sender's address to a NodeID
through the config's address book (the relay gives every node its own address for each
peer, and a peer's datagrams arrive from exactly that address), and hands both to the one
runtime loop (`nodes.common.loop`), which runs `SwimCore` and performs its effects through
this server: datagrams to a NodeID's configured address (or the broadcast port), journal
events, the generation file. Undecodable datagrams are dropped and counted, never fatal.

Extra HTTP routes (admin port, and the same on ``ports.client``): ``POST /swim/leave`` and
``POST /swim/join`` (rejoin after leaving) -> ``{"ok": true, "gen": g, "left": bool}``;
``GET /swim/keys`` and ``POST /swim/keys`` ``{"op": "install"|"use"|"remove", "key": hex}``
(key rotation, see ``nodes.swim.crypto``).

With ``options.keyring`` (hex keys, primary first) every datagram is sealed on send and
opened on receive, here at the datagram boundary only; one that no key opens is dropped,
counted (``stats.refused_decrypt``) and journaled at most once per ``REFUSAL_LOG_S``. Key
operations are saved to ``keyring.json`` in the data dir, which a restart prefers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import socket
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.effects import EVERYONE
from nodes.common.journal import Journal
from nodes.common.loop import CoreLoop, JournalingHost
from nodes.common.refusals import Refusals
from nodes.swim import codec as c
from nodes.swim import crypto
from nodes.swim.core import BUGS, Options, SwimCore, default_seeds

log = logging.getLogger("swim")

BROADCAST_HOST = "127.255.255.255"
#: authenticated with every sealed datagram: a sealed datagram of another protocol is refused
AAD = b"swim"
#: refused-decrypt journal events: the first at once, then one per this many seconds (a count)
REFUSAL_LOG_S = 5.0
KEYS_BODY = '{"op": "install"|"use"|"remove", "key": "<32, 48 or 64 hex digits>"}'


def _keyring(cfg: NodeConfig, saved: Path) -> crypto.Keyring | None:
    """``options.keyring``: hex keys, primary first; absent or null: encryption off. With
    encryption on, the ring a rotation left in ``saved`` wins (serf's keyring file), so a node
    restarted after a rotation still speaks the group's key."""
    raw = cfg.options.get("keyring")
    if raw is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        raw = json.loads(saved.read_text())
    if not isinstance(raw, list):
        raise ConfigError(f"options.keyring: expected a list of hex keys, got {raw!r}")
    try:
        return crypto.Keyring(raw)
    except crypto.KeyringError as e:
        raise ConfigError(f"options.keyring: {e}") from e


def _seeds(cfg: NodeConfig, gen: int) -> list[int]:
    """Seed NodeIDs: ``options.seeds`` (peer names, or "all"); by default the lowest-numbered
    node founds the group and every other node joins through it. A restarted node
    (generation > 0) may rejoin through any peer, so a restarted founder finds the group."""
    ids = {name: p.num_id for name, p in cfg.peers.items() if p.num_id is not None}
    raw = cfg.options.get("seeds")
    if raw == "all":
        return sorted(ids.values())
    if raw is None or gen > 0:
        return default_seeds(cfg.num_id, ids.values(), gen)
    if not isinstance(raw, list) or any(n not in ids for n in raw if n != cfg.id):
        raise ConfigError(f"options.seeds: expected peer names from {sorted(ids)}, got {raw!r}")
    return [ids[n] for n in raw if n != cfg.id]


class _Endpoint(asyncio.DatagramProtocol):
    def __init__(self, node: SwimNode) -> None:
        self.node = node

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.node.on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:  # ICMP unreachable etc.: UDP is lossy
        log.debug("udp error: %s", exc)


class SwimNode(JournalingHost):
    """One SWIM member process (see the module docstring)."""

    logger = log

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.gen_path = cfg.data_dir / "generation"
        self.gen = self._next_generation()
        self.addresses: dict[int, tuple[str, int]] = {}
        self.names: dict[int, str] = {cfg.num_id: cfg.id}
        for name, p in cfg.peers.items():
            if p.num_id is not None:
                self.names[p.num_id] = name  # a peer without an address: named, not booked
            if p.num_id is not None and p.peer:
                self.addresses[p.num_id] = p.peer_addr()
        self.by_addr = {a: i for i, a in self.addresses.items()}
        try:
            self.opts = Options.from_dict(cfg.options)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"options: {e}") from e
        self.core = SwimCore(cfg.num_id, self.gen, self.addresses, _seeds(cfg, self.gen),
                             self.opts, random.Random(cfg.seed), cfg.bugs)
        self.stats = {"datagrams_in": 0, "datagrams_out": 0, "bytes_in": 0, "bytes_out": 0,
                      "malformed": 0, "unknown": 0, "unknown_sender": 0, "refused_decrypt": 0}
        self.keyring_path = cfg.data_dir / "keyring.json"
        self.keyring = _keyring(cfg, self.keyring_path)
        #: counts into stats["refused_decrypt"]; journals one event per REFUSAL_LOG_S
        self._decrypt_refusals = Refusals(window=REFUSAL_LOG_S, per_window=1, counts=self.stats)
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self._add_routes(self.admin.app)
        self.loop = CoreLoop(self.core, self, self.clock.monotonic)
        self._transport: asyncio.DatagramTransport | None = None
        self._bcast: asyncio.DatagramTransport | None = None
        self._client_runner: web.AppRunner | None = None
        self._cpu0 = time.process_time()
        self._mono0 = self.clock.monotonic()

    def _next_generation(self) -> int:
        """Each process start gets a higher generation than any before it; the core makes
        it durable (``Persist("generation")``) before it says anything."""
        with contextlib.suppress(OSError, ValueError):
            return int(self.gen_path.read_text().strip()) + 1
        return 0

    # ---- admin / client HTTP
    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/swim/leave", self._leave_h)
        app.router.add_post("/swim/join", self._join_h)
        app.router.add_get("/swim/keys", self._keys_h)
        app.router.add_post("/swim/keys", self._keys_h)

    async def _leave_h(self, _req: web.Request) -> web.Response:
        return web.json_response(await self._command("leave"))

    async def _join_h(self, _req: web.Request) -> web.Response:
        return web.json_response(await self._command("rejoin"))

    async def _keys_h(self, req: web.Request) -> web.Response:
        """Key rotation: install a key, make it primary (use), remove one. Keys are shown by
        fingerprint only."""
        if self.keyring is None:
            return web.json_response({"error": "encryption is off (no options.keyring); it "
                                      "cannot be turned on at run time"}, status=409)
        if req.method == "POST":
            try:
                body = await req.json()
                op, key = body["op"], body["key"]
                if op not in ("install", "use", "remove"):
                    raise KeyError(op)
                getattr(self.keyring, op)(key)
            except (ValueError, KeyError, TypeError) as e:  # KeyringError is a ValueError
                return web.json_response({"error": f"{e!s}; expected JSON body {KEYS_BODY}"},
                                         status=400)
            self._save_keyring()
            self.emit("keyring", {"op": op, "key": crypto.fingerprint(crypto.parse_key(key)),
                                  "keys": self.keyring.fingerprints()})
        return web.json_response({"ok": True, "keys": self.keyring.fingerprints()})

    def _save_keyring(self) -> None:
        """The ring after a key operation, durable and readable by this user only."""
        assert self.keyring is not None
        tmp = self.keyring_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump([k.hex() for k in self.keyring.keys], f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.keyring_path)

    async def _command(self, cmd: str) -> Any:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.loop.command(cmd, answer)
        return await answer

    def state(self) -> dict[str, Any]:
        core = self.core
        members = [{**m, "name": self.names.get(m["id"], str(m["id"]))} for m in core.view()]
        elapsed = max(self.clock.monotonic() - self._mono0, 1e-9)
        return {
            "id": self.cfg.id, "num_id": self.cfg.num_id, "gen": core.gen,
            "period": core.period, "joined": core.joined, "left": core.left,
            "capacity": self.opts.capacity, "members": members,
            "alive": sorted(m["name"] for m in members if m["state"] == "alive"),
            "bugs": sorted(self.cfg.bugs), "options": self.opts.__dict__,
            "keys": self.keyring.fingerprints() if self.keyring else None,
            "stats": {**self.stats, "sent": core.counters.sent,
                      "received": core.counters.received, "probes": core.counters.probes,
                      "probes_failed": core.counters.probes_failed,
                      "indirect_probes": core.counters.indirect_probes,
                      "forwarded": core.counters.forwarded,
                      "probes_inconclusive": core.counters.probes_inconclusive,
                      "confirmations": core.counters.confirmations,
                      "stalls": core.counters.stalls,
                      "refused_generations": core.counters.refused_generations,
                      "unknown_gossip": core.counters.unknown_gossip,
                      "refused_strangers": core.counters.refused_strangers,
                      "syncs": core.counters.syncs,
                      "refused": core.counters.refused,
                      "cpu_s": round(time.process_time() - self._cpu0, 4),
                      "uptime_s": round(elapsed, 3)},
            "mono": self.clock.monotonic(), "t": self.clock.wall(),
        }

    # ---- the datagram path
    def on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        self.stats["datagrams_in"] += 1
        self.stats["bytes_in"] += len(data)
        if self.keyring is not None:
            try:
                data = crypto.open_(self.keyring, data, AAD)
            except crypto.DecryptError as e:
                self._refused_decrypt(addr, e)
                return
        try:
            msg = c.decode(data)
        except c.UnknownMessage:
            self.stats["unknown"] += 1
            return
        except c.MalformedMessage as e:
            self.stats["malformed"] += 1
            log.debug("malformed datagram from %s: %s", addr, e)
            return
        from_id = self.by_addr.get((addr[0], addr[1]))
        if from_id is None:
            from_id = self._introduce(msg, (addr[0], addr[1]))
        if from_id is None:
            self.stats["unknown_sender"] += 1
        self.loop.message(from_id, msg)

    def _introduce(self, msg: c.Message, addr: tuple[str, int]) -> int | None:
        """A sender outside the book that the core books (dynamic members: a token-proven
        JoinReq, ``SwimCore.introduce``) is booked here too, so answers reach it."""
        x = self.core.introduce(msg, addr)
        if x is not None:
            self.addresses[x] = addr
            self.by_addr[addr] = x  # the core journals ``introduced``
        return x

    def _refused_decrypt(self, addr: tuple[str, int], e: crypto.DecryptError) -> None:
        """Count every refusal; journal the first, then one per REFUSAL_LOG_S with a count."""
        ev = self._decrypt_refusals.note("refused_decrypt", self.clock.monotonic())
        if ev is not None:
            self.emit("refused-decrypt", {"count": 1 + ev.get("unjournaled_before", 0),
                                          "from": f"{addr[0]}:{addr[1]}", "error": str(e)})

    # ---- effects (the Host of nodes.common.loop)
    def send(self, to: int | str, msg: c.Message) -> None:
        raw = c.encode(msg)
        if self.keyring is not None:
            raw = crypto.seal(self.keyring, raw, AAD)
        if to == EVERYONE:
            port = int(self.cfg.options.get("broadcast_port", 0))
            if self._bcast is not None and port:
                self._bcast.sendto(raw, (BROADCAST_HOST, port))
            return
        addr = self.addresses.get(int(to))
        if addr is None or self._transport is None:
            return
        self._transport.sendto(raw, addr)
        self.stats["datagrams_out"] += 1
        self.stats["bytes_out"] += len(raw)

    def persist(self, what: str, record: Any) -> None:
        if what != "generation":
            raise ValueError(f"SWIM keeps no durable {what!r}")
        tmp = self.gen_path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(int(record)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.gen_path)
        self.gen = int(record)

    def sync(self) -> None:
        """``persist`` already fsynced the generation file."""

    def reply(self, token: asyncio.Future[Any], value: Any) -> None:
        if not token.done():
            token.set_result(value)

    def emit(self, type_: str, fields: dict[str, Any]) -> None:
        self.journal.emit(type_, mono=round(self.clock.monotonic(), 6), **fields)

    # ---- life cycle
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(
            lambda: _Endpoint(self), local_addr=(self.cfg.host, self.cfg.ports.peer))
        bport = int(self.cfg.options.get("broadcast_port", 0))
        if bport:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            # the broadcast address only (loopback's), never every interface: a datagram to
            # this port from elsewhere cannot reach it (docs/swim.md, "Trust boundaries")
            sock.bind((BROADCAST_HOST, bport))
            self._bcast, _ = await loop.create_datagram_endpoint(lambda: _Endpoint(self),
                                                                 sock=sock)
        await self.admin.start()
        capp = web.Application()
        self._add_routes(capp)
        self._client_runner = web.AppRunner(capp, access_log=None)
        await self._client_runner.setup()
        await web.TCPSite(self._client_runner, self.cfg.host, self.cfg.ports.client,
                          reuse_address=True).start()
        self.journal.emit("start", mono=round(self.clock.monotonic(), 6), gen=self.gen,
                          num_id=self.cfg.num_id, seeds=self.core.seeds,
                          options=self.opts.__dict__, bugs=sorted(self.cfg.bugs))
        self.loop.start()
        self.admin.set_ready()

    async def stop(self) -> None:
        self.loop.close()
        for t in (self._transport, self._bcast):
            if t is not None:
                t.close()
        if self._client_runner is not None:
            await self._client_runner.cleanup()
        await self.admin.stop()
        self.journal.close()


def make_node(cfg: NodeConfig) -> SwimNode:
    return SwimNode(cfg)


__all__ = ["BUGS", "SwimNode", "make_node"]
