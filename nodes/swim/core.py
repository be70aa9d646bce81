"""The SWIM membership protocol as a sans-IO state machine.

`SwimCore` follows the one core interface (`nodes.common.core`): ``on_message`` takes a
decoded datagram and its sender's NodeID, ``on_timer("tick")`` runs every timer that is due,
``on_command`` takes ``"leave"`` and ``"rejoin"``; all timed in seconds. It returns effects:
datagrams to a member *by NodeID* or broadcast announcements to ``EVERYONE`` (`Send`), the
next wake-up (`SetTimer`), the generation (`Persist("generation", g)`, before anything that
carries it leaves), client answers (`Reply`) and journal events (`Emit`). It owns no socket,
no clock and no randomness but the `random.Random` it is given, so the simulator
(`harness.sim`) drives many with virtual time.

Members are named by NodeID, never by address: behind the harness's UDP relay every node
reaches the same peer at a different address (docs/swim.md, "Addressing"), so the runtime
maps addresses to NodeIDs and back from the node's config.

What it does (spec ../shared/specs/swim.md, SWIM paper, memberlist's incarnation rules):

* join through seeds: JoinReq, answered by JoinAck (+ a sample of members), JoinNak (a token
  expected, or refused), JoinRedirect (at capacity: "ask that member"), or silence;
* one probe per protocol period, to the *stalest* member (neither heard from nor probed for
  longest; ``probe_order: round-robin`` restores the paper's shuffled round-robin), a member
  we heard suspected first; after ``probe_timeout_s`` without an answer, ``indirect_k``
  helpers relay the probe (ttl 1); no answer by the period's end -> the member is suspected,
  and ``indirect_k`` members are told at once;
* suspicion is Lifeguard's (Dadgar et al. 2018; memberlist's suspicion.go), decided as
  follows. Only members whose own probe failed run a timer (hearsay never kills). A *lone*
  suspicion waits the maximum, ``suspicion_mult * max(1, log10 n)`` periods: the timeout
  this node always used, whose false-positive record (none in a 10-member, 10-minute
  fault-free run) is what we keep. Each member whose own probe of the suspect also failed
  gossips the suspicion with *itself* as origin; every distinct origin is one independent
  confirmation, and c confirmations shrink the timer to
  ``max(min, max - (max - min) * log(c + 1) / log(k + 1))`` with ``min =
  suspicion_min_mult * max(1, log10 n)`` periods (default 2: half the maximum, half of
  memberlist's minimum, which is our maximum) and ``k = suspicion_k`` (2) capped at
  ``n - 2``. A member that hears of a suspicion probes the suspect first thing next
  period, so a dead member collects its confirmations within about a period. Why a
  minimum below memberlist's is safe: it needs k + 1 members whose direct *and* indirect
  probes all failed, a live member keeps being nudged (each nudge carries the notice it
  refutes) for min periods, and the accuser's own local stalls never count (next point).
  A refutation (a higher generation) cancels the suspicion and its confirmations;
* local health (Lifeguard's concern, without its nacks: the spec's relayed ping is
  answered by the target straight to the requester, so helpers never learn the outcome):
  a timer firing more than a probe timeout late means *this* process was stopped or
  starved; the probe then in flight proves nothing (no suspicion), and suspicions that
  expired meanwhile get one more probe timeout for buffered refutations to be read;
* the member that declares a death sends the verdict at once to every live member (and
  every member that learns it fans it out to ``indirect_k`` more); the accuser nudges the
  suspect every period;
* updates (alive/joined, suspect, dead, left) are piggy-backed on pings, join answers and
  join requests, each sent ``retransmit_mult * ceil(log10(n + 1))`` times; deaths and
  leaves are also flooded at once; every ping names its sender (cheap anti-entropy);
  no new gossip item: a confirmation is an ordinary suspect entry whose ``origin`` is the
  confirming member (docs/swim.md, "Wire");
* a member we believe suspect or dead is told so whenever we talk to it ("notice"), so it can
  refute; dead members, and address-book members we never heard of, get a reconnecting
  JoinReq every ``reconnect_periods`` periods, which is how two sides of a healed partition
  find each other again (and two groups founded apart merge);
* voluntary leave (Leave to every member, then silence), peer capacity, broadcast seeds.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from nodes.common.effects import EVERYONE, Effect, Emit, Persist, Reply, Send, SetTimer
from nodes.common.refusals import Refusals
from nodes.swim import codec as c
from nodes.swim import join_token
from nodes.swim.codec import NodeInfo, Update, UpdateKind

#: named bug modes (docs/swim.md): off unless listed in the node config's ``bugs``
BUGS = ("no-indirect-probes", "no-refutation", "no-gossip-retransmit", "ignore-capacity",
        "ignore-leave", "accept-forged-dead", "never-suspect-paused", "unbounded-gossip")

DOMAIN = c.domain_tag("swim")
NAK_TOKEN_EXPECTED = 7115  # the spec's example session
NAK_REFUSED = 7116
NAK_FULL = 7117
REDIRECT_AT_CAPACITY = 7118


class State(enum.StrEnum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"
    LEFT = "left"


LIVE_STATES = (State.ALIVE, State.SUSPECT)


#: the one timer name: the core re-arms it for its earliest deadline after every input
TICK = "tick"


#: packet budget (docs/swim.md, "Packet budget"): bytes kept for the AES-GCM seal, so a
#: budget holds whether encryption is on or off
SEAL_RESERVE = 29  # nodes.swim.crypto.OVERHEAD (a unit test pins it)
#: bytes kept for the largest part of a message outside its payload: a JoinReq's code,
#: NodeInfo, token hint (14) and HMAC (32) with their lengths = 59; a ping's head is 10
HEAD_RESERVE = 64
#: a payload's fixed part (seq u32, two counts) and its entries
PAYLOAD_FIXED, UPDATE_BYTES, INFO_BYTES = 6, 13, 8
MIN_PACKET = SEAL_RESERVE + HEAD_RESERVE + PAYLOAD_FIXED + UPDATE_BYTES + INFO_BYTES


@dataclass(frozen=True)
class Options:
    """Protocol knobs, from the node config's ``options`` (unknown keys are ignored)."""

    period_s: float = 1.0
    probe_timeout_s: float = 0.5
    indirect_k: int = 3
    suspicion_mult: float = 4.0  # a lone suspicion: mult * max(1, log10 n) periods
    suspicion_min_mult: float = 2.0  # floor with k confirmations (= suspicion_mult: off)
    suspicion_k: int = 2  # confirmations expected (memberlist: suspicion_mult - 2)
    probe_order: str = "stalest"  # or "round-robin" (shuffled, the SWIM paper's)
    capacity: int = 0  # 0: no limit
    retransmit_mult: int = 4
    retransmits: int = 0  # 0: retransmit_mult * ceil(log10(n + 1))
    max_piggyback: int = 8
    sample_size: int = 0  # JoinAck sample; 0: every alive member (the joiner's full view)
    reconnect_periods: int = 5
    sync_periods: int = 10  # every that many probes carries our view (anti-entropy); 0: off
    announce_periods: int = 0  # 0: never broadcast
    join_token: str = ""  # non-empty: a shared secret every JoinReq proves (join_token.py)
    accept_joins: bool = True  # False: ignore JoinReq
    refuse_joins: bool = False  # True: JoinNak 7116 every JoinReq
    discover: bool = False  # with no seeds: wait for a Broadcast instead of founding a group
    dynamic_members: bool = False  # True: a joiner outside the address book is admitted
    # with its token's proof, at the address its JoinReq came from (docs/swim.md)
    max_packet: int = 1400  # bytes on the wire (sealed or not) of any datagram we build
    leave_retries: int = 3  # a Leave goes to each member at most this many times, once a
    # period, until that member acknowledges it (a PingResponse carrying our leave)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Options:
        known = {f.name: f.type for f in fields(cls)}
        kw: dict[str, Any] = {}
        for k, v in d.items():
            if k in known:
                default = getattr(cls, k)
                kw[k] = type(default)(v)
        opts = cls(**kw)
        if opts.period_s <= 0 or not 0 < opts.probe_timeout_s <= opts.period_s:
            raise ValueError("need period_s > 0 and 0 < probe_timeout_s <= period_s")
        if not 0 < opts.suspicion_min_mult <= opts.suspicion_mult or opts.suspicion_k < 0:
            raise ValueError("need 0 < suspicion_min_mult <= suspicion_mult, suspicion_k >= 0")
        if opts.max_packet < MIN_PACKET:
            raise ValueError(f"max_packet {opts.max_packet} is below {MIN_PACKET} bytes, the "
                             "smallest that holds a JoinReq with its token and one update")
        if opts.dynamic_members and not opts.join_token:
            raise ValueError("dynamic_members needs a join_token: a stranger's address is "
                             "taken only from a JoinReq that proves the token (HMAC)")
        if opts.sync_periods < 0:
            raise ValueError("sync_periods: 0 (no sync) or the periods between syncs")
        if opts.probe_order not in ("stalest", "round-robin"):
            raise ValueError("probe_order: 'stalest' or 'round-robin'")
        return opts


@dataclass
class Member:
    id: int
    gen: int
    state: State
    since: float
    suspect_deadline: float | None = None  # set while *we* time its suspicion
    suspected_by: int | None = None  # the first accuser we heard of (notices name it)
    suspect_start: float | None = None  # when our own probe failed (our timer's start)
    suspecters: set[int] = field(default_factory=set)  # distinct others who suspect it @gen
    heard: float = 0.0  # last datagram from it, or our last probe of it (probe order)

    def info(self) -> NodeInfo:
        return NodeInfo(self.id, self.gen)


@dataclass
class _Probe:
    target: int
    seq: int
    direct_deadline: float
    acked: bool = False
    indirect: bool = False
    stalled: bool = False  # our own process stalled during it: a failure proves nothing


@dataclass
class _Gossip:
    update: Update
    left: int
    sent: int = 0


#: the largest generation the wire carries (NodeInfo's u32)
GEN_MAX = 2**32 - 1
#: how far one update may move a generation ahead of the one we hold: restarts and
#: refutations add one at a time, so a bigger jump is a forgery or corruption. The same
#: headroom is kept below GEN_MAX, so a refutation (generation + 1) can never overflow.
MAX_GEN_STEP = 1 << 16


@dataclass
class Counters:
    sent: dict[str, int] = field(default_factory=dict)
    received: dict[str, int] = field(default_factory=dict)
    probes: int = 0
    probes_failed: int = 0
    indirect_probes: int = 0
    forwarded: int = 0
    probes_inconclusive: int = 0  # failed across a local stall: not held against the target
    confirmations: int = 0  # independent suspicions counted toward a timer we run
    stalls: int = 0
    refused_generations: int = 0  # updates naming an implausible generation (_plausible)
    unknown_gossip: int = 0  # gossip entries of a kind we do not know, skipped
    refused_strangers: int = 0  # JoinReqs from ids outside the address book
    refused: dict[str, int] = field(default_factory=dict)  # datagrams refused, by reason
    syncs: int = 0  # probes that carried our view, and views we answered one with (sync)


#: journaled ``refused`` events per reason per protocol period; the rest are only counted
REFUSED_EVENTS_PER_PERIOD = 5
#: JoinReqs answered per sender per period, and from everyone per period: a JoinAck carries
#: the full view, so unbounded answers make every member a reflector
JOINS_PER_SENDER_PER_PERIOD = 2
JOINS_PER_PERIOD = 16
#: the longest peer-supplied string the journal keeps (a Nak's etag)
MAX_LOGGED = 64
#: JoinAck datagrams one admitted JoinReq gets at most (the view split by the packet budget)
JOIN_ACK_PARTS = 4
#: members admitted from outside the start-up address book (dynamic_members), at most
MAX_DYNAMIC = 256
#: periods a seed's join answer (JoinAck, Nak) is expected after our JoinReq to it
JOIN_ANSWER_PERIODS = 3
#: periods a joiner asks its seeds unanswered before it may found the group itself: only if
#: it heard a JoinReq from another joiner within that many periods and is the lowest-numbered
#: of them (a founder that restarted with every peer as a seed, while each peer waits to join
#: through it, would otherwise wedge: nobody founds; docs/swim.md "Founding")
FOUND_AFTER_PERIODS = 5
#: periods after joining before a member of a minority group also knocks (`_reconnect`) at
#: address-book members it never heard of: by then gossip has taught it every member of its
#: group, so one still unknown is in another group (founded beside ours across a partition)
#: or not running
STRANGER_PERIODS = 10
#: view samples (sync answers) sent per sender per period, and to everyone per period: each
#: may fill a datagram, so unbounded answers would make every member a reflector
SYNCS_PER_SENDER_PER_PERIOD = 1
SYNCS_PER_PERIOD = 8
#: JoinNaks sent per sender per period, and to everyone per period: a forged JoinReq flood
#: from (or spoofing) one address must not make a node answer it datagram for datagram
NAKS_PER_SENDER_PER_PERIOD = 1
NAKS_PER_PERIOD = 16
#: periods a probe's sequence number stays valid for its ack (a late answer is normal); an
#: ack naming a sequence number we did not issue in that window is refused (`ack-seq`)
ACK_PERIODS = 4


class SwimCore:
    """One member's protocol state. Call ``start`` once, then the other inputs."""

    def __init__(self, me: int, gen: int, addresses: Mapping[int, tuple[str, int]],
                 seeds: Iterable[int], options: Options, rng: random.Random,
                 bugs: Iterable[str] = ()) -> None:
        unknown = set(bugs) - set(BUGS)
        if unknown:
            raise ValueError(f"unknown bug modes {sorted(unknown)}; known: {list(BUGS)}")
        self.me = me
        self.gen = gen
        self.addresses = dict(addresses)
        self.seeds = [s for s in seeds if s != me]
        self.opts = options
        self.rng = rng
        self.bugs = frozenset(bugs)
        self.members: dict[int, Member] = {}
        self.joined = False
        self.left = False
        self.period = 0
        self.counters = Counters()
        self._next_period: float = 0.0
        self._probe: _Probe | None = None
        self._order: list[int] = []
        self._priority: list[int] = []  # hearsay suspects to probe first (confirmation)
        self._refusals = Refusals(window=1, per_window=REFUSED_EVENTS_PER_PERIOD,
                                  counts=self.counters.refused)
        self._gen_refusals = Refusals(window=1, per_window=REFUSED_EVENTS_PER_PERIOD)
        self._joins_seen: tuple[int, dict[int, int]] = (0, {})  # (period, sender -> count)
        self._naks_seen: tuple[int, dict[int, int]] = (0, {})  # (period, sender -> count)
        self._syncs_seen: tuple[int, dict[int, int]] = (0, {})  # (period, sender -> count)
        # seed -> {nonce of a JoinReq we sent it: its period}; a JoinAck must echo one
        self._join_asked: dict[int, dict[int, int]] = {}
        self._seqs: dict[int, int] = {}  # probe sequence numbers we issued -> their period
        self._gossip: dict[int, _Gossip] = {}
        self._seed_i = 0
        self._join_target: int | None = None
        self._redirected: set[int] = set()
        self._leave_unacked: set[int] = set()  # members yet to acknowledge our Leave
        self._leave_sends = 0  # Leaves sent to each of them so far
        self._dynamic: dict[int, tuple[str, int]] = {}  # book entries added by introduce()
        self._introduced: set[int] = set()  # members our own JoinReq introduced us to
        self._former: list[int] = []  # the members we left: whom a rejoin asks first
        self._join_tries = 0  # periods spent unjoined asking seeds (since start or rejoin)
        self._joined_at = 0  # the period we last joined (or founded) in: _reconnect
        self._joiners: dict[int, int] = {}  # joiner -> period its JoinReq reached us unjoined
        self._out: list[Effect] = []
        self._armed: float | None = None  # the TICK timer's time as last set
        self._now = 0.0

    # ---------------------------------------------------------------- public surface

    def start(self, now: float) -> list[Effect]:
        """Begin: the generation is made durable, then the first period starts now (a founder
        with no seeds is joined at once)."""
        self._now = now
        self._next_period = now
        self._out.append(Persist("generation", self.gen))
        self._poll(now)
        return self._flush()

    def on_timer(self, name: str, now: float) -> list[Effect]:
        """``TICK``: run every timer due at ``now`` (other names are not ours: ignored)."""
        if name != TICK:
            return []
        self._armed = None  # it just fired
        self._poll(now)
        return self._flush()

    def on_message(self, peer: int | None, msg: c.Message, now: float) -> list[Effect]:
        """One decoded datagram; ``peer`` is the sender as the address book says (None: an
        address we do not know)."""
        self._now = now
        self._on_message(msg, peer)
        return self._flush()

    def on_command(self, cmd: str, token: Any, now: float) -> list[Effect]:
        """``"leave"`` (tell every member, fall silent) or ``"rejoin"`` (join again with a
        higher generation); the reply says ``{"ok", "gen", "left"}`` either way."""
        self._now = now
        if cmd == "leave":
            self._leave()
        elif cmd == "rejoin":
            self._rejoin(now)
        else:
            self._out.append(Reply(token, {"ok": False, "error": f"unknown command {cmd!r}; "
                                           "use leave or rejoin"}))
            return self._flush()
        self._out.append(Reply(token, {"ok": True, "gen": self.gen, "left": self.left}))
        return self._flush()

    def next_wakeup(self) -> float:
        """The earliest time a timer is due."""
        t = self._next_period
        if self.left:
            return t  # only the next round of Leaves
        p = self._probe
        if p is not None and not p.acked and not p.indirect:
            t = min(t, p.direct_deadline)
        for m in self.members.values():
            if m.state is State.SUSPECT and m.suspect_deadline is not None:
                t = min(t, m.suspect_deadline)
        return t

    def _poll(self, now: float) -> None:
        self._now = now
        self._check_stall(now)
        if not self.left:  # a left node runs no probes or suspicions: only its Leaves
            p = self._probe
            if p is not None and not p.acked and not p.indirect and now >= p.direct_deadline:
                self._indirect(p)
            for m in list(self.members.values()):
                if (m.state is State.SUSPECT and m.suspect_deadline is not None
                        and now >= m.suspect_deadline):
                    self._declare_dead(m)
        while now >= self._next_period:
            self._period()
            self._next_period += self.opts.period_s
            if self._next_period <= now:  # a stall (paused process): do not replay periods
                self._next_period = now + self.opts.period_s

    def _on_message(self, msg: c.Message, from_id: int | None) -> None:
        now = self._now
        name = type(msg).__name__
        self.counters.received[name] = self.counters.received.get(name, 0) + 1
        why = self._untrusted(msg, from_id)
        if why is not None:
            self._refuse(why, msg, from_id)
            return
        if self.left:
            self._leave_acked(msg)
            return  # a left node is silent
        if from_id is not None and (m := self.members.get(from_id)) is not None and (
                isinstance(msg, c.PingRequest | c.PingResponse) and msg.payload.seq != 0
                and from_id == (msg.src if isinstance(msg, c.PingRequest) else msg.target)):
            # its probe of us, or its answer to ours: it was alive just now, no need to probe
            # it soon. Only probe traffic counts: one-way gossip pings (seq 0: a verdict sent
            # to every member, floods, refutations) reach many members at once, and would
            # make a member that dies right after sending them the freshest everywhere
            m.heard = max(m.heard, now)
        match msg:
            case c.PingRequest():
                self._on_ping(msg)
            case c.PingResponse():
                self._on_pong(msg)
            case c.JoinReq():
                self._on_join_req(msg, from_id)
            case c.JoinAck():
                self._on_join_ack(msg)
            case c.JoinNak():
                if from_id is not None and self._asked(from_id):
                    self._on_join_nak(msg, from_id)  # else unsolicited: ignored
            case c.JoinRedirect():
                self._on_redirect(msg, from_id)
            case c.Leave():
                self._on_leave(msg)
            case c.Broadcast():
                self._on_broadcast(msg)

    def _untrusted(self, msg: c.Message, from_id: int | None) -> str | None:
        """Why a datagram is refused before anything in it is applied, or None (docs/swim.md,
        "Trust boundaries"). Only a Broadcast may come from an address outside the book (it
        leaves from the broadcast socket, and only names a seed to ask); every other message
        must come from a configured address, and one that names its sender must name the
        member at that address: a Leave its leaver, a PingResponse the probed member, a
        JoinReq or JoinAck its joiner or seed. A PingRequest may be relayed (ttl), so its
        ``src`` is not checked; the relayer is a configured member."""
        if isinstance(msg, c.Broadcast):
            return None
        if from_id is None:
            return "unknown-address"
        claimed: int | None = None
        match msg:
            case c.Leave():
                claimed = msg.src.id
            case c.PingResponse():
                claimed = msg.target
            case c.JoinReq():
                claimed = msg.src.id
            case c.JoinAck():
                claimed = msg.desc.id
        if claimed is not None and claimed != from_id:
            return "origin-mismatch"
        if isinstance(msg, c.PingResponse) and msg.src == self.me and msg.payload.seq != 0 \
                and msg.payload.seq not in self._seqs:
            return "ack-seq"  # an ack to a probe we never sent (or long expired): forged
        if isinstance(msg, c.JoinAck) and not self._asked(from_id, msg.payload.seq):
            return "unsolicited-join-ack"
        return None

    def _asked(self, to: int, nonce: int | None = None) -> bool:
        """Did we send ``to`` a JoinReq within JOIN_ANSWER_PERIODS (with ``nonce``, if given)?
        A JoinAck must echo the nonce of one: its view and sample are applied wholesale."""
        recent = {n: p for n, p in self._join_asked.get(to, {}).items()
                  if p >= self.period - JOIN_ANSWER_PERIODS}
        return bool(recent) if nonce is None else nonce in recent

    def _refuse(self, why: str, msg: c.Message, from_id: int | None) -> None:
        """Count a refused datagram; journal it at most REFUSED_EVENTS_PER_PERIOD times per
        reason per period, so that a flood grows a counter, not the journal."""
        ev = self._refusals.note(why, self.period, kind=type(msg).__name__, sender=from_id)
        if ev is not None:
            self._emit("refused", **ev)

    def _join_allowed(self, sender: int) -> bool:
        """Answer at most JOINS_PER_SENDER_PER_PERIOD JoinReqs per sender and
        JOINS_PER_PERIOD in all per period (a JoinAck reflects the whole view)."""
        self._joins_seen, ok = _within(self._joins_seen, self.period, sender,
                                       JOINS_PER_SENDER_PER_PERIOD, JOINS_PER_PERIOD)
        return ok

    def _nak(self, msg: c.JoinReq, from_id: int | None, nak: c.JoinNak) -> None:
        """Send ``nak`` to the JoinReq's sender unless it (or everyone) had its Naks for this
        period (`nak-rate`: counted): a refusal must not be an amplifier."""
        self._naks_seen, ok = _within(self._naks_seen, self.period, msg.src.id,
                                      NAKS_PER_SENDER_PER_PERIOD, NAKS_PER_PERIOD)
        if ok:
            self._send(msg.src.id, nak)
        else:
            self._refuse("nak-rate", msg, from_id)

    def _leave(self) -> None:
        if self.left:
            return
        self._former = [m.id for m in self._live()]
        self._leave_unacked = set(self._former)
        self._leave_sends = 0
        self._emit("leave", gen=self.gen)
        self.left = True
        self.joined = False
        self._probe = None
        self._send_leaves()

    def _leaving(self) -> bool:
        """Left, with Leaves still owed: a member has not acknowledged and rounds are left."""
        return bool(self._leave_unacked) and self._leave_sends < self.opts.leave_retries

    def _send_leaves(self) -> None:
        """One round of Leaves to the members that have not acknowledged one, while rounds
        are left: a lost Leave would otherwise make them find us dead."""
        if not self._leaving():
            return
        self._leave_sends += 1
        for to in sorted(self._leave_unacked):
            self._send(to, c.Leave(NodeInfo(self.me, self.gen)))

    def _leave_acked(self, msg: c.Message) -> None:
        """While left: a PingResponse to us carrying our leave is a member's acknowledgement
        (its sender was checked to be ``msg.target`` by _untrusted)."""
        if isinstance(msg, c.PingResponse) and msg.src == self.me and any(
                u.kind is UpdateKind.LEFT and u.node.id == self.me and u.node.gen >= self.gen
                for u in msg.payload.updates):
            self._leave_unacked.discard(msg.target)

    def _on_leave(self, msg: c.Leave) -> None:
        """Apply a member's leave and acknowledge it (again, for a retry whose first
        acknowledgement was lost), so that it stops re-sending."""
        if "ignore-leave" in self.bugs:
            return
        self._apply(Update(UpdateKind.LEFT, msg.src, msg.src.id))
        cur = self.members.get(msg.src.id)
        if cur is not None and cur.state is State.LEFT and cur.gen >= msg.src.gen:
            ack = c.Payload(updates=(Update(UpdateKind.LEFT, cur.info(), self.me),))
            self._send(cur.id, c.PingResponse(cur.id, self.me, 0, ack))

    def _rejoin(self, now: float) -> None:
        if not self.left:
            return
        self.left = False
        self._armed = None
        self.gen += 1
        self._out.append(Persist("generation", self.gen))
        self.members.clear()
        self._gossip.clear()
        self._leave_unacked.clear()
        # ask the members we left first: a founder has no seeds of its own, and alone it
        # would found a second group beside the one it left
        self.seeds = list(dict.fromkeys([*self._former, *self.seeds]))
        self._join_tries = 0
        self._joiners.clear()
        self._emit("rejoin", gen=self.gen)
        self._next_period = now
        self._poll(now)

    def view(self) -> list[dict[str, Any]]:
        return [{"id": m.id, "gen": m.gen, "state": m.state.value, "since": round(m.since, 6)}
                for m in sorted(self.members.values(), key=lambda m: m.id)]

    @property
    def n(self) -> int:
        """Group size as this member sees it (itself included)."""
        return 1 + sum(1 for m in self.members.values() if m.state in LIVE_STATES)

    def suspicion_timeout(self, confirmations: int = 0) -> float:
        """Lifeguard's suspicion timeout (memberlist's suspicion.go): a lone suspicion waits
        the maximum, ``suspicion_mult * max(1, log10 n)`` periods (the timeout this node
        always used); each *independent* suspicion of the same member at the same
        generation by another member shrinks it logarithmically, down to the minimum,
        ``suspicion_min_mult * max(1, log10 n)`` periods, at ``k`` confirmations:
        ``max(min, max - (max - min) * log(c + 1) / log(k + 1))``. ``k`` is
        ``suspicion_k`` capped at ``n - 2`` (the members other than us and the suspect);
        with nobody left to confirm (k = 0) it is the maximum (memberlist takes the
        minimum there; we keep "a lone suspicion waits the full time")."""
        scale = max(1.0, math.log10(self.n)) * self.opts.period_s
        hi = self.opts.suspicion_mult * scale
        lo = min(self.opts.suspicion_min_mult * scale, hi)
        k = min(self.opts.suspicion_k, self.n - 2)
        if k <= 0 or confirmations <= 0:
            return hi
        frac = math.log(min(confirmations, k) + 1) / math.log(k + 1)
        return max(lo, hi - (hi - lo) * frac)

    def _rearm(self, m: Member) -> None:
        """Recompute the deadline of a suspicion we time from its confirmations so far."""
        if m.suspect_start is not None and m.state is State.SUSPECT:
            m.suspect_deadline = m.suspect_start + self.suspicion_timeout(len(m.suspecters))

    def retransmit_limit(self) -> int:
        if "unbounded-gossip" in self.bugs:
            return 1 << 30  # every update piggybacked every time, for good
        if "no-gossip-retransmit" in self.bugs:
            return 1
        if self.opts.retransmits > 0:
            return self.opts.retransmits
        return self.opts.retransmit_mult * max(1, math.ceil(math.log10(self.n + 1)))

    # ---------------------------------------------------------------- periods and probes

    def _check_stall(self, now: float) -> None:
        """Local health (Lifeguard's point, without its nacks): a timer that fires more than
        a probe timeout late means this process itself was stopped or starved (SIGSTOP, a
        GC, an overloaded host). Answers may sit unread in the socket buffer, so the probe
        in flight proves nothing about its target, and a suspicion that expired meanwhile
        gets one more probe timeout for a buffered refutation to be read first."""
        due = self._next_period
        p = self._probe
        if p is not None and not p.acked and not p.indirect:
            due = min(due, p.direct_deadline)
        late = now - due
        if self.period == 0 or late <= self.opts.probe_timeout_s:
            return
        self.counters.stalls += 1
        self._emit("stall", late=round(late, 3))
        if p is not None:
            p.stalled = True
        for m in self.members.values():
            if m.suspect_deadline is not None and m.suspect_deadline <= now:
                m.suspect_deadline = now + self.opts.probe_timeout_s

    def _period(self) -> None:
        self.period += 1
        for seq in [q for q, p in self._seqs.items() if p < self.period - ACK_PERIODS]:
            del self._seqs[seq]
        if self.left:
            self._send_leaves()  # and nothing else: no probes, joins or announcements
            return
        p = self._probe
        if p is not None and not p.acked:
            if p.stalled:
                self.counters.probes_inconclusive += 1
            else:
                self._probe_failed(p)
        self._probe = None
        if not self.joined:
            self._try_join()
        else:
            if not self._live() and self.seeds and self.period % 2 == 0:
                # joined but alone (peers dropped or died): knock at a seed again
                to = self.seeds[self._seed_i % len(self.seeds)]
                self._seed_i += 1
                self._join_req(to)
            self._probe_next()
            self._nudge_suspects()
            if self.opts.reconnect_periods > 0 and self.period % self.opts.reconnect_periods == 0:
                self._reconnect()
        if self.opts.announce_periods > 0 and (self.period - 1) % self.opts.announce_periods == 0:
            self._out.append(Send(EVERYONE, c.Broadcast(NodeInfo(self.me, self.gen))))
            self._count_sent("Broadcast")

    def _probe_next(self) -> None:
        target = self._next_target()
        if target is None:
            return
        seq = self._new_seq()
        self._probe = _Probe(target, seq, self._now + self.opts.probe_timeout_s)
        m = self.members.get(target)
        if m is not None:
            m.heard = max(m.heard, self._now)
        self.counters.probes += 1
        sample = self._view_sample() if self._sync_due() else None
        self._send(target, c.PingRequest(self.me, target, 0,
                                          self._payload(target, seq, sample=sample)))

    def _sync_due(self) -> bool:
        """Is this period's probe the anti-entropy one (every `Options.sync_periods`)?

        Gossip alone does not make views converge: each update is re-sent a bounded number
        of times, and while the group is in flux those sends can all go to members that
        already know (the sim's seed-12 finding: members restarting together after a heal
        rejoin through different seeds, each join's gossip is spent before the others count
        the joiner alive, and two live members stay unaware of each other for good on a
        lossless network; a member learns another from its self-sample only once one of
        them probes the other, which neither does). So a probe now and then carries our
        whole view as its sample and its answer carries the target's (the spec's
        PingResponse example: a sample of members), as memberlist's periodic push-pull.
        Without a capacity only: with one, views are partial by design (the spec's weak
        consistency) and symmetry is kept by redirects instead."""
        n, since = self.opts.sync_periods, self.period - self._joined_at
        return n > 0 and self.opts.capacity <= 0 and since > 0 and since % n == 0

    def _view_sample(self) -> list[NodeInfo]:
        """Us and the members we hold alive, shuffled and cut to the packet budget (a view
        too large for one datagram is sampled; successive syncs cover the rest)."""
        self.counters.syncs += 1
        alive = [m.info() for m in self._live() if m.state is State.ALIVE]
        self.rng.shuffle(alive)
        return [NodeInfo(self.me, self.gen)] + alive[: self._sample_room() - 1]

    def _new_seq(self) -> int:
        """A random non-zero 32-bit probe sequence number: an ack must name it, so a forger
        cannot answer a probe it did not see (an incrementing counter is guessed at once).
        Kept ACK_PERIODS periods, so an ack naming another is refused (`ack-seq`)."""
        seq = self.rng.getrandbits(32) or 1
        self._seqs[seq] = self.period
        return seq

    def _nudge_suspects(self) -> None:
        """Ping each member whose suspicion we are timing, every period: the ping carries the
        notice and the answer carries the refutation, so a live member gets several direct
        chances to clear itself before we declare it dead (a lossy link's false positive)."""
        for m in self.members.values():
            if m.state is State.SUSPECT and m.suspect_deadline is not None:
                seq = self._new_seq()  # non-zero: answer with gossip
                self._send(m.id, c.PingRequest(self.me, m.id, 0, self._payload(m.id, seq)))

    def _next_target(self) -> int | None:
        """The member to probe this period: first a member we heard suspected and have not
        probed since (our probe confirms or clears it: Lifeguard's confirmations), then, by
        default, the *stalest* live member: the one we have neither heard from nor probed
        for longest (ties at random). Any datagram from a member proves it alive, so
        probing the ones we just heard from finds nothing; probing the stalest spreads the
        group's probes over the members nobody has heard from, and a killed member, silent
        everywhere, becomes the stalest at many members at once and is found sooner than
        with independent round-robin orders (which probe some members twice in a period
        and others not at all). Every member is still probed within n - 1 of our periods
        (time-bounded completeness): probing one makes it the freshest."""
        while self._priority:
            t = self._priority.pop(0)
            m = self.members.get(t)
            if m is not None and m.state is State.SUSPECT and m.suspect_start is None:
                return t
        if self.opts.probe_order == "stalest":
            live = self._live()
            if not live:
                return None
            oldest = min(m.heard for m in live)
            return self.rng.choice([m.id for m in live if m.heard <= oldest + 1e-9])
        for _ in range(2):
            while self._order:
                t = self._order.pop()
                m = self.members.get(t)
                if m is not None and m.state in LIVE_STATES:
                    return t
            self._order = [m.id for m in self._live()]
            self.rng.shuffle(self._order)
        return None

    def _indirect(self, p: _Probe) -> None:
        p.indirect = True
        if "no-indirect-probes" in self.bugs:
            return
        helpers = [m.id for m in self._live() if m.id != p.target and m.state is State.ALIVE]
        for h in self.rng.sample(helpers, min(self.opts.indirect_k, len(helpers))):
            self.counters.indirect_probes += 1
            self._send(h, c.PingRequest(self.me, p.target, 1, self._payload(p.target, p.seq)))

    def _probe_failed(self, p: _Probe) -> None:
        self.counters.probes_failed += 1
        m = self.members.get(p.target)
        if m is None or "never-suspect-paused" in self.bugs:
            return
        u = Update(UpdateKind.SUSPECT, m.info(), self.me)
        if m.state is State.ALIVE:
            self._suspect(m, by=self.me, local=True)
            self._enqueue(u)
            # ask for confirmations now: tell indirect_k members directly (they probe it
            # first thing in their next period); piggy-backed copies reach the rest
            self._fan_out(u)
        elif m.state is State.SUSPECT and m.suspect_start is None:
            # our own probe confirms a suspicion we only heard of: now we time it too, and
            # our suspicion (origin: us) is a confirmation for everyone timing it
            m.suspect_start = self._now
            self._rearm(m)
            self._emit("suspect-confirmed", member=m.id, gen=m.gen, by=m.suspected_by,
                       confirmations=len(m.suspecters))
            self._enqueue(u)
            self._gossip_to([x for x in sorted(m.suspecters)
                             if (y := self.members.get(x)) is not None
                             and y.state in LIVE_STATES], u)

    def _gossip_to(self, targets: Iterable[int], u: Update) -> None:
        """A one-way gossip ping (seq 0) carrying just ``u`` to each of ``targets``."""
        for to in targets:
            self._send(to, c.PingRequest(self.me, to, 0, c.Payload(
                0, (u,), (NodeInfo(self.me, self.gen),))))

    def _suspect(self, m: Member, by: int, local: bool) -> None:
        """Mark ``m`` suspect. Only a member whose *own* probe failed runs the timer that
        turns suspicion into death: hearsay alone never kills, so a false suspicion needs to
        be refuted to one member (its originator, who is told directly), not to all."""
        m.state = State.SUSPECT
        m.since = self._now
        m.suspected_by = by
        m.suspecters = set() if by == self.me else {by}
        m.suspect_start = self._now if local else None
        m.suspect_deadline = None
        self._rearm(m)
        if not local and m.id not in self._priority:
            self._priority.append(m.id)  # probe it next period: confirm or clear it
        self._emit("suspect", member=m.id, gen=m.gen, by=by, local=local)

    def _confirm(self, m: Member, by: int) -> None:
        """Another member independently suspects ``m`` at the generation we hold suspect:
        one more confirmation (counted once per member), which shortens our timer."""
        if by == self.me or by == m.id or by in m.suspecters:
            return
        m.suspecters.add(by)
        if m.suspect_start is not None:
            self.counters.confirmations += 1
            self._rearm(m)
            self._emit("suspect-confirmation", member=m.id, gen=m.gen, by=by,
                       confirmations=len(m.suspecters))

    def _settle(self, m: Member, state: State, gen: int) -> None:
        """``m`` is now ``state`` (not suspect) at ``gen``: no timer of ours runs for it."""
        m.gen, m.state, m.since = gen, state, self._now
        m.suspect_deadline = m.suspect_start = None

    def _declare_dead(self, m: Member) -> None:
        self._settle(m, State.DEAD, m.gen)
        self._emit("dead", member=m.id, gen=m.gen, by=self.me, local=True,
                   suspected_by=m.suspected_by, confirmations=len(m.suspecters))
        u = Update(UpdateKind.DEAD, m.info(), self.me)
        self._enqueue(u)
        # the verdict goes to every live member at once (one datagram each, once per death):
        # "all survivors know" is then one hop after the first verdict, not an epidemic's
        # few rounds; receivers still fan it out (_apply), covering datagrams lost on the way
        self._gossip_to([x.id for x in self._live() if x.state is State.ALIVE], u)

    # ---------------------------------------------------------------- pings

    def _on_ping(self, msg: c.PingRequest) -> None:
        if msg.target != self.me:
            # a relayed probe: forward toward the target if we may and can
            if msg.ttl >= 1 and msg.target in self.addresses:
                self.counters.forwarded += 1
                self._send(msg.target, c.PingRequest(msg.src, msg.target, msg.ttl - 1,
                                                     msg.payload))
            return
        self._take(msg.payload, msg.src)
        if msg.src in self.addresses:
            # seq 0 marks a one-way gossip ping (fan-out, refutation): answered, but without
            # piggy-back, so a flood does not burn every member's retransmission budget
            seq = msg.payload.seq
            sample = None
            if len(msg.payload.sample) > 1 and seq != 0 and self.opts.capacity <= 0:
                # a probe that carries its sender's view (a sync): answer with ours
                self._syncs_seen, ok = _within(self._syncs_seen, self.period, msg.src,
                                               SYNCS_PER_SENDER_PER_PERIOD, SYNCS_PER_PERIOD)
                sample = self._view_sample() if ok else None
            self._send(msg.src, c.PingResponse(msg.src, self.me, msg.ttl,
                                               self._payload(msg.src, seq, sample=sample,
                                                             gossip=seq != 0)))
            self._check_symmetry(msg.src)

    def _check_symmetry(self, src: int) -> None:
        """With a peer capacity, "connections are symmetrical" (the spec): a member that
        probes us while we do not track it is told where to (re)join: here, if we have the
        slot kept for direct joins, else some member of ours. Without a capacity every member
        learns every other through gossip, and this stays out of the way."""
        m = self.members.get(src)
        if self.opts.capacity <= 0 or not self.joined or (m is not None
                                                          and m.state in LIVE_STATES):
            return
        if self._full(direct=True):
            others = [x.id for x in self._live() if x.id != src and x.state is State.ALIVE]
            if not others:
                return
            to = self.rng.choice(others)
        else:
            to = self.me
        host, port = self.addresses.get(to, ("0.0.0.0", 0))
        self._send(src, c.JoinRedirect(c.Address.of(host, port), DOMAIN, REDIRECT_AT_CAPACITY,
                                       f"node:{to}"))

    def _on_pong(self, msg: c.PingResponse) -> None:
        if msg.src != self.me:
            return
        self._take(msg.payload, msg.target)
        p = self._probe
        if p is not None and p.target == msg.target and p.seq == msg.payload.seq:
            p.acked = True  # msg.target is its sender (_untrusted): the probed member answered

    # ---------------------------------------------------------------- joining

    def _try_join(self) -> None:
        if self._join_target is None:
            if not self.seeds:
                if self.opts.discover:
                    return  # wait for a seed's Broadcast
                self._found()
                return
            self._join_tries += 1
            if self._may_found():
                self._found()  # seeds kept: alone, it still knocks at them (_poll)
                return
            self._join_target = self.seeds[self._seed_i % len(self.seeds)]
            self._seed_i += 1
        target, self._join_target = self._join_target, None
        self._join_req(target)

    def _found(self) -> None:
        self.joined = True  # a founder: a group of one that others join
        self._joined_at = self.period
        self._emit("join-ok", seed=None, gen=self.gen)
        self._probe_next()

    def _may_found(self) -> bool:
        """Found the group though we have seeds? Only after FOUND_AFTER_PERIODS unanswered
        periods, with another joiner heard within them (its JoinReq reached us while we were
        unjoined: our seeds may be waiting on us) and every such joiner numbered above us, so
        of the joiners that hear each other exactly one founds and the rest join it."""
        if self._join_tries <= FOUND_AFTER_PERIODS:
            return False
        # remembered long enough for a lower joiner that founded meanwhile to reach us (it
        # knocks at one seed every 2 periods while alone) or for us to ask it in our round
        keep = FOUND_AFTER_PERIODS + 2 * len(self.addresses)
        recent = [j for j, p in self._joiners.items() if self.period - p <= keep]
        return bool(recent) and min(recent) > self.me

    def _join_req(self, to: int) -> None:
        """Every JoinReq we send (first join, a knock when alone, a redirect, a reconnect
        across a healed partition) carries the token's proof when one is configured."""
        nonce = self.rng.getrandbits(32) or 1
        req = c.JoinReq(NodeInfo(self.me, self.gen), payload=self._payload(to, nonce))
        asked = self._join_asked.setdefault(to, {})
        for n in [n for n, p in asked.items() if p < self.period - JOIN_ANSWER_PERIODS]:
            del asked[n]  # bounded: at most a few JoinReqs to one member per window
        asked[nonce] = self.period
        self._send(to, join_token.signed(self.opts.join_token, req))

    def _on_join_req(self, msg: c.JoinReq, from_id: int | None) -> None:
        src = msg.src
        if (not self.joined and not self.left and src.id != self.me and src.id in self.addresses
                and from_id == src.id):
            self._joiners[src.id] = self.period  # a joiner (or a knock) while we join: _may_found
        if not self.joined or not self.opts.accept_joins or src.id == self.me:
            return  # ignore: not a member (yet), or told to ignore
        if not self._plausible(src, src.id):
            return
        if src.id not in self.addresses:
            # not in the address book: its gossip is not applied, nobody is redirected or
            # evicted for it, and `_redirected` holds only ids the book bounds
            self.counters.refused_strangers += 1
            return
        if self.opts.refuse_joins:
            self._nak(msg, from_id, c.JoinNak(DOMAIN, NAK_REFUSED, "refused"))
            return
        if not join_token.verified(self.opts.join_token, msg):
            # the hint says which token, never the token itself
            self._nak(msg, from_id, c.JoinNak(DOMAIN, NAK_TOKEN_EXPECTED,
                                              join_token.hint(self.opts.join_token)))
            return
        if not self._join_allowed(src.id):
            # admitted JoinReqs only: their answers (JoinAck: the whole view) amplify
            self._refuse("join-rate", msg, from_id)
            return
        self._take(msg.payload, src.id)
        cur = self.members.get(src.id)
        if (cur is None or cur.state not in LIVE_STATES) and self._full():
            others = [m.id for m in self._live() if m.state is State.ALIVE]
            if not others:
                self._nak(msg, from_id, c.JoinNak(DOMAIN, NAK_FULL, "at capacity"))
                return
            if src.id in self._redirected:
                # asked again after a redirect: the group may be saturated (every member
                # full), so make room: drop one of ours, who will find a new home the
                # same way (it probes us, we no longer track it, we redirect it)
                self._redirected.discard(src.id)
                victim = self.rng.choice(others)
                del self.members[victim]
                self._emit("evicted", member=victim, for_member=src.id)
                self._apply(Update(UpdateKind.ALIVE, src, self.me), direct=True)
                self._ack(src, msg.payload.seq)
                return
            self._redirected.add(src.id)
            to = self.rng.choice(others)
            host, port = self.addresses.get(to, ("0.0.0.0", 0))
            self._send(src.id, c.JoinRedirect(c.Address.of(host, port), DOMAIN,
                                              REDIRECT_AT_CAPACITY, f"node:{to}"))
            self._emit("join-redirected", member=src.id, to=to)
            return
        self._apply(Update(UpdateKind.ALIVE, src, self.me), direct=True)
        self._ack(src, msg.payload.seq)

    def _ack(self, src: NodeInfo, nonce: int) -> None:
        """JoinAck parts echo the JoinReq's nonce (its payload seq): the joiner applies
        only an answer to a JoinReq it sent."""
        sample = [m.info() for m in self._live() if m.id != src.id and m.state is State.ALIVE]
        self.rng.shuffle(sample)
        sample = sample[: self.opts.sample_size or None]
        for i, part in enumerate(self._ack_parts(sample)):
            # the first part carries the gossip; the rest only more of the view
            payload = self._payload(src.id, nonce, sample=part, gossip=i == 0)
            self._send(src.id, c.JoinAck(NodeInfo(self.me, self.gen), payload))

    # ---------------------------------------------------------------- packet budget

    def _sample_room(self) -> int:
        """NodeInfos one payload may carry beside ``max_piggyback`` updates (at most 255)."""
        free = (self.opts.max_packet - SEAL_RESERVE - HEAD_RESERVE - PAYLOAD_FIXED
                - UPDATE_BYTES * min(max(self.opts.max_piggyback, 1), 255))  # + a notice
        return max(1, min(255, free // INFO_BYTES))

    def _update_room(self, n_sample: int) -> int:
        """Updates one payload may carry beside ``n_sample`` NodeInfos (at most 255)."""
        free = (self.opts.max_packet - SEAL_RESERVE - HEAD_RESERVE - PAYLOAD_FIXED
                - INFO_BYTES * n_sample)
        return max(0, min(255, free // UPDATE_BYTES))

    def _ack_parts(self, sample: list[NodeInfo]) -> list[list[NodeInfo]]:
        """The JoinAck's view split into parts that each fit the budget: the joiner gets
        the whole view in ceil(n / room) datagrams (two at 200 members), not a cut one.
        At most JOIN_ACK_PARTS parts: a join is answered by a bounded number of datagrams."""
        room = self._sample_room()
        parts = [sample[i:i + room] for i in range(0, len(sample), room)] or [[]]
        return parts[:JOIN_ACK_PARTS]

    def _on_join_ack(self, msg: c.JoinAck) -> None:
        if not self.joined:
            self.joined = True
            self._joined_at = self.period
            self._emit("join-ok", seed=msg.desc.id, gen=self.gen)
        # the acker first: it may take the slot kept for direct joins, the rest may not
        self._apply(Update(UpdateKind.ALIVE, msg.desc, msg.desc.id), direct=True)
        self._take(msg.payload, msg.desc.id)
        self._introduce_me(msg)

    # ---------------------------------------------------------------- dynamic members

    def introduce(self, msg: c.Message, addr: tuple[str, int]) -> int | None:
        """A datagram from ``addr``, outside the address book: the NodeID to hand it on as,
        once ``addr`` is booked for it, or None (then refused as ``unknown-address``).

        The rule (docs/swim.md, "Dynamic members"): with ``dynamic_members`` on, only a
        JoinReq that proves the join token (HMAC over the whole request) books its sender,
        at the address it came from, under an id the book does not hold yet (a booked id is
        never moved), at most MAX_DYNAMIC of them. Called by the runtime before
        ``on_message``; it sends nothing."""
        if not (self.opts.dynamic_members and self.joined and not self.left
                and self.opts.accept_joins and isinstance(msg, c.JoinReq)):
            return None
        x = msg.src.id
        if (x == self.me or x in self.addresses or len(self._dynamic) >= MAX_DYNAMIC
                or not join_token.verified(self.opts.join_token, msg)
                or msg.src.gen > GEN_MAX - MAX_GEN_STEP):
            return None
        self.addresses[x] = addr
        self._dynamic[x] = addr
        self._emit("introduced", member=x, addr=f"{addr[0]}:{addr[1]}")
        return x

    def _reintroduce(self, x: int) -> None:
        """A member we introduced ourselves to came back at a higher generation: a restart
        forgets what it booked, so introduce us again (a refutation costs one extra
        JoinReq and its JoinAck)."""
        if x in self._introduced and self.joined and not self.left:
            self._join_req(x)

    def _introduce_me(self, ack: c.JoinAck) -> None:
        """With ``dynamic_members``, a joiner sends its signed JoinReq once to every member a
        JoinAck names: a member whose start-up book lacks us books us from it (``introduce``)
        before our first ping reaches it; one that has us answers a JoinAck as to any join."""
        if not self.opts.dynamic_members:
            return
        self._introduced.add(ack.desc.id)  # it booked us from our JoinReq
        for info in ack.payload.sample:
            x = info.id
            if x != self.me and x != ack.desc.id and x in self.members \
                    and x not in self._introduced:
                self._introduced.add(x)
                self._join_req(x)

    def _on_join_nak(self, msg: c.JoinNak, from_id: int | None) -> None:
        self._emit("join-refused", seed=from_id, code=msg.code, etag=msg.etag[:MAX_LOGGED])
        # a token refusal is not retried at once: our JoinReqs already carry the token we
        # have, and a hint is not a token (the next period asks again, a seed may have
        # been misconfigured)

    def _on_redirect(self, msg: c.JoinRedirect, from_id: int | None) -> None:
        to: int | None = None
        if msg.etag.startswith("node:"):
            try:
                to = int(msg.etag[5:])
            except ValueError:
                to = None
        self._emit("join-redirect", seed=from_id, to=to)
        if to is None or to not in self.addresses or to == self.me:
            return
        if self.joined:
            # a member does not track us: drop it too (symmetry) and ask where it says
            if from_id is not None and from_id != to and from_id in self.members:
                del self.members[from_id]
                self._emit("dropped", member=from_id)
            self._join_req(to)
            return
        self._join_target = to  # asked at the next period: redirects cannot ping-pong fast

    def _on_broadcast(self, msg: c.Broadcast) -> None:
        sid = msg.self_info.id
        if sid == self.me or sid not in self.addresses:
            return
        if sid not in self.seeds:
            self.seeds.append(sid)
            self._emit("seed-discovered", seed=sid)
        if not self.joined:
            self._join_target = sid
            self._try_join()

    def _reconnect(self) -> None:
        """Every ``reconnect_periods``: one JoinReq to a member we hold dead, or, from a
        member of a minority group (`_in_minority`), to one of the address book we have never
        heard of. The second is how two groups merge: members that restarted on both sides
        of a partition each found a group (`_may_found`) that knows nothing of the other, so
        nobody there is dead and without it the two stay apart for good. A joined member is
        not a member of the other group, so it may ask to join it (the spec's "Joining a
        group"); the JoinAck's view and the pings that follow merge the two views
        (docs/swim.md "Partitions heal")."""
        targets = [m.id for m in self.members.values() if m.state is State.DEAD]
        if self._in_minority():
            targets += sorted(set(self.addresses) - set(self.members) - {self.me})
        if targets:
            self._join_req(self.rng.choice(targets))

    def _in_minority(self) -> bool:
        """Do we knock at address-book members we never heard of? Only while our group (us
        and the members we hold alive or suspect: `n`) is at most half the address book,
        we have room (`_full`), and we joined over STRANGER_PERIODS periods ago. Of two
        disjoint groups at most one is a majority, so some member of every pair knocks at
        the other; a majority member never knocks: a member that gossip failed to bring
        into an overlapping view is the periodic sync's to mend (`_sync_due`), at no extra
        datagram, not a JoinReq's."""
        return (2 * self.n <= 1 + len(self.addresses) and not self._full(direct=False)
                and self.period - self._joined_at > STRANGER_PERIODS)

    # ---------------------------------------------------------------- gossip

    def _take(self, p: c.Payload, sender: int) -> None:
        """Merge a payload: its updates, then its sample as alive members (a JoinAck's
        view; on pings, the sender itself)."""
        self.counters.unknown_gossip += len(p.skipped)
        for u in p.updates:
            self._apply(u)
        for info in p.sample:
            if info.id != self.me and info.id in self.addresses:
                self._apply(Update(UpdateKind.ALIVE, info, sender))

    def _apply(self, u: Update, direct: bool = False) -> bool:
        """Merge one update by the incarnation rules; re-gossip it if it changed our view.

        ``direct``: the member itself is talking to us (its JoinReq, our JoinAck), so it may
        take the slot kept for direct joins."""
        x, g = u.node.id, u.node.gen
        if not self._plausible(u.node, u.origin):
            return False
        if x == self.me:
            return self._about_me(u)
        cur = self.members.get(x)
        k = u.kind
        changed = False
        if k is UpdateKind.ALIVE:
            if cur is None:
                if x not in self.addresses or self._full(direct):
                    return False
                self.members[x] = Member(x, g, State.ALIVE, self._now, heard=self._now)
                self._emit("joined", member=x, gen=g, via=u.origin)
                changed = True
            elif g > cur.gen:
                prev = cur.state
                if prev not in LIVE_STATES and self._full(direct):
                    return False
                self._settle(cur, State.ALIVE, g)
                cur.heard, cur.suspecters = max(cur.heard, self._now), set()
                self._reintroduce(x)
                self._emit("alive", member=x, gen=g, prev=prev.value, via=u.origin)
                changed = True
        elif cur is None:
            return False  # news of an unknown member's failure: nothing to update
        elif k is UpdateKind.SUSPECT:
            if (cur.state is State.ALIVE and g >= cur.gen) or (
                    cur.state is State.SUSPECT and g > cur.gen):
                cur.gen = g
                self._suspect(cur, by=u.origin, local=False)
                changed = True
            elif cur.state is State.SUSPECT and g == cur.gen:
                self._confirm(cur, u.origin)
        elif k is UpdateKind.DEAD:
            stale_ok = "accept-forged-dead" in self.bugs
            if (cur.state in LIVE_STATES and (g >= cur.gen or stale_ok)) or (
                    cur.state in (State.DEAD, State.LEFT) and g > cur.gen):
                self._settle(cur, State.DEAD, g)
                self._emit("dead", member=x, gen=g, by=u.origin, local=False)
                changed = True
        elif k is UpdateKind.LEFT and "ignore-leave" not in self.bugs:
            if (cur.state is not State.LEFT and g >= cur.gen) or g > cur.gen:
                self._settle(cur, State.LEFT, g)
                self._emit("left", member=x, gen=g)
                changed = True
        if changed:
            self._enqueue(u)
            if k in (UpdateKind.DEAD, UpdateKind.LEFT):
                self._fan_out(u)  # whoever learns a death first passes it on at once
        return changed

    def _fan_out(self, u: Update) -> None:
        """Spread ``u`` at once: a ping (seq 0, answer ignored) carrying just ``u`` to
        ``indirect_k`` random live members other than its subject and origin, outside the
        piggy-back budget. For a death or leave every member that learns it does the same,
        so the news floods the group in a few round trips; for our own fresh suspicion it
        asks for confirmations. The piggy-backed copies still reach anyone this missed."""
        skip = {u.node.id, u.origin}
        peers = [m.id for m in self._live() if m.id not in skip and m.state is State.ALIVE]
        self._gossip_to(self.rng.sample(peers, min(self.opts.indirect_k, len(peers))), u)

    def _plausible(self, info: NodeInfo, said_by: int | None) -> bool:
        """Whether ``info``'s generation could be true: at most MAX_GEN_STEP ahead of the
        one we hold for it (any, for a member we do not know) and below the headroom kept
        under GEN_MAX. Else refused, counted and journaled: one forged datagram must not
        push a generation where the next refutation cannot be encoded."""
        held = self.gen if info.id == self.me else (
            self.members[info.id].gen if info.id in self.members else None)
        g = info.gen
        if g <= GEN_MAX - MAX_GEN_STEP and (held is None or g <= held + MAX_GEN_STEP):
            return True
        self.counters.refused_generations += 1
        # journaled like any refusal, rate-limited: a member's address can carry one per update
        ev = self._gen_refusals.note("generation", self.period, member=info.id, gen=g,
                                     held=held, by=said_by)
        if ev is not None:
            ev.pop("reason")
            self._emit("refused-generation", **ev)
        return False

    def _about_me(self, u: Update) -> bool:
        if u.kind is UpdateKind.ALIVE and u.node.gen <= self.gen:
            return False  # our own news, or older
        if u.node.gen < self.gen:
            # someone still holds an old suspicion: our refutation missed it, say it again
            if u.node.id not in self._gossip:
                self._enqueue(Update(UpdateKind.ALIVE, NodeInfo(self.me, self.gen), self.me))
            return False
        if "no-refutation" in self.bugs:
            return False
        # a suspicion, death or leave at our generation or above, or the group holding us
        # alive above it (our generation file or a refutation was lost): go past it
        was = u.kind.name.lower()
        self.gen = u.node.gen + 1
        self._out.append(Persist("generation", self.gen))  # a restart never goes below it
        self._emit("refute", gen=self.gen, was=was, by=u.origin)
        self._enqueue(Update(UpdateKind.ALIVE, NodeInfo(self.me, self.gen), self.me))
        if u.origin != self.me and u.origin in self.addresses and self.joined:
            # tell the accuser at once (a ping carrying the refutation), not only by gossip
            self._send(u.origin, c.PingRequest(self.me, u.origin, 0, self._payload(u.origin, 0)))
        return True

    def _enqueue(self, u: Update) -> None:
        self._gossip[u.node.id] = _Gossip(u, self.retransmit_limit())

    def _payload(self, to: int, seq: int, sample: list[NodeInfo] | None = None,
                 gossip: bool = True) -> c.Payload:
        updates: list[Update] = []
        m = self.members.get(to)
        if m is not None and m.state in (State.SUSPECT, State.DEAD):
            kind = UpdateKind.SUSPECT if m.state is State.SUSPECT else UpdateKind.DEAD
            # the notice (refute if you can), naming the accuser so the refutation goes there
            updates.append(Update(kind, m.info(), m.suspected_by or self.me))
        picks = sorted(self._gossip.values(), key=lambda gsp: gsp.sent) if gossip else []
        room = self._update_room(1 if sample is None else len(sample))
        for gsp in picks:
            if len(updates) >= self.opts.max_piggyback and "unbounded-gossip" not in self.bugs:
                break
            if len(updates) >= room:
                break  # the packet budget: the least-sent items went first
            if gsp.update.node.id == to and updates:
                continue
            updates.append(gsp.update)
            gsp.sent += 1
            gsp.left -= 1
            if gsp.left <= 0:
                del self._gossip[gsp.update.node.id]
        if sample is None:
            # every message names its sender's incarnation: a member that missed a join's
            # gossip learns the joiner at its first probe (anti-entropy at 8 bytes a message)
            sample = [NodeInfo(self.me, self.gen)]
        return c.Payload(seq, tuple(updates), tuple(sample))

    # ---------------------------------------------------------------- helpers

    def _live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state in LIVE_STATES]

    def _full(self, direct: bool = True) -> bool:
        """At capacity? Members learned second-hand (gossip, samples) may fill all but one
        slot: the last is kept for a direct join, so a full group can still admit joiners."""
        cap = self.opts.capacity
        if cap <= 0 or "ignore-capacity" in self.bugs:
            return False
        live = sum(1 for m in self.members.values() if m.state in LIVE_STATES)
        return live >= (cap if direct else max(cap - 1, 0))

    def _send(self, to: int, msg: c.Message) -> None:
        self._count_sent(type(msg).__name__)
        self._out.append(Send(to, msg))

    def _count_sent(self, name: str) -> None:
        self.counters.sent[name] = self.counters.sent.get(name, 0) + 1

    def _emit(self, type_: str, **fields: Any) -> None:
        self._out.append(Emit(type_, {**fields, "period": self.period}))

    def _flush(self) -> list[Effect]:
        """The effects so far, and the wake-up re-armed when it moved (one timer, ``TICK``;
        a member that left has none once its Leaves are acknowledged or given up)."""
        if not self.left or self._leaving():
            at = self.next_wakeup()
            if at != self._armed:
                self._armed = at
                self._out.append(SetTimer(TICK, at))
        out, self._out = self._out, []
        return out


def default_seeds(me: int, ids: Iterable[int], gen: int) -> list[int]:
    """The seeds a member joins through when none are configured (the real server and the sim
    share it): the lowest-numbered member founds the group and every other joins through it;
    a restarted member (generation > 0) may rejoin through any peer, so a restarted founder
    finds the group it made (and `_may_found` lets it found again if nobody else has joined)."""
    peers = sorted({i for i in ids if i != me})
    if gen > 0:
        return peers
    return peers[:1] if peers and peers[0] < me else []


def _within(seen: tuple[int, dict[int, int]], period: int, sender: int, per_sender: int,
            per_period: int) -> tuple[tuple[int, dict[int, int]], bool]:
    """A per-period allowance: (the new counts, whether ``sender`` may have one more)."""
    at, counts = seen
    if at != period:
        at, counts = period, {}
    if counts.get(sender, 0) >= per_sender or sum(counts.values()) >= per_period:
        return (at, counts), False
    counts[sender] = counts.get(sender, 0) + 1
    return (at, counts), True
