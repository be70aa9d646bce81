"""The SDS node process: UDP sockets, durable log, timers and the admin API around `SdsCore`.

Transport ("broadcast = fan-out through the relay"): the node binds one UDP socket on
``ports.peer`` and broadcasts a message as one datagram to every peer's relay address
(``config.peers[p].peer``; the harness's UDP relay forwards ``i -> j`` with that flow's cut /
loss / latency / jitter). So every delivery of every broadcast is its own fault point. The
relay also duplicates deliveries (nemesis ``start-duplicate``), so the node never needs to.

Clients talk to ``ports.client`` over UDP too (the harness proxies client links through the same
relay): one JSON request a datagram, ``{"req": r, "op": "send", "payload": s}``, answered with
``{"req": r, "ok": true, "id": ..., "lamport": ...}`` once the message is in the durable log
and broadcast. A retry with the same payload is idempotent (the id is the content's hash).

Durability: every log entry is fsynced (`nodes.common.records`) before its journal event and
before a client is told ``ok``; so is every message put in the incoming buffer (its id is in
our bloom filter from then on, so peers take it as held). A restart replays both files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
from typing import Any

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import NodeConfig
from nodes.common.journal import Journal
from nodes.common.records import RecordFile, rewrite_records
from nodes.sds.core import (
    Broadcast,
    Delivered,
    Effect,
    Emit,
    EphemeralDelivered,
    Held,
    SdsCore,
    SdsOptions,
)
from nodes.sds.wire import Message, WireError, decode, encode

log = logging.getLogger("sds")

LOG_FILE = "log.rec"
HELD_FILE = "incoming.rec"
#: socket buffers (bytes); the kernel caps them at net.core.rmem_max / wmem_max
SOCKET_BUFFER = 4 * 1024 * 1024


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Any) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            self.on_datagram(data, addr)
        except Exception:  # one bad datagram must never stop the node
            log.exception("datagram handler failed")

    def error_received(self, exc: Exception) -> None:
        pass  # ICMP unreachable from a dead peer: UDP loses it, so do we


def _payload(m: Message) -> str:
    return (m.content or b"").decode("utf-8", "replace")


class SdsNode:
    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.options = SdsOptions.from_dict(cfg.options)
        self.tick_s = float(cfg.option("tick_ms", 50)) / 1000
        self.fsync = bool(cfg.option("fsync", True))
        self.core = SdsCore(cfg.id, [*cfg.peers, cfg.id], self.options, cfg.bugs,
                            random.Random(f"{cfg.seed}:core"), self.clock.wall_ms())
        self.peer_addrs = {p: cfg.peers[p].peer_addr() for p in sorted(cfg.peers)}
        self.records = RecordFile.open(cfg.data_dir / LOG_FILE)
        self.held_path = cfg.data_dir / HELD_FILE
        self.held: RecordFile | None = None
        self.io = {"datagrams_sent": 0, "datagrams_received": 0,
                   "send_buffer_full": 0, "send_errors": 0, "client_requests": 0,
                   "client_errors": 0}
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self._peer: socket.socket | None = None
        self._client: _Udp | None = None
        self._task: asyncio.Task[None] | None = None

    def now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    # ---- effects ------------------------------------------------------------------------

    def perform(self, fx: list[Effect]) -> None:
        """Persist new log entries (one fsync), then journal, then send: in that order, so a
        journal or a peer never knows of an entry a crash could lose."""
        delivered = [e for e in fx if isinstance(e, Delivered)]
        if delivered:
            self.records.append_many((encode(e.msg) for e in delivered), sync=self.fsync)
        held = [e for e in fx if isinstance(e, Held)]
        if held and self.held is not None:
            self.held.append_many((encode(e.msg) for e in held), sync=self.fsync)
        for e in fx:
            if isinstance(e, Delivered):
                m = e.msg
                self.journal.emit("send" if e.own else "deliver", id=m.message_id,
                                  lamport=m.lamport_timestamp, sender=m.sender_id, deps=m.deps,
                                  payload=_payload(m))
            elif isinstance(e, Emit):
                self.journal.emit(e.type, **e.fields)
            elif isinstance(e, EphemeralDelivered):
                self.journal.emit("ephemeral", sender=e.msg.sender_id, payload=_payload(e.msg))
        for e in fx:
            if isinstance(e, Broadcast):
                self._broadcast(e.data, e.to)

    def _broadcast(self, data: bytes, to: tuple[str, ...] | None = None) -> None:
        sock = self._peer
        if sock is None:
            return
        addrs = self.peer_addrs.values() if to is None else [
            self.peer_addrs[p] for p in to if p in self.peer_addrs]
        for addr in addrs:
            try:
                sock.sendto(data, addr)
                self.io["datagrams_sent"] += 1
            except (BlockingIOError, InterruptedError):
                self.io["send_buffer_full"] += 1  # UDP: a full buffer is a lost datagram
            except OSError:
                self.io["send_errors"] += 1  # e.g. ICMP unreachable reported late

    def _drain_peer(self) -> None:
        """Read every datagram waiting on the peer socket, then perform all their effects
        at once: one fsync for the batch (group commit) instead of one per datagram."""
        sock = self._peer
        if sock is None:
            return
        fx: list[Effect] = []
        now = self.now_ms()
        for _ in range(512):
            try:
                data = sock.recv(65_535)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue  # ICMP port unreachable from a dead peer, reported on this socket
            self.io["datagrams_received"] += 1
            fx.extend(self.core.receive(data, now))
        if fx:
            self.perform(fx)

    def _on_client(self, data: bytes, addr: tuple[str, int]) -> None:
        self.io["client_requests"] += 1
        req: Any = None
        try:
            body = json.loads(data)
            req = body.get("req")
            op = body["op"]
            payload = str(body["payload"]).encode()
            if op == "send":
                msg, fx = self.core.send(payload, self.now_ms(), self.clock.wall_ms())
                self.perform(fx)
                reply = {"req": req, "ok": True, "id": msg.message_id,
                         "lamport": msg.lamport_timestamp}
            elif op == "ephemeral":
                self.perform(self.core.send_ephemeral(payload))
                reply = {"req": req, "ok": True}
            else:
                raise ValueError(f"unknown op {op!r}; use send or ephemeral")
        except (ValueError, KeyError, TypeError, AttributeError, WireError) as e:
            self.io["client_errors"] += 1
            reply = {"req": req, "ok": False, "error": f"{type(e).__name__}: {e}"}
        if self._client and self._client.transport:
            self._client.transport.sendto(json.dumps(reply).encode(), addr)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                self.perform(self.core.tick(self.now_ms(), self.clock.wall_ms()))
            except Exception:
                log.exception("tick failed")

    # ---- admin --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        snap = self.core.snapshot(self.now_ms())
        return {"id": self.cfg.id, "bugs": sorted(self.cfg.bugs),
                "options": {k: v for k, v in vars(self.options).items()},
                **snap, "io": dict(self.io)}

    # ---- life ---------------------------------------------------------------------------

    async def start(self) -> None:
        entries = self._load(self.records.records_at_open, "log")
        held_file = RecordFile.open(self.held_path)
        held = self._load(held_file.records_at_open, "held-message")
        held_file.close()
        self.core.restore(entries, self.clock.wall_ms(), held, self.now_ms())
        # keep only what still waits; the file is rewritten at each start
        rewrite_records(self.held_path, [encode(b.msg) for b in self.core.incoming.values()])
        self.held = RecordFile.open(self.held_path)
        self._journal_recovered(entries)
        loop = asyncio.get_running_loop()
        host = self.cfg.host
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):  # ~200 bloom-sized datagrams
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        sock.setblocking(False)
        sock.bind((host, self.cfg.ports.peer))
        self._peer = sock
        loop.add_reader(sock.fileno(), self._drain_peer)
        _, self._client = await loop.create_datagram_endpoint(
            lambda: _Udp(self._on_client), local_addr=(host, self.cfg.ports.client))
        await self.admin.start()
        self.journal.emit("start", log_len=len(self.core.log), lamport=self.core.lamport,
                          recovered_bytes_dropped=self.records.report.dropped_bytes,
                          wall=self.clock.wall())
        self._task = asyncio.create_task(self._ticker())
        self.admin.set_ready()

    def _load(self, raws: list[bytes], what: str) -> list[Message]:
        """Decode durable records; one that does not decode is skipped, and journaled as lost
        evidence: the log it belonged to now lacks an entry the checkers would compare."""
        out = []
        for i, raw in enumerate(raws):
            try:
                out.append(decode(raw))
            except WireError as e:
                self.journal.node_error(f"unreadable {what} record #{i} skipped", e,
                                        evidence=True, logger=log)
        return out

    def _journal_recovered(self, entries: list[Message]) -> None:
        """Journal entries that reached the log but not the journal (killed in between), so
        the journal's deliveries stay a complete account of the log."""
        if not entries:
            return
        seen: set[str] = set()
        nxt = 0
        while True:
            evs, nxt2 = self.journal.since(nxt, 50_000)
            seen.update(e.get("id") for e in evs if e.get("type") in ("send", "deliver"))
            if not evs or nxt2 == nxt:
                break
            nxt = nxt2
        for m in entries:
            if m.message_id not in seen:
                seen.add(m.message_id)
                self.journal.emit("send" if m.sender_id == self.cfg.id else "deliver",
                                  id=m.message_id, lamport=m.lamport_timestamp,
                                  sender=m.sender_id, deps=m.deps, payload=_payload(m),
                                  recovered=True)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._peer is not None:
            asyncio.get_running_loop().remove_reader(self._peer.fileno())
            self._peer.close()
            self._peer = None
        if self._client is not None and self._client.transport is not None:
            self._client.transport.close()
        await self.admin.stop()
        self.records.close()
        if self.held is not None:
            self.held.close()
        self.journal.close()
