"""The DRiP protocol as a sans-IO state machine: messages and timer ticks in, effects out.

No sockets, no asyncio, no clock: every method takes ``now`` (monotonic seconds). State that
must survive kill -9 lives in the injected :class:`~nodes.drip.store.Store` and is written
before the effects that depend on it are returned (a vote lock before the "yes" is sent, a
commit before it is forwarded or acknowledged).

Vote routing beyond the initiator's direct peers (the spec leaves it open; ours):

* A receiver of a new ``/voting`` votes, locks the key on "yes", and forwards the request to
  its active peers except the one it came from. It answers *its sender* (not the initiator)
  with one aggregated response once every peer it forwarded to has answered, failed, or its
  relay timer ran out: the response lists every node of its forwarding subtree that voted yes
  (``voters``), every one that voted no, and the highest stored version of the key there.
  A "no" is answered at once, without forwarding.
* A receiver that has already seen the request (same initiator and counter) answers at once
  with ``duplicate``: its vote travels on the path it first came by.
* The initiator commits only if nobody voted no **and every member of the mesh voted yes**.
  Members are the configured mesh (``mesh_members``), its peers, and every node id learned
  from heartbeats; they are persisted. Counting only *reachable* peers would let both sides of
  a split mesh commit conflicting updates of one key, so an unreachable member aborts updates
  (2PC blocks rather than diverge).
* The commit carries ``version = 1 + max version reported``; stores keep the highest
  ``(version, update id)`` per key, so commits and sync batches may arrive in any order.

Commit propagation uses a durable per-peer outbox, retried until the peer answers 200. When a
peer is found inactive its queued commits are dropped (spec 4.7: nothing is propagated to it)
and the peer is *owed* a sync: the next heartbeat tells it so and it pulls our whole store.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nodes.common.effects import Emit, Send, SetTimer
from nodes.drip.codec import (
    Abort,
    Commit,
    Heartbeat,
    Item,
    Message,
    NodeNotice,
    SyncBatch,
    SyncRequest,
    Update,
    VoteResponse,
    Voting,
    next_counter,
)
from nodes.drip.entitlement import Policy, allow_all
from nodes.drip.store import OWN, Store

BUGS = ("commit-partial-vote", "forget-in-progress", "skip-sync")
SEEN_WINDOW = 4096


class Unavailable(Exception):
    """The node cannot take this request in its current state (answered 503)."""


# --------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class SendSeq:
    """Send these in order to ``to``, stopping at the first failure (sync batches)."""

    to: str
    msgs: tuple[Message, ...]
    #: a full-store sync: report success with ``on_sync_served(to, owed_gen)``
    owed_gen: int | None = None


@dataclass(frozen=True)
class ClientDone:
    """The outcome of an update this node initiated."""

    uid: str
    committed: bool
    detail: dict[str, Any]


@dataclass(frozen=True)
class WakeOutbox:
    """New commits are queued for ``peer``."""

    peer: str


Effect = Send | SendSeq | ClientDone | SetTimer | Emit | WakeOutbox


@dataclass
class CoreConfig:
    vote_timeout_s: float = 2.0
    lock_ttl_s: float = 3.0
    sync_timeout_s: float = 5.0
    sync_batch: int = 1000
    bugs: frozenset[str] = frozenset()
    #: how much sooner than its sender a forwarder answers (see DRiP-Vote-Budget-Ms)
    relay_margin_s: float = 0.2


# --------------------------------------------------------------------------- state


@dataclass
class Window:
    """Which counters of one initiator were seen: all ``<= floor`` plus ``recent``."""

    saved: int | None
    reset_at: int | None
    floor: int | None
    recent: set[int] = field(default_factory=set)


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


@dataclass
class SyncState:
    source: str
    reason: str
    started: float
    batches: int = 0
    changed: int = 0


class DripCore:
    """One DRiP node's protocol state."""

    def __init__(self, me: str, peers: list[str], store: Store, cfg: CoreConfig | None = None,
                 policy: Policy = allow_all, mesh_members: list[str] | None = None) -> None:
        self.me = me
        self.peers = sorted(peers)
        self.store = store
        self.cfg = cfg or CoreConfig()
        self.policy = policy
        self.bugs = self.cfg.bugs
        self.state = "active"
        self.peer_up: dict[str, bool] = {p: True for p in self.peers}
        self.members: set[str] = store.members() | {me} | set(peers) | set(mesh_members or [])
        self.windows: dict[str, Window] = {
            n: Window(c, r, c) for n, (c, r) in store.saved_counters().items()}
        self.counter = store.own_counter()
        self.locks: dict[str, str] = {}  # key -> uid of the in-progress update we voted yes on
        self.tallies: dict[str, Tally] = {}  # uid -> votes being gathered (initiator or relay)
        self.sync: SyncState | None = None
        self.reachable: dict[str, bool] = {p: True for p in self.peers}
        self.peer_state: dict[str, str] = {}
        self.owed_gen: dict[str, int] = {}  # bumped whenever we drop commits queued for a peer

    # ---- start-up -------------------------------------------------------------------------
    def on_start(self, now: float) -> list[Effect]:
        """Restore in-progress votes and pick the first state (fresh -> active, else sync)."""
        self.store.add_members(self.members)
        out: list[Effect] = []
        for key, (uid, initiator) in self.store.locks().items():
            if initiator == self.me:  # our own update died with the process: never commits
                self.store.del_lock(key, uid)
                out.append(Emit("release", {"uid": uid, "key": key, "why": "restart"}))
            else:
                self.locks[key] = uid
                out.append(SetTimer(("lock", key, uid), now + self.cfg.lock_ttl_s))
        fresh = self.store.fresh
        self.state = "active" if fresh or "skip-sync" in self.bugs else "sync"
        out.insert(0, Emit("start", {"fresh": fresh, "state": self.state, "counter": self.counter,
                                     "members": sorted(self.members), "peers": self.peers}))
        if not fresh and self.state == "active":
            out.append(Emit("state", {"state": "active", "reason": "restart, sync skipped"}))
        return out

    # ---- helpers --------------------------------------------------------------------------
    def active_peers(self, exclude: str | None = None) -> list[str]:
        return [p for p in self.peers if self.peer_up.get(p) and p != exclude]

    def _next_counter(self) -> tuple[int, bool]:
        c, reset = next_counter(self.counter)
        self.counter = c
        self._seen(self.me, c, reset)
        return c, reset

    def _seen(self, node: str, counter: int, reset: bool) -> bool:
        """Spec 4.4: has this (initiator, counter) been received before? Records it if not.

        Beyond the spec's single saved counter we remember a window of recent counters, so a
        message overtaken by a later one of the same initiator is still handled once.
        """
        w = self.windows.get(node)
        if w is None:
            self.windows[node] = Window(counter, counter if reset else None, None, {counter})
            return False
        if reset:
            if w.reset_at == counter and counter in w.recent:
                return True
            self.windows[node] = Window(counter, counter, None, {counter})
            return False
        if counter in w.recent or (w.floor is not None and counter <= w.floor):
            return True
        w.recent.add(counter)
        if w.saved is None or counter > w.saved:
            w.saved = counter
        if len(w.recent) > 2 * SEEN_WINDOW:
            w.floor = w.saved - SEEN_WINDOW
            w.recent = {c for c in w.recent if c > w.floor}
        return False

    def _counter_rows(self, *nodes: str) -> list[tuple[str, int, int | None]]:
        rows: list[tuple[str, int, int | None]] = []
        for n in nodes:
            if n == self.me:
                rows.append((OWN, self.counter, None))
            else:
                w = self.windows[n]
                assert w.saved is not None
                rows.append((n, w.saved, w.reset_at))
        return rows

    def _version(self, key: str) -> int:
        it = self.store.get(key)
        return it.version if it else 0

    # ---- initiating an update (our client endpoint) ----------------------------------------
    def client_update(self, up: Update, now: float) -> list[Effect]:
        """Start the voting phase for ``up``; the outcome comes later as ClientDone."""
        if self.state != "active":
            raise Unavailable(f"node {self.me} is {self.state}; it initiates no updates now")
        if up.uid in self.tallies or self.store.is_applied(up.uid):
            return [ClientDone(up.uid, False, {"error": f"update id {up.uid!r} was already used"})]
        if up.owner is None:
            up = Update(up.uid, up.key, up.value, self.me)
        refusal = self.policy(self.store.get(up.key), up, self.me)
        if refusal:
            return [ClientDone(up.uid, False, {"error": "not entitled: " + refusal})]
        held = self.locks.get(up.key)
        if held is not None and held != up.uid and "forget-in-progress" not in self.bugs:
            return [ClientDone(up.uid, False,
                               {"error": f"key {up.key!r} has an update in progress ({held})"})]
        counter, reset = self._next_counter()
        self.store.put_lock(up.key, up.uid, self.me, self._counter_rows(self.me))
        replaced = self.locks.get(up.key)
        self.locks[up.key] = up.uid
        pending = set(self.active_peers())
        t = Tally(up, self.me, counter, None, pending, {self.me}, set(), self._version(up.key), now)
        self.tallies[up.uid] = t
        out: list[Effect] = [
            Emit("vote-start", {"uid": up.uid, "key": up.key, "value": up.value,
                                "counter": counter, "members": sorted(self.members),
                                "asked": sorted(pending)}),
            Emit("vote", {"uid": up.uid, "key": up.key, "initiator": self.me, "vote": "yes",
                          "from": None, "syncing": False}),
        ]
        if replaced is not None and replaced != up.uid:
            out.append(Emit("release", {"uid": replaced, "key": up.key, "why": "replaced"}))
        if not pending:
            return out + self._decide(t, now, "no active peer to ask")
        msg = Voting(self.me, counter, reset, up, budget_ms=int(self.cfg.vote_timeout_s * 1000))
        out += [Send(p, msg) for p in sorted(pending)]
        out.append(SetTimer(("vote", up.uid), now + self.cfg.vote_timeout_s))
        return out

    # ---- one entry point for peer messages ---------------------------------------------------
    def receive(self, hop: str, msg: Message, now: float) -> list[Effect]:
        """Route one decoded peer message (heartbeats have their own reply: on_heartbeat)."""
        if isinstance(msg, Voting):
            return self.on_voting(hop, msg, now)
        if isinstance(msg, VoteResponse):
            return self.on_vote_response(hop, msg, now)
        if isinstance(msg, Commit):
            return self.on_commit(hop, msg, now)
        if isinstance(msg, Abort):
            return self.on_abort(hop, msg, now)
        if isinstance(msg, SyncBatch):
            return self.on_sync_batch(hop, msg, now)
        if isinstance(msg, SyncRequest):
            return self.on_sync_request(hop, now)
        if isinstance(msg, NodeNotice):
            return self.on_node_notice(hop, msg, now)
        raise TypeError(f"no handler for {type(msg).__name__}")

    # ---- voting ---------------------------------------------------------------------------
    def _own_vote(self, up: Update, initiator: str) -> str | None:
        """None for "yes", else why "no"."""
        if self.state == "sync":
            return None  # spec 4.6: a syncing node votes yes to every update
        held = self.locks.get(up.key)
        if held is not None and held != up.uid and "forget-in-progress" not in self.bugs:
            return f"key in progress: {held}"
        return self.policy(self.store.get(up.key), up, initiator)

    def on_voting(self, hop: str, msg: Voting, now: float) -> list[Effect]:
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        up = msg.update
        if self._seen(msg.initiator, msg.counter, msg.reset):
            return [Send(hop, VoteResponse(self.me, True, msg.initiator, msg.counter, up.uid,
                                           duplicate=True))]
        self.members.add(msg.initiator)
        rows = self._counter_rows(msg.initiator)
        reason = self._own_vote(up, msg.initiator)
        out: list[Effect] = [Emit("vote", {"uid": up.uid, "key": up.key,
                                           "initiator": msg.initiator,
                                           "vote": "no" if reason else "yes", "reason": reason,
                                           "from": hop, "syncing": self.state == "sync"})]
        version = self._version(up.key)
        if reason:
            self.store.save_counters(rows)
            return out + [Send(hop, VoteResponse(self.me, False, msg.initiator, msg.counter,
                                                 up.uid, (), (self.me,), version))]
        self.store.put_lock(up.key, up.uid, msg.initiator, rows)
        replaced = self.locks.get(up.key)
        if replaced is not None and replaced != up.uid:  # syncing (or a bug): the old vote goes
            out.append(Emit("release", {"uid": replaced, "key": up.key, "why": "replaced"}))
        self.locks[up.key] = up.uid
        out.append(SetTimer(("lock", up.key, up.uid), now + self.cfg.lock_ttl_s))
        downstream = set(self.active_peers(exclude=hop))
        t = Tally(up, msg.initiator, msg.counter, hop, downstream, {self.me}, set(), version, now)
        if not downstream:
            return out + [self._respond(t)]
        self.tallies[up.uid] = t
        # answer our sender a hop's margin before it gives up, and give those below us less
        # time again, so partial answers climb back in time when a link below hangs
        budget = (msg.budget_ms / 1000 if msg.budget_ms is not None
                  else self.cfg.vote_timeout_s / 2)
        wait = max(self.cfg.relay_margin_s / 2, budget - self.cfg.relay_margin_s)
        fwd = replace(msg, budget_ms=int(wait * 1000))
        out += [Send(p, fwd) for p in sorted(downstream)]
        out.append(SetTimer(("relay", up.uid), now + wait))
        return out

    def _respond(self, t: Tally) -> Send:
        assert t.upstream is not None
        t.decided = True
        self.tallies.pop(t.update.uid, None)
        return Send(t.upstream, VoteResponse(self.me, not t.no_voters, t.initiator, t.counter,
                                             t.update.uid, tuple(sorted(t.voters)),
                                             tuple(sorted(t.no_voters)), t.version))

    def on_vote_response(self, hop: str, r: VoteResponse, now: float) -> list[Effect]:
        t = self.tallies.get(r.uid)
        if t is None or t.decided or hop not in t.pending:
            # spec 4.5.1: no action for responses after the timeout (or never asked for)
            return [Emit("late-vote", {"uid": r.uid, "from": hop, "vote": "yes" if r.yes else "no"})]
        t.pending.discard(hop)
        t.voters |= set(r.voters)
        t.no_voters |= set(r.no_voters)
        if not r.yes and not r.no_voters:
            t.no_voters.add(hop)
        t.version = max(t.version, r.version)
        return self._progress(t, now)

    def on_send_failed(self, to: str, msg: Message, now: float) -> list[Effect]:
        """A request that could not be delivered: a /voting subtree that will not answer, or
        a sync source that will not serve."""
        if isinstance(msg, SyncRequest):
            return self.on_sync_failed(to, now)
        if not isinstance(msg, Voting):
            return []
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
        return self._decide(t, now, None)

    def _decide(self, t: Tally, now: float, why: str | None, timeout: bool = False
                ) -> list[Effect]:
        """Initiator: commit on an all-yes aggregate of every member, else abort."""
        t.decided = True
        self.tallies.pop(t.update.uid, None)
        up = t.update
        missing = sorted(self.members - t.voters - t.no_voters)
        partial_ok = "commit-partial-vote" in self.bugs
        if t.no_voters:
            why = f"voted no: {sorted(t.no_voters)}"
        elif missing and not partial_ok:
            why = ("timeout; " if timeout else "") + f"no vote from {missing}"
        else:
            return self._commit(t, now, missing)
        self.store.del_lock(up.key, up.uid)
        if self.locks.get(up.key) == up.uid:
            del self.locks[up.key]
        out: list[Effect] = [
            Emit("decide", {"uid": up.uid, "key": up.key, "outcome": "abort", "reason": why,
                            "voters": sorted(t.voters), "no_voters": sorted(t.no_voters),
                            "missing": missing, "elapsed_s": round(now - t.started, 4)}),
            Emit("release", {"uid": up.uid, "key": up.key, "why": "abort"}),
            ClientDone(up.uid, False, {"error": "aborted: " + str(why)})]
        if self.peers:  # anyone the request reached may hold the key for it: tell them now
            counter, reset = self._next_counter()
            abort = Abort(self.me, counter, reset, up.uid, up.key)
            out += [Send(p, abort) for p in self.active_peers()]
        return out

    def on_abort(self, hop: str, msg: Abort, now: float) -> list[Effect]:
        """The initiator will never commit ``msg.uid``: release its key and pass the word on.
        Safe because only the initiator decides, and it decided abort."""
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        if self._seen(msg.initiator, msg.counter, msg.reset):
            return []
        out: list[Effect] = []
        t = self.tallies.get(msg.uid)
        if t is not None and t.upstream is not None:  # a relay still gathering: nobody waits
            t.decided = True
            del self.tallies[msg.uid]
        if self.locks.get(msg.key) == msg.uid:
            del self.locks[msg.key]
            self.store.del_lock(msg.key, msg.uid)
            out.append(Emit("release", {"uid": msg.uid, "key": msg.key,
                                        "why": f"aborted by {msg.initiator}"}))
        return out + [Send(p, msg) for p in self.active_peers(exclude=hop)]

    def _commit(self, t: Tally, now: float, missing: list[str]) -> list[Effect]:
        up = t.update
        version = t.version + 1
        counter, reset = self._next_counter()
        msg = Commit(self.me, counter, reset, up, version)
        out: list[Effect] = [Emit("decide", {
            "uid": up.uid, "key": up.key, "outcome": "commit", "version": version,
            "voters": sorted(t.voters), "no_voters": [], "missing": missing,
            "elapsed_s": round(now - t.started, 4)})]
        out += self._apply(msg, None, forward=True, rows=self._counter_rows(self.me))
        out.append(ClientDone(up.uid, True, {"version": version}))
        return out

    # ---- commit phase ---------------------------------------------------------------------
    def _apply(self, msg: Commit, hop: str | None, forward: bool,
               rows: list[tuple[str, int, int | None]]) -> list[Effect]:
        up = msg.update
        targets = [p for p in self.peers if p != hop] if forward else []
        queued = [p for p in targets if self.peer_up.get(p)]
        payload = commit_payload(msg)
        fresh, changed = self.store.apply_commit(up, msg.version, [(p, payload) for p in queued],
                                                 rows)
        if not fresh:
            return []
        out: list[Effect] = [Emit("apply", {"uid": up.uid, "key": up.key, "value": up.value,
                                            "version": msg.version, "initiator": msg.initiator,
                                            "via": "update", "from": hop, "changed": changed})]
        if self.locks.get(up.key) == up.uid:
            del self.locks[up.key]
            out.append(Emit("release", {"uid": up.uid, "key": up.key, "why": "commit"}))
        for p in targets:
            if p not in queued:
                out += self._drop_for(p, "inactive")
        out += [WakeOutbox(p) for p in queued]
        return out

    def on_commit(self, hop: str, msg: Commit, now: float) -> list[Effect]:
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        self.members.add(msg.initiator)
        dup = self._seen(msg.initiator, msg.counter, msg.reset)
        rows = [] if dup else self._counter_rows(msg.initiator)
        if self.store.is_applied(msg.update.uid):
            if rows:
                self.store.save_counters(rows)
            return []
        return self._apply(msg, hop, forward=not dup, rows=rows)

    def _drop_for(self, peer: str, why: str) -> list[Effect]:
        self.owed_gen[peer] = self.owed_gen.get(peer, 0) + 1
        n = self.store.drop_outbox(peer)
        return [Emit("owe-sync", {"peer": peer, "dropped": n, "why": why})]

    # ---- timers ---------------------------------------------------------------------------
    def on_timer(self, name: tuple[Any, ...], now: float) -> list[Effect]:
        kind = name[0]
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
            if self.locks.get(key) != uid:
                return []
            del self.locks[key]
            self.store.del_lock(key, uid)
            return [Emit("release", {"uid": uid, "key": key, "why": "expired"})]
        if kind == "sync":
            s = self.sync
            if s is None or s.started != name[1]:
                return []
            self.sync = None
            return [Emit("sync-abandoned", {"source": s.source, "batches": s.batches})]
        return []

    # ---- heartbeats and node state (spec 4.2, 4.7) ------------------------------------------
    def heartbeat_for(self, peer: str) -> Heartbeat:
        return Heartbeat(self.me, self.state, tuple(sorted(self.members)),
                         peer in self.store.owed())

    def on_heartbeat(self, hop: str, hb: Heartbeat, now: float) -> tuple[dict[str, Any], list[Effect]]:
        """A peer's heartbeat: our reply body and what it sets off."""
        out: list[Effect] = []
        new = set(hb.members) - self.members
        if new:
            self.members |= new
            self.store.add_members(new)
            out.append(Emit("members", {"added": sorted(new), "from": hop}))
        self.peer_state[hop] = hb.state
        if hb.sync_owed and self.sync is None and self.state != "inactive" \
                and "skip-sync" not in self.bugs:
            out += self._start_sync(hop, "owed", now)
        return {"state": self.state}, out

    def on_heartbeat_round(self, results: dict[str, dict[str, Any] | None], now: float
                           ) -> list[Effect]:
        """One heartbeat round: ``results[peer]`` is the 200 reply body, or None."""
        out: list[Effect] = []
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
                    out.append(WakeOutbox(p))
                else:
                    out += self._drop_for(p, "heartbeat failed" if reply is None else "inactive")
        any_ok = any(results.get(p) is not None for p in self.peers)
        if self.peers and not any_ok and self.state != "inactive":
            self.sync = None
            out += self._set_state("inactive", "no peer answered a heartbeat")
        elif self.state == "inactive" and any_ok:
            if "skip-sync" in self.bugs:
                out += self._set_state("active", "peer reachable again, sync skipped")
            else:
                out += self._set_state("sync", "peer reachable again")
        if self.state == "sync" and self.sync is None:
            out += self._pick_sync_source(now)
        return out

    def _set_state(self, state: str, reason: str) -> list[Effect]:
        if state == self.state:
            return []
        self.state = state
        out: list[Effect] = [Emit("state", {"state": state, "reason": reason})]
        if state in ("active", "inactive"):
            out += [Send(p, NodeNotice(self.me, state == "active")) for p in self.active_peers()]
        return out

    def on_node_notice(self, hop: str, n: NodeNotice, now: float) -> list[Effect]:
        self.peer_state[hop] = "active" if n.active else "inactive"
        if self.peer_up.get(hop) == n.active:
            return []
        self.peer_up[hop] = n.active
        out: list[Effect] = [Emit("peer", {"peer": hop, "up": n.active, "state": "notice"})]
        return out + ([WakeOutbox(hop)] if n.active else self._drop_for(hop, "peer said inactive"))

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
        self.sync = SyncState(source, reason, now)
        return [Emit("sync-start", {"source": source, "reason": reason}),
                Send(source, SyncRequest(self.me)),
                SetTimer(("sync", now), now + self.cfg.sync_timeout_s)]

    def on_sync_request(self, hop: str, now: float) -> list[Effect]:
        """A peer asks for our whole store: stream it in batches, the last one complete."""
        if self.state != "active":
            raise Unavailable(f"node {self.me} is {self.state}; sync from an active node")
        items = self.store.items()
        n = self.cfg.sync_batch
        chunks = [items[i:i + n] for i in range(0, len(items), n)] or [[]]
        sid = f"{self.me}-{self.counter + 1}"
        msgs = []
        for i, chunk in enumerate(chunks):
            c, reset = self._next_counter()
            msgs.append(SyncBatch(self.me, c, reset, i == len(chunks) - 1, sid, tuple(chunk)))
        self.store.save_counters(self._counter_rows(self.me))
        return [Emit("sync-serve", {"to": hop, "keys": len(items), "batches": len(msgs)}),
                SendSeq(hop, tuple(msgs), self.owed_gen.get(hop, 0))]

    def on_sync_served(self, to: str, gen: int) -> None:
        """Every batch of a sync reached ``to``: we owe it nothing dropped before the snapshot
        (unless more was dropped since)."""
        if self.owed_gen.get(to, 0) == gen:
            self.store.clear_owed(to)

    def on_sync_batch(self, hop: str, b: SyncBatch, now: float) -> list[Effect]:
        if self.state == "inactive":
            raise Unavailable(f"node {self.me} is inactive")
        self._seen(b.source, b.counter, b.reset)  # addressed to us alone: not propagated
        changed = self.store.apply_items(list(b.items))
        self.store.save_counters(self._counter_rows(b.source))
        s = self.sync
        out: list[Effect] = []
        if changed:
            out += self._learned_by_sync(hop)
        if s is not None and s.source == hop:
            s.batches += 1
            s.changed += changed
        if b.complete and s is not None and s.source == hop:
            self.sync = None
            out.append(Emit("sync-done", {"source": hop, "batches": s.batches,
                                          "changed": s.changed, "reason": s.reason,
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
            self.store.owe(others)
            for p in others:
                self.owed_gen[p] = self.owed_gen.get(p, 0) + 1
            out += [Emit("owe-sync", {"peer": p, "dropped": 0,
                                      "why": f"learned commits by sync from {source}"})
                    for p in others]
        for key, uid in sorted(self.locks.items()):
            it = self.store.get(key)
            if it is not None and it.uid == uid:
                del self.locks[key]
                self.store.del_lock(key, uid)
                out.append(Emit("release", {"uid": uid, "key": key, "why": "committed (sync)"}))
        return out

    def on_sync_failed(self, to: str, now: float) -> list[Effect]:
        if self.sync is not None and self.sync.source == to:
            s, self.sync = self.sync, None
            return [Emit("sync-abandoned", {"source": to, "batches": s.batches})]
        return []

    # ---- reads and snapshots ----------------------------------------------------------------
    def read(self, key: str) -> Item | None:
        return self.store.get(key)

    def snapshot(self) -> dict[str, Any]:
        return {
            "id": self.me, "state": self.state, "counter": self.counter,
            "peers": {p: {"up": self.peer_up.get(p, False), "reachable": self.reachable.get(p),
                          "state": self.peer_state.get(p)} for p in self.peers},
            "members": sorted(self.members),
            "kv": {i.key: {"value": i.value, "version": i.version, "uid": i.uid, "owner": i.owner}
                   for i in self.store.items()},
            "locks": dict(self.locks),
            "in_flight": sorted(self.tallies),
            "outbox": self.store.outbox_count(),
            "owed": sorted(self.store.owed()),
            "syncing_from": self.sync.source if self.sync else None,
            "bugs": sorted(self.bugs),
        }


def commit_payload(msg: Commit) -> dict[str, Any]:
    """A Commit as an outbox row (the initiator's token travels with it unchanged)."""
    return {"initiator": msg.initiator, "counter": msg.counter, "reset": msg.reset,
            "update": msg.update.to_json(), "version": msg.version, "auth": msg.auth}


def commit_from_payload(d: dict[str, Any]) -> Commit:
    return Commit(d["initiator"], int(d["counter"]), bool(d["reset"]),
                  Update.from_json(d["update"]), int(d["version"]), d.get("auth"))


def item_brief(it: Item | None) -> dict[str, Any] | None:
    return None if it is None else {"value": it.value, "version": it.version, "uid": it.uid}
