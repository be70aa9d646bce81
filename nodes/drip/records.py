"""What a DRiP node makes durable: the records of its ``Persist`` effects, and what they add up to.

The core never writes a file: every durable change is one of these records in a
``Persist(STORE, record)`` effect, and a restart hands the core the `Durable` value they add
up to. The node's runtime writes them to SQLite (`nodes.drip.store`); the simulator keeps the
records and folds them with `Durable.apply`, the one definition of what a record means (a unit
test holds the store to it). Records are plain frozen dataclasses.

Records written together, before the next send or reply, are one SQLite transaction: a
commit's counters, data, applied mark, lock release and outbox rows appear together or not at
all.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from nodes.common.fastinit import fast_frozen_init
from nodes.drip.codec import Commit, Item, Update

#: ``Persist.what`` of every DRiP record (one store: ``data_dir/drip.sqlite3``)
STORE = "drip"
#: the counters row of this node's own counter
OWN = "__self__"


@fast_frozen_init
@dataclass(frozen=True)
class Init:
    """The first thing a node writes: a node that finds it restarts (and syncs); one that
    does not starts fresh (active at once)."""


@fast_frozen_init
@dataclass(frozen=True)
class Counters:
    """Saved counters (spec 4.4): ``(node, counter, reset_at, window)``; ``OWN`` is our own
    (window None); a window is the counters remembered of that initiator (nodes.drip.seen)."""

    rows: tuple[tuple[str, int, int | None, str | None], ...]


@fast_frozen_init
@dataclass(frozen=True)
class Members:
    """Mesh members learned (configured, or from heartbeats)."""

    nodes: tuple[str, ...]


@fast_frozen_init
@dataclass(frozen=True)
class Lock:
    """A yes vote in progress: ``key`` is held for update ``uid`` of ``initiator``, taken in
    voting round ``counter`` (the initiator's counter; None: not known, as in a store from
    before rounds were saved): a restarted voter's ``OutcomeQuery`` still names the round."""

    key: str
    uid: str
    initiator: str
    counter: int | None = None


@fast_frozen_init
@dataclass(frozen=True)
class Unlock:
    """The vote for ``uid`` on ``key`` is over (aborted, expired, or committed by sync)."""

    key: str
    uid: str


@fast_frozen_init
@dataclass(frozen=True)
class Queued:
    """One outbox row: ``commit`` still to be delivered to ``peer``."""

    seq: int
    peer: str
    commit: Commit


@fast_frozen_init
@dataclass(frozen=True)
class Applied:
    """A commit applied once: its applied mark, the key if ``item`` is newer, the release of
    its own lock, and its forwarding to peers (outbox rows)."""

    item: Item
    queued: tuple[Queued, ...] = ()


@fast_frozen_init
@dataclass(frozen=True)
class Merged:
    """Sync items merged (each key moves only to a higher ``(version, uid)``)."""

    items: tuple[Item, ...]


@fast_frozen_init
@dataclass(frozen=True)
class Delivered:
    """Outbox row ``seq`` reached ``peer``. The one record the store commits without an
    fsync: losing it to a power cut costs one more (idempotent) delivery, nothing else."""

    peer: str
    seq: int


@fast_frozen_init
@dataclass(frozen=True)
class Dropped:
    """Everything queued for ``peer`` is dropped, and the peer is owed a sync (spec 4.7)."""

    peer: str


@fast_frozen_init
@dataclass(frozen=True)
class Owe:
    """``peers`` are owed a sync (their queued commits stay queued)."""

    peers: tuple[str, ...]


@fast_frozen_init
@dataclass(frozen=True)
class Paid:
    """A full sync reached ``peer``: it is owed nothing any more."""

    peer: str


@fast_frozen_init
@dataclass(frozen=True)
class Fence:
    """The next update of ``key`` takes a version above ``version``: a decommissioned
    initiator may have committed it unseen (`DripCore._initiators_gone`). Durable so that a
    restart does not hand that version to another value."""

    key: str
    version: int


Record = (Init | Counters | Members | Lock | Unlock | Applied | Merged | Delivered | Dropped
          | Owe | Paid | Fence)


def newer(a: Item, b: Item | None) -> bool:
    """Commits order by ``(version, uid)``: a key only moves to a higher pair."""
    return b is None or (a.version, a.uid) > (b.version, b.uid)


#: keys whose values a lean `Durable` still holds (the membership: the core reads it)
KEEP_VALUES = "drip:"


def lean_item(it: Item) -> Item:
    """``it`` without its value, unless it is one of the reserved keys."""
    return it if it.value is None or it.key.startswith(KEEP_VALUES) else replace(it, value=None)


#: update ids a node's runtime keeps in memory of those applied (`AppliedIds`): ~110 B each
APPLIED_RECENT = 65_536
#: ids found not applied that `AppliedIds` remembers (~100 B each): the updates in flight,
#: with room for a burst of forged ones
ABSENT_KEPT = 4_096


class AppliedIds:
    """The update ids applied here, one per commit, for the node's life: what the
    ``revote-applied`` refusal, `_outcome_of`'s "committed" and commit idempotence read.

    Exact, and bounded in memory: the last ``cap`` ids added are kept here (the oldest
    forgotten first), and a miss is answered by ``lookup`` (the node: a primary-key read of
    the store's ``applied`` table, which keeps every id). Before session 45 the node held
    them all in a set loaded whole at start, its largest memory in a long run (one id per
    commit: 23,430 ids after the hostile bench's 10,000 requests, issue 26). Without
    ``lookup`` (the simulator, unit tests: ``Durable()``) every id stays in memory, as then.

    Why a miss may go to the store: an id leaves memory only ``cap`` adds after it came, and
    a group commit (the runtime writes each loop turn's records in one) holds far fewer, so
    every forgotten id is already committed there."""

    __slots__ = ("_ids", "_order", "_absent", "cap", "lookup", "lookups")

    def __init__(self, ids: Iterable[str] = (), cap: int | None = None,
                 lookup: Callable[[str], bool] | None = None) -> None:
        if cap is not None and (lookup is None or cap < 1):
            raise ValueError("a bounded AppliedIds needs a lookup for the ids it forgets")
        self._ids: set[str] = set()
        self._order: deque[str] = deque()
        #: ids ``lookup`` found absent, until they are added (the oldest forgotten first):
        #: a new update's id is asked for at each copy of its voting and at its first
        #: commit, and each miss was a store read (11 per update over 5 nodes, session 51)
        self._absent: OrderedDict[str, None] = OrderedDict()
        self.cap, self.lookup = cap, lookup
        #: misses answered by ``lookup`` (``sizes``: the store reads they cost)
        self.lookups = 0
        for uid in ids:
            self.add(uid)

    def __contains__(self, uid: object) -> bool:
        if uid in self._ids:
            return True
        if self.lookup is None or not isinstance(uid, str) or uid in self._absent:
            return False
        self.lookups += 1
        if self.lookup(uid):
            return True
        self._absent[uid] = None
        if len(self._absent) > ABSENT_KEPT:
            self._absent.popitem(last=False)
        return False

    def add(self, uid: str) -> None:
        """An id applied now (the only way an id becomes applied: `apply` of an `Applied`),
        so an earlier miss remembered for it ends here."""
        if self._absent:
            self._absent.pop(uid, None)
        if uid in self._ids:
            return
        self._ids.add(uid)
        self._order.append(uid)
        if self.cap is not None and len(self._order) > self.cap:
            self._ids.discard(self._order.popleft())

    def __len__(self) -> int:
        """How many are held in memory (all of them without a ``lookup``)."""
        return len(self._order)

    def recent(self) -> Iterator[str]:
        """The ids held in memory, newest first."""
        return reversed(self._order)


@dataclass
class Durable:
    """A node's durable state: what the store loads at start, and what the core keeps
    current as it persists (``apply`` each record it writes)."""

    fresh: bool = True
    counter: int = 0
    counters: dict[str, tuple[int, int | None, str | None]] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    kv: dict[str, Item] = field(default_factory=dict)
    applied: AppliedIds = field(default_factory=AppliedIds)
    locks: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (uid, initiator)
    #: key -> the voting round of its lock, when the `Lock` named one
    lock_rounds: dict[str, int] = field(default_factory=dict)
    outbox: dict[str, dict[int, Queued]] = field(default_factory=dict)  # peer -> seq -> row
    owed: set[str] = field(default_factory=set)
    #: key -> a version its next update must pass (`Fence`)
    fences: dict[str, int] = field(default_factory=dict)
    #: keep only each key's metadata (value None), the values staying in the store (the
    #: node: `Store(lean=True)`); the reserved ``drip:`` keys (membership) keep theirs
    lean: bool = False

    def apply(self, r: Record) -> int:
        """Fold one record in; returns how many keys changed (``Applied``, ``Merged``)."""
        if isinstance(r, Init):
            self.fresh = False
        elif isinstance(r, Counters):
            for n, c, reset, window in r.rows:
                if n == OWN:
                    self.counter = c
                else:
                    self.counters[n] = (c, reset, window)
        elif isinstance(r, Members):
            self.members.update(r.nodes)
        elif isinstance(r, Lock):
            self.locks[r.key] = (r.uid, r.initiator)
            if r.counter is None:
                self.lock_rounds.pop(r.key, None)
            else:
                self.lock_rounds[r.key] = r.counter
        elif isinstance(r, Unlock):
            self._unlock(r.key, r.uid)
        elif isinstance(r, Applied):
            it = r.item
            self.applied.add(it.uid)
            changed = self._merge(it)
            self._unlock(it.key, it.uid)
            for q in r.queued:
                self.outbox.setdefault(q.peer, {})[q.seq] = q
            return changed
        elif isinstance(r, Merged):
            return sum(self._merge(it) for it in r.items)
        elif isinstance(r, Delivered):
            rows = self.outbox.get(r.peer, {})
            rows.pop(r.seq, None)
            if not rows:
                self.outbox.pop(r.peer, None)
        elif isinstance(r, Dropped):
            self.outbox.pop(r.peer, None)
            self.owed.add(r.peer)
        elif isinstance(r, Owe):
            self.owed.update(r.peers)
        elif isinstance(r, Paid):
            self.owed.discard(r.peer)
        elif isinstance(r, Fence):
            self.fences[r.key] = max(r.version, self.fences.get(r.key, 0))
        else:
            raise TypeError(f"not a DRiP record: {r!r}")
        return 0

    def _merge(self, it: Item) -> int:
        if not newer(it, self.kv.get(it.key)):
            return 0
        self.kv[it.key] = lean_item(it) if self.lean else it
        return 1

    def _unlock(self, key: str, uid: str) -> None:
        if self.locks.get(key, (None,))[0] == uid:
            del self.locks[key]
            self.lock_rounds.pop(key, None)

    @classmethod
    def of(cls, records: list[Record]) -> Durable:
        d = cls()
        for r in records:
            d.apply(r)
        return d


def commit_payload(msg: Commit) -> dict[str, Any]:
    """A Commit as an outbox row (the initiator's token travels with it unchanged)."""
    return {"initiator": msg.initiator, "counter": msg.counter, "reset": msg.reset,
            "update": msg.update.to_json(), "version": msg.version, "auth": msg.auth}


def commit_from_payload(d: dict[str, Any]) -> Commit:
    return Commit(d["initiator"], int(d["counter"]), bool(d["reset"]),
                  Update.from_json(d["update"]), int(d["version"]), d.get("auth"))
