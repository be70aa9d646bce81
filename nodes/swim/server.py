"""The SWIM node runtime: a UDP socket, a timer loop, the admin API; the core does the rest.

Thin by design (DESIGN.md): it decodes datagrams, maps the sender's address to a NodeID
through the config's address book (the relay gives every node its own address for each
peer, and a peer's datagrams arrive from exactly that address), hands both to `SwimCore`,
and performs the effects: datagrams to a NodeID's configured address, journal events, the
generation file. Undecodable datagrams are dropped and counted, never fatal.

Extra HTTP routes (admin port, and the same on ``ports.client``): ``POST /swim/leave`` and
``POST /swim/join`` (rejoin after leaving) -> ``{"ok": true, "gen": g, "left": bool}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
from typing import Any

from aiohttp import web

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, NodeConfig
from nodes.common.journal import Journal
from nodes.swim import codec as c
from nodes.swim.core import BUGS, Announce, Effect, Emit, Options, Send, SwimCore

log = logging.getLogger("swim")

BROADCAST_HOST = "127.255.255.255"


def _seeds(cfg: NodeConfig, gen: int) -> list[int]:
    """Seed NodeIDs: ``options.seeds`` (peer names, or "all"); by default the lowest-numbered
    node founds the group and every other node joins through it. A restarted node
    (generation > 0) may rejoin through any peer, so a restarted founder finds the group."""
    ids = {name: p.num_id for name, p in cfg.peers.items() if p.num_id is not None}
    raw = cfg.options.get("seeds")
    if gen > 0 or raw == "all":
        return sorted(ids.values())
    if raw is None:
        lowest = min(ids.values(), default=None)
        return [lowest] if lowest is not None and lowest < cfg.num_id else []
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


class SwimNode:
    """One SWIM member process (see the module docstring)."""

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
            if p.num_id is not None and p.peer:
                self.addresses[p.num_id] = p.peer_addr()
                self.names[p.num_id] = name
        self.by_addr = {a: i for i, a in self.addresses.items()}
        try:
            self.opts = Options.from_dict(cfg.options)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"options: {e}") from e
        self.core = SwimCore(cfg.num_id, self.gen, self.addresses, _seeds(cfg, self.gen),
                             self.opts, random.Random(cfg.seed), cfg.bugs)
        self.stats = {"datagrams_in": 0, "datagrams_out": 0, "bytes_in": 0, "bytes_out": 0,
                      "malformed": 0, "unknown": 0, "unknown_sender": 0}
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self._add_routes(self.admin.app)
        self._transport: asyncio.DatagramTransport | None = None
        self._bcast: asyncio.DatagramTransport | None = None
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._client_runner: web.AppRunner | None = None
        self._cpu0 = time.process_time()
        self._mono0 = self.clock.monotonic()

    def _next_generation(self) -> int:
        """Each process start gets a higher generation than any before it (durable)."""
        gen = 0
        with contextlib.suppress(OSError, ValueError):
            gen = int(self.gen_path.read_text().strip()) + 1
        self._save_gen(gen)
        return gen

    def _save_gen(self, gen: int) -> None:
        tmp = self.gen_path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(gen))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.gen_path)

    # ---- admin / client HTTP
    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/swim/leave", self._leave_h)
        app.router.add_post("/swim/join", self._join_h)

    async def _leave_h(self, _req: web.Request) -> web.Response:
        self._perform(self.core.leave(self.clock.monotonic()))
        return web.json_response({"ok": True, "gen": self.core.gen, "left": self.core.left})

    async def _join_h(self, _req: web.Request) -> web.Response:
        self._perform(self.core.rejoin(self.clock.monotonic()))
        return web.json_response({"ok": True, "gen": self.core.gen, "left": self.core.left})

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
            "stats": {**self.stats, "sent": core.counters.sent,
                      "received": core.counters.received, "probes": core.counters.probes,
                      "probes_failed": core.counters.probes_failed,
                      "indirect_probes": core.counters.indirect_probes,
                      "forwarded": core.counters.forwarded,
                      "probes_inconclusive": core.counters.probes_inconclusive,
                      "confirmations": core.counters.confirmations,
                      "stalls": core.counters.stalls,
                      "cpu_s": round(time.process_time() - self._cpu0, 4),
                      "uptime_s": round(elapsed, 3)},
            "mono": self.clock.monotonic(), "t": self.clock.wall(),
        }

    # ---- the datagram path
    def on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        self.stats["datagrams_in"] += 1
        self.stats["bytes_in"] += len(data)
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
            self.stats["unknown_sender"] += 1
        self._perform(self.core.on_message(msg, self.clock.monotonic(), from_id))

    def _perform(self, effects: list[Effect], wake: bool = True) -> None:
        """Carry out effects; ``wake`` re-arms the timer loop (a message may have set an
        earlier deadline) and is off for the loop's own calls, or it would spin."""
        for e in effects:
            if isinstance(e, Send):
                addr = self.addresses.get(e.to)
                if addr is None or self._transport is None:
                    continue
                raw = c.encode(e.msg)
                self._transport.sendto(raw, addr)
                self.stats["datagrams_out"] += 1
                self.stats["bytes_out"] += len(raw)
            elif isinstance(e, Emit):
                self.journal.emit(e.type, mono=round(self.clock.monotonic(), 6), **e.fields)
            elif isinstance(e, Announce) and self._bcast is not None:
                port = int(self.cfg.options.get("broadcast_port", 0))
                self._bcast.sendto(c.encode(e.msg), (BROADCAST_HOST, port))
        if self.core.gen != self.gen:
            self.gen = self.core.gen
            self._save_gen(self.gen)
        if wake:
            self._wake.set()

    async def _timer_loop(self) -> None:
        while True:
            delay = self.core.next_wakeup() - self.clock.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            self._perform(self.core.poll(self.clock.monotonic()), wake=False)

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
            sock.bind(("", bport))
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
        self._perform(self.core.start(self.clock.monotonic()))
        self._loop_task = asyncio.create_task(self._timer_loop())
        self.admin.set_ready()

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
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
