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

Durability: the core's ``Persist`` effects (`nodes.common.loop`): every log entry is written
(`nodes.common.records`) before its journal event and fsynced before any datagram leaves or a
client is told ``ok``; so is every message put in the incoming buffer (its id is in our
bloom filter from then on, so peers take it as held). Datagrams read together share one
fsync. A restart replays both files.

``incoming.rec`` only ever appends (a held message leaves the buffer in memory, not on disk),
so it is compacted at runtime: once it holds more than ``incoming_compact_min`` records and
more than twice the messages still held, it is rewritten (atomically) with just those. The
rewrite runs as its own event-loop callback, after the batch that triggered it has performed
all its effects and fsynced: a held message that was delivered is then already in ``log.rec``.
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
from nodes.common.effects import EVERYONE
from nodes.common.journal import Journal
from nodes.common.loop import CoreLoop, JournalingHost
from nodes.common.records import RecordFile, rewrite_records
from nodes.sds.core import HELD, LOG, SdsCommand, SdsCore, SdsOptions, payload_text
from nodes.sds.wire import Message, WireError, decode, encode

log = logging.getLogger("sds")

LOG_FILE = "log.rec"
HELD_FILE = "incoming.rec"
#: ``incoming.rec`` is compacted above max(this, 2 x held) records (option ``incoming_compact_min``)
COMPACT_MIN = 256
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


class SdsNode(JournalingHost):
    logger = log

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.clock = Clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.data_dir / "events.jsonl", self.clock)
        self.options = SdsOptions.from_dict(cfg.options)
        self.fsync = bool(cfg.option("fsync", True))
        self.peer_addrs = {p: cfg.peers[p].peer_addr() for p in sorted(cfg.peers)}
        self.records = RecordFile.open(cfg.data_dir / LOG_FILE)
        self.held_path = cfg.data_dir / HELD_FILE
        self.held: RecordFile | None = None
        self._dirty: set[str] = set()
        self.compact_min = int(cfg.option("incoming_compact_min", COMPACT_MIN))
        if self.compact_min < 1:
            raise ValueError(f"option incoming_compact_min must be >= 1, got {self.compact_min}")
        self._held_records = 0  # records in incoming.rec (written since the last rewrite)
        self._compaction_due = False
        self.io = {"datagrams_sent": 0, "datagrams_received": 0,
                   "send_buffer_full": 0, "send_errors": 0, "client_requests": 0,
                   "client_errors": 0, "incoming_compactions": 0}
        self.admin = AdminServer(cfg.id, self.state, self.journal, self.clock, cfg.host,
                                 cfg.ports.admin)
        self.entries = self._load(self.records.records_at_open, "log")
        held_file = RecordFile.open(self.held_path)
        held = self._load(held_file.records_at_open, "held-message")
        held_file.close()
        self.core = SdsCore(cfg.id, [*cfg.peers, cfg.id], self.options, cfg.bugs,
                            random.Random(f"{cfg.seed}:core"), self.clock.wall_ms(),
                            wall=lambda _now: self.clock.wall(), durable=(self.entries, held))
        self.loop = CoreLoop(self.core, self, self.clock.monotonic)
        self._peer: socket.socket | None = None
        self._client: _Udp | None = None

    def now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    # ---- effects (the Host of nodes.common.loop) --------------------------------------------

    def persist(self, what: str, record: bytes) -> None:
        f = self.records if what == LOG else self.held if what == HELD else None
        if f is None:
            raise ValueError(f"SDS keeps no durable {what!r}")
        f.append(record, sync=False)
        self._dirty.add(what)
        if what == HELD:
            self._held_records += 1
            if (not self._compaction_due
                    and self._held_records > max(self.compact_min, 2 * len(self.core.incoming))):
                self._compaction_due = True
                # not now: later effects of this batch (the log entry of a held message just
                # delivered) are not yet durable; a callback runs after the batch is performed
                asyncio.get_running_loop().call_soon(self._compact_held)

    def _compact_held(self) -> None:
        """Rewrite ``incoming.rec`` with only the messages still held (atomic replace)."""
        self._compaction_due = False
        if self.held is None:
            return  # stopped meanwhile
        try:
            self.held.close()
            self._rewrite_held()
            self.io["incoming_compactions"] += 1
        except OSError as e:  # a full disk: keep appending to the old file, retry next time
            self.journal.node_error("incoming.rec compaction failed", e, evidence=False,
                                    logger=log)
            self._held_records = 0  # not at once again: after another threshold's worth
            self.held = RecordFile.open(self.held_path)
            return
        self.held = RecordFile.open(self.held_path)

    def _rewrite_held(self) -> None:
        held = [encode(b.msg) for b in self.core.incoming.values()]
        rewrite_records(self.held_path, held)
        self._held_records = len(held)

    def sync(self) -> None:
        if self.fsync:
            for what in sorted(self._dirty):
                f = self.records if what == LOG else self.held
                if f is not None:
                    f.sync()
        self._dirty.clear()

    def send(self, to: str, data: bytes) -> None:
        sock = self._peer
        if sock is None:
            return
        addrs = self.peer_addrs.values() if to == EVERYONE else (
            [self.peer_addrs[to]] if to in self.peer_addrs else [])
        for addr in addrs:
            try:
                sock.sendto(data, addr)
                self.io["datagrams_sent"] += 1
            except (BlockingIOError, InterruptedError):
                self.io["send_buffer_full"] += 1  # UDP: a full buffer is a lost datagram
            except OSError:
                self.io["send_errors"] += 1  # e.g. ICMP unreachable reported late

    def reply(self, token: tuple[Any, tuple[str, int]], value: dict[str, Any]) -> None:
        req, addr = token
        if not value.get("ok"):
            self.io["client_errors"] += 1
        if self._client and self._client.transport:
            self._client.transport.sendto(json.dumps({"req": req, **value}).encode(), addr)

    # ---- inputs -------------------------------------------------------------------------

    def _drain_peer(self) -> None:
        """Read every datagram waiting on the peer socket and hand them over together: the
        log entries they bring share one fsync (group commit) instead of one each."""
        sock = self._peer
        if sock is None:
            return
        batch: list[tuple[None, bytes]] = []
        for _ in range(512):
            try:
                data = sock.recv(65_535)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue  # ICMP port unreachable from a dead peer, reported on this socket
            self.io["datagrams_received"] += 1
            batch.append((None, data))
        if batch:
            self.loop.messages(batch)

    def _on_client(self, data: bytes, addr: tuple[str, int]) -> None:
        self.io["client_requests"] += 1
        req: Any = None
        try:
            body = json.loads(data)
            req = body.get("req")
            cmd = SdsCommand(str(body["op"]), str(body["payload"]).encode(),
                             None if req is None else f"{addr[0]}:{addr[1]}:{req}")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self.reply((req, addr), {"ok": False, "error": f"{type(e).__name__}: {e}"})
            return
        self.loop.command(cmd, (req, addr))

    # ---- admin --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        snap = self.core.snapshot(self.now_ms())
        return {"id": self.cfg.id, "bugs": sorted(self.cfg.bugs),
                "options": {k: v for k, v in vars(self.options).items()},
                **snap, "io": {**self.io, "incoming_records": self._held_records}}

    # ---- life ---------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop.start()  # restores the log and the incoming buffer, arms the tick
        self._rewrite_held()  # keep only what still waits; also rewritten at runtime
        self.held = RecordFile.open(self.held_path)
        self._journal_recovered(self.entries)
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
                                  sender=m.sender_id, deps=m.deps, payload=payload_text(m),
                                  recovered=True)

    async def stop(self) -> None:
        self.loop.close()
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
            self.held = None
        self.journal.close()
