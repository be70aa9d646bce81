"""The SDS participant as a sans-IO state machine (one channel), SDS-R included.

``SdsCore`` never touches a socket or a clock. It follows the one core interface
(`nodes.common.core`): ``on_message(peer, datagram, now)``, ``on_timer("tick", now)`` (the
periodic work, re-armed every ``tick_ms``), ``on_command(SdsCommand, token, now)``, all in
seconds on the monotonic clock, so a clock-skew fault does not stall resends or repairs. The
Lamport clock is fed by ``wall(now)``, the node's skewable calendar clock in seconds, as the
spec requires. Effects: datagrams (`Send`, to ``EVERYONE`` or to the peers that lack a
message), log entries and held messages made durable (`Persist("log" | "held", bytes)`),
journal events (`Emit`: ``send``, ``deliver``, ``ephemeral``, ...) and client answers
(`Reply`). The protocol's steps underneath (``send``, ``receive``, ``tick``, ``restore``)
count time in integer milliseconds, as the spec's parameters do.

Decisions where the spec is open (docs/sds.md has the full list):

* message id: SHA-256 hex of sender, Lamport time and content (``message_id``), checked on
  receipt when ``verify_ids`` (a mismatch is refused: nobody can squat an id); sync ids are
  SHA-256 of ``"sync:<sender>:<lamport>"`` (they may repeat; they are never stored);
* acknowledgement: in a received causal history -> acknowledged; in a received bloom filter ->
  possibly acknowledged; in the blooms of ``possible_acks_threshold`` distinct participants ->
  acknowledged (the spec's MAY, as the most used implementation does);
* re-arm: a bloom filter proves absence (no false negatives), so an own message that a peer's
  recent filter lacks is put back in the outgoing buffer. This closes the gap the spec leaves
  to Store nodes: a message acknowledged by one peer but never referenced again would
  otherwise never reach a peer that missed it;
* relay (part of repair, off with ``no-repair``): a peer's message we logged is re-armed the
  same way when another peer's filters lack it for ``resend_possibly_ms`` plus a ``T_resp``
  backoff (its sender, at distance 0, goes first). A sender killed for good cannot re-arm,
  and a message no later causal history names is never asked for by SDS-R: without this a
  live node that missed it while its sender was alive never gets it from the live holders;
* sync messages are skipped only when we sent a new content message in the interval (not
  for ephemerals or resends), and never when a repair request is due (SDS-R periodic sync);
* a peer cannot wedge or grow us: limits on Lamport time, id lengths, history and repair
  requests (refused, counted, journaled), held and repair entries expire as ``lost``, a
  deliverable copy replaces a held one, and an exception keeps the effects already made;
* the log keeps every message stripped of its bloom filter and repair requests; that is what a
  repair rebroadcasts (the spec's "augmented local history").
"""

from __future__ import annotations

import bisect
import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from nodes.common.effects import EVERYONE, Effect, Emit, Persist, Reply, Send, SetTimer
from nodes.common.refusals import Refusals
from nodes.sds import repair
from nodes.sds.bloom import BloomFilter, contains_at, positions
from nodes.sds.wire import (
    DEFAULT_CHANNEL,
    HistoryEntry,
    Kind,
    Message,
    WireError,
    decode,
    encode,
)

#: the named bug modes (docs/sds.md); all off by default
BUGS: tuple[str, ...] = ("deliver-without-deps", "order-by-arrival", "no-resend",
                         "resend-new-lamport", "no-lamport-update", "ties-descending-id",
                         "empty-history", "acks-ignored", "no-repair", "bloom-ignored")


def content_id(content: bytes) -> str:
    """SHA-256 hex of ``content`` alone (ephemeral ids: ``eph:`` + this)."""
    return hashlib.sha256(content).hexdigest()


def message_id(sender: str, lamport: int, content: bytes) -> str:
    """A content message's id: SHA-256 hex of ``sender NUL lamport NUL content``. A sender's
    Lamport times strictly increase (restored from the log on restart), so the id is unique
    per sender and send (the spec's "globally unique"), the same text sent twice or by two
    senders gets two ids, and a receiver can check that an id belongs to its content."""
    return hashlib.sha256(b"%s\0%d\0%s" % (sender.encode(), lamport, content)).hexdigest()


@dataclass(frozen=True)
class SdsOptions:
    """Protocol knobs. Defaults follow the spec where it gives one (causal history 2, T_min
    30 s, T_max 120 s, 3 repair requests a message); the harness compresses timings."""

    channel_id: str = DEFAULT_CHANNEL
    history_size: int = 2
    resend_unacked_ms: int = 2_000
    resend_possibly_ms: int = 6_000
    sync_interval_ms: int = 5_000
    possible_acks_threshold: int = 2
    rearm: bool = True
    repair: bool = True
    t_min_ms: int = 30_000
    t_max_ms: int = 120_000
    max_repair_requests: int = 3
    max_resends_per_tick: int = 100
    tick_ms: int = 50
    num_response_groups: int | None = None  # None: num_participants // 128 + 1
    # ---- limits on what a peer may make us hold (docs/sds.md "Limits") ----
    #: a held message or a repair request older than this is dropped and journaled ``lost``
    #: (None: 10 x ``t_max_ms``; the spec allows T_max, but under loss one T_max leaves a
    #: single repair attempt and the simulator then loses messages for good)
    lost_after_ms: int | None = None
    #: a Lamport time above our calendar clock plus this is refused
    max_clock_skew_ms: int = 3_600_000
    max_id_len: int = 256
    max_sender_len: int = 256
    max_history: int = 256
    #: repair_request entries read from one message; more are refused
    max_repair_requests_in: int = 16
    #: repair_request entries accepted from one sender per ``tick_ms`` x 20 window
    repair_requests_per_window: int = 64
    #: a peer's bloom filter older than this is forgotten
    peer_bloom_stale_ms: int = 60_000
    #: refuse a content message whose id is not ``message_id(sender, lamport, content)``
    #: (turn off for peers that use another id scheme)
    verify_ids: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SdsOptions:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


class AckState(StrEnum):
    UNACKNOWLEDGED = "unacknowledged"
    POSSIBLY_ACKNOWLEDGED = "possibly_acknowledged"
    ACKNOWLEDGED = "acknowledged"


# ---- commands and durable records ---------------------------------------------------------

#: the one timer: periodic work (incoming sweep, re-arm, resends, repairs, sync)
TICK = "tick"
#: the durable stores: ``log`` (every entry of the local log) and ``held`` (messages waiting
#: in the incoming buffer; their ids are already in our bloom filter)
LOG, HELD = "log", "held"


@dataclass(frozen=True)
class SdsCommand:
    """A client's request: ``op`` "send" (a content message) or "ephemeral". ``key``: the
    client's request id (with its address); a retried send with the same key and payload gets
    the first answer instead of a second entry (ids are unique per send, so the node cannot dedup by
    content)."""

    op: str
    payload: bytes
    key: str | None = None

#: how many answered client send keys are remembered for retries
RECENT_SENDS = 4096


def payload_text(m: Message) -> str:
    return (m.content or b"").decode("utf-8", "replace")


# ---- state records --------------------------------------------------------------------------


@dataclass
class Outgoing:
    msg: Message
    data: bytes
    state: AckState = AckState.UNACKNOWLEDGED
    possibly_by: set[str] = field(default_factory=set)
    last_sent_ms: int = 0
    resends: int = 0
    #: re-armed: only these peers are known to lack it (None: everyone, a normal send)
    to: set[str] | None = None

    def __post_init__(self) -> None:
        self.bits = positions(self.msg.message_id)  # computed once, probed in many filters


@dataclass
class OwnTrack:
    """Which peers have shown that they hold one of our messages (for re-arming)."""

    message_id: str
    last_sent_ms: int
    confirmed_by: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.bits = positions(self.message_id)


@dataclass
class RelayTrack:
    """A peer's message we logged, kept until every other peer's filter shows it: since when
    each peer's filters lack it, and how long we leave its sender to re-arm it first."""

    message_id: str
    sender: str
    confirmed_by: set[str]
    lacking_since: dict[str, int] = field(default_factory=dict)
    delay_ms: int | None = None  # computed when a peer first lacks it (most never do)

    def __post_init__(self) -> None:
        self.bits = positions(self.message_id)


@dataclass
class Buffered:
    msg: Message
    since_ms: int


@dataclass
class PeerBloom:
    data: bytes
    received_ms: int
    checked: bool = False


@dataclass
class Counters:
    sent: int = 0
    delivered: int = 0
    received: int = 0
    duplicates: int = 0
    wire_errors: int = 0
    resends: int = 0
    rearms: int = 0
    relays: int = 0
    syncs_sent: int = 0
    syncs_received: int = 0
    ephemeral_received: int = 0
    acked_causal: int = 0
    acked_bloom: int = 0
    buffered: int = 0
    repair_requests_sent: int = 0
    repair_requests_received: int = 0
    repair_responses_sent: int = 0
    bloom_rollovers: int = 0
    broadcasts: int = 0


class SdsCore:
    """One participant in one channel. Not thread-safe; the runtime serializes calls."""

    def __init__(self, me: str, peers: Iterable[str], options: SdsOptions | None = None,
                 bugs: Iterable[str] = (), rng: random.Random | None = None,
                 wall_ms: int = 0, wall: Callable[[float], float] | None = None,
                 durable: tuple[Iterable[Message], Iterable[Message]] = ((), ())) -> None:
        """``wall(now)``: the calendar clock in seconds (default: ``wall_ms`` fixed);
        ``durable``: the log entries and held messages a restart reads back (``start``
        restores them)."""
        self.me = me
        self.peers = sorted(set(peers) - {me})
        self._peer_set = frozenset(self.peers)
        self.opt = options or SdsOptions()
        self.bugs = frozenset(bugs)
        unknown = self.bugs - set(BUGS)
        if unknown:
            raise ValueError(f"unknown SDS bug mode(s) {sorted(unknown)}; known: {list(BUGS)}")
        self.rng = rng or random.Random(0)
        self.wall = wall or (lambda _now: wall_ms / 1000)
        self.lamport = wall_ms  # spec: initialized to the current epoch time in ms
        self._durable = durable
        self.log_keys: list[tuple[int, str]] = []  # (lamport, id), the order of the log
        self.log: dict[str, Message] = {}
        self.bloom = BloomFilter()
        self._bloom_size = len(self.bloom.to_bytes())
        self.incoming: dict[str, Buffered] = {}
        self.waiting: dict[str, set[str]] = {}  # missing dependency -> buffered ids
        self.outgoing: dict[str, Outgoing] = {}
        self.own: dict[str, OwnTrack] = {}
        self.relays: dict[str, RelayTrack] = {}  # insertion order: the oldest first
        self.peer_blooms: dict[str, PeerBloom] = {}
        self._heard: dict[str, int] = {}  # peer -> when last heard from (or first looked for)
        self.repair_out: dict[str, tuple[int, HistoryEntry]] = {}
        self.repair_in: dict[str, tuple[int, HistoryEntry]] = {}
        self.c = Counters()
        self.refusals = Refusals()
        self.repair_since: dict[str, int] = {}  # repair_out id -> when first wanted
        self._repair_budget: dict[str, tuple[int, int]] = {}  # requester -> (window, used)
        self._recent_sends: dict[str, Message] = {}  # client key -> the entry it made
        self._broadcast_since_sync = False
        self._next_sync_ms: int | None = None
        groups = self.opt.num_response_groups
        self.groups = groups or repair.num_response_groups(len(self.peers) + 1)

    # ---- the core interface (nodes.common.core) ---------------------------------------------

    def _wall_ms(self, now: float) -> int:
        return int(self.wall(now) * 1000)

    def start(self, now: float) -> list[Effect]:
        """Restore what was made durable (a restart), then arm the tick."""
        entries, held = self._durable
        self._durable = ((), ())
        self.restore(entries, self._wall_ms(now), held, _ms(now))
        return [SetTimer(TICK, now + self.opt.tick_ms / 1000)]

    def on_message(self, peer: str | None, msg: bytes, now: float) -> list[Effect]:
        """A datagram from ``peer`` (the sender id inside it is what counts)."""
        fx: list[Effect] = []
        return self._guarded("message", fx, lambda: self.receive(msg, _ms(now), fx=fx,
                                                              wall_ms=self._wall_ms(now)))

    def on_timer(self, name: str, now: float) -> list[Effect]:
        if name != TICK:
            return []
        fx: list[Effect] = []
        out = self._guarded("tick", fx, lambda: self.tick(_ms(now), self._wall_ms(now), fx))
        return [*out, SetTimer(TICK, now + self.opt.tick_ms / 1000)]

    def _guarded(self, where: str, fx: list[Effect], step: Callable[[], list[Effect]]
                 ) -> list[Effect]:
        """Run one input's step; if it raises, the effects it already produced (deliveries,
        made durable and journaled) are still returned, with a ``core-error`` event: a state
        change the core made is never left without its evidence."""
        try:
            return step()
        except Exception as e:  # noqa: BLE001 - any bug: keep what was done, report, go on
            fx.append(Emit("core-error", {"where": where,
                                          "error": f"{type(e).__name__}: {e}"[:200]}))
            return fx

    def on_command(self, cmd: SdsCommand, token: Any, now: float) -> list[Effect]:
        """Reply ``{"ok": true, "id", "lamport"}`` for a send (after its log entry is
        durable), ``{"ok": true}`` for an ephemeral, ``{"ok": false, "error"}`` otherwise."""
        try:
            if cmd.op == "send":
                m = self._recent_sends.get(cmd.key) if cmd.key is not None else None
                if m is not None and m.content != cmd.payload:
                    m = None  # the key was reused (a new client, a relay's address): a new send
                fx = []
                if m is None:
                    m, fx = self.send(cmd.payload, _ms(now), self._wall_ms(now))
                    if cmd.key is not None:
                        self._recent_sends[cmd.key] = m
                        if len(self._recent_sends) > RECENT_SENDS:
                            del self._recent_sends[next(iter(self._recent_sends))]
                return [*fx, Reply(token, {"ok": True, "id": m.message_id,
                                           "lamport": m.lamport_timestamp})]
            if cmd.op == "ephemeral":
                return [*self.send_ephemeral(cmd.payload), Reply(token, {"ok": True})]
            raise ValueError(f"unknown op {cmd.op!r}; use send or ephemeral")
        except (ValueError, WireError) as e:
            return [Reply(token, {"ok": False, "error": f"{type(e).__name__}: {e}"})]

    # ---- recovery -----------------------------------------------------------------------

    def restore(self, entries: Iterable[Message], wall_ms: int,
                held: Iterable[Message] = (), now_ms: int = 0) -> None:
        """Rebuild the log, bloom filter, incoming buffer and Lamport clock from persisted
        entries (restart). Own messages are tracked again, so peers' bloom filters re-arm any
        a peer lacks; peers' messages are watched for relaying again."""
        for m in entries:
            if m.message_id in self.log or m.lamport_timestamp is None:
                continue
            self._insert(m)
            self._bloom_add(m.message_id)
            if m.sender_id == self.me:
                self.own[m.message_id] = OwnTrack(m.message_id, last_sent_ms=0)
            else:  # a restarted holder relays too: its sender may be gone
                self._track_relay(m)
        for m in held:
            mid = m.message_id
            if mid not in self.log and mid not in self.incoming and m.lamport_timestamp:
                self._hold(m, self._missing(m), now_ms)
                self._bloom_add(mid)
        top = max((k[0] for k in self.log_keys), default=0)
        self.lamport = max(self.lamport, wall_ms, top)

    # ---- sending ------------------------------------------------------------------------

    def _tick_lamport(self, wall_ms: int) -> int:
        self.lamport = max(wall_ms, self.lamport + 1)
        return self.lamport

    def _history(self) -> tuple[HistoryEntry, ...]:
        n = 0 if "empty-history" in self.bugs else self.opt.history_size
        keys = self.log_keys[-n:] if n > 0 else []
        return tuple(HistoryEntry(mid, sender_id=self.log[mid].sender_id) for _, mid in keys)

    def _repair_requests(self, now_ms: int) -> tuple[HistoryEntry, ...]:
        """Up to ``max_repair_requests`` due entries, lowest T_req first; each is rescheduled
        (a lost request or response is asked again after a fresh backoff)."""
        if not self.opt.repair or not self.repair_out or "no-repair" in self.bugs:
            return ()
        due = sorted((t, mid) for mid, (t, _) in self.repair_out.items() if t <= now_ms)
        out = []
        for _, mid in due[: self.opt.max_repair_requests]:
            _, entry = self.repair_out[mid]
            self.repair_out[mid] = (self._t_req(now_ms, mid), entry)
            out.append(entry)
        if out:
            self.c.repair_requests_sent += 1
        return tuple(out)

    def _t_req(self, now_ms: int, mid: str) -> int:
        return repair.t_req(now_ms, self.me, mid, self.opt.t_min_ms, self.opt.t_max_ms)

    def _stamp(self, mid: str | None, content: bytes | None, now_ms: int, wall_ms: int
               ) -> tuple[Message, list[Effect]]:
        """``mid`` None: the content message id of this send (``message_id``)."""
        lamport = self._tick_lamport(wall_ms)
        if mid is None:
            mid = message_id(self.me, lamport, content or b"")
        reqs = self._repair_requests(now_ms)
        msg = Message(sender_id=self.me, message_id=mid, channel_id=self.opt.channel_id,
                      lamport_timestamp=lamport, causal_history=self._history(),
                      bloom_filter=self.bloom.to_bytes(), repair_request=reqs, content=content)
        fx: list[Effect] = []
        if reqs:
            fx.append(Emit("repair-request", {"ids": [r.message_id for r in reqs],
                                              "via": "content" if content else "sync"}))
        return msg, fx

    def send(self, content: bytes, now_ms: int, wall_ms: int) -> tuple[Message, list[Effect]]:
        """Broadcast a content message: a new entry each time, even for the same text."""
        if not content:
            raise ValueError("a content message needs non-empty content (empty is a sync)")
        msg, fx = self._stamp(None, content, now_ms, wall_ms)
        mid = msg.message_id
        data = encode(msg)
        self._insert(msg.stripped())
        self._bloom_add(mid)
        self.outgoing[mid] = Outgoing(msg, data, last_sent_ms=now_ms)
        self.own[mid] = OwnTrack(mid, last_sent_ms=now_ms)
        self.c.sent += 1
        fx[:0] = self._logged(msg.stripped(), own=True)
        fx.extend(self._broadcast(data, msg, "send"))
        return msg, fx

    def send_ephemeral(self, content: bytes) -> list[Effect]:
        """An ephemeral message: no Lamport time, history or bloom; never buffered or logged."""
        msg = Message(self.me, "eph:" + content_id(content), self.opt.channel_id, content=content)
        return self._broadcast(encode(msg), msg, "ephemeral")

    def _broadcast(self, data: bytes, msg: Message, reason: str,
                   to: tuple[str, ...] | None = None) -> list[Effect]:
        """``data`` to every peer, or only to ``to`` (a re-armed message goes to the peers
        known to lack it). ``reason``: send | resend | sync | repair | ephemeral."""
        self.c.broadcasts += 1
        if reason == "send":  # only a new content message stands in for a sync
            self._broadcast_since_sync = True
        if to is None:
            return [Send(EVERYONE, data)]
        return [Send(p, data) for p in to]

    def _logged(self, m: Message, own: bool) -> list[Effect]:
        """A new log entry: durable first, then journaled (``send`` for our own)."""
        return [Persist(LOG, encode(m)),
                Emit("send" if own else "deliver",
                     {"id": m.message_id, "lamport": m.lamport_timestamp, "sender": m.sender_id,
                      "deps": m.deps, "payload": payload_text(m)})]

    # ---- receiving ----------------------------------------------------------------------

    def receive(self, data: bytes, now_ms: int, fx: list[Effect] | None = None,
                wall_ms: int | None = None) -> list[Effect]:
        """One datagram from the network; malformed bytes are counted and dropped."""
        fx = [] if fx is None else fx
        # lists longer than our limits are refused (history) or cut (repair requests): no need
        # to convert more than limit + 1 entries of a hostile datagram-sized list
        cap = max(self.opt.max_history, self.opt.max_repair_requests_in) + 1
        try:
            msg = decode(data, cap)
        except WireError as e:
            self.c.wire_errors += 1
            if self.c.wire_errors <= 20:
                fx.append(Emit("wire-error", {"error": str(e)[:200]}))
            return fx
        return self.receive_message(msg, now_ms, fx, wall_ms)

    def _refuse(self, reason: str, now_ms: int, fx: list[Effect], **detail: Any) -> list[Effect]:
        """Count a refusal; journal it (rate-limited per reason, nodes/common/refusals.py)."""
        fields = self.refusals.note(reason, now_ms / 1000, **detail)
        if fields is not None:
            fx.append(Emit("refused", fields))
        return fx

    def _check_limits(self, msg: Message, now_ms: int, wall_ms: int | None) -> str | None:
        """Why ``msg`` is refused outright (docs/sds.md "Limits"), or None."""
        o = self.opt
        if len(msg.sender_id) > o.max_sender_len:
            return "sender-id-too-long"
        if len(msg.message_id) > o.max_id_len:
            return "id-too-long"
        if len(msg.causal_history) > o.max_history:
            return "history-too-long"
        if any(len(e.message_id) > o.max_id_len or len(e.sender_id or "") > o.max_sender_len
               for e in (*msg.causal_history, *msg.repair_request)):
            return "history-entry-too-long"
        if (o.verify_ids and msg.kind is Kind.CONTENT and msg.message_id
                != message_id(msg.sender_id, msg.lamport_timestamp or 0, msg.content or b"")):
            return "id-mismatch"
        if msg.lamport_timestamp is not None:
            wall = self._wall_ms(now_ms / 1000) if wall_ms is None else wall_ms
            if msg.lamport_timestamp > max(wall, self.lamport) + o.max_clock_skew_ms:
                return "lamport-ahead"
        return None

    def receive_message(self, msg: Message, now_ms: int, fx: list[Effect] | None = None,
                        wall_ms: int | None = None) -> list[Effect]:
        fx = [] if fx is None else fx
        if msg.channel_id != self.opt.channel_id or msg.sender_id == self.me:
            return fx
        why = self._check_limits(msg, now_ms, wall_ms)
        if why is not None:
            return self._refuse(why, now_ms, fx, sender=msg.sender_id, id=msg.message_id,
                                lamport=msg.lamport_timestamp)
        self.c.received += 1
        kind = msg.kind
        if kind is Kind.EPHEMERAL:
            self.c.ephemeral_received += 1
            fx.append(Emit("ephemeral", {"sender": msg.sender_id, "payload": payload_text(msg)}))
            return fx
        mid = msg.message_id
        if kind is Kind.CONTENT:  # SDS-R: this id needs no repair, and nobody else to repair it
            self.repair_out.pop(mid, None)
            self.repair_in.pop(mid, None)
        self._review_acks(msg, now_ms, fx)
        if self.opt.repair:
            self._on_repair_requests(msg, now_ms, fx)
        if kind is Kind.SYNC:
            self.c.syncs_received += 1
            self._want_repairs(msg.causal_history, now_ms)
            return fx
        if mid in self.incoming and not self._missing(msg):
            # a deliverable copy replaces the held one (its Lamport time or history may differ,
            # e.g. another implementation's retry): a held copy must never wedge the id
            self._unhold(mid)
            fx.append(Emit("replaced-held", {"id": mid, "lamport": msg.lamport_timestamp}))
        elif mid in self.log or mid in self.incoming:
            self.c.duplicates += 1
            return fx
        self._bloom_add(mid)  # spec: a received content message's id goes into our filter
        missing = [] if "deliver-without-deps" in self.bugs else self._missing(msg)
        if missing:
            self._hold(msg, missing, now_ms)
            self.c.buffered += 1
            fx.append(Persist(HELD, encode(msg.stripped())))
            fx.append(Emit("buffered", {"id": mid, "missing": missing}))
            self._want_repairs(msg.causal_history, now_ms)
            return fx
        self._deliver(msg, fx)
        self._drain_incoming(fx, [mid])
        return fx

    def _hold(self, msg: Message, missing: list[str], now_ms: int) -> None:
        self.incoming[msg.message_id] = Buffered(msg, now_ms)
        for d in missing:
            self.waiting.setdefault(d, set()).add(msg.message_id)

    def _unhold(self, mid: str) -> Buffered | None:
        """Forget a held message: its buffer, index and repair entries."""
        b = self.incoming.pop(mid, None)
        if b is not None:
            for d in b.msg.deps:
                w = self.waiting.get(d)
                if w is not None:
                    w.discard(mid)
                    if not w:
                        del self.waiting[d]
        return b

    @property
    def lost_after_ms(self) -> int:
        """How long a held message or a repair request is kept before it is given up as
        ``lost``: the spec bounds repair (T_max, "irretrievably lost"); the snapshot reports
        it so a checker knows until when an entry nobody live can serve may stay."""
        return self.opt.lost_after_ms or 10 * self.opt.t_max_ms

    def _expire(self, now_ms: int, fx: list[Effect]) -> None:
        """Held messages and repair requests older than ``lost_after_ms`` are dropped and
        journaled ``lost`` (the spec's "irretrievably lost"). A dropped held id leaves our
        bloom filter, so its sender sees we lack it and a later copy is taken afresh."""
        limit = self.lost_after_ms
        dropped = []
        reask: list[Message] = []
        for mid, b in list(self.incoming.items()):
            if now_ms - b.since_ms > limit:
                self._unhold(mid)
                dropped.append(mid)
                fx.append(Emit("lost", {"id": mid, "sender": b.msg.sender_id,
                                        "lamport": b.msg.lamport_timestamp, "where": "incoming",
                                        "missing": self._missing(b.msg)}))
                reask.append(b.msg)
        for mid, since in list(self.repair_since.items()):
            if mid not in self.repair_out:
                del self.repair_since[mid]
            elif now_ms - since > limit:
                _, e = self.repair_out.pop(mid)
                del self.repair_since[mid]
                fx.append(Emit("lost", {"id": mid, "sender": e.sender_id, "where": "repair"}))
        for mid, (t, _) in list(self.repair_in.items()):
            if t - now_ms > limit or now_ms - t > limit:
                del self.repair_in[mid]
        if dropped:
            keep = [k[1] for k in self.log_keys[-max(1, self.bloom.count):]]
            self.bloom = self.bloom.rebuilt([*keep, *self.incoming])
        for msg in reask:  # after the repair sweep above: these start a fresh age
            self._reask(msg, now_ms)

    def _reask(self, msg: Message, now_ms: int) -> None:
        """Ask once by repair for a held message we gave up. Our filter showed it while we
        held it, so peers that logged it ended their relay tracks (`_review_relays`) and
        only its sender would send it again, from our filter alone; if the sender is gone,
        a live holder answering this request is the only way back. If nobody logged it, the
        request is given up ``lost_after_ms`` later like any other; a copy that comes back
        and is held again is re-asked again only when given up again (one request per
        ``lost_after_ms``, and only while some node still serves it)."""
        # a held id is never in repair_out (a content message's arrival pops it), and the
        # give-up sweep just dropped repair_since entries outside repair_out: a fresh age
        self._want_repairs((HistoryEntry(msg.message_id, msg.sender_id),), now_ms)

    def _missing(self, msg: Message) -> list[str]:
        return [d for d in msg.deps if d not in self.log]

    def _want_repairs(self, entries: Iterable[HistoryEntry], now_ms: int) -> None:
        """SDS-R: unmet dependencies go to the outgoing repair request buffer."""
        if not self.opt.repair or "no-repair" in self.bugs:
            return
        for e in entries:
            mid = e.message_id
            if mid in self.log or mid in self.incoming or mid in self.repair_out:
                continue
            self.repair_out[mid] = (self._t_req(now_ms, mid), e)
            self.repair_since.setdefault(mid, now_ms)

    def _on_repair_requests(self, msg: Message, now_ms: int, fx: list[Effect]) -> None:
        """Incoming requests, at most ``max_repair_requests_in`` a message and
        ``repair_requests_per_window`` a requester per window; the rest are refused."""
        reqs = msg.repair_request if "no-repair" not in self.bugs else []
        if not reqs:
            return
        window = now_ms // (self.opt.tick_ms * 20)
        start, used = self._repair_budget.get(msg.sender_id, (window, 0))
        if start != window:
            used = 0
        room = min(self.opt.max_repair_requests_in, self.opt.repair_requests_per_window - used)
        if len(reqs) > room:
            self._refuse("repair-requests-over-limit", now_ms, fx, sender=msg.sender_id,
                         entries=len(reqs), accepted=max(0, room))
            reqs = reqs[: max(0, room)]
        if len(self._repair_budget) > 4 * (len(self.peers) + 1):
            self._repair_budget.clear()  # unknown senders cannot grow this map
        self._repair_budget[msg.sender_id] = (window, used + len(reqs))
        for e in reqs:
            mid = e.message_id
            self.c.repair_requests_received += 1
            self.repair_out.pop(mid, None)  # someone asked already: we need not ask too
            have = self.log.get(mid)
            if have is None or mid in self.repair_in:
                continue
            sender = e.sender_id or have.sender_id
            if repair.in_response_group(self.me, sender, mid, self.groups):
                self.repair_in[mid] = (repair.t_resp(now_ms, self.me, sender, mid,
                                                     self.opt.t_max_ms), e)

    def _review_acks(self, msg: Message, now_ms: int, fx: list[Effect]) -> None:
        """Causal history acknowledges at once; the bloom filter is kept as the peer's latest
        and reviewed at the next tick (`_review_blooms`): one pass per peer per tick instead
        of one per datagram, which is what keeps a busy node from drowning in hashing."""
        peer = msg.sender_id
        if peer in self._peer_set:
            self._heard[peer] = now_ms
        for mid in msg.deps:
            track = self.own.get(mid) or self.relays.get(mid)
            if track is not None:
                track.confirmed_by.add(peer)
            if mid in self.outgoing:
                self._acked(mid, "causal", peer, fx)
        bloom = msg.bloom_filter
        if "bloom-ignored" in self.bugs:
            bloom = None
        if bloom and len(bloom) == self._bloom_size:  # absent, or not our filter's shape
            if peer in self._peer_set:  # only configured peers' filters count as acks
                self.peer_blooms[peer] = PeerBloom(bloom, now_ms)
            else:
                self._refuse("bloom-from-unknown-sender", now_ms, fx, sender=peer)

    def _review_blooms(self, now_ms: int, fx: list[Effect]) -> None:
        """Review ACK status against each peer's newest bloom filter; then re-arm own
        messages a filter proves missing (see the module docstring)."""
        if all(pb.checked for pb in self.peer_blooms.values()):  # most ticks: nothing new
            if len(self._heard) < len(self.peers):
                self._ack_need(now_ms)  # its first look at a silent peer must stay this tick's
            return
        need = self._ack_need(now_ms)
        grace = self.opt.resend_unacked_ms
        rearm = self.opt.rearm and "no-resend" not in self.bugs
        for peer, pb in self.peer_blooms.items():
            if pb.checked:
                continue
            pb.checked = True
            for mid, o in list(self.outgoing.items()):
                if peer not in o.possibly_by:
                    if not contains_at(pb.data, o.bits):
                        continue
                    o.possibly_by.add(peer)
                if len(o.possibly_by) >= need:
                    self._acked(mid, "bloom", peer, fx)
                elif o.state is AckState.UNACKNOWLEDGED:
                    o.state = AckState.POSSIBLY_ACKNOWLEDGED
            for mid, track in list(self.own.items()):
                if peer in track.confirmed_by:
                    continue
                if contains_at(pb.data, track.bits):
                    track.confirmed_by.add(peer)
                    if track.confirmed_by.issuperset(self.peers):
                        del self.own[mid]
                elif rearm and mid in self.log and pb.received_ms - track.last_sent_ms > grace:
                    o = self.outgoing.get(mid)
                    if o is None:
                        msg = self.log[mid]
                        self.outgoing[mid] = Outgoing(msg, encode(msg), last_sent_ms=0,
                                                      to={peer})
                    elif o.to is not None and peer not in o.to:
                        o.to.add(peer)
                    else:
                        continue
                    self.c.rearms += 1
                    fx.append(Emit("rearm", {"id": mid, "missing_at": peer}))
            self._review_relays(peer, pb, rearm, fx)

    def _ack_need(self, now_ms: int) -> int:
        """Blooms that acknowledge: ``possible_acks_threshold``, but at most the peers heard
        from within ``peer_bloom_stale_ms`` (at least one): with peers gone for good, too few
        filters are left to reach the threshold, and every message of ours would stay possibly
        acknowledged, resent for ever. A peer never heard from counts until it has been silent
        that long since we first looked."""
        stale = self.opt.peer_bloom_stale_ms
        silent = sum(1 for p in self.peers if now_ms - self._heard.setdefault(p, now_ms) > stale)
        return max(1, min(self.opt.possible_acks_threshold, len(self.peers) - silent))

    def _review_relays(self, peer: str, pb: PeerBloom, rearm: bool, fx: list[Effect]) -> None:
        """Re-arm, to ``peer``, a peer's message its filters have lacked for the track's
        delay (its sender had that long to do it); then wait a full delay again."""
        relay = rearm and self.opt.repair and "no-repair" not in self.bugs
        for mid, rt in list(self.relays.items()):
            if peer in rt.confirmed_by:
                continue
            if contains_at(pb.data, rt.bits):
                rt.confirmed_by.add(peer)
                rt.lacking_since.pop(peer, None)
                if rt.confirmed_by.issuperset(self.peers):
                    del self.relays[mid]
                continue
            first = rt.lacking_since.setdefault(peer, pb.received_ms)
            if rt.delay_ms is None:
                rt.delay_ms = self.opt.resend_possibly_ms + repair.t_resp(
                    0, self.me, rt.sender, mid, self.opt.t_max_ms)
            if not relay or mid not in self.log or pb.received_ms - first < rt.delay_ms:
                continue
            rt.lacking_since[peer] = pb.received_ms
            o = self.outgoing.get(mid)
            if o is None:
                msg = self.log[mid]
                self.outgoing[mid] = Outgoing(msg, encode(msg), last_sent_ms=0, to={peer})
            elif o.to is not None:
                o.to.add(peer)
            else:  # already going to everyone
                continue
            self.c.relays += 1
            fx.append(Emit("rearm", {"id": mid, "missing_at": peer, "relay": True,
                                     "sender": rt.sender}))

    def _acked(self, mid: str, how: str, peer: str, fx: list[Effect]) -> None:
        if "acks-ignored" in self.bugs:  # the bug: the acknowledgement never takes effect
            return
        self.outgoing.pop(mid)
        if how == "causal":
            self.c.acked_causal += 1
        else:
            self.c.acked_bloom += 1
        fx.append(Emit("ack", {"id": mid, "how": how, "by": peer}))

    # ---- delivery -----------------------------------------------------------------------

    def _insert(self, msg: Message) -> None:
        assert msg.lamport_timestamp is not None
        key = (msg.lamport_timestamp, msg.message_id)
        if "order-by-arrival" in self.bugs:
            self.log_keys.append(key)
        elif "ties-descending-id" in self.bugs:  # the bug: equal Lamport times, larger id first
            bisect.insort(self.log_keys, key, key=lambda k: (k[0], [-ord(c) for c in k[1]]))
        else:  # spec: ordered by Lamport timestamp, ties by ascending message id
            bisect.insort(self.log_keys, key)
        self.log[msg.message_id] = msg

    def _deliver(self, msg: Message, fx: list[Effect]) -> None:
        assert msg.lamport_timestamp is not None
        if msg.lamport_timestamp > self.lamport and "no-lamport-update" not in self.bugs:
            self.lamport = msg.lamport_timestamp
        stripped = msg.stripped()
        self._insert(stripped)
        self.repair_out.pop(msg.message_id, None)
        self.c.delivered += 1
        self._track_relay(stripped)
        fx.extend(self._logged(stripped, own=False))

    def _track_relay(self, msg: Message) -> None:
        """Watch the peers' filters for ``msg`` (see `RelayTrack`), the newest half a filter's
        capacity at most: a filter rolled over keeps that much, so older absences prove
        nothing (and a peer gone for good must not grow this)."""
        mid, sender = msg.message_id, msg.sender_id
        self.relays[mid] = RelayTrack(mid, sender, {sender})
        while len(self.relays) > self.bloom.capacity // 2:
            del self.relays[next(iter(self.relays))]

    def _drain_incoming(self, fx: list[Effect], ready: Iterable[str] | None = None) -> None:
        """Deliver every buffered message whose dependencies are now met, transitively.

        ``ready``: ids just delivered (only their waiters are looked at); ``None`` sweeps the
        whole buffer (the periodic incoming-buffer sweep)."""
        if not self.incoming:
            self.waiting.clear()
            return
        if ready is None:
            cand = set(self.incoming)
        else:
            cand = set()
            for r in ready:
                cand |= self.waiting.pop(r, set())
        while cand:
            now_ready = sorted((self.incoming[m].msg.lamport_timestamp or 0, m) for m in cand
                               if m in self.incoming and not self._missing(self.incoming[m].msg))
            cand = set()
            for _, mid in now_ready:
                b = self.incoming.pop(mid)
                self._deliver(b.msg, fx)
                cand |= self.waiting.pop(mid, set())

    def _bloom_add(self, mid: str) -> None:
        if self.bloom.full:  # spec: roll over at capacity; keep the newer half of the log
            keep = [k[1] for k in self.log_keys[-self.bloom.capacity // 2:]]
            self.bloom = self.bloom.rebuilt(keep)
            self.c.bloom_rollovers += 1
        self.bloom.add(mid)

    # ---- timers -------------------------------------------------------------------------

    def tick(self, now_ms: int, wall_ms: int, fx: list[Effect] | None = None) -> list[Effect]:
        """Periodic work: incoming sweep, expiry, re-arm, outgoing resends, repairs, sync."""
        fx = [] if fx is None else fx
        self._drain_incoming(fx)
        self._expire(now_ms, fx)
        for peer, pb in list(self.peer_blooms.items()):
            if now_ms - pb.received_ms > self.opt.peer_bloom_stale_ms:
                del self.peer_blooms[peer]
        for b in self.incoming.values():
            self._want_repairs(b.msg.causal_history, now_ms)
        self._review_blooms(now_ms, fx)
        if "no-resend" not in self.bugs:
            self._resend(now_ms, wall_ms, fx)
        if self.opt.repair:
            self._respond(now_ms, fx)
        self._maybe_sync(now_ms, wall_ms, fx)
        return fx

    def _resend(self, now_ms: int, wall_ms: int, fx: list[Effect]) -> None:
        """Rebroadcast what is due, oldest Lamport time first (dependencies before dependents)
        and at most ``max_resends_per_tick`` a tick: after a partition heals a node may have
        thousands due, and one burst would overflow socket buffers along the way."""
        due = []
        for mid, o in self.outgoing.items():
            period = (self.opt.resend_unacked_ms if o.state is AckState.UNACKNOWLEDGED
                      else self.opt.resend_possibly_ms)
            if now_ms - o.last_sent_ms >= period:
                due.append((o.msg.lamport_timestamp or 0, mid))
        due.sort()
        for _, mid in due[: self.opt.max_resends_per_tick]:
            o = self.outgoing[mid]
            if "resend-new-lamport" in self.bugs:  # the bug: same id, fresh Lamport time
                msg, _ = self._stamp(mid, o.msg.content, now_ms, wall_ms)
                o.msg, o.data = msg, encode(msg)
            else:  # same id, Lamport time and history; the current filter and due requests
                o.msg = replace(o.msg, bloom_filter=self.bloom.to_bytes(),
                                repair_request=self._repair_requests(now_ms))
                o.data = encode(o.msg)
            o.last_sent_ms = now_ms
            o.resends += 1
            track = self.own.get(mid)
            if track is not None:
                track.last_sent_ms = now_ms
            self.c.resends += 1
            fx.append(Emit("resend", {"id": mid, "lamport": o.msg.lamport_timestamp,
                                      "state": o.state.value, "n": o.resends}))
            fx.extend(self._broadcast(o.data, o.msg, "resend",
                                      tuple(sorted(o.to)) if o.to is not None else None))

    def _respond(self, now_ms: int, fx: list[Effect]) -> None:
        for mid, (t, _) in list(self.repair_in.items()):
            if t > now_ms:
                continue
            del self.repair_in[mid]
            msg = self.log.get(mid)
            if msg is None:
                continue
            self.c.repair_responses_sent += 1
            fx.append(Emit("repair-response", {"id": mid, "sender": msg.sender_id}))
            fx.extend(self._broadcast(encode(msg), msg, "repair"))

    def _maybe_sync(self, now_ms: int, wall_ms: int, fx: list[Effect]) -> None:
        if self._next_sync_ms is None:
            self._next_sync_ms = now_ms + self._sync_gap()
        if now_ms < self._next_sync_ms:
            return
        self._next_sync_ms = now_ms + self._sync_gap()
        repairs_due = self.opt.repair and any(t <= now_ms for t, _ in self.repair_out.values())
        if self._broadcast_since_sync and not repairs_due:
            self._broadcast_since_sync = False
            return
        self._broadcast_since_sync = False
        mid = hashlib.sha256(f"sync:{self.me}:{self.lamport + 1}".encode()).hexdigest()
        msg, more = self._stamp(mid, None, now_ms, wall_ms)
        fx.extend(more)
        self.c.syncs_sent += 1
        fx.extend(self._broadcast(encode(msg), msg, "sync"))
        self._broadcast_since_sync = False

    def _sync_gap(self) -> int:
        return int(self.opt.sync_interval_ms * self.rng.uniform(0.75, 1.25))

    # ---- inspection ---------------------------------------------------------------------

    def ack_state(self, mid: str) -> AckState | None:
        """Our own message's state; ``None`` if it is not ours."""
        if mid in self.outgoing:
            return self.outgoing[mid].state
        if mid in self.log and self.log[mid].sender_id == self.me:
            return AckState.ACKNOWLEDGED
        return None

    def ordered_log(self) -> list[Message]:
        return [self.log[mid] for _, mid in self.log_keys]

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        """The protocol part of ``/admin/state`` (docs/sds.md)."""
        def entry(m: Message) -> dict[str, Any]:
            return {"id": m.message_id, "lamport": m.lamport_timestamp, "sender": m.sender_id,
                    "deps": m.deps,
                    "payload": (m.content or b"").decode("utf-8", "replace")}

        return {
            "lamport": self.lamport,
            "lost_after_ms": self.lost_after_ms,
            "tick_ms": self.opt.tick_ms,  # give-ups run at ticks: one may lag the bound by this
            "log": [entry(m) for m in self.ordered_log()],
            "incoming_buffer": [{"id": mid, "lamport": b.msg.lamport_timestamp,
                                 "sender": b.msg.sender_id, "missing": self._missing(b.msg),
                                 "age_ms": now_ms - b.since_ms}
                                for mid, b in self.incoming.items()],
            "outgoing_buffer": [{"id": mid, "lamport": o.msg.lamport_timestamp,
                                 "state": o.state.value, "possibly_by": sorted(o.possibly_by),
                                 "resends": o.resends} for mid, o in self.outgoing.items()],
            "own_unconfirmed": {mid: sorted(set(self.peers) - t.confirmed_by)
                                for mid, t in self.own.items()},
            "relays_unconfirmed": len(self.relays),
            "bloom": {"bits": self.bloom.bits, "hashes": self.bloom.hashes,
                      "capacity": self.bloom.capacity, "count": self.bloom.count,
                      "fill_ratio": round(self.bloom.fill_ratio(), 6),
                      "rollovers": self.c.bloom_rollovers},
            "repair": {
                "outgoing": [{"id": mid, "sender": e.sender_id, "t_req_in_ms": t - now_ms,
                              "age_ms": now_ms - self.repair_since.get(mid, now_ms)}
                             for mid, (t, e) in sorted(self.repair_out.items(),
                                                       key=lambda kv: kv[1][0])],
                "incoming": [{"id": mid, "sender": e.sender_id, "t_resp_in_ms": t - now_ms}
                             for mid, (t, e) in sorted(self.repair_in.items(),
                                                       key=lambda kv: kv[1][0])],
                "response_groups": self.groups,
            },
            "counters": dict(vars(self.c)),
            "refused": self.refusals.snapshot(),
        }


def _ms(now: float) -> int:
    return int(now * 1000)


__all__ = ["BUGS", "HELD", "LOG", "TICK", "AckState", "Effect", "SdsCommand", "SdsCore",
           "SdsOptions", "content_id", "message_id", "payload_text"]
