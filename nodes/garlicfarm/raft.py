"""Raft consensus as a sans-IO state machine (h11 style), speaking Garlic Farm messages.

The node's core (`nodes.garlicfarm.core.GarlicFarmCore`) owns it: it hands it requests
(with an opaque reply ``token``), responses from peers and timer firings, each with ``now``
(monotonic seconds), and takes back effects **in order**: the common vocabulary
(`nodes.common.effects`: ``Send``, ``SetTimer``, ``Emit``, ``Reply(token, Response | None)``,
``Persist("raft", record)`` with the records below) plus two it consumes itself, ``Apply``
(a committed entry, in index order) and ``InstallState`` (a snapshot replaced the log). A
``Persist`` comes before any effect that depends on it; the runtime makes it durable before
the next send or reply.

Promises kept here:
- randomized election timeouts from the injected ``random.Random``; RequestVote with the
  up-to-date check; a vote is persisted before it is sent;
- AppendEntries: prevLogTerm/prevLogIndex are the header's Last Log Term/Index; the
  response's Next Index tells the leader where to resume (conflict -> first index of the
  conflicting term, never below commit+1); the leader only counts current-term entries
  toward commit (Figure 8);
- ClientRequest (5) is answered with AppendEntriesResponse (4): not leader -> Is Accepted 0,
  Destination = leader id (or -1, ``NO_LEADER``, when no leader is known, as JRaft), Next Index 0, nothing
  appended. Leader -> the entries are appended and the answer is sent **after they commit**:
  Is Accepted 1, Destination = leader, Next Index = index of the last appended entry + 1.
  If leadership is lost before that, ``Reply(token, None)``: the runtime closes the
  connection without an answer (indeterminate). An empty ClientRequest is answered at once
  (Is Accepted = leader?, Next Index = last log index + 1): the leader probe of the
  establishment sequence.
- membership: one change at a time, and only once the leader has committed an entry of its
  own term (its election no-op): the single-server-change rule Ongaro gave on raft-dev (2015)
  after the original algorithm was shown to commit one index twice. A request that comes
  too early is refused (Is Accepted 0), as one that comes while a change is pending is; the
  caller retries. AddServer -> JoinCluster -> SyncLog/InstallSnapshot until caught up ->
  new Configuration entry; AddServer for a current member is refused (as JRaft does).
  RemoveServer -> LeaveCluster to the removed server -> new Configuration entry once it
  accepts (as JRaft does), or directly once ``leave_timeout`` passes without an answer (JRaft
  removes it directly once its retries give up). A configuration takes effect when appended.
  A server not in its configuration, or told to leave (``removed``, durable through
  ``PersistRemoved``), never starts elections; nor does a server invited to join
  (``catching_up``, JRaft's flag) until a committed configuration names it: a server removed
  (the configuration without it never reaches it), then invited back, still finds itself in its stale
  configuration, and its elections would depose every leader while its join is abandoned.
  The leader cannot remove itself.
- compaction via ``compact`` and chunked InstallSnapshot.

Bug modes handled here: ``commit-without-majority`` (the leader commits on its own append);
``unsafe-config-change`` (a new leader starts a configuration change before it has committed
an entry of its term: the original single-server algorithm, which can commit an index twice);
``sync-loop`` (a joiner applies a SyncLog pack at Last Log Index, not + 1: it answers accepted
with nothing applied and the join loops on SyncLog, its log empty); ``no-term-bound`` (the
``MAX_COUNTER`` check below is skipped: a hostile member's term of 2^64-1 is taken as ours and
the node can never campaign again, the wedge the simulator's hostile search found).

Counters a peer sends (term, last log term/index, commit index, entry terms, next index) above
``MAX_COUNTER`` are refused as malformed before they change any state (counted in
``refused``, the request answered by closing): a term of 2^64-1 taken as ours would make the
next election ask for 2^64, which the u64 wire cannot carry (JRaft's Java long overflows at
2^63-1 already).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from nodes.common.effects import Emit, Persist, Reply, Send, SetTimer
from nodes.common.refusals import Refusals
from nodes.garlicfarm.codec import (
    NO_LEADER,
    ClusterConfig,
    ClusterServer,
    CodecError,
    LogEntry,
    LogPack,
    MsgType,
    Request,
    Response,
    SnapshotSyncRequest,
    ValueType,
    decode_cluster_server,
    decode_config,
    decode_log_pack,
    decode_snapshot_sync,
    encode_config,
    encode_log_pack,
    encode_snapshot_sync,
)

#: the store ``Persist`` records of this module go to (nodes.garlicfarm.storage)
RAFT = "raft"

# ---------------------------------------------------------------- records and effects


@dataclass(frozen=True)
class PersistState:
    term: int
    voted_for: int | None


@dataclass(frozen=True)
class PersistAppend:
    entries: tuple[tuple[int, LogEntry], ...]


@dataclass(frozen=True)
class PersistRemoved:
    """The server was told to leave (LeaveCluster) or invited back (JoinCluster): kept so a
    removed server does not campaign after a restart."""

    removed: bool


@dataclass(frozen=True)
class PersistTruncate:
    from_index: int


@dataclass(frozen=True)
class PersistSnapshot:
    last_index: int
    last_term: int
    config: ClusterConfig
    data: bytes
    remaining: tuple[tuple[int, LogEntry], ...]


@dataclass(frozen=True)
class Apply:
    index: int
    entry: LogEntry


@dataclass(frozen=True)
class InstallState:
    last_index: int
    last_term: int
    data: bytes


Record = PersistState | PersistAppend | PersistTruncate | PersistSnapshot | PersistRemoved
Effect = Send | Reply | SetTimer | Persist | Apply | InstallState | Emit


class Role(StrEnum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"


#: the members the per-message paths compare with, bound once (an enum member read through
#: its class costs several times a global's look-up, on every heartbeat and its answer)
_LEADER, _FOLLOWER = Role.LEADER, Role.FOLLOWER
_AE_REQUEST, _AE_RESPONSE = MsgType.APPEND_ENTRIES_REQUEST, MsgType.APPEND_ENTRIES_RESPONSE
_RV_RESPONSE = MsgType.REQUEST_VOTE_RESPONSE


@dataclass
class Snapshot:
    last_index: int = 0
    last_term: int = 0
    config: ClusterConfig | None = None
    data: bytes = b""


@dataclass
class StoredState:
    """What storage hands the core at start: hard state, snapshot, entries after it."""

    term: int = 0
    voted_for: int | None = None
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: list[LogEntry] = field(default_factory=list)
    removed: bool = False


#: the largest term or index a peer may send: JRaft's Java long (2^63-1) less 2^32 of headroom
#: for our own increments (elections, appends), so nothing we derive overflows either wire
MAX_COUNTER = 2**63 - 1 - 2**32


def _out_of_range(msg: Request | Response) -> str | None:
    """The first counter of ``msg`` above ``MAX_COUNTER``, by name, or None (one comparison
    chain on the hot path; names only for a refusal)."""
    top = MAX_COUNTER
    if isinstance(msg, Response):
        if msg.term <= top and msg.next_index <= top:
            return None
        fields = (("term", msg.term), ("next index", msg.next_index))
    else:
        if (msg.term <= top and msg.last_log_term <= top and msg.last_log_index <= top
                and msg.commit_index <= top and not (msg.entries and max(e.term for e in msg.entries) > top)):
            return None
        fields = (("term", msg.term), ("last log term", msg.last_log_term),
                  ("last log index", msg.last_log_index), ("commit index", msg.commit_index))
    return next((name for name, v in fields if v > top), "entry term")


@dataclass
class Options:
    election_min: float = 0.3
    election_max: float = 0.6
    heartbeat: float = 0.1
    rpc_timeout: float = 1.0
    max_batch: int = 256
    snapshot_chunk: int = 16 * 1024
    join_timeout: float = 15.0
    leave_timeout: float = 5.0


@dataclass
class _Joining:
    id: int
    endpoint: str
    since: float
    stage: str = "join"  # join -> sync


def noop_value(term: int) -> bytes:
    return b'{"noop":%d}' % term


#: request type -> the handler's name (one class-level table, not a dict built per message)
_HANDLERS: dict[MsgType, str] = {
    MsgType.REQUEST_VOTE_REQUEST: "_on_vote",
    MsgType.APPEND_ENTRIES_REQUEST: "_on_append",
    MsgType.CLIENT_REQUEST: "_on_client",
    MsgType.ADD_SERVER_REQUEST: "_on_add_server",
    MsgType.REMOVE_SERVER_REQUEST: "_on_remove_server",
    MsgType.SYNC_LOG_REQUEST: "_on_sync_log",
    MsgType.JOIN_CLUSTER_REQUEST: "_on_join",
    MsgType.LEAVE_CLUSTER_REQUEST: "_on_leave",
    MsgType.INSTALL_SNAPSHOT_REQUEST: "_on_install_snapshot",
}


class Raft:
    def __init__(
        self,
        me: int,
        bootstrap: dict[int, str],
        stored: StoredState,
        rng: random.Random,
        options: Options | None = None,
        bugs: frozenset[str] = frozenset(),
    ) -> None:
        self.me = me
        self.rng = rng
        self.opt = options or Options()
        self.bugs = bugs
        #: False only under bug ``no-term-bound``: a peer's counters are taken as sent
        self.bounded = "no-term-bound" not in bugs
        self.bootstrap = dict(bootstrap)
        self.term = stored.term
        self.voted_for = stored.voted_for
        self.snap = stored.snapshot
        self.log: list[LogEntry] = list(stored.entries)
        self.role = Role.FOLLOWER
        self.leader: int | None = None
        self.commit = self.snap.last_index
        self.applied = self.snap.last_index
        self.servers: dict[int, str] = {}
        self.config_index = 0
        #: errors the core survived, for the runtime to log and journal (``take_errors``)
        self.errors: list[tuple[str, str]] = []
        self._undecodable: set[int] = set()
        self._recompute_config()
        self.election_at = 0.0
        self.last_leader_contact = -1e18
        self.votes: set[int] = set()
        #: peers that answered this term's RequestVote in this term, yes or no. A no given in
        #: our term is final for it (the peer voted for another, or our log is behind its), so
        #: they are not asked again; a no from an older term (the peer still hears a leader)
        #: is not an answer to this term and is asked again
        self.answered: set[int] = set()
        self.next_index: dict[int, int] = {}
        self.match_index: dict[int, int] = {}
        self.inflight: dict[int, float] = {}
        self.snap_send: dict[int, tuple[int, int, bool]] = {}  # peer -> (snap index, offset, done sent)
        self.pending: dict[int, tuple[Any, int]] = {}
        self.joining: _Joining | None = None
        #: servers asked to leave -> (since, LeaveCluster last sent): LeaveCluster first, the
        #: configuration without them once they answer
        self.leaving: dict[int, tuple[float, float]] = {}
        self.removed = stored.removed
        #: invited to join (JoinCluster) and no committed configuration names it yet
        self.catching_up = False
        self._snap_rx: tuple[int, bytearray] | None = None
        self._last_role_event: tuple | None = None
        #: peers' messages refused as malformed, by reason (``status()["refused"]``)
        self.refused = Refusals()

    # ------------------------------------------------------------ log helpers

    @property
    def last_index(self) -> int:
        return self.snap.last_index + len(self.log)

    def term_at(self, i: int) -> int | None:
        if i == 0:
            return 0
        base = self.snap.last_index
        if i == base:
            return self.snap.last_term
        if base < i <= base + len(self.log):
            return self.log[i - base - 1].term
        return None

    def entry(self, i: int) -> LogEntry:
        return self.log[i - self.snap.last_index - 1]

    @property
    def last_term(self) -> int:
        return self.term_at(self.last_index) or 0

    def take_errors(self) -> list[tuple[str, str]]:
        """``(where, error)`` for each error since the last call; the membership a skipped
        configuration entry held is unknown, so the runtime journals it as lost evidence."""
        out, self.errors = self.errors, []
        return out

    def _recompute_config(self) -> None:
        for k in range(len(self.log) - 1, -1, -1):
            e = self.log[k]
            if e.vtype == ValueType.CONFIGURATION:
                try:
                    cfg = decode_config(e.value)
                except CodecError as err:
                    index = self.snap.last_index + k + 1
                    if index not in self._undecodable:  # once per entry, not per recompute
                        self._undecodable.add(index)
                        self.errors.append(("configuration entry undecodable",
                                            f"index {index}: {err}"))
                    continue
                self.servers = {s.id: s.endpoint or "" for s in cfg.servers}
                self.config_index = self.snap.last_index + k + 1
                return
        if self.snap.config is not None:
            self.servers = {s.id: s.endpoint or "" for s in self.snap.config.servers}
            self.config_index = self.snap.last_index
        else:
            self.servers = dict(self.bootstrap)
            self.config_index = 0

    def config_at(self, index: int) -> ClusterConfig:
        for i in range(min(index, self.last_index), self.snap.last_index, -1):
            e = self.entry(i)
            if e.vtype == ValueType.CONFIGURATION:
                return decode_config(e.value)
        if self.snap.config is not None:
            return self.snap.config
        return self._make_config(self.bootstrap, 0)

    def _make_config(self, servers: dict[int, str], index: int) -> ClusterConfig:
        """The configuration at log ``index``; its Last Log Index is the log index of the
        configuration before it, as JRaft's ``ClusterConfiguration`` records it (0 for the first)."""
        if index > self.config_index:
            prev = self.config_index  # a new configuration follows the current one
        elif index == 0 or self.config_index == 0:
            prev = 0
        else:  # restating the current configuration: keep the predecessor it recorded
            prev = self.config_at(self.config_index).last_log_index
        return ClusterConfig(index, prev, tuple(ClusterServer(i, ep) for i, ep in sorted(servers.items())))

    def endpoint_of(self, sid: int) -> str | None:
        if sid in self.servers:
            return self.servers[sid]
        if self.joining and self.joining.id == sid:
            return self.joining.endpoint
        return None

    @property
    def voters(self) -> set[int]:
        return set(self.servers)

    def _majority(self) -> int:
        return len(self.servers) // 2 + 1  # the voters, without building their set

    def config_change_pending(self) -> bool:
        return self.config_index > self.commit

    def may_change_config(self) -> bool:
        """A leader starts a configuration change only with none pending and an entry of its
        own term committed (``unsafe-config-change``: without the latter)."""
        if self.joining or self.leaving or self.config_change_pending():
            return False
        return "unsafe-config-change" in self.bugs or self.term_at(self.commit) == self.term

    # ------------------------------------------------------------ effects helpers

    def _reset_election(self, now: float) -> list[Effect]:
        self.election_at = now + self.rng.uniform(self.opt.election_min, self.opt.election_max)
        return [SetTimer("election", self.election_at)]

    def _role_event(self) -> list[Effect]:
        key = (self.role, self.term, self.leader)
        if key == self._last_role_event:
            return []
        self._last_role_event = key
        return [Emit("role", {"role": self.role.value, "term": self.term, "leader": self.leader})]

    def _append_local(self, entries: list[LogEntry]) -> list[Effect]:
        first = self.last_index + 1
        self.log.extend(entries)
        if any(e.vtype == ValueType.CONFIGURATION for e in entries):
            self._recompute_config()
        return [Persist(RAFT, PersistAppend(tuple((first + k, e) for k, e in enumerate(entries))))]

    def _truncate(self, from_index: int) -> list[Effect]:
        del self.log[from_index - self.snap.last_index - 1 :]
        self._recompute_config()
        return [Persist(RAFT, PersistTruncate(from_index))]

    def _merge_entries(self, start: int, entries: list[LogEntry]) -> list[Effect]:
        """Raft's receiver rule for entries placed at ``start``: skip those we already hold,
        truncate at the first conflicting term, append the rest."""
        for k, e in enumerate(entries):
            i = start + k
            if i <= self.last_index:
                if self.term_at(i) == e.term:
                    continue
                out = self._truncate(i)
            else:
                out = []
            return out + self._append_local(entries[k:])
        return []

    def _set_commit(self, c: int) -> list[Effect]:
        c = min(c, self.last_index)
        if c <= self.commit:
            return []
        self.commit = c
        out: list[Effect] = []
        while self.applied < self.commit:
            self.applied += 1
            out.append(Apply(self.applied, self.entry(self.applied)))
        if self.catching_up and self.me in self.config_at(self.commit).ids():
            self.catching_up = False
            if self.removed:
                self.removed = False
                out.append(Persist(RAFT, PersistRemoved(False)))
        if self.role == Role.LEADER and self.pending:
            for idx in sorted(i for i in self.pending if i <= self.commit):
                token, t = self.pending.pop(idx)
                ok = self.term_at(idx) == t
                out.append(Reply(token, self._client_resp(True, idx + 1) if ok else None))
        return out

    def _client_resp(self, accepted: bool, next_index: int, t: MsgType = MsgType.APPEND_ENTRIES_RESPONSE) -> Response:
        # JRaft answers Destination -1 when it knows no leader; our own id would read as "I lead".
        dest = self.leader if self.leader is not None else NO_LEADER
        return Response(t, self.me, dest, self.term, next_index, accepted)

    def _step_down(self, term: int, leader: int | None, now: float) -> list[Effect]:
        out: list[Effect] = []
        if term > self.term:
            self.term = term
            self.voted_for = None
            out.append(Persist(RAFT, PersistState(self.term, None)))
        if self.role == Role.LEADER:
            for _idx, (token, _t) in sorted(self.pending.items()):
                out.append(Reply(token, None))
            self.pending.clear()
            self.joining = None
            self.leaving.clear()
        self.role = Role.FOLLOWER
        self.leader = leader
        return out + self._role_event()

    # ------------------------------------------------------------ entry points

    def start(self, now: float) -> list[Effect]:
        return self._role_event() + self._reset_election(now)

    def can_elect(self) -> bool:
        return self.me in self.servers and not self.removed and not self.catching_up

    def on_timer(self, name: str, now: float) -> list[Effect]:
        if name == "election":
            if self.role == _LEADER or now < self.election_at:
                return []
            if not self.can_elect():
                return self._reset_election(now)
            return self._start_election(now)
        if name == "heartbeat" and self.role == Role.CANDIDATE:
            # retry RequestVote to peers that have not answered (Raft: candidates retry). Not
            # to one that said no: the link to a peer carries one request at a time, so a
            # pointless retry in flight when our next term starts holds that term's
            # RequestVote back a round trip, and under latency the other candidate's timer
            # fires first and the vote splits again (docs/garlicfarm.md, "Latency")
            out = []
            for p in self._targets():
                sent = self.inflight.get(p)
                if p not in self.answered and (sent is None or now - sent >= self.opt.heartbeat):
                    out.append(self._vote_request(p, now))
            return out + [SetTimer("heartbeat", now + self.opt.heartbeat)]
        if name == "heartbeat" and self.role == _LEADER:
            out: list[Effect] = []
            for p in self._targets():
                sent = self.inflight.get(p)
                if sent is None or now - sent > self.opt.rpc_timeout:
                    out += self._replicate(p, now)
            if self.joining and now - self.joining.since > self.opt.join_timeout:
                out.append(Emit("join-abandoned", {"server": self.joining.id}))
                self.joining = None
            for sid, (since, sent) in list(self.leaving.items()):
                if now - since > self.opt.leave_timeout:
                    out += self._finish_leave(sid, now, answered=False)
                elif now - sent > self.opt.rpc_timeout:
                    out += self._send_leave(sid, now)
            out.append(SetTimer("heartbeat", now + self.opt.heartbeat))
            return out
        return []

    def _targets(self) -> list[int]:
        t = [p for p in sorted(self.voters) if p != self.me]
        return t

    def _start_election(self, now: float) -> list[Effect]:
        self.term += 1
        self.voted_for = self.me
        self.role = Role.CANDIDATE
        self.leader = None
        self.votes = {self.me}
        self.answered = set()
        self.inflight.clear()
        out: list[Effect] = [Persist(RAFT, PersistState(self.term, self.me))]
        out += self._role_event()
        out.append(Emit("vote", {"term": self.term, "candidate": self.me, "granted": True}))
        out += self._reset_election(now)
        if len(self.votes) >= self._majority():
            return out + self._become_leader(now)
        for p in self._targets():
            out.append(self._vote_request(p, now))
        return out + [SetTimer("heartbeat", now + self.opt.heartbeat)]

    def _vote_request(self, p: int, now: float) -> Send:
        self.inflight[p] = now
        return Send(p, Request(MsgType.REQUEST_VOTE_REQUEST, self.me, p, self.term, self.last_term, self.last_index, self.commit))

    def _become_leader(self, now: float) -> list[Effect]:
        self.role = Role.LEADER
        self.leader = self.me
        self.next_index = {p: self.last_index + 1 for p in self.voters}
        self.match_index = {p: 0 for p in self.voters}
        self.inflight.clear()
        self.snap_send.clear()
        out = self._role_event() + [self._leader_log()]
        out += self._append_local([LogEntry(self.term, ValueType.APPLICATION, noop_value(self.term))])
        out += self._advance_commit()
        for p in self._targets():
            out += self._replicate(p, now)
        out.append(SetTimer("heartbeat", now + self.opt.heartbeat))
        return out

    def _leader_log(self) -> Emit:
        """The log a new leader starts from, as term runs ``[first index, term]``: with Log
        Matching, enough for checkers.raft.leader_completeness to tell whether it holds an
        entry committed in an earlier term."""
        runs: list[list[int]] = []
        for k, e in enumerate(self.log):
            if not runs or runs[-1][1] != e.term:
                runs.append([self.snap.last_index + k + 1, e.term])
        return Emit("leader-log", {"term": self.term, "last_index": self.last_index,
                                   "snapshot_index": self.snap.last_index, "runs": runs})

    def _append_config(self, servers: dict[int, str], now: float) -> list[Effect]:
        """Append (and start replicating) a configuration entry; journal what the leader knew
        then, for checkers.raft.membership_safety."""
        idx = self.last_index + 1
        out: list[Effect] = [Emit("config-change", {
            "index": idx, "term": self.term, "servers": sorted(servers),
            "prev_config_index": self.config_index, "commit": self.commit,
            "commit_term": self.term_at(self.commit) or 0})]
        out += self._append_local([LogEntry(self.term, ValueType.CONFIGURATION, encode_config(self._make_config(servers, idx)))])
        out += self._advance_commit()
        for p in self._targets():
            if p not in self.inflight:
                out += self._replicate(p, now)
        return out

    # ------------------------------------------------------------ replication (leader)

    def _replicate(self, p: int, now: float) -> list[Effect]:
        if self.joining and p == self.joining.id and p not in self.servers:
            return self._sync_joining(now)
        ni = self.next_index.get(p)
        if ni is None:
            ni = self.next_index[p] = self.last_index + 1
        if p not in self.match_index:
            self.match_index[p] = 0
        self.inflight[p] = now
        base = self.snap.last_index
        if ni <= base:
            return [self._snapshot_chunk(p)]
        prev = ni - 1
        # prev is within the log here (or the snapshot's own index): its term, read directly
        log = self.log
        prev_term = (0 if prev == 0 else self.snap.last_term if prev == base
                     else log[prev - base - 1].term if prev - base <= len(log) else 0)
        entries = tuple(log[prev - base : prev - base + self.opt.max_batch]) if prev - base < len(log) else ()
        return [Send(p, Request(_AE_REQUEST, self.me, p, self.term, prev_term, prev, self.commit, entries))]

    def _snapshot_chunk(self, p: int) -> Send:
        si, off, _ = self.snap_send.get(p, (self.snap.last_index, 0, False))
        if si != self.snap.last_index:
            off = 0
        data = self.snap.data[off : off + self.opt.snapshot_chunk]
        done = off + len(data) >= len(self.snap.data)
        self.snap_send[p] = (self.snap.last_index, off, done)
        cfg = self.snap.config or self._make_config(self.bootstrap, 0)
        ssr = SnapshotSyncRequest(self.snap.last_index, self.snap.last_term, cfg, off, data, done)
        return Send(p, Request(MsgType.INSTALL_SNAPSHOT_REQUEST, self.me, p, self.term, self.snap.last_term,
                               self.snap.last_index, self.commit, (LogEntry(self.term, ValueType.SNAPSHOT_SYNC_REQUEST, encode_snapshot_sync(ssr)),)))

    def _sync_joining(self, now: float) -> list[Effect]:
        j = self.joining
        assert j is not None
        self.inflight[j.id] = now
        if j.stage == "join":
            cfg = self._make_config(self.servers, self.config_index)
            return [Send(j.id, Request(MsgType.JOIN_CLUSTER_REQUEST, self.me, j.id, self.term, self.last_term, self.last_index, self.commit,
                                       (LogEntry(self.term, ValueType.CONFIGURATION, encode_config(cfg)),)))]
        ni = self.next_index.get(j.id, 1)
        if ni <= self.snap.last_index:
            return [self._snapshot_chunk(j.id)]
        first = ni - self.snap.last_index - 1
        entries = tuple(self.log[first : first + self.opt.max_batch])
        # JRaft: the pack's offsets are positions in the log's byte stream (here: since the
        # snapshot), the header's Last Log Index is the index *before* the first packed entry
        # and its Last Log Term is 0.
        base = sum(9 + len(e.value) for e in self.log[:first])
        pack = encode_log_pack(LogPack(entries, base))
        return [Send(j.id, Request(MsgType.SYNC_LOG_REQUEST, self.me, j.id, self.term, 0, ni - 1, self.commit,
                                   (LogEntry(self.term, ValueType.LOG_PACK, pack),)))]

    def _advance_commit(self) -> list[Effect]:
        if self.role != _LEADER:
            return []
        if "commit-without-majority" in self.bugs:
            return self._set_commit(self.last_index)
        last = self.last_index
        if last <= self.commit:
            return []  # a heartbeat's answer: nothing new to count
        maj = self._majority()
        me, match = self.me, self.match_index
        for n in range(last, self.commit, -1):
            if self.term_at(n) != self.term:
                break
            count = sum(1 for v in self.servers if (last if v == me else match.get(v, 0)) >= n)
            if count >= maj:
                return self._set_commit(n)
        return []

    def _maybe_finish_join(self, now: float) -> list[Effect]:
        j = self.joining
        if j is None or self.next_index.get(j.id, 0) <= self.last_index or self.config_change_pending():
            return []
        self.joining = None
        servers = dict(self.servers)
        servers[j.id] = j.endpoint
        idx = self.last_index + 1
        out: list[Effect] = [Emit("join-complete", {"server": j.id, "index": idx})]
        self.match_index.setdefault(j.id, self.next_index[j.id] - 1)
        return out + self._append_config(servers, now)

    def _send_leave(self, sid: int, now: float) -> list[Effect]:
        self.leaving[sid] = (self.leaving[sid][0], now)
        return [Send(sid, Request(MsgType.LEAVE_CLUSTER_REQUEST, self.me, sid, self.term, self.last_term, self.last_index, self.commit))]

    def _finish_leave(self, sid: int, now: float, answered: bool) -> list[Effect]:
        """``sid`` accepted LeaveCluster (or never answered it): append the configuration
        without it, as JRaft's removeServerFromCluster does."""
        del self.leaving[sid]
        servers = {k: v for k, v in self.servers.items() if k != sid}
        idx = self.last_index + 1
        self.next_index.pop(sid, None)
        self.match_index.pop(sid, None)
        return [Emit("leave-complete", {"server": sid, "index": idx, "answered": answered})] + self._append_config(servers, now)

    # ------------------------------------------------------------ responses

    def on_response(self, resp: Response, now: float) -> list[Effect]:
        bad = _out_of_range(resp) if self.bounded else None
        if bad:
            return self._refuse(bad, resp, now)
        p = resp.source
        self.inflight.pop(p, None)
        if resp.term > self.term:
            return self._step_down(resp.term, None, now) + self._reset_election(now)
        t = resp.type
        if t == _RV_RESPONSE:
            if self.role == Role.CANDIDATE and resp.term == self.term:
                self.answered.add(p)
                if resp.accepted:
                    self.votes.add(p)
                    if len(self.votes & self.voters) >= self._majority():
                        return self._become_leader(now)
            return []
        if self.role != _LEADER or resp.term != self.term:
            return []
        if t == _AE_RESPONSE:
            last = self.last_index
            if resp.accepted:
                ni = min(resp.next_index, last + 1)
                self.match_index[p] = m = max(self.match_index.get(p, 0), ni - 1)
                self.next_index[p] = nxt = max(ni, m + 1)
                out = self._advance_commit()
                if p in self.servers and nxt <= last:
                    out += self._replicate(p, now)
                return out
            self.next_index[p] = max(1, min(resp.next_index or 1, last + 1, self.next_index.get(p, 1)))
            if self.next_index[p] <= self.match_index.get(p, 0):
                self.next_index[p] = self.match_index[p] + 1
            return self._replicate(p, now) if p in self.servers else []
        if t == MsgType.INSTALL_SNAPSHOT_RESPONSE:
            si, off, done_sent = self.snap_send.get(p, (self.snap.last_index, 0, False))
            # JRaft: Next Index is a byte offset (offset + chunk length); the transfer is done
            # when it reaches the snapshot's size. It is never a log index: the follower then
            # holds exactly the snapshot's last index, which is all the match index may claim.
            size = len(self.snap.data) if si == self.snap.last_index else None
            if resp.accepted and done_sent and size is not None and resp.next_index >= size:
                self.snap_send.pop(p, None)
                self.match_index[p] = max(self.match_index.get(p, 0), si)
                self.next_index[p] = min(self.match_index[p] + 1, self.last_index + 1)
            elif si != self.snap.last_index:  # compacted again meanwhile: send the new snapshot
                self.snap_send[p] = (self.snap.last_index, 0, False)
            else:
                nxt = resp.next_index if resp.next_index <= len(self.snap.data) else 0
                self.snap_send[p] = (si, nxt, False)
            out = self._advance_commit() if p in self.servers else []
            if self.joining and p == self.joining.id:
                out += self._maybe_finish_join(now)
                if self.joining:
                    out += self._sync_joining(now)
                return out
            if p in self.servers and self.next_index.get(p, 0) <= self.last_index:
                out += self._replicate(p, now)
            return out
        if t == MsgType.JOIN_CLUSTER_RESPONSE and self.joining and p == self.joining.id:
            if not resp.accepted:
                self.joining = None
                return [Emit("join-refused", {"server": p})]
            self.joining.stage = "sync"
            # JRaft ignores the joiner's Next Index and syncs from index 1 (a JRaft joiner
            # answers 2 with an empty log; trusting it would skip entry 1).
            self.next_index[p] = 1
            return self._maybe_finish_join(now) + (self._sync_joining(now) if self.joining else [])
        if t == MsgType.SYNC_LOG_RESPONSE and self.joining and p == self.joining.id:
            self.next_index[p] = max(1, resp.next_index)
            return self._maybe_finish_join(now) + (self._sync_joining(now) if self.joining else [])
        if t == MsgType.LEAVE_CLUSTER_RESPONSE and p in self.leaving and resp.accepted:
            return self._finish_leave(p, now, answered=True)
        return []

    # ------------------------------------------------------------ requests

    def propose(self, value: bytes, token: Any, now: float) -> list[Effect]:
        """Submit one Application entry as a local ClientRequest."""
        req = Request(MsgType.CLIENT_REQUEST, 0, self.me, 0, entries=(LogEntry(0, ValueType.APPLICATION, value),))
        return self.on_request(req, token, now)

    def on_request(self, req: Request, token: Any, now: float) -> list[Effect]:
        bad = _out_of_range(req) if self.bounded else None
        if bad:
            return [Reply(token, None)] + self._refuse(bad, req, now)
        return getattr(self, _HANDLERS[req.type])(req, token, now)

    def _refuse(self, field_name: str, msg: Request | Response, now: float) -> list[Effect]:
        """Count a message with a counter above ``MAX_COUNTER``; journal the first per window."""
        fields = self.refused.note("counter-out-of-range", now, field=field_name,
                                   message=msg.type.name, source=msg.source)
        return [Emit("refused", fields)] if fields else []

    def _resp(self, t: MsgType, to: int, next_index: int, accepted: bool) -> Response:
        return Response(t, self.me, to, self.term, next_index, accepted)

    def _on_vote(self, req: Request, token: Any, now: float) -> list[Effect]:
        out: list[Effect] = []
        heard_leader = self.leader is not None and self.leader != req.source and now - self.last_leader_contact < self.opt.election_min
        if req.term > self.term and not heard_leader:
            if self.role == Role.LEADER:
                # a leader's election timer lapsed unarmed: deposed by a vote it may not
                # grant (its log is longer), it must campaign again, or nobody with the
                # longest log ever does and the cluster has no leader for good
                out += self._reset_election(now)
            out += self._step_down(req.term, None, now)
        up_to_date = (req.last_log_term, req.last_log_index) >= (self.last_term, self.last_index)
        granted = (
            req.term == self.term
            and not heard_leader
            and self.voted_for in (None, req.source)
            and up_to_date
            and self.role != Role.LEADER
        )
        if granted:
            if self.voted_for != req.source:
                self.voted_for = req.source
                out.append(Persist(RAFT, PersistState(self.term, self.voted_for)))
            out += self._reset_election(now)
        out.append(Emit("vote", {"term": req.term, "candidate": req.source, "granted": granted}))
        out.append(Reply(token, self._resp(MsgType.REQUEST_VOTE_RESPONSE, req.source, 0, granted)))
        return out

    def _accept_leader(self, req: Request, now: float) -> list[Effect]:
        self.last_leader_contact = now
        if req.term > self.term or self.role != _FOLLOWER or self.leader != req.source:
            out = self._step_down(req.term, req.source, now)
            out += self._reset_election(now)
            return out
        return self._reset_election(now)

    def _on_append(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = _AE_RESPONSE
        if req.term < self.term:
            return [Reply(token, self._resp(T, req.source, self.last_index + 1, False))]
        out = self._accept_leader(req, now)
        prev = req.last_log_index
        entries = list(req.entries) if req.entries else []
        last = self.last_index
        if prev > last:
            return out + [Reply(token, self._resp(T, req.source, last + 1, False))]
        if prev < self.snap.last_index:
            skip = self.snap.last_index - prev
            entries = entries[skip:]
            prev = self.snap.last_index
        elif self.term_at(prev) != req.last_log_term:
            t = self.term_at(prev)
            i = prev
            floor = max(self.commit, self.snap.last_index) + 1
            while i > floor and self.term_at(i - 1) == t:
                i -= 1
            return out + [Reply(token, self._resp(T, req.source, max(i, floor), False))]
        if entries:
            out += self._merge_entries(prev + 1, entries)
        new_last = prev + len(entries)
        if req.commit_index > self.commit:  # `_set_commit` does nothing otherwise
            out += self._set_commit(min(req.commit_index, new_last))
        out.append(Reply(token, self._resp(T, req.source, new_last + 1, True)))
        return out

    def _on_client(self, req: Request, token: Any, now: float) -> list[Effect]:
        if self.role != Role.LEADER:
            return [Reply(token, self._client_resp(False, 0))]
        if not req.entries:
            return [Reply(token, self._client_resp(True, self.last_index + 1))]
        out = self._append_local([LogEntry(self.term, ValueType.APPLICATION, e.value) for e in req.entries])
        self.pending[self.last_index] = (token, self.term)
        out += self._advance_commit()
        for p in self._targets():
            if p not in self.inflight:
                out += self._replicate(p, now)
        return out

    def _on_add_server(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.ADD_SERVER_RESPONSE
        try:
            s = decode_cluster_server(req.entries[0].value)
        except CodecError:
            return [Reply(token, self._client_resp(False, 0, T))]
        if self.role != Role.LEADER:
            return [Reply(token, self._client_resp(False, 0, T))]
        if s.id in self.servers or not s.endpoint or not self.may_change_config():
            return [Reply(token, self._client_resp(False, 0, T))]
        self.joining = _Joining(s.id, s.endpoint, now)
        out: list[Effect] = [Emit("join-start", {"server": s.id, "endpoint": s.endpoint}),
                             Reply(token, self._client_resp(True, self.last_index + 1, T))]
        return out + self._sync_joining(now)

    def _on_remove_server(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.REMOVE_SERVER_RESPONSE
        try:
            sid = decode_cluster_server(req.entries[0].value).id
        except CodecError:
            return [Reply(token, self._client_resp(False, 0, T))]
        if self.role != Role.LEADER or sid == self.me:
            return [Reply(token, self._client_resp(False, 0, T))]
        if sid not in self.servers:
            return [Reply(token, self._client_resp(True, self.last_index + 1, T))]
        if not self.may_change_config():
            return [Reply(token, self._client_resp(False, 0, T))]
        self.leaving[sid] = (now, now)
        return [Emit("leave-start", {"server": sid}),
                Reply(token, self._client_resp(True, self.last_index + 1, T))] + self._send_leave(sid, now)

    def _on_join(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.JOIN_CLUSTER_RESPONSE
        if req.term < self.term:
            return [Reply(token, self._resp(T, req.source, self.last_index + 1, False))]
        out = self._accept_leader(req, now)
        try:
            cfg = decode_config(req.entries[0].value)
        except CodecError:
            return out + [Reply(token, self._resp(T, req.source, 0, False))]
        if self.me not in self.servers:
            self.bootstrap = {s.id: s.endpoint or "" for s in cfg.servers}
            self._recompute_config()
        self.catching_up = self.me not in cfg.ids()
        if self.removed and not self.catching_up:  # else kept (durably) until it is named
            self.removed = False
            out.append(Persist(RAFT, PersistRemoved(False)))
        out.append(Emit("join-invited", {"leader": req.source, "servers": cfg.ids()}))
        return out + [Reply(token, self._resp(T, req.source, self.last_index + 1, True))]

    def _on_sync_log(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.SYNC_LOG_RESPONSE
        if req.term < self.term:
            return [Reply(token, self._resp(T, req.source, self.last_index + 1, False))]
        out = self._accept_leader(req, now)
        # JRaft applies the pack at Last Log Index + 1; bug sync-loop reads that index as the
        # first packed entry's (the old reading): an accepted answer with nothing applied, and
        # the leader sends the same pack again, forever (issue 22's Garlic Farm joiner)
        start = req.last_log_index + (0 if "sync-loop" in self.bugs else 1)
        try:
            pack = decode_log_pack(req.entries[0].value)
        except CodecError:
            return out + [Reply(token, self._resp(T, req.source, self.last_index + 1, False))]
        if start > self.last_index + 1 or start <= self.snap.last_index:
            return out + [Reply(token, self._resp(T, req.source, self.last_index + 1, start <= self.snap.last_index))]
        entries = list(pack.entries)
        out += self._merge_entries(start, entries)
        out += self._set_commit(min(req.commit_index, start + len(entries) - 1))
        return out + [Reply(token, self._resp(T, req.source, self.last_index + 1, True))]

    def _on_leave(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.LEAVE_CLUSTER_RESPONSE
        if req.term < self.term:
            return [Reply(token, self._resp(T, req.source, 0, False))]
        out = self._step_down(req.term, None, now)
        if not self.removed:
            self.removed = True
            out.append(Persist(RAFT, PersistRemoved(True)))
        out.append(Emit("left-cluster", {"leader": req.source, "term": req.term}))
        return out + [Reply(token, self._resp(T, req.source, self.last_index + 1, True))]

    def _on_install_snapshot(self, req: Request, token: Any, now: float) -> list[Effect]:
        T = MsgType.INSTALL_SNAPSHOT_RESPONSE
        if req.term < self.term:
            return [Reply(token, self._resp(T, req.source, 0, False))]
        out = self._accept_leader(req, now)
        try:
            s = decode_snapshot_sync(req.entries[0].value)
        except CodecError:
            return out + [Reply(token, self._resp(T, req.source, 0, False))]
        if s.offset == 0:
            self._snap_rx = (s.last_log_index, bytearray())
        rx = self._snap_rx
        if rx is None or rx[0] != s.last_log_index or len(rx[1]) != s.offset:
            expect = len(rx[1]) if rx is not None and rx[0] == s.last_log_index else 0
            return out + [Reply(token, self._resp(T, req.source, expect, False))]
        rx[1].extend(s.data)
        if not s.done:
            return out + [Reply(token, self._resp(T, req.source, len(rx[1]), True))]
        data = bytes(rx[1])
        self._snap_rx = None
        done_at = len(data)  # JRaft answers every chunk, the last one too, with offset + length
        if s.last_log_index <= self.commit:
            return out + [Reply(token, self._resp(T, req.source, done_at, True))]
        keep: list[LogEntry] = []
        if self.term_at(s.last_log_index) == s.last_log_term and s.last_log_index <= self.last_index:
            keep = self.log[s.last_log_index - self.snap.last_index :]
        self.snap = Snapshot(s.last_log_index, s.last_log_term, s.config, data)
        self.log = keep
        self.commit = self.applied = s.last_log_index
        self._recompute_config()
        if self.catching_up and self.me in self.config_at(self.commit).ids():
            self.catching_up = False
            if self.removed:
                self.removed = False
                out.append(Persist(RAFT, PersistRemoved(False)))
        rem = tuple((s.last_log_index + 1 + k, e) for k, e in enumerate(keep))
        out += [
            Persist(RAFT, PersistSnapshot(s.last_log_index, s.last_log_term, s.config, data, rem)),
            InstallState(s.last_log_index, s.last_log_term, data),
            Emit("snapshot", {"last_index": s.last_log_index, "last_term": s.last_log_term, "installed_from": req.source}),
        ]
        return out + [Reply(token, self._resp(T, req.source, done_at, True))]

    # ------------------------------------------------------------ compaction

    def compact(self, index: int, data: bytes) -> list[Effect]:
        """Replace the log up to ``index`` (<= last applied) by a snapshot holding ``data``."""
        if index <= self.snap.last_index or index > self.applied:
            return []
        cfg = self.config_at(index)
        term = self.term_at(index) or 0
        keep = self.log[index - self.snap.last_index :]
        self.snap = Snapshot(index, term, cfg, data)
        self.log = keep
        self._recompute_config()
        rem = tuple((index + 1 + k, e) for k, e in enumerate(keep))
        return [Persist(RAFT, PersistSnapshot(index, term, cfg, data, rem)),
                Emit("snapshot", {"last_index": index, "last_term": term})]

    # ------------------------------------------------------------ observation

    def status(self) -> dict[str, Any]:
        return {
            "role": self.role.value, "term": self.term, "voted_for": self.voted_for, "leader": self.leader,
            "commit_index": self.commit, "last_applied": self.applied, "last_index": self.last_index,
            "snapshot": {"last_index": self.snap.last_index, "last_term": self.snap.last_term},
            "servers": sorted(self.servers), "removed": self.removed,
            "joining": self.joining.id if self.joining else None,
            "refused": self.refused.snapshot(),
        }
