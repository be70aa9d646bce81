"""The DRiP protocol as a sans-IO core (docs/contracts.md section 0a): ``start``, peer
messages, timer firings and client commands in, with the time; effects out.

Vote routing beyond the initiator's direct peers (the spec leaves it open; ours):

* A receiver of a new ``/voting`` votes, locks the key on "yes", and forwards the request to
  its active peers except the one it came from. It answers *its sender* (not the initiator)
  with one aggregated response once every peer it forwarded to has answered, failed, or its
  relay timer ran out: the response lists every node of its forwarding subtree that voted yes
  (``voters``), every one that voted no, and the highest stored version of the key there.
  A "no" is answered at once, without forwarding.
* A receiver that has already seen the request (same initiator and counter) answers at once
  with ``duplicate`` in the request's own HTTP answer (no vote response of its own): its vote
  travels on the path it first came by.
* The initiator commits only if nobody voted no **and every member of the mesh voted yes**.
  Members are the configured mesh (``mesh_members``), its peers, and every node id learned
  from heartbeats; they are persisted. Counting only *reachable* peers would let both sides of
  a split mesh commit conflicting updates of one key, so an unreachable member aborts updates
  (2PC blocks rather than diverge).
* The commit carries ``version = 1 + max version reported``; stores keep the highest
  ``(version, update id)`` per key, so commits and sync batches may arrive in any order.

Commit propagation uses a durable per-peer outbox, delivered up to ``outbox_window`` commits at a
time (stores keep the highest version per key, so order does not matter) and retried
until the peer answers 200. When a peer is found inactive its queued commits are dropped (spec
4.7: nothing is propagated to it) and the peer is *owed* a sync: the next heartbeat tells it
so and it pulls our whole store.

How the runtime meets the core (our decisions, the same for the node and the simulator):

* **A peer's request** arrives as ``on_message(Inbound(hop, conn), msg)`` and the core answers
  it with exactly one ``Send(Inbound, Answer(status, body))`` among the effects it returns:
  the HTTP answer (200 ``{"ok": true}``; a heartbeat's ``{"state"}``; 503 when the node's state
  refuses the request). An answer travels on the request's own connection, as Garlic Farm's
  ``Send(Inbound, Response)`` does; ``Reply`` stays for client commands. The answer follows
  the request's ``Persist`` effects, so the runtime fsyncs them before the peer hears 200: a
  forwarded commit a peer acknowledged is durable here.
* **Every request the core sends** (``Send(peer, msg)``) ends in exactly one
  ``on_message(peer, Outcome(msg, status, body))`` from the runtime: the peer's HTTP status
  and JSON body, or status 0 when no answer came (refused, timed out, connection lost). The
  core ignores the outcomes it has no use for.
* Heartbeat rounds, the commit outbox, serving a sync batch by batch, and the ``GET /state``
  check before a sync (spec 4.6) are the core's, driven by timers and outcomes; the runtime
  only moves requests and answers.
* **Client updates and reads** are commands (`ClientUpdate`, `ClientRead`) answered with
  ``Reply(token, Answer)``.
* **Durable state** changes are ``Persist(STORE, record)`` effects (`nodes.drip.records`); the
  core folds each record into its own `Durable` as it returns it, so memory and disk agree on
  what a record means, and a restart builds the core from the `Durable` the store loaded.
* The core reads no clock and makes no random choice (a sync source is the first active peer
  by id), so it takes no ``random.Random``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer
from nodes.common.fastinit import fast_frozen_init
from nodes.common.refusals import Refusals
from nodes.drip.codec import (
    U64_MAX,
    Abort,
    Commit,
    Heartbeat,
    Item,
    Message,
    NodeNotice,
    OutcomeQuery,
    StateQuery,
    SyncBatch,
    SyncRequest,
    Update,
    VoteResponse,
    Voting,
    next_counter,
)
from nodes.drip.entitlement import Policy, allow_all
from nodes.drip.journalvalue import value_fields
from nodes.drip.membership import check_membership, member_addresses, member_ids, membership_value
from nodes.drip.records import (
    OWN,
    STORE,
    Applied,
    Counters,
    Delivered,
    Dropped,
    Durable,
    Fence,
    Init,
    Lock,
    Members,
    Merged,
    Owe,
    Paid,
    Queued,
    Record,
    Unlock,
    newer,
)
from nodes.drip.seen import COUNTER_WINDOW, CounterOutOfWindow, Seen
from nodes.drip.sync import Feeder, Puller, Refused, SyncLimits, matched, summarize

BUGS = ("commit-partial-vote", "forget-in-progress", "skip-sync", "syncing-votes-no",
        "inactive-takes-part", "retake-duplicate-votes", "act-on-late-votes", "commit-after-abort",
        # issue 26 items 1 and 3 planted back (docs/drip.md "Bug modes")
        "learn-heartbeat-members", "apply-unvoted-commits", "apply-unsolicited-sync",
        "trust-relayed-voters", "ignore-counter-window",
        # issue 26 item 2: the version bound is the decoder's (nodes/drip/server.py sets it)
        "no-version-bound",
        # the lock-TTL hazard planted back: a voter lock releases blind when its TTL runs out
        "release-expired-locks")
#: bug modes where an initiator keeps an aborted vote open and commits on a late yes
LATE_BUGS = frozenset({"act-on-late-votes", "commit-after-abort"})
#: the reserved key whose committed value is the membership (a sorted list of node ids) and
#: whose version is the membership epoch; clients cannot write it (see docs/drip.md)
MEMBERS_KEY = "drip:members"
RESERVED = "drip:"
HEARTBEAT = "heartbeat"
#: how long past the runtime's own request timeout a heartbeat round waits for stragglers
ROUND_SLACK_S = 0.5
VOTED_MAX = 10_000  # yes votes remembered past their lock, for slow commits
ANSWERED_MAX = 1_024  # relay tallies kept after answering, for a hop's later answer
ENDED_MAX = 10_000  # aborts we know of, to answer other voters' OutcomeQuery
#: the initiators' signed proofs of those aborts we pass on (`nodes.drip.abort_proof`): up to
#: ~1.5 KB each (a group token), and useless once expired (their 10-minute token life)
PROOFS_MAX = 2_048
#: `/voting`s forged in our own name remembered, to end their voters' locks
#: (`DripCore._pass_asked_round`): ~150 B each; a node holds at most ``initiator_rounds``
#: (128) locks of one initiator, so a few of them per lock
FORGED_MAX = 2_048
OK: dict[str, Any] = {"ok": True}
#: the 200 answer to a /voting already seen (same initiator and counter): the sender stops
#: waiting on us for it at once, as on a ``duplicate`` vote response, which it is spared
DUPLICATE: dict[str, Any] = {"ok": True, "duplicate": True}
K = TypeVar("K")
V = TypeVar("V")


#: a lock's outcome is asked every ``outcome_retry_s`` this many times (an abort crosses a
#: line of the mesh one hop per retry), then ever less often, up to OUTCOME_RETRY_MAX_S
OUTCOME_FAST_ASKS = 8
OUTCOME_RETRY_MAX_S = 8.0


def outcome_retry(cfg: CoreConfig, asks: int) -> float:
    """Seconds to the next question about a lock's outcome after ``asks`` of them.

    Why it backs off: a `/voting` a compromised member sends in another's name with a counter
    far ahead of its real one (inside the window) took a lock no one could end (the initiator
    answered "unknown" to a round it had not reached and never signs one ahead), and each
    such lock asked every peer every second, for good: the outcome queries of the locks a
    long attack left grew past the attack's own requests (issue 26, session 44). Since
    session 45 the initiator ends a round it saw forged (`_pass_asked_round`), within the
    fast asks; one it did not see (the flood did not reach it, or it restarted since) still
    stays, asked ever less often. A real lock is answered within the fast asks; a peer that
    comes back is asked at once (`_reask`)."""
    if asks < OUTCOME_FAST_ASKS:
        return cfg.outcome_retry_s
    return min(OUTCOME_RETRY_MAX_S, cfg.outcome_retry_s * 2 ** (asks - OUTCOME_FAST_ASKS + 1))


def _remember(d: dict[K, V], key: K, value: V, cap: int) -> None:
    """Put ``key`` last (newest) in the insertion-ordered ``d`` and forget the oldest entries
    past ``cap``: the bounded memories of votes, answered tallies and known aborts."""
    d.pop(key, None)
    d[key] = value
    while len(d) > cap:
        del d[next(iter(d))]


class Values(Protocol):
    """Where the committed values are read from (the node's `Store`): sync pages by key
    cursor and client reads, so a node needs no value in memory (`Durable.lean`)."""

    def item(self, key: str) -> Item | None: ...

    def page(self, after: str | None, max_items: int, max_bytes: int,
             upto: str | None = None) -> tuple[tuple[Item, ...], bool]: ...


class Unavailable(Exception):
    """The node cannot take this request in its current state (answered 503)."""


# --------------------------------------------------------------------------- runtime types


@fast_frozen_init
@dataclass(frozen=True)
class Inbound:
    """A peer's request on an HTTP connection: ``hop`` is its TLS identity, ``conn`` the
    runtime's handle for the answer (``Send(Inbound, Answer)``)."""

    hop: str
    conn: Hashable


@fast_frozen_init
@dataclass(frozen=True)
class Answer:
    """An HTTP answer: to a peer's request (``Send``), or to a client command (``Reply``)."""

    status: int
    body: dict[str, Any]


@fast_frozen_init
@dataclass(frozen=True)
class Outcome:
    """How a request this node sent ended: the peer's HTTP status and JSON body, or status 0
    when no answer came (refused, timed out, connection lost)."""

    request: Message
    status: int
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 200


@fast_frozen_init
@dataclass(frozen=True)
class ClientUpdate:
    """``POST /client/update``: initiate ``update``; answered once it is decided."""

    update: Update


@fast_frozen_init
@dataclass(frozen=True)
class ClientRead:
    """``GET /client/read?key=``: a local, possibly stale read."""

    key: str


@fast_frozen_init
@dataclass(frozen=True)
class ClientMembers:
    """Admin ``POST /admin/members``: add and/or decommission members. The change is an
    update of `MEMBERS_KEY` and goes through the same 2PC; it needs a yes from every member
    that stays (a removed node need not, and cannot, agree to its own removal)."""

    uid: str
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    #: where added members listen and what to trust of them (nodes/drip/membership.py); the
    #: operator's word, agreed with the membership, so every member can dial and accept them
    addresses: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class CoreConfig:
    vote_timeout_s: float = 2.0
    lock_ttl_s: float = 3.0
    #: once a voter's lock TTL ran out, how often it asks again for the outcome: a voter
    #: further down a line learns an abort only after the one before it did (every answer
    #: "unknown" until then), one question per hop, and each waited a whole TTL
    outcome_retry_s: float = 1.0
    #: a sync with no batch for this long is abandoned (and resumed from its cursor)
    sync_timeout_s: float = 5.0
    sync_batch: int = 1000
    sync_batch_bytes: int = 4 * 1024 * 1024
    #: a new sync served to one peer at most this often (repeats join the one under way)
    sync_min_interval_s: float = 1.0
    bugs: frozenset[str] = frozenset()
    #: how much sooner than its sender a forwarder answers (see DRiP-Vote-Budget-Ms)
    relay_margin_s: float = 0.2
    heartbeat_s: float = 0.3
    #: the runtime's timeout for one request (a heartbeat round waits this long, and a bit)
    peer_timeout_s: float = 2.0
    #: a commit delivery that failed (not refused) is retried after this long
    outbox_retry_s: float = 0.5
    #: commits on their way to one peer at once: one at a time made each link's commit rate
    #: 1 / (round trip + the peer's fsync), which capped the whole mesh (docs/drip.md "Batches")
    outbox_window: int = 64
    #: how far ahead of an initiator's last accepted counter a message may be (seen.py)
    counter_window: int = COUNTER_WINDOW


# --------------------------------------------------------------------------- state


@dataclass
class Tally:
    """Votes gathered for one update, by its initiator or by a forwarding relay."""

    update: Update
    initiator: str
    counter: int
    upstream: str | None  # None at the initiator
    pending: set[str]
    voters: set[str]
    no_voters: set[str]
    version: int
    started: float
    decided: bool = False
    token: Any = None  # the client command waiting for the decision (initiator)
    #: the yes voters' signed statements gathered from below, passed up with our answer
    statements: dict[str, str] = field(default_factory=dict)
    #: every hop the vote went to (``pending`` at the start): a hop that answered may answer
    #: again, and what a later answer proves still counts (`DripCore._merge`)
    asked: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.asked:
            self.asked = set(self.pending)


@dataclass
class Round:
    """One heartbeat round: ``results[peer]`` is the 200 reply body, or None."""

    n: int
    pending: set[str]
    results: dict[str, dict[str, Any] | None] = field(default_factory=dict)


class DripCore:
    """One DRiP node's protocol state, built from what the node made durable."""

    def __init__(self, me: str, peers: list[str], durable: Durable | None = None,
                 cfg: CoreConfig | None = None, policy: Policy = allow_all,
                 mesh_members: list[str] | None = None, join: bool = False,
                 refusals: Refusals | None = None, values: Values | None = None) -> None:
        self.me = me
        #: the peers of our config; the agreed membership adds addressed members to them and
        #: takes decommissioned ones away (`_wanted_peers`)
        self.configured = sorted(peers)
        #: committed values to read sync pages and client reads from (None: ``d.kv``'s own)
        self.values = values
        self.peers = sorted(peers)
        #: the agreed address entries of members added at run time (nodes/drip/membership.py)
        self.addresses: dict[str, dict[str, Any]] = {}
        self.d = durable if durable is not None else Durable()
        self.fresh = self.d.fresh
        self.cfg = cfg or CoreConfig()
        self.policy = policy
        self.bugs = self.cfg.bugs
        self.state = "active"
        #: peer -> the later epoch at which it refused us as not-a-peer (`_decommissioned`)
        self.disowned: dict[str, int] = {}
        #: the epoch we learned we were decommissioned at (state "decommissioned")
        self.left_at: int | None = None
        self.peer_up: dict[str, bool] = {p: True for p in self.peers}
        self.members: set[str] = self.d.members | {me} | set(peers) | set(mesh_members or [])
        #: a fresh data directory that joins a running mesh syncs first (spec 4.6)
        self.join = join
        self._agreed_members()
        self.peers = self._wanted_peers()
        self.peer_up = {p: True for p in self.peers}
        self.seen = Seen(self.d.counters, self._window())
        self.counter = self.d.counter
        self.tallies: dict[str, Tally] = {}  # uid -> votes being gathered (initiator or relay)
        #: uid -> a relay's tally it already answered upward: a later answer from below that
        #: proves more voters is passed up again (`_reanswer`), oldest dropped first
        self.answered: dict[str, Tally] = {}
        # uid -> initiator of each update we voted yes on and have not applied: a commit is
        # taken only for one of these (its lock may have expired before a slow commit came)
        self.voted: dict[str, str] = {}
        #: uid -> initiator of updates we know were aborted (its Abort, or its own answer):
        #: a voter's `OutcomeQuery` may ask us rather than a far initiator
        self.aborted: dict[str, str] = {}
        #: uid -> (initiator, counter) of the `Abort` we took for it: a `/voting` of that
        #: update with an earlier counter is a round it already aborted, overtaken by its abort
        #: (`_aborted_round`); a retry of the id has a later counter and is voted on as usual
        self.abort_rounds: dict[str, tuple[str, int]] = {}
        #: uid -> the initiator's own signed evidence of the abort (its `/abort` token, or its
        #: signed answer to an `OutcomeQuery`), passed on in our answers: an unproven
        #: "aborted" is taken as "undecided" by the asker's runtime (`nodes.drip.abort_proof`)
        self.abort_proofs: dict[str, dict[str, Any]] = {}
        #: (uid, counter) of `/voting`s in our own name above our counter, refused as forged
        #: with our key: a question about such a round moves our counter past it, and is
        #: answered "aborted" (`_pass_asked_round`)
        self.forged_rounds: dict[tuple[str, int], None] = {}
        #: the voting round (initiator's counter) of each lock we took for a peer, by key:
        #: our `OutcomeQuery` names it, so a proof of an earlier attempt of the same update
        #: id does not release a retry's lock (saved with the lock, `Lock.counter`: a lock
        #: read back after a restart asks with its round; one saved without asks without)
        self.lock_rounds: dict[str, tuple[str, int]] = {
            k: (self.d.locks[k][0], c) for k, c in self.d.lock_rounds.items()
            if k in self.d.locks}
        #: key -> (uid, times asked) of each peer's lock whose TTL ran out and that we asked
        #: about (`_ask_outcome`): a peer that comes back is asked at once (`_reask`)
        self.expired: dict[str, tuple[str, int]] = {}
        #: peers not yet heard alive since this process started: the first live answer of each
        #: is a return too (`_met`), so a lock read back from the store is asked about at once,
        #: not a whole TTL after the restart (ring5 hot keys, seed 7, session 42)
        self.unmet: set[str] = set(self.peers)
        self.puller = Puller()
        #: the id of each sync we ask for (`SyncRequest.sync_id`): the runtime sets a random
        #: one (a forged batch must not guess it); this default is for the simulator
        self.new_sync_id: Callable[[], str] = lambda: f"{self.me}-pull-{self.puller._tokens}"
        self.feeder = Feeder(SyncLimits(self.cfg.sync_batch, self.cfg.sync_batch_bytes,
                                        self.cfg.sync_min_interval_s))
        #: what this node refused from its peers (the runtime shares it and reports it)
        self.refusals = refusals if refusals is not None else Refusals()
        self.reachable: dict[str, bool] = {p: True for p in self.peers}
        self.peer_state: dict[str, str] = {}
        self.owed_gen: dict[str, int] = {}  # bumped whenever we drop commits queued for a peer
        #: the outbox rows on their way to each peer, by update id (at most outbox_window)
        self.inflight: dict[str, dict[str, Queued]] = {}
        self.next_seq = 1 + max((s for rows in self.d.outbox.values() for s in rows), default=0)
        self.round: Round | None = None
        self.rounds = 0

    # ---- the four inputs ------------------------------------------------------------------
    def start(self, now: float) -> list[Effect]:
        """Restore in-progress votes, pick the first state (fresh -> active, else sync), and
        start heartbeats and outbox delivery."""
        fresh = self.fresh
        syncs = (not fresh or self.join) and "skip-sync" not in self.bugs
        self.state = "sync" if syncs else "active"
        out: list[Effect] = [Emit("start", {"fresh": fresh, "join": self.join,
                                            "state": self.state,
                                            "counter": self.counter,
                                            "members": sorted(self.members),
                                            "epoch": self.epoch,
                                            "peers": self.peers})]
        if fresh:
            out.append(self._p(Init()))
        if self.epoch == 0 and self.members - self.d.members:
            out.append(self._p(Members(tuple(sorted(self.members - self.d.members)))))
        for key, (uid, initiator) in sorted(self.d.locks.items()):
            if initiator == self.me:  # our own update died with the process: never commits
                out += [self._p(Unlock(key, uid)),
                        Emit("release", {"uid": uid, "key": key, "why": "restart"})]
            else:
                out.append(SetTimer(("lock", key, uid), now + self.cfg.lock_ttl_s))
        if not fresh and self.state == "active":
            out.append(Emit("state", {"state": "active", "reason": "restart, sync skipped"}))
        out.append(SetTimer(HEARTBEAT, now))
        for p in self.peers:
            out += self._pump(p)
        return out

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        """A peer's request (``peer`` an `Inbound`), or the `Outcome` of one of ours."""
        if isinstance(peer, Inbound):
            try:
                out, body = self._request(peer.hop, msg, now)
                answer = Answer(200, body)
            except Unavailable as e:
                out, answer = [], Answer(503, {"error": str(e)})
            except Refused as e:
                out = self._refused(peer.hop, e, now)
                answer = Answer(e.status, {"ok": True, "note": str(e)} if e.status == 200
                                else {"error": str(e)})
            except CounterOutOfWindow as e:  # checked before anything is recorded
                out = self._refused(peer.hop, Refused(400, "counter-window", str(e)), now)
                answer = Answer(400, {"error": str(e)})
            return [*out, Send(peer, answer)]
        if isinstance(msg, Outcome):
            return self._outcome(peer, msg, now)
        raise TypeError(f"not a DRiP input from {peer!r}: {type(msg).__name__}")

    def on_timer(self, name: Hashable, now: float) -> list[Effect]:
        if name == HEARTBEAT:
            return self._heartbeat_round(now) if self.round is None else []
        assert isinstance(name, tuple)
        kind = name[0]
        if kind == "round":
            if self.round is None or self.round.n != name[1]:
                return []
            return self._end_round(now)
        if kind == "outbox":
            return self._pump(name[1])
        if kind == "vote":
            t = self.tallies.get(name[1])
            if t is None or t.decided or t.upstream is not None:
                return []
            return self._decide(t, now, None, timeout=True)
        if kind == "relay":
            t = self.tallies.get(name[1])
            if t is None or t.decided or t.upstream is None:
                return []
            return [self._respond(t)]
        if kind == "lock":
            _, key, uid = name
            if self._lock_uid(key) != uid:
                return []
            t = self.tallies.get(uid)
            if t is not None and t.upstream is None and not t.decided:  # our round never ended
                return self._decide(t, now, None, timeout=True)  # aborts, unlocks, answers
            initiator = self.d.locks[key][1]
            if initiator == self.me or "release-expired-locks" in self.bugs:
                return [self._p(Unlock(key, uid)),
                        Emit("release", {"uid": uid, "key": key, "why": "expired"})]
            return self._ask_outcome(key, uid, initiator, now)
        if kind == "sync":
            s = self.puller.cur
            if s is None or s.token != name[1]:
                return []
            return self._sync_failed(s.source)
        return []

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        if isinstance(cmd, ClientUpdate):
            if cmd.update.key.startswith(RESERVED):
                return [Reply(token, Answer(400, {
                    "result": "refused", "error": f"keys starting {RESERVED!r} are reserved; "
                    "change members with POST /admin/members"}))]
            try:
                return self._client_update(cmd.update, token, now)
            except Unavailable as e:
                return [Reply(token, Answer(503, {"result": "unavailable", "error": str(e)}))]
        if isinstance(cmd, ClientMembers):
            new = (self.members - set(cmd.remove)) | set(cmd.add)
            bad = sorted(n for n in (*cmd.add, *cmd.remove) if not n or not isinstance(n, str))
            if bad or self.me not in new or set(cmd.add) & set(cmd.remove):
                return [Reply(token, Answer(400, {
                    "result": "refused", "error": "give node ids to add and to remove (not "
                    "both, not this node itself: decommission a node from another member)"}))]
            if set(cmd.addresses) - set(cmd.add):
                return [Reply(token, Answer(400, {
                    "result": "refused", "error": "addresses are for the ids being added, got "
                    f"{sorted(set(cmd.addresses) - set(cmd.add))}"}))]
            value = membership_value(new, {**self.addresses, **cmd.addresses})
            why = check_membership(value)
            if why is not None:
                return [Reply(token, Answer(400, {"result": "refused", "error": why}))]
            try:
                return self._client_update(Update(cmd.uid, MEMBERS_KEY, value, self.me),
                                           token, now)
            except Unavailable as e:
                return [Reply(token, Answer(503, {"result": "unavailable", "error": str(e)}))]
        if isinstance(cmd, ClientRead):
            it = self._item(cmd.key)
            return [Reply(token, Answer(200, {
                "key": cmd.key, "value": None if it is None else it.value,
                "version": 0 if it is None else it.version,
                "uid": None if it is None else it.uid, "state": self.state}))]
        return [Reply(token, Answer(400, {"error": f"no such command {type(cmd).__name__}"}))]

    def storage_failed(self, disk: Durable) -> list[Effect]:
        """The runtime could not make the last records durable (a full or failing disk) and
        let none of what they promised leave; ``disk`` is what the store still holds. Memory
        goes back to it, so no read, vote or commit rests on a record that is not on disk.
        Our own locks with no open vote are released in memory only (a Persist could fail
        again, and a restart releases them on disk anyway); votes of others keep theirs until
        their timer. Every dropped send still ends in an ``Outcome`` from the runtime."""
        lost = self._rolled_back(disk)
        self.d = disk
        self._agreed_members()
        self.seen = Seen(disk.counters, self._window())
        self.puller.stop()
        self.puller.resume = None  # a batch taken in memory may be missing on disk
        out: list[Effect] = [Emit("storage-failed", {"rolled_back": lost})]
        for key, (uid, initiator) in sorted(disk.locks.items()):
            t = self.tallies.get(uid)
            if initiator == self.me and (t is None or t.decided):
                self.d.apply(Unlock(key, uid))
                out.append(Emit("release", {"uid": uid, "key": key, "why": "storage failure"}))
        return out

    def _rolled_back(self, disk: Durable) -> list[str]:
        """The update ids memory applied and ``disk`` does not hold (journaled). Was the
        difference of two sets of every id; neither is held whole now (`AppliedIds`). An id
        is added to memory only when it was applied nowhere (`_on_commit`, `_client_update`
        ask the store too), so those of the failed groups are the newest in memory, after
        every durable one: read newest first, up to the first the disk holds (a failed group
        is one loop turn's records, far fewer than memory keeps). A few store reads, not one
        per id kept (65,536: ~0.2 s of CPU, `bench/bench_drip_applied.py`)."""
        lost: list[str] = []
        for uid in self.d.applied.recent():
            if uid in disk.applied:
                break
            lost.append(uid)
        return sorted(lost)

    # ---- routing ----------------------------------------------------------------------------
    def _request(self, hop: str, msg: Message, now: float) -> tuple[list[Effect], dict[str, Any]]:
        """One decoded peer request: what it sets off, and the body of the 200 answer."""
        if isinstance(msg, StateQuery):  # spec 4.2.3; inactive: "no response"
            if self.state == "inactive":
                raise Unavailable("inactive")
            return [], {"state": self.state}
        if isinstance(msg, Heartbeat):
            out = self._on_heartbeat(hop, msg, now)
            return out, {"state": self.state}
        if isinstance(msg, Voting):
            return self._on_voting(hop, msg, now)
        if isinstance(msg, VoteResponse):
            return self._on_vote_response(hop, msg, now), OK
        if isinstance(msg, Commit):
            return self._on_commit(hop, msg, now), OK
        if isinstance(msg, Abort):
            return self._on_abort(hop, msg, now), OK
        if isinstance(msg, SyncBatch):
            return self._on_sync_batch(hop, msg, now), OK
        if isinstance(msg, SyncRequest):
            return self._on_sync_request(hop, msg, now), OK
        if isinstance(msg, NodeNotice):
            return self._on_node_notice(hop, msg), OK
        if isinstance(msg, OutcomeQuery):
            out = self._pass_asked_round(msg)  # persisted before the answer leaves
            return out, self._outcome_of(msg.uid, msg.initiator, msg.counter)
        raise TypeError(f"no handler for {type(msg).__name__}")

    @staticmethod
    def acts_on(o: Outcome) -> bool:
        """Whether `on_message` does anything with ``o`` (`_outcome`): a success of a
        /voting the peer took as new, of a vote response, an abort or a sync request is
        nothing to it, and the runtime need not spend a core pass on it (a batch's answers
        alone were a turn of their own: docs/drip.md, session 48). `_outcome` asks it too,
        so the two cannot disagree."""
        req = o.request
        if isinstance(req, Heartbeat | Commit | SyncBatch | StateQuery | OutcomeQuery):
            return True
        if not o.ok:
            return isinstance(req, SyncRequest | Voting)
        return isinstance(req, Voting) and isinstance(o.body, dict) \
            and o.body.get("duplicate") is True

    def _outcome(self, peer: str, o: Outcome, now: float) -> list[Effect]:
        req = o.request
        if isinstance(req, Heartbeat):
            self._note_disowned(peer, o)
            return self._heartbeat_result(peer, o.body if o.ok and isinstance(o.body, dict)
                                          else None, now)
        if isinstance(req, Commit):
            return self._commit_delivered(peer, o, now)
        if isinstance(req, SyncBatch):
            return self._batch_delivered(peer, o)
        if isinstance(req, StateQuery):
            return self._source_state(peer, o)
        if isinstance(req, OutcomeQuery):
            return self._outcome_answer(peer, req, o)
        if not self.acts_on(o):  # what the runtime may drop unseen: decided in one place
            return []
        if isinstance(req, SyncRequest):  # (it failed)
            return self._sync_failed(peer)
        assert isinstance(req, Voting)  # it failed, or the peer had it: no answer comes
        return self._voting_failed(peer, req, now)

    # ---- helpers ----------------------------------------------------------------------------
    def _p(self, r: Record) -> Persist:
        """Persist ``r``, and fold it into our own durable state at once."""
        self.d.apply(r)
        return Persist(STORE, r)

    def active_peers(self, exclude: str | None = None) -> list[str]:
        return [p for p in self.peers if self.peer_up.get(p) and p != exclude]

    def _next_counter(self) -> tuple[int, bool]:
        c, reset = next_counter(self.counter)
        self._take_counter(c, reset)
        return c, reset

    def _take_counter(self, c: int, reset: bool) -> None:
        """Our counter is now ``c``; our own window keeps it (saved by our ``OWN`` row)."""
        self.counter = c
        self.seen.before(self.me, c, reset)

    @staticmethod
    def _counter_taken(hop: str, msg: Any, uid: str | None, via: str,
                       initiator: str | None = None) -> Emit:
        """The journal's word that a peer's counter was taken by a message that journals no
        ``vote`` or ``apply`` of its own (an abort, a commit of an update applied here
        already, a sync batch): each moves the initiator's counter window as a vote does, and
        the 2PC checker's window rule must see it (a forged abort in a compromised member's
        name moved n4's window unjournaled: chaos seed 6, session 47)."""
        return Emit("counter-taken", {"uid": uid, "initiator": initiator or msg.initiator,
                                      "from": hop, "counter": msg.counter,
                                      "reset": msg.reset, "via": via})

    def _repeat(self, initiator: str, counter: int, reset: bool) -> bool:
        """`Seen.before`, except in our own name: every counter up to ours we sent (each saved
        before it left), so it is a repeat; one above it we never sent: a forgery with our
        key, refused. Taken, it was recorded in memory only (our row saves our counter, not a
        window), so after a restart we took it again (a 10-minute sim search, ``--hostile``,
        seed 22)."""
        if initiator != self.me:
            return self.seen.before(initiator, counter, reset)
        if counter > self.counter:
            raise Refused(400, "forged-own-counter",
                          f"a message in {self.me}'s own name with counter {counter}, but "
                          f"{self.me} has sent only up to {self.counter}: forged with its key")
        return True

    def _window(self) -> int:
        """The counter window; the planted ``ignore-counter-window`` takes any counter."""
        return 2**65 if "ignore-counter-window" in self.bugs else self.cfg.counter_window

    def _row(self, node: str) -> tuple[str, int, int | None, str | None]:
        return (OWN, self.counter, None, None) if node == self.me else self.seen.row(node)

    def _item(self, key: str) -> Item | None:
        """``key``'s item with its value: from memory, or (lean) its last committed one."""
        it = self.d.kv.get(key)
        if it is None or not self.d.lean or self.values is None:
            return it
        return self.values.item(key) or it

    def _version(self, key: str) -> int:
        """The highest version of ``key`` here, for a vote: past any a decommissioned
        initiator may have committed unseen (`_initiators_gone`)."""
        it = self.d.kv.get(key)
        return max(it.version if it else 0, self.d.fences.get(key, 0))

    def _lock_uid(self, key: str) -> str | None:
        held = self.d.locks.get(key)
        return None if held is None else held[0]

    @staticmethod
    def _done(token: Any, committed: bool, detail: dict[str, Any]) -> Reply:
        if committed:
            return Reply(token, Answer(200, {"result": "committed", **detail}))
        return Reply(token, Answer(409, {"result": "aborted", **detail}))

    # ---- initiating an update (our client endpoint) ------------------------------------------
    def _client_update(self, up: Update, token: Any, now: float) -> list[Effect]:
        """Start the voting phase for ``up``; its answer comes when it is decided."""
        if self.state == "decommissioned":
            raise Unavailable(f"node {self.me} was decommissioned from the mesh at epoch "
                              f"{self.left_at}; send updates to a member (see /admin/state "
                              "of any member), or add this node again with POST /admin/members")
        if self.state != "active":
            raise Unavailable(f"node {self.me} is {self.state}; it initiates no updates now")
        if up.uid in self.tallies or up.uid in self.d.applied:
            return [self._done(token, False, {"error": f"update id {up.uid!r} was already used"})]
        if up.owner is None:
            up = replace(up, owner=self.me)
        refusal = self._policy(up, self.me)
        if refusal:
            return [self._done(token, False, {"error": "not entitled: " + refusal})]
        held = self._lock_uid(up.key)
        if held is not None and held != up.uid and "forget-in-progress" not in self.bugs:
            return [self._done(token, False,
                               {"error": f"key {up.key!r} has an update in progress ({held})"})]
        counter, reset = self._next_counter()
        out: list[Effect] = [self._p(Counters((self._row(self.me),))),
                             self._p(Lock(up.key, up.uid, self.me))]
        pending = set(self.active_peers())
        t = Tally(up, self.me, counter, None, pending, {self.me}, set(), self._version(up.key),
                  now, token=token)
        self.tallies[up.uid] = t
        out += [
            Emit("vote-start", {"uid": up.uid, "key": up.key, **value_fields(up.key, up.value),
                                "counter": counter, "members": sorted(self.members),
                                "epoch": self.epoch,
                                "asked": sorted(pending)}),
            Emit("vote", {"uid": up.uid, "key": up.key, "initiator": self.me, "vote": "yes",
                          "from": None, "syncing": False}),
        ]
        if held is not None and held != up.uid:
            out.append(Emit("release", {"uid": held, "key": up.key, "why": "replaced"}))
        if not pending:
            return out + self._decide(t, now, "no active peer to ask")
        msg = Voting(self.me, counter, reset, up, budget_ms=int(self.cfg.vote_timeout_s * 1000))
        out += [Send(p, msg) for p in sorted(pending)]
        out.append(SetTimer(("vote", up.uid), now + self.cfg.vote_timeout_s))
        out.append(SetTimer(("lock", up.key, up.uid), now + self.cfg.lock_ttl_s))  # like a voter's
        return out

    # ---- voting -------------------------------------------------------------------------------
    def _own_vote(self, up: Update, initiator: str) -> str | None:
        """None for "yes", else why "no"."""
        if self.state == "sync":  # spec 4.6: a syncing node votes yes to every update
            return "syncing" if "syncing-votes-no" in self.bugs else None
        held = self._lock_uid(up.key)
        if held is not None and held != up.uid and "forget-in-progress" not in self.bugs:
            return f"key in progress: {held}"
        return self._policy(up, initiator)

    def _policy(self, up: Update, initiator: str) -> str | None:
        """Entitlement (spec 4.8) for data keys; the membership key is checked for shape:
        any member may propose a membership, and every staying member must agree to it."""
        if up.key != MEMBERS_KEY:
            return self.policy(self.d.kv.get(up.key), up, initiator)
        return check_membership(up.value)

    # ---- membership (ours: see docs/drip.md "Membership") ------------------------------------
    @property
    def epoch(self) -> int:
        """The membership epoch: the version of the agreed membership, 0 before any change."""
        it = self.d.kv.get(MEMBERS_KEY)
        return 0 if it is None else it.version

    def _agreed_members(self) -> bool:
        """Take the committed membership, if any; True when it changed ours."""
        it = self.d.kv.get(MEMBERS_KEY)
        if it is None:
            return False
        self.addresses = member_addresses(it.value)
        if set(member_ids(it.value)) == self.members:
            return False
        self.members = set(member_ids(it.value))
        return True

    def _wanted_peers(self) -> list[str]:
        """Whom we talk to: our configured peers, always (a decommissioned one must still
        hear that it left: it learns so by commit or sync), and every member added at run
        time with an address while it is a member (decommissioned, it is dropped)."""
        ps = set(self.configured) | (set(self.addresses) & self.members)
        return sorted(ps - {self.me})

    def _rewire(self) -> list[Effect]:
        """Follow the agreed membership: an added member gets heartbeats, commits and
        forwarded votes (as a peer configured up front, first assumed up); a removed one gets
        nothing more, its queued commits are dropped and it is owed a sync should it come
        back. The runtime dials and trusts what `addresses` says (nodes/drip/server.py)."""
        want = self._wanted_peers()
        added = sorted(set(want) - set(self.peers))
        removed = sorted(set(self.peers) - set(want))
        if not added and not removed:
            return []
        self.peers = want
        out: list[Effect] = [Emit("rewire", {"epoch": self.epoch, "peers": want,
                                             "added": added, "removed": removed})]
        for p in added:
            self.peer_up[p] = self.reachable[p] = True
        for p in removed:
            for d in (self.peer_up, self.reachable, self.peer_state, self.inflight):
                d.pop(p, None)
            out += self._drop_for(p, "decommissioned")
        return out

    def _members_event(self, via: str, old: set[str] | None = None) -> Emit:
        f: dict[str, Any] = {"epoch": self.epoch, "members": sorted(self.members), "via": via}
        if old is not None:
            f["added"] = sorted(self.members - old)
            f["removed"] = sorted(old - self.members)
        return Emit("members", f)

    def _members_after(self, via: str) -> list[Effect]:
        old = set(self.members)
        changed = self._agreed_members()
        gone = self._initiators_gone() if changed and \
            "release-expired-locks" not in self.bugs else []
        return ([self._members_event(via, old)] if changed else []) + gone + self._rewire()

    def _learn(self, node: str) -> None:
        """Before any agreed membership (epoch 0), an authenticated peer that speaks to us
        is a member; afterwards only a membership change adds one."""
        if self.epoch == 0:
            self.members.add(node)

    def required(self, up: Update) -> set[str]:
        """Whose yes ``up`` needs: every member; for a membership change, every member that
        stays in it."""
        if up.key == MEMBERS_KEY and member_ids(up.value):
            return self.members & set(member_ids(up.value))
        return set(self.members)

    def _on_voting(self, hop: str, msg: Voting, now: float
                   ) -> tuple[list[Effect], dict[str, Any]]:
        """Vote on (and forward) a new /voting; a repeat is answered ``DUPLICATE`` in the
        HTTP answer itself, not by a vote response of its own (docs/drip.md, session 43)."""
        if self.state == "inactive" and "inactive-takes-part" not in self.bugs:
            raise Unavailable(f"node {self.me} is inactive")
        up = msg.update
        retake = False
        if up.uid in self.d.applied:  # before its counter is recorded (as a refused commit)
            raise Refused(409, "revote-applied", f"update {up.uid!r} is already applied here")
        if msg.initiator == self.me and msg.counter > self.counter:  # refused by `_repeat`
            _remember(self.forged_rounds, (up.uid, msg.counter), None, FORGED_MAX)
        if self._repeat(msg.initiator, msg.counter, msg.reset):
            if "retake-duplicate-votes" not in self.bugs:
                return [], DUPLICATE
            retake = True  # bug: votes on (and answers) a repeat again, without forwarding it
        self._learn(msg.initiator)
        rows = Counters((self._row(msg.initiator),))
        reason = self._own_vote(up, msg.initiator)
        if reason is None and self.state != "sync":  # spec 4.6: a syncing node votes yes
            reason = self._aborted_round(msg)
        out: list[Effect] = [Emit("vote", {"uid": up.uid, "key": up.key,
                                           "initiator": msg.initiator,
                                           "vote": "no" if reason else "yes", "reason": reason,
                                           "from": hop, "syncing": self.state == "sync",
                                           "counter": msg.counter, "reset": msg.reset})]
        version = self._version(up.key)
        if reason:
            return out + [self._p(rows), Send(hop, VoteResponse(
                self.me, False, msg.initiator, msg.counter, up.uid, (), (self.me,), version))], OK
        replaced = self._lock_uid(up.key)
        out += [self._p(rows), self._p(Lock(up.key, up.uid, msg.initiator, msg.counter))]
        if len(self.lock_rounds) > ENDED_MAX + len(self.d.locks):  # forget ended locks' rounds
            self.lock_rounds = {k: r for k, r in self.lock_rounds.items()
                                if self._lock_uid(k) == r[0]}
        self.lock_rounds[up.key] = (up.uid, msg.counter)
        _remember(self.voted, up.uid, msg.initiator, VOTED_MAX)  # oldest: their commits long due
        if replaced is not None and replaced != up.uid:  # syncing (or a bug): the old vote goes
            out.append(Emit("release", {"uid": replaced, "key": up.key, "why": "replaced"}))
        out.append(SetTimer(("lock", up.key, up.uid), now + self.cfg.lock_ttl_s))
        downstream = set() if retake else set(self.active_peers(exclude=hop))
        t = Tally(up, msg.initiator, msg.counter, hop, downstream, {self.me}, set(), version, now)
        if not downstream:
            return out + [self._respond(t)], OK
        self.tallies[up.uid] = t
        # answer our sender a hop's margin before it gives up, and give those below us less
        # time again, so partial answers climb back in time when a link below hangs
        budget = (msg.budget_ms / 1000 if msg.budget_ms is not None
                  else self.cfg.vote_timeout_s / 2)
        wait = max(self.cfg.relay_margin_s / 2, budget - self.cfg.relay_margin_s)
        fwd = replace(msg, budget_ms=int(wait * 1000))
        out += [Send(p, fwd) for p in sorted(downstream)]
        out.append(SetTimer(("relay", up.uid), now + wait))
        return out, OK

    def _aborted_round(self, msg: Voting) -> str | None:
        """Why ``msg`` is a round its initiator already aborted, else None. On a ring the
        abort can overtake the vote: the update's no came from one side, the abort went round
        that side, and the vote reached us later the other way; locked, the key stayed held
        for a whole TTL (then asked) though nobody would ever commit it (4 of 6 expired locks
        in a ring5 hot-key run with no commit, chaos seed 4). The initiator decides one round
        of an id at a time and sends its abort with a later counter than that round's, so an
        earlier counter is a decided round; voting no is always safe."""
        r = self.abort_rounds.get(msg.update.uid)
        if r is None or r[0] != msg.initiator or msg.reset or msg.counter >= r[1]:
            return None
        return f"aborted already: {msg.initiator}'s abort (counter {r[1]}) came first"

    def _respond(self, t: Tally) -> Send[str, VoteResponse]:
        assert t.upstream is not None
        t.decided = True
        self.tallies.pop(t.update.uid, None)
        _remember(self.answered, t.update.uid, t, ANSWERED_MAX)
        return self._answer(t)

    def _answer(self, t: Tally) -> Send[str, VoteResponse]:
        assert t.upstream is not None
        return Send(t.upstream, VoteResponse(self.me, not t.no_voters, t.initiator, t.counter,
                                             t.update.uid, tuple(sorted(t.voters)),
                                             tuple(sorted(t.no_voters)), t.version,
                                             statements=tuple(sorted(t.statements.items()))))

    def _on_vote_response(self, hop: str, r: VoteResponse, now: float) -> list[Effect]:
        if r.uid is None:
            return self._on_bare_vote(hop, r, now)
        t = self.tallies.get(r.uid)
        if t is not None and t.decided and hop in t.pending and self.bugs & LATE_BUGS:
            return self._bug_late_commit(t, hop, r, now)
        if t is None and r.uid in self.answered:
            return self._reanswer(self.answered[r.uid], hop, r, now)
        if t is None or t.decided or hop not in t.asked:
            # spec 4.5.1: no action for responses after the timeout (or never asked for)
            return [Emit("late-vote", {"uid": r.uid, "from": hop, "vote": "yes" if r.yes else "no"})]
        # a hop that already answered may answer again: its first answer may have been a
        # key holder's forgery in its name (a yes for itself alone), and its real one then
        # carries the proven votes of everyone behind it; each proven voter counts, once
        t.pending.discard(hop)
        self._merge(t, hop, r)
        return self._progress(t, now)

    @staticmethod
    def _merge(t: Tally, hop: str, r: VoteResponse) -> bool:
        """Add what one answer from ``hop`` says (its voters are proven by the pre-core
        checks, `nodes.drip.admit.Gate.proven`); True when it added a voter or a no."""
        before = (len(t.voters), len(t.no_voters))
        for v, jwt in r.statements:
            t.statements.setdefault(v, jwt)
        t.voters |= set(r.voters)
        t.no_voters |= set(r.no_voters)
        if not r.yes and not r.no_voters:
            t.no_voters.add(hop)
        t.version = max(t.version, r.version)
        return (len(t.voters), len(t.no_voters)) != before

    def _reanswer(self, t: Tally, hop: str, r: VoteResponse, now: float) -> list[Effect]:
        """A relay that already answered upward hears more from below (a hop's later answer,
        or one after its relay timer): it answers again with everything proven so far, which
        its sender merges, only when that added a voter or a no; past the vote timeout, or once
        the update's commit or abort came (`_on_commit`, `_on_abort`), nobody waits, and the
        tally is dropped."""
        if now - t.started > self.cfg.vote_timeout_s:
            self.answered.pop(t.update.uid, None)
            return [Emit("late-vote", {"uid": r.uid, "from": hop, "vote": "yes" if r.yes else "no"})]
        if hop not in t.asked or not self._merge(t, hop, r):
            return []
        return [Emit("re-answer", {"uid": r.uid, "from": hop, "voters": sorted(t.voters),
                                   "no_voters": sorted(t.no_voters)}), self._answer(t)]

    def _bug_late_commit(self, t: Tally, hop: str, r: VoteResponse, now: float
                         ) -> list[Effect]:
        """Bug modes only: an aborted vote kept open takes a late answer, and commits when
        the vote is complete after all: ``act-on-late-votes`` journals a second ``decide``
        (its client was told "aborted"); ``commit-after-abort`` does not, and answers its
        client only now ("committed"), as if the abort had never been."""
        out: list[Effect] = [Emit("late-vote", {"uid": r.uid, "from": hop,
                                                "vote": "yes" if r.yes else "no"})]
        t.pending.discard(hop)
        t.voters |= set(r.voters)
        t.statements.update(r.statements)
        t.no_voters |= set(r.no_voters) | (set() if r.yes or r.no_voters else {hop})
        t.version = max(t.version, r.version)
        if t.pending or t.no_voters or t.update.uid in self.d.applied or \
                self.required(t.update) - t.voters:
            return out
        again = self._decide(t, now, None)
        if "commit-after-abort" in self.bugs:
            return out + [e for e in again if not (isinstance(e, Emit) and e.type == "decide")]
        return out + [e for e in again if not isinstance(e, Reply)]

    def _on_bare_vote(self, hop: str, r: VoteResponse, now: float) -> list[Effect]:
        """A vote response without a body (the spec's example): it names no update, so it
        counts only where one open vote waits on ``hop``, and only as ``hop``'s own vote (it
        vouches for nobody beyond it, so a subtree behind it stays missing)."""
        open_ = [t for t in self.tallies.values() if not t.decided and hop in t.pending]
        vote = "yes" if r.yes else "no"
        if len(open_) != 1:
            return [Emit("late-vote", {"uid": None, "from": hop, "vote": vote,
                                       "why": f"no body and {len(open_)} open votes wait on it"})]
        t = open_[0]
        t.pending.discard(hop)
        (t.voters if r.yes else t.no_voters).add(hop)
        return self._progress(t, now)

    def _voting_failed(self, to: str, msg: Voting, now: float) -> list[Effect]:
        """A /voting that was not taken: that subtree will not answer."""
        t = self.tallies.get(msg.update.uid)
        if t is None or t.decided or to not in t.pending:
            return []
        t.pending.discard(to)
        return self._progress(t, now)

    def _progress(self, t: Tally, now: float) -> list[Effect]:
        if t.pending and not t.no_voters:
            return []
        if t.upstream is not None:
            return [self._respond(t)]
        if (not t.no_voters and t.voters - {self.me} and self.required(t.update) - t.voters
                and "commit-partial-vote" not in self.bugs):
            # every hop is done, a yes came and some voter is missing: a hop may answer again
            # (its first answer a forgery in its name), so the vote timer decides
            return []
        return self._decide(t, now, None)

    def _decide(self, t: Tally, now: float, why: str | None, timeout: bool = False,
                abort: bool = False) -> list[Effect]:
        """Initiator: commit on an all-yes aggregate of every member, else abort (``abort``:
        abort for ``why`` whatever the votes say)."""
        t.decided = True
        if not self.bugs & LATE_BUGS:
            self.tallies.pop(t.update.uid, None)
        up = t.update
        required = self.required(up)
        missing = sorted(required - t.voters - t.no_voters)
        partial_ok = "commit-partial-vote" in self.bugs
        if not abort:
            if t.no_voters:
                why = f"voted no: {sorted(t.no_voters)}"
            elif missing and not partial_ok:
                why = ("timeout; " if timeout else "") + f"no vote from {missing}"
            else:
                return self._commit(t, now, missing, required)
        out: list[Effect] = [
            self._p(Unlock(up.key, up.uid)),
            Emit("decide", {"uid": up.uid, "key": up.key, "outcome": "abort", "reason": why,
                            "voters": sorted(t.voters), "no_voters": sorted(t.no_voters),
                            "missing": missing, "epoch": self.epoch,
                            "required": sorted(required),
                            "elapsed_s": round(now - t.started, 4)}),
            Emit("release", {"uid": up.uid, "key": up.key, "why": "abort"})]
        if self.peers:  # anyone the request reached may hold the key for it: tell them now
            counter, reset = self._next_counter()
            out.append(self._p(Counters((self._row(self.me),))))
            word = Abort(self.me, counter, reset, up.uid, up.key)
            out += [Send(p, word) for p in self.active_peers()]
        if "commit-after-abort" not in self.bugs:  # the bug answers when a late yes commits
            out.append(self._done(t.token, False, {"error": "aborted: " + str(why)}))
        return out

    # ---- locks end on an outcome (ours: docs/drip.md "Locks end on an outcome") ------------
    def _ask_outcome(self, key: str, uid: str, initiator: str, now: float) -> list[Effect]:
        """A voter lock's TTL ran out with no commit or abort: the initiator may have decided
        commit and lost its sends, so releasing now could let another value take the same
        version. Ask every active peer (the initiator answers from its records, a relay from
        what it learned), keep the key, and ask again ``outcome_retry_s`` later."""
        out: list[Effect] = [Emit("lock-expired", {"uid": uid, "key": key,
                                                   "initiator": initiator,
                                                   "asked": self.active_peers()})]
        q = OutcomeQuery(self.me, uid, initiator, self._lock_round(key))
        out += [Send(p, q) for p in self.active_peers()]
        was = self.expired.get(key)
        asks = was[1] + 1 if was is not None and was[0] == uid else 1
        out.append(SetTimer(("lock", key, uid), now + outcome_retry(self.cfg, asks)))
        if len(self.expired) > len(self.d.locks) + 64:  # keys released meanwhile: amortized
            self._forget_released()
        self.expired[key] = (uid, asks)
        return out

    def _reask(self, peer: str) -> list[Effect]:
        """``peer`` is reachable again: ask it at once about every lock we hold for another
        initiator, expired or not, rather than at its TTL or next retry. The initiator's abort
        (or our last question) may have been lost in the cut that just healed, and the lock
        blocks every update of its key meanwhile: a partition timed to each re-ask held a hot
        key for three TTLs, a whole ring5 run with no commit (chaos seed 4); an abort cut off
        1.5 s after the vote held the key to its TTL, 1.4 s into the next open window (seed 4,
        session 42). Asking is safe at any time (`_outcome_of`): an open vote is "undecided"."""
        self._forget_released()
        return [Send(peer, OutcomeQuery(self.me, uid, initiator, self._lock_round(key)))
                for key, (uid, initiator) in sorted(self.d.locks.items())
                if initiator != self.me]

    def _forget_released(self) -> None:
        """Drop from ``expired`` the keys whose lock was released, or is a new vote's."""
        self.expired = {k: v for k, v in self.expired.items() if self._lock_uid(k) == v[0]}

    def _met(self, peer: str) -> list[Effect]:
        """``peer`` answered alive, and was thought up already: if this is the first time since
        this process started, it is a return all the same (`_reask`). Every peer starts "up",
        so without this a restarted voter asked about a lock read back from its store only at
        the TTL, set anew at `start`: the initiator's abort, sent while we were down, held the
        key a whole TTL after the restart (ring5 hot keys, seed 7, session 42)."""
        if peer not in self.unmet:
            return []
        self.unmet.discard(peer)
        return self._reask(peer)

    def _lock_round(self, key: str) -> int | None:
        """The voting round of the lock on ``key`` when we know it (`lock_rounds`)."""
        uid, counter = self.lock_rounds.get(key, (None, None))
        return counter if uid is not None and uid == self._lock_uid(key) else None

    def _pass_asked_round(self, q: OutcomeQuery) -> list[Effect]:
        """Asked as initiator about a voting round ``q.counter`` ahead of our own counter,
        of a `/voting` in our name we refused as forged with our key (`forged_rounds`: a
        compromised member holding it, `hostile._fresh`: inside the window, so every voter
        took it and locks its key for us). We answered "unknown" to it for good, so those
        locks never ended, and they count toward ``initiator_rounds``, which then refused our
        real votings 429 (issue 26, session 45). Now our own counter first moves to that
        round (persisted: its ``OWN`` counters row goes in the same group commit as the
        answer, which leaves only after it is fsynced), and `_outcome_of` then answers it as
        any past round: "aborted" (signed by the runtime, `abort_proof.sign`) unless the
        update is applied or its vote is open.

        Why that abort can never contradict a commit: we never sent that counter (it is above
        ours, and a counter is saved before anything carrying it leaves), and from now on
        every round we start takes a counter above it (`_next_counter`; also after a
        restart: the row is durable before the answer), so no real round of ours ever has
        it; and the signed statement names that round (`abort_proof.outcome_digest`), so it
        proves nothing about any other round of the update id.

        Why only for a round we saw forged: anyone may ask (a member holding only its own
        key too), and a jump sends nothing, so two questions would move our counter past the
        window of every node that had all our real messages: our next ones refused there for
        good (a direct peer catches up from our heartbeat, `Seen.rebase`; a node further away
        never). A round we saw forged was signed with our key, whose holder can silence us
        anyway. Unseen (the flood did not reach us, or we restarted since: `forged_rounds` is
        memory only), the round is answered "unknown" and the lock stays, as before.

        Bounded: only when the round is less than ``counter_window`` ahead (our next counter,
        one above it, is then within the window of a receiver that had all our messages); a
        round further ahead is answered "unknown" and moves nothing. One question moves the
        counter by less than the window, so reaching the wrap-around takes 2**44 of them.
        Near the wrap-around: the asked counter is a u64, so a jump never wraps (the wrap
        stays `next_counter`'s, with its reset); a round ahead only across the wrap (a small
        counter while ours is within the window of ``2**64-1``: a round after a reset we have
        not made) is answered "unknown" and moves nothing (`_across_wrap`)."""
        c = q.counter
        if (q.initiator != self.me or c is None or c <= self.counter
                or c - self.counter >= self.cfg.counter_window
                or (q.uid, c) not in self.forged_rounds or q.uid in self.d.applied):
            return []
        was = self.counter
        self._take_counter(c, False)
        return [self._p(Counters((self._row(self.me),))),
                Emit("counter-jump", {"from": was, "to": c, "uid": q.uid,
                                      "asked_by": q.sender})]

    def _outcome_of(self, uid: str, initiator: str, counter: int | None = None
                    ) -> dict[str, Any]:
        """The answer to an `OutcomeQuery` for ``uid`` (of voting round ``counter``): only its
        initiator may say "aborted" from having no commit of it (its open votes live in
        memory and a restart ends them unapplied: they never commit after; a retry of the id
        opens a new round; its runtime signs that answer); anyone else passes on an abort it
        learned with the initiator's proof of it, or a commit."""
        if uid in self.d.applied:
            return {"outcome": "committed"}
        if initiator != self.me:
            if uid not in self.aborted:
                return {"outcome": "unknown"}
            proof = self.abort_proofs.get(uid)
            return {"outcome": "aborted", **({"proof": proof} if proof else {})}
        if counter is not None and (counter > self.counter or self._across_wrap(counter)):
            # no such round yet (beyond the window: `_pass_asked_round` moved nothing), or
            # one only after a wrap-around we have not made: never sign one ahead
            return {"outcome": "unknown"}
        t = self.tallies.get(uid)
        if (t is not None and t.upstream is None and not t.decided
                and (counter is None or counter >= t.counter)):
            return {"outcome": "undecided"}  # its vote timer (< any lock TTL) ends it soon
        self._remember_abort(uid, initiator)
        return {"outcome": "aborted"}

    def _across_wrap(self, counter: int) -> bool:
        """``counter`` is below ours but ahead of it across the wrap-around by at most the
        window: a round after a reset we have not made yet (ours near ``2**64-1``)."""
        return counter < self.counter and \
            counter + U64_MAX + 1 - self.counter <= self.cfg.counter_window

    def _remember_abort(self, uid: str, initiator: str) -> None:
        _remember(self.aborted, uid, initiator, ENDED_MAX)

    def _outcome_answer(self, peer: str, q: OutcomeQuery, o: Outcome) -> list[Effect]:
        """A peer's answer to our `OutcomeQuery`: "aborted" releases the key; "committed"
        keeps it until the commit arrives (the initiator's outbox, or a sync)."""
        word = o.body.get("outcome") if o.ok and isinstance(o.body, dict) else None
        if word != "aborted":
            return []
        self._remember_abort(q.uid, q.initiator)
        if isinstance(o.body.get("proof"), dict):  # the runtime checked it (abort_proof)
            _remember(self.abort_proofs, q.uid, o.body["proof"], PROOFS_MAX)
        held = next((k for k, (u, i) in self.d.locks.items()
                     if u == q.uid and i == q.initiator), None)
        if held is None or self._lock_round(held) != q.counter:  # a retry holds it now
            return []
        return [self._p(Unlock(held, q.uid)),
                Emit("release", {"uid": q.uid, "key": held,
                                 "why": f"aborted (asked {peer} after the lock TTL)"})]

    def _initiators_gone(self) -> list[Effect]:
        """The agreed membership removed a node: every lock held for it is released (the
        operator's removal is what ends a dead initiator's block). It may have decided commit
        and died before any send left, so the key's next version goes past the one it would
        have used (1 + our version now): its lost write, if any, is overwritten, never
        given the same version as another value."""
        out: list[Effect] = []
        for key, (uid, initiator) in sorted(self.d.locks.items()):
            if initiator != self.me and initiator not in self.members:
                self._remember_abort(uid, initiator)
                out += [self._p(Fence(key, self._version(key) + 1)), self._p(Unlock(key, uid)),
                        Emit("release", {"uid": uid, "key": key,
                                         "why": f"initiator {initiator} decommissioned"})]
        return out

    def _on_abort(self, hop: str, msg: Abort, now: float) -> list[Effect]:
        """The initiator will never commit ``msg.uid``: release its key and pass the word on.
        Safe because only the initiator decides, and it decided abort."""
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        if self._repeat(msg.initiator, msg.counter, msg.reset):
            return []
        out: list[Effect] = [self._counter_taken(hop, msg, msg.uid, "abort")]
        self._remember_abort(msg.uid, msg.initiator)
        _remember(self.abort_rounds, msg.uid, (msg.initiator, msg.counter), ENDED_MAX)
        if msg.auth:  # its token, checked on arrival, is the initiator's proof of the abort
            _remember(self.abort_proofs, msg.uid, {"token": msg.auth, "abort": {
                "counter": msg.counter, "reset": msg.reset, "key": msg.key}}, PROOFS_MAX)
        t = self.tallies.get(msg.uid)
        if t is not None and t.upstream is not None:  # a relay still gathering: nobody waits
            t.decided = True
            del self.tallies[msg.uid]
        self.answered.pop(msg.uid, None)
        if self._lock_uid(msg.key) == msg.uid:
            out += [self._p(Unlock(msg.key, msg.uid)),
                    Emit("release", {"uid": msg.uid, "key": msg.key,
                                     "why": f"aborted by {msg.initiator}"})]
        return out + [Send(p, msg) for p in self.active_peers(exclude=hop)]

    def _commit(self, t: Tally, now: float, missing: list[str], required: set[str]
                ) -> list[Effect]:
        up = t.update
        version = t.version + 1
        counter, reset = self._next_counter()
        msg = Commit(self.me, counter, reset, up, version)
        out: list[Effect] = [Emit("decide", {
            "uid": up.uid, "key": up.key, "outcome": "commit", "version": version,
            "voters": sorted(t.voters), "no_voters": [], "missing": missing,
            "epoch": self.epoch, "required": sorted(required),
            "elapsed_s": round(now - t.started, 4)})]
        applied = self._apply(msg, None, forward=True, rows=[self._row(self.me)])
        # the answer goes after the commit's records (fsynced first) and before its sends
        return out + applied[0] + [self._done(t.token, True, {"version": version})] + applied[1]

    # ---- commit phase ---------------------------------------------------------------------
    def _apply(self, msg: Commit, hop: str | None, forward: bool,
               rows: list[tuple[str, int, int | None, str | None]]
               ) -> tuple[list[Effect], list[Effect]]:
        """Apply a new commit: (its records and events, the sends it sets off)."""
        up = msg.update
        targets = [p for p in self.peers if p != hop] if forward else []
        queued = [p for p in targets if self.peer_up.get(p)]
        held = self._lock_uid(up.key) == up.uid
        out: list[Effect] = [self._p(Counters(tuple(rows)))] if rows else []
        rec = Applied(Item(up.key, up.value, msg.version, up.uid, up.owner),
                      tuple(Queued(self._seq(), p, msg) for p in queued))
        changed = self.d.apply(rec)
        out += [Persist(STORE, rec),
                Emit("apply", {"uid": up.uid, "key": up.key, **value_fields(up.key, up.value),
                               "version": msg.version, "initiator": msg.initiator,
                               "via": "update", "from": hop, "changed": bool(changed),
                               "counter": msg.counter, "reset": msg.reset})]
        if up.key == MEMBERS_KEY:
            out += self._members_after("update")
        if held:
            out.append(Emit("release", {"uid": up.uid, "key": up.key, "why": "commit"}))
        for p in targets:
            if p not in queued:
                out += self._drop_for(p, "inactive")
        sends: list[Effect] = []
        for p in queued:
            sends += self._pump(p)
        return out, sends

    def _seq(self) -> int:
        self.next_seq += 1
        return self.next_seq - 1

    def _on_commit(self, hop: str, msg: Commit, now: float) -> list[Effect]:
        if self.state == "inactive" and "inactive-takes-part" not in self.bugs:
            raise Unavailable(f"node {self.me} is inactive")
        applied = msg.update.uid in self.d.applied
        if not applied:  # refused before its counter is recorded: a refused commit moved the
            # counter window unjournaled (a 10-minute sim search, ``--hostile``, seed 21)
            if "apply-unvoted-commits" not in self.bugs:
                self._check_vote_round(msg)
            why = self._policy(msg.update, msg.initiator)  # a yes while syncing checked nothing
            if why is not None:
                raise Refused(409, "commit-not-entitled", f"commit of {msg.update.uid!r} "
                              f"refused: not entitled: {why}")
        dup = self._repeat(msg.initiator, msg.counter, msg.reset)
        self._learn(msg.initiator)
        rows = [] if dup else [self._row(msg.initiator)]
        if applied:
            return [self._p(Counters(tuple(rows))),
                    self._counter_taken(hop, msg, msg.update.uid, "commit-of-applied")
                    ] if rows else []
        self.voted.pop(msg.update.uid, None)
        # decided: a later answer from below is a late vote, not a re-answer (as on an abort)
        self.answered.pop(msg.update.uid, None)
        records, sends = self._apply(msg, hop, forward=not dup, rows=rows)
        return records + sends

    def _check_vote_round(self, msg: Commit) -> None:
        """Refuse (409) a commit of an update we did not vote yes on for that initiator; the
        hop may be a relay, so the check is on the message's initiator and our own vote."""
        up = msg.update
        held = self.d.locks.get(up.key)
        if (held is not None and tuple(held) == (up.uid, msg.initiator)) or self.voted.get(up.uid) == msg.initiator:
            return
        if up.uid in self.voted or (held is not None and held[0] == up.uid):
            raise Refused(409, "commit-other-initiator",
                          f"commit of {up.uid!r} names {msg.initiator!r}, not the initiator "
                          "we voted for")
        raise Refused(409, "commit-without-vote",
                      f"no yes vote of ours for update {up.uid!r}; a commit comes only after "
                      "its vote round")

    def _drop_for(self, peer: str, why: str, missed: bool = True) -> list[Effect]:
        """Drop what is queued for ``peer`` and owe it a sync. ``missed=False`` (it merely
        went down): owe nothing unless a commit for it was queued or in flight; a commit made
        while it is down owes it then (`_apply`), and a node that was itself cut off syncs
        on its own when it comes back."""
        n = len(self.d.outbox.get(peer, {}))
        if not missed and n == 0:
            return []
        self.owed_gen[peer] = self.owed_gen.get(peer, 0) + 1
        return [self._p(Dropped(peer)), Emit("owe-sync", {"peer": peer, "dropped": n, "why": why})]

    # ---- the outbox: queued commits, one in flight per peer ---------------------------------
    def _pump(self, peer: str) -> list[Effect]:
        """Send ``peer`` its oldest queued commits not yet on their way, up to the window,
        unless it is down."""
        rows = self.d.outbox.get(peer)
        if not rows or not self.peer_up.get(peer):
            return []
        flying = self.inflight.setdefault(peer, {})
        out: list[Effect] = []
        for q in rows.values():
            if len(flying) >= self.cfg.outbox_window:
                break
            if q.commit.update.uid not in flying:
                flying[q.commit.update.uid] = q
                out.append(Send(peer, q.commit))
        return out

    def _commit_delivered(self, peer: str, o: Outcome, now: float) -> list[Effect]:
        assert isinstance(o.request, Commit)
        flying = self.inflight.get(peer, {})
        q = flying.get(o.request.update.uid)
        if q is None:
            return []  # not a delivery we wait for (a restart came in between)
        del flying[o.request.update.uid]
        if q.seq not in self.d.outbox.get(peer, {}):
            return self._pump(peer)  # dropped meanwhile
        if o.ok:
            return [self._p(Delivered(peer, q.seq)), *self._pump(peer)]
        if o.status in (400, 401, 409):  # e.g. a token expired, no vote of theirs: owe a sync
            return self._drop_for(peer, f"commit refused: {o.body}")
        return [SetTimer(("outbox", peer), now + self.cfg.outbox_retry_s)]

    # ---- heartbeats and node state (spec 4.2, 4.7) ------------------------------------------
    def heartbeat_for(self, peer: str) -> Heartbeat:
        return Heartbeat(self.me, self.state, tuple(sorted(self.members)), peer in self.d.owed,
                         self.counter)

    def _heartbeat_round(self, now: float) -> list[Effect]:
        self.rounds += 1
        self.round = Round(self.rounds, set(self.peers))
        if not self.peers:
            return self._end_round(now)
        out: list[Effect] = [Send(p, self.heartbeat_for(p)) for p in self.peers]
        out.append(SetTimer(("round", self.rounds), now + self.cfg.peer_timeout_s + ROUND_SLACK_S))
        return out

    def _heartbeat_result(self, peer: str, reply: dict[str, Any] | None, now: float
                          ) -> list[Effect]:
        r = self.round
        if r is None or peer not in r.pending:
            return []
        r.pending.discard(peer)
        r.results[peer] = reply
        return [] if r.pending else self._end_round(now)

    def _end_round(self, now: float) -> list[Effect]:
        r, self.round = self.round, None
        assert r is not None
        out = self._round_results(r.results, now)
        out.append(SetTimer(HEARTBEAT, now + self.cfg.heartbeat_s))
        return out

    def _on_heartbeat(self, hop: str, hb: Heartbeat, now: float) -> list[Effect]:
        """A peer's heartbeat: sync if we are owed one. The ids in its body are not learned
        (one bogus id would block every update); before any agreed membership the sender
        itself, authenticated by TLS, is."""
        out: list[Effect] = []
        if self.epoch == 0 and hop not in self.members:
            self.members.add(hop)
            out += [self._p(Members((hop,))),
                    Emit("members", {"epoch": 0, "members": sorted(self.members),
                                     "added": [hop], "removed": [], "via": "heartbeat"})]
        if "learn-heartbeat-members" in self.bugs and set(hb.members) - self.members:
            new = sorted(set(hb.members) - self.members)  # bug: the body's word taken
            self.members |= set(new)
            out += [self._p(Members(tuple(new))),
                    Emit("members", {"epoch": self.epoch, "members": sorted(self.members),
                                     "added": new, "removed": [], "via": "heartbeat-body"})]
        self.peer_state[hop] = hb.state
        # the sender's own counter, from its TLS identity (never another node's): a window
        # left far behind moves up to it (seen.py), once, and is saved
        if hb.counter is not None and self.seen.rebase(hop, hb.counter):
            out += [self._p(Counters((self._row(hop),))),
                    Emit("counter-rebase", {"peer": hop, "counter": hb.counter})]
        # an owed sync only from an active sender (spec 4.6): asking a syncing one fails at
        # its state check and, redone on each heartbeat, kept the puller busy so a mesh all
        # of whose nodes restarted never picked its first active node (docs/drip.md "A mesh that
        # restarted whole")
        if hb.sync_owed and hb.state == "active" and self.puller.cur is None \
                and self.state != "inactive" and "skip-sync" not in self.bugs:
            out += self._start_sync(hop, "owed", now)
        return out

    def _note_disowned(self, peer: str, o: Outcome) -> None:
        """A heartbeat answer: 403 not-a-peer at an epoch beyond ours means ``peer`` agreed a
        membership without us; any 200 takes that back."""
        b = o.body if isinstance(o.body, dict) else {}
        e = b.get("epoch")
        if o.status == 403 and b.get("refusal") == "not-a-peer" and isinstance(e, int) \
                and not isinstance(e, bool) and e > self.epoch:
            self.disowned[peer] = e
        elif o.ok:
            self.disowned.pop(peer, None)

    def _decommissioned(self, results: dict[str, dict[str, Any] | None]) -> list[Effect]:
        """Learn that we were decommissioned (docs/drip.md "A decommissioned member that
        restarts"): no peer took our heartbeat this round and more than half of our peers
        refused us as not-a-peer at a later epoch; a hostile minority cannot make us leave."""
        if self.state == "decommissioned" or any(results.get(p) is not None for p in self.peers):
            return []
        said = {p: self.disowned[p] for p in self.peers if p in self.disowned}
        if 2 * len(said) <= len(self.peers):
            return []
        self.left_at = max(said.values())
        self.puller.stop()
        return [Emit("decommissioned", {"epoch": self.left_at, "own_epoch": self.epoch,
                                        "by": sorted(said)}),
                *self._set_state("decommissioned",
                                 f"peers {sorted(said)} agreed epoch {self.left_at} without us")]

    def _round_results(self, results: dict[str, dict[str, Any] | None], now: float
                       ) -> list[Effect]:
        """One heartbeat round: ``results[peer]`` is the 200 reply body, or None."""
        out: list[Effect] = self._decommissioned(results)
        if out:  # just learned it left: its open votes end here too, as on going inactive
            out += self._abort_own_votes(now, "decommissioned from the mesh")
        if self.state == "decommissioned":
            for p in self.peers:
                self.reachable[p] = False
            if not any(results.get(p) is not None for p in self.peers):
                return out
        for p in self.peers:
            reply = results.get(p)
            self.reachable[p] = reply is not None
            if reply is not None:
                self.peer_state[p] = str(reply.get("state"))
            up = reply is not None and reply.get("state") in ("active", "sync")
            if up != self.peer_up.get(p):
                self.peer_up[p] = up
                out.append(Emit("peer", {"peer": p, "up": up,
                                         "state": None if reply is None else reply.get("state")}))
                if up:
                    out += self._pump(p) + self._reask(p)
                else:
                    out += self._drop_for(p, "heartbeat failed" if reply is None else "inactive",
                                          missed=False)
            elif up:
                out += self._met(p)
            if up:
                self.unmet.discard(p)
        any_ok = any(results.get(p) is not None for p in self.peers)
        if self.peers and not any_ok and self.state != "inactive":
            self.puller.stop()
            out += self._set_state("inactive", "no peer answered a heartbeat")
            out += self._abort_own_votes(now)
        elif self.state in ("inactive", "decommissioned") and any_ok:
            if "skip-sync" in self.bugs:
                out += self._set_state("active", "peer reachable again, sync skipped")
            else:
                out += self._set_state("sync", "peer reachable again")
        if self.state == "sync" and self.puller.cur is None:
            out += self._pick_sync_source(now)
        return out

    def _abort_own_votes(self, now: float,
                         why: str = "went inactive: no peer answered a heartbeat"
                         ) -> list[Effect]:
        """Gone inactive: abort the votes we initiated that are still open. Spec 4.7: an
        inactive node neither updates nor propagates key-value data, so it must not commit
        them later (when a late yes or its timer comes back after its links do); the initiator
        alone decides, so aborting is safe, and its client gets a definite 409 now."""
        if "inactive-takes-part" in self.bugs:
            return []
        out: list[Effect] = []
        for t in [t for t in self.tallies.values() if t.upstream is None and not t.decided]:
            out += self._decide(t, now, why, abort=True)
        return out

    def _set_state(self, state: str, reason: str) -> list[Effect]:
        if state == self.state:
            return []
        self.state = state
        out: list[Effect] = [Emit("state", {"state": state, "reason": reason})]
        if state in ("active", "inactive"):
            out += [Send(p, NodeNotice(self.me, state == "active")) for p in self.active_peers()]
        return out

    def _on_node_notice(self, hop: str, n: NodeNotice) -> list[Effect]:
        self.peer_state[hop] = "active" if n.active else "inactive"
        if self.peer_up.get(hop) == n.active:
            return self._met(hop) if n.active else []
        self.unmet.discard(hop)
        self.peer_up[hop] = n.active
        out: list[Effect] = [Emit("peer", {"peer": hop, "up": n.active, "state": "notice"})]
        return out + (self._pump(hop) + self._reask(hop) if n.active
                      else self._drop_for(hop, "peer said inactive", missed=False))

    # ---- sync (spec 4.6) --------------------------------------------------------------------
    def _pick_sync_source(self, now: float) -> list[Effect]:
        active = [p for p in self.peers if self.reachable.get(p)
                  and self.peer_state.get(p) == "active"]
        if active:
            return self._start_sync(active[0], "recovering", now)
        live = [p for p in self.peers if self.reachable.get(p)]
        if live and all(self.peer_state.get(p) == "sync" for p in live) \
                and self.me < min(live):
            # every reachable peer is syncing too (e.g. all restarted): the lowest id goes first
            return [Emit("sync-done", {"source": None, "batches": 0, "changed": 0,
                                       "reason": "no active peer; lowest id resumes"}),
                    *self._set_state("active", "no active peer to sync from")]
        return []

    def _start_sync(self, source: str, reason: str, now: float) -> list[Effect]:
        """Ask ``source`` its state first (spec 4.6: sync only from an active peer)."""
        s = self.puller.begin(source, reason, now)
        return [Emit("sync-start", {"source": source, "reason": reason, "after": s.after}),
                Send(source, StateQuery(self.me)),
                SetTimer(("sync", s.token), now + self.cfg.sync_timeout_s)]

    def _source_state(self, peer: str, o: Outcome) -> list[Effect]:
        s = self.puller.cur
        if s is None or s.source != peer or s.asked:
            return []
        state = o.body.get("state") if o.ok and isinstance(o.body, dict) else None
        if state != "active":
            return self._sync_failed(peer)
        s.asked = True
        s.sid = self.new_sync_id()  # its batches must carry it (`Puller.check`)
        # what we hold after the cursor: the source skips ranges we hold as it does
        return [Send(peer, SyncRequest(self.me, s.after, s.sid, summarize(self.d.kv, s.after)))]

    def _refused(self, hop: str, e: Refused, now: float) -> list[Effect]:
        ev = self.refusals.note(e.reason, now, peer=hop, status=e.status, error=str(e))
        return [] if ev is None else [Emit("refused", ev)]

    def _on_sync_request(self, hop: str, msg: SyncRequest, now: float) -> list[Effect]:
        """A peer asks for our store (or its part after a key): one batch now, the next when
        it is acknowledged (`nodes.drip.sync`)."""
        if self.state != "active":
            raise Unavailable(f"node {self.me} is {self.state}; sync from an active node")
        self._check_sync_needed(hop)
        sv = self.feeder.request(hop, msg.after, msg.sync_id or f"{self.me}-{self.counter + 1}",
                                 self.owed_gen.get(hop, 0), now,
                                 matched(self.d.kv, msg.after, msg.summary),
                                 named=msg.sync_id is not None)
        return [Emit("sync-serve", {"to": hop, "keys": len(self.d.kv), "after": sv.after,
                                    "ranges": len(msg.summary), "skip": len(sv.skip)}),
                *self._serve_next(hop)]

    def _check_sync_needed(self, hop: str) -> None:
        """Serve only a peer that needs it: one we owe a sync, or whose latest heartbeat (or
        notice) said it is not active (syncing; or inactive, as the heartbeat of the round
        after which it starts syncing says). A request in the name of an active member (its
        key stolen) made us serve the real member, which refused every batch as unsolicited:
        the flood cost the mesh a third of its commit rate (docs/drip.md "Refusals")."""
        if (refused := self.sync_refusal(hop)) is not None:
            raise refused

    def out_of_window(self, node: str, counter: int, reset: bool
                      ) -> CounterOutOfWindow | None:
        """The counter-window refusal `on_message` would give, read-only (for the gate)."""
        return self.seen.out_of_window(node, counter, reset)

    def locks_of(self, initiator: str) -> int:
        """How many keys this node holds locked for ``initiator``'s updates: the vote rounds
        of that initiator it takes part in now (read-only; the gate bounds them per
        initiator before a /voting's token is checked, nodes/drip/admit.py)."""
        return sum(1 for _, i in self.d.locks.values() if i == initiator)

    def sync_refusal(self, hop: str) -> Refused | None:
        """`_check_sync_needed`'s refusal, read-only (the gate asks it before a sync
        request's token is checked: nodes/drip/admit.py)."""
        if hop in self.d.owed or self.peer_state.get(hop) in ("sync", "inactive"):
            return None
        said = self.peer_state.get(hop)
        return Refused(409, "sync-not-needed",
                       f"{hop} said it is {said or 'nothing yet'} and is owed no sync; "
                       "heartbeat as syncing first")

    def _serve_next(self, peer: str) -> list[Effect]:
        sv = self.feeder.serves[peer]
        values = self.values
        if values is not None:  # keyset pages of the store: no value held in memory
            lim = self.feeder.lim
            items, complete = self.feeder.next_batch(peer, lambda after, upto: values.page(
                after, lim.batch_items, lim.batch_bytes, upto))
        else:
            items, complete = self.feeder.next_items(peer, self.d.kv)
        c, reset = self._next_counter()
        b = SyncBatch(self.me, c, reset, complete, sv.sid, items)
        self.feeder.sent(peer, b)
        return [self._p(Counters((self._row(self.me),))), Send(peer, b)]

    def _batch_delivered(self, peer: str, o: Outcome) -> list[Effect]:
        """The next batch after an acknowledged one; after the last, the peer is owed nothing
        dropped before the sync's first part (unless more was dropped since)."""
        b = o.request
        assert isinstance(b, SyncBatch)
        sv = self.feeder.delivered(peer, b, o.ok)
        if sv is None:
            return []
        if not b.complete:
            return self._serve_next(peer)
        if self.owed_gen.get(peer, 0) == sv.gen and peer in self.d.owed:
            return [self._p(Paid(peer))]
        return []

    def _on_sync_batch(self, hop: str, b: SyncBatch, now: float) -> list[Effect]:
        """A batch of the sync we asked for (anything else is refused and applies nothing);
        items the entitlement policy refuses are left out."""
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        try:
            self.puller.check(hop, b)
            solicited = True
        except Refused:
            if "apply-unsolicited-sync" not in self.bugs:
                raise
            solicited = False  # bug: applied all the same
        out: list[Effect] = []
        if not self.seen.before(b.source, b.counter, b.reset):  # to us alone: not propagated
            out.append(self._counter_taken(hop, b, None, "sync-batch", b.source))
        items = []
        for it in b.items:
            why = self._policy(Update(it.uid, it.key, it.value, it.owner), it.owner or hop)
            if why is None:
                items.append(it)
            else:
                out += self._refused(hop, Refused(200, "sync-not-entitled", why), now)
        rec = Merged(tuple(items))
        learned = [it for it in items if newer(it, self.d.kv.get(it.key))]
        changed = self.d.apply(rec)
        out += [Persist(STORE, rec), self._p(Counters((self._row(b.source),)))]
        # each commit learned here is journaled like one applied from an update, so the
        # checkers see that this node holds it (liveness, 2PC agreement) and by which way
        out += [Emit("apply", {"uid": it.uid, "key": it.key, **value_fields(it.key, it.value),
                               "version": it.version, "initiator": it.owner, "via": "sync",
                               "from": hop, "changed": True}) for it in learned]
        if any(it.key == MEMBERS_KEY for it in learned):
            out += self._members_after("sync")
        if changed:
            out += self._learned_by_sync(hop)
        if not solicited:
            return out
        s = self.puller.took(b, changed)
        if not b.complete:
            return [*out, SetTimer(("sync", s.token), now + self.cfg.sync_timeout_s)]
        out.append(Emit("sync-done", {"source": hop, "batches": s.batches,
                                      "changed": s.changed, "items": s.items,
                                      "reason": s.reason,
                                      "elapsed_s": round(now - s.started, 4)}))
        if self.state == "sync":
            out += self._set_state("active", f"sync from {hop} complete")
        return out

    def _learned_by_sync(self, source: str) -> list[Effect]:
        """Commits that reached us only through a sync go no further by themselves (their
        sender dropped what it had queued for us while we were down). Owe every other peer a
        sync so they travel on, hop by hop, and let go of votes whose update is now here."""
        out: list[Effect] = []
        others = [p for p in self.peers if p != source]
        if others:
            out.append(self._p(Owe(tuple(others))))
            for p in others:
                self.owed_gen[p] = self.owed_gen.get(p, 0) + 1
            out += [Emit("owe-sync", {"peer": p, "dropped": 0,
                                      "why": f"learned commits by sync from {source}"})
                    for p in others]
        for key, (uid, _) in sorted(self.d.locks.items()):
            it = self.d.kv.get(key)
            if it is not None and it.uid == uid:
                out += [self._p(Unlock(key, uid)),
                        Emit("release", {"uid": uid, "key": key, "why": "committed (sync)"})]
        return out

    def _sync_failed(self, to: str) -> list[Effect]:
        s = self.puller.stop(to)
        if s is None:
            return []
        return [Emit("sync-abandoned", {"source": to, "batches": s.batches, "after": s.after,
                                        "items": s.items})]

    # ---- what the admin API shows -------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {
            "id": self.me, "state": self.state, "counter": self.counter,
            "peers": {p: {"up": self.peer_up.get(p, False), "reachable": self.reachable.get(p),
                          "state": self.peer_state.get(p)} for p in self.peers},
            "members": sorted(self.members), "epoch": self.epoch,
            # decommissioned: the liveness checker expects no progress from it
            "left": self.me not in self.members or self.state == "decommissioned",
            "decommissioned_at": self.left_at if self.state == "decommissioned" else None,
            "kv": {k: {"value": i.value, "version": i.version, "uid": i.uid, "owner": i.owner}
                   for k, i in ((k, self._item(k) or i) for k, i in sorted(self.d.kv.items()))},
            "locks": {k: uid for k, (uid, _) in sorted(self.d.locks.items())},
            "in_flight": sorted(self.tallies),
            "outbox": {p: len(rows) for p, rows in sorted(self.d.outbox.items()) if rows},
            "owed": sorted(self.d.owed),
            "syncing_from": self.puller.cur.source if self.puller.cur else None,
            "bugs": sorted(self.bugs),
        }


def item_brief(it: Item | None) -> dict[str, Any] | None:
    return None if it is None else {"value": it.value, "version": it.version, "uid": it.uid}
