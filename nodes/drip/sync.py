"""Node sync (spec 4.6) as sans-IO bookkeeping: which batch comes next, which batch we take.

Why it is its own module: a sync must finish on a store of large values and must not be
started by anyone who was not asked. Our rules (the spec leaves them open):

* **Bounded batches.** The source cuts its store, in key order, into batches of at most
  ``batch_items`` items and ``batch_bytes`` bytes of JSON (one item always fits, whatever its
  size). It builds only the next batch once the previous one was acknowledged, so a sync of
  any store costs one batch of memory per peer on each side.
* **Resumable.** Each batch's last key is the cursor. A sync that stops (timeout, lost
  connection) is asked again *after* that key from the same source, which serves the rest.
  If the source dropped commits for that peer since the sync's first part (the peer flapped
  under load), the peer stays owed a sync when this one ends, so what it missed before the
  cursor still comes (cheaply: see the summary). Before, the source started over from the
  first key, and under load a long sync never finished.
* **Only what the requester lacks.** The request carries a summary of the requester's keys
  after its cursor: the keys in order, cut into ranges of ``RANGE_KEYS`` (more when there
  are more than ``MAX_RANGES`` ranges), each given by its last key and a digest of the
  ``(key, version, uid)`` of every key in it. The source skips a range whose own digest over
  the same key interval is equal. Safe: equal digests mean the same keys at the same
  versions (a 128-bit SHA-256 prefix; a requester that lies only starves itself), so the
  requester lacks nothing there and holds nothing older; any difference (a key missing on
  either side, an older or newer version) changes the digest and the whole range is sent.
  Keys after the last range are always sent. A commit the source takes after the request is
  delivered by the outbox or dropped and owed, as for any part of a sync already sent.
* **Coalesced and rate-limited per peer.** A sync request from a peer being served is
  answered 200 and starts nothing (409 if it names another sync id than the serve's: the
  peer would refuse that serve's batches, so it asks again); a new serve to one peer starts
  at most once per ``min_interval_s`` (else 429).
* **Only what we asked for.** A receiver takes a batch only from the source it asked (after
  that source said it is active), with the sync id of that serve; anything else is refused
  and applies nothing.
* The sync's timer is an *idle* timer: each batch taken restarts it, so a long sync that
  keeps moving is never abandoned, and a stalled one is.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from nodes.drip.codec import Item, SyncBatch

#: a batch's JSON, at most (one larger item still goes, alone)
BATCH_BYTES = 4 * 1024 * 1024
BATCH_ITEMS = 1000
#: keys per summary range (more when the store would need more than MAX_RANGES ranges): a
#: differing range resends all its keys, so small; 10,000 keys -> 313 ranges, ~17 KB
RANGE_KEYS = 32
MAX_RANGES = 4096
#: hex digits of a range digest (128 bits)
DIGEST_HEX = 32

#: a summary: (last key of the range, digest of its keys' (key, version, uid)), in key order;
#: the first range starts after the request's cursor, each next one after the previous last key
Summary = tuple[tuple[str, str], ...]


class Refused(Exception):
    """A sync message we do not take: answered ``status`` and counted under ``reason``."""

    def __init__(self, status: int, reason: str, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class SyncLimits:
    batch_items: int = BATCH_ITEMS
    batch_bytes: int = BATCH_BYTES
    #: a new serve to one peer at most this often
    min_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.batch_items < 1 or self.batch_bytes < 1 or self.min_interval_s < 0:
            raise ValueError("sync limits: batch_items and batch_bytes must be >= 1 and "
                             f"min_interval_s >= 0, not {self}")


def item_bytes(it: Item) -> int:
    """The item's JSON size on the wire (what a batch is bounded by)."""
    return len(json.dumps(it.to_json(), separators=(",", ":")))


def range_digest(items: Iterable[Item]) -> str:
    """The digest of a key range: its items' ``(key, version, uid)`` in key order (no value:
    equal update ids are equal values, and a digest reads no stored value)."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps([it.key, it.version, it.uid], separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()[:DIGEST_HEX]


def summarize(kv: Mapping[str, Item], after: str | None, per: int = RANGE_KEYS) -> Summary:
    """The requester's summary of its keys after ``after`` (module docstring)."""
    keys = sorted(k for k in kv if after is None or k > after)
    per = max(per, -(-len(keys) // MAX_RANGES))
    return tuple((keys[min(i + per, len(keys)) - 1],
                  range_digest(kv[k] for k in keys[i:i + per]))
                 for i in range(0, len(keys), per))


def matched(kv: Mapping[str, Item], after: str | None, summary: Summary
            ) -> list[tuple[str | None, str]]:
    """The summary's ranges ``(lo, hi]`` (lo None: from the first key) in which ``kv``
    holds exactly the same keys at the same versions: the ones a source may skip."""
    keys = sorted(kv)
    out: list[tuple[str | None, str]] = []
    lo = after
    for hi, digest in summary:
        if lo is not None and hi <= lo:
            raise ValueError(f"sync summary: range ends {hi!r} are not increasing after {lo!r}")
        i = 0 if lo is None else bisect_right(keys, lo)
        j = bisect_right(keys, hi)
        if range_digest(kv[k] for k in keys[i:j]) == digest:
            out.append((lo, hi))
        lo = hi
    return out


def take_batch(kv: Mapping[str, Item], after: str | None, lim: SyncLimits,
               upto: str | None = None) -> tuple[tuple[Item, ...], bool]:
    """The items after key ``after`` (None: from the start) and up to ``upto`` (None: no
    bound) that fit one batch, and whether they are the last of that interval."""
    keys = sorted(kv)
    i = 0 if after is None else bisect_right(keys, after)
    end = len(keys) if upto is None else bisect_right(keys, upto)
    items: list[Item] = []
    size = 0
    while i < end and len(items) < lim.batch_items:
        it = kv[keys[i]]
        n = item_bytes(it)
        if items and size + n > lim.batch_bytes:
            break
        items.append(it)
        size += n
        i += 1
    return tuple(items), i >= end


# --------------------------------------------------------------------------- receiver


@dataclass
class Pull:
    """The sync this node asked for."""

    source: str
    reason: str
    started: float
    token: int  # the idle timer's name: a new one per batch taken
    asked: bool = False  # the source said it is active and was sent the request
    sid: str | None = None  # the source's serve, fixed by its first batch
    after: str | None = None  # resume cursor: the last key taken
    batches: int = 0
    changed: int = 0
    items: int = 0  # items received (changed or not): what the sync moved


@dataclass
class Puller:
    """Receiver side: at most one sync outstanding, and where an interrupted one stopped."""

    cur: Pull | None = None
    #: (source, last key taken) of a sync that stopped before its last batch
    resume: tuple[str, str] | None = None
    _tokens: int = 0

    def _token(self) -> int:
        self._tokens += 1
        return self._tokens

    def begin(self, source: str, reason: str, now: float) -> Pull:
        after = self.resume[1] if self.resume and self.resume[0] == source else None
        self.cur = Pull(source, reason, now, self._token(), after=after)
        return self.cur

    def check(self, hop: str, b: SyncBatch) -> None:
        """Raise `Refused` unless ``b`` belongs to the sync we asked ``hop`` for."""
        s = self.cur
        if s is None:
            raise Refused(409, "sync-unsolicited", f"no sync outstanding; batch from {hop} "
                          "ignored")
        if hop != s.source or b.source != hop:
            raise Refused(409, "sync-unsolicited", f"sync asked from {s.source}, not {hop}; "
                          "batch ignored")
        if not s.asked:
            raise Refused(409, "sync-unsolicited", f"sync from {hop} not requested yet")
        if s.sid is not None and b.sync_id != s.sid:
            raise Refused(409, "sync-stale", f"sync id {b.sync_id!r} is not the one being "
                          f"taken ({s.sid!r})")

    def took(self, b: SyncBatch, changed: int) -> Pull:
        """A checked batch was applied: move the cursor, restart the idle timer; after the
        last batch nothing is outstanding."""
        s = self.cur
        assert s is not None
        s.sid = b.sync_id
        s.batches += 1
        s.changed += changed
        s.items += len(b.items)
        s.token = self._token()
        if b.items:
            s.after = b.items[-1].key
            self.resume = (s.source, s.after)
        if b.complete:
            self.cur, self.resume = None, None
        return s

    def stop(self, peer: str | None = None) -> Pull | None:
        """The sync from ``peer`` (any, if None) ended unfinished; its cursor is kept."""
        s = self.cur
        if s is None or (peer is not None and s.source != peer):
            return None
        self.cur = None
        return s


# --------------------------------------------------------------------------- source


@dataclass
class Serve:
    sid: str
    #: the peer's owed generation when the first part of this sync was served (-1: unknown,
    #: e.g. we restarted since; the serve then pays no debt)
    gen: int
    after: str | None
    #: summary ranges ``(lo, hi]`` the requester already holds as we do, in key order
    skip: list[tuple[str | None, str]] = field(default_factory=list)
    inflight: SyncBatch | None = None
    #: the cursor once ``inflight`` is acknowledged (past any range skipped to build it)
    pending: str | None = None
    batches: int = 0
    keys: int = 0
    skipped: int = 0  # summary ranges skipped
    #: the peer's previous serve start, given back if this serve's first batch is not taken
    prev_start: float | None = None


#: reads the page after a key, up to a key (inclusive; None: no bound): a store's
#: ``page`` or `take_batch` over the in-memory items
Pager = Callable[[str | None, str | None], tuple[tuple[Item, ...], bool]]


@dataclass
class Feeder:
    """Source side: one serve per peer, started at most once per ``min_interval_s`` (a serve
    whose first batch the peer did not take does not count)."""

    lim: SyncLimits = field(default_factory=SyncLimits)
    serves: dict[str, Serve] = field(default_factory=dict)
    last_start: dict[str, float] = field(default_factory=dict)
    #: the owed generation when the peer last got a sync from its start
    full_gen: dict[str, int] = field(default_factory=dict)

    def request(self, hop: str, after: str | None, sid: str, gen: int, now: float,
                skip: list[tuple[str | None, str]] | None = None, *, named: bool = True
                ) -> Serve:
        """A sync request: a new serve, or `Refused` (coalesced 200, busy 409, rate-limited
        429). A resumed one (``after``) goes on from the cursor even if commits for the peer
        were dropped since its first part; then it pays no debt (`Serve.gen`), so the peer
        stays owed what it missed. ``named``: the requester chose ``sid`` and takes only
        batches carrying it (`Puller.check`)."""
        cur = self.serves.get(hop)
        if cur is not None and named and cur.sid != sid:
            # joined to a serve under another id, the requester would refuse its batches
            # and wait out its whole sync timeout (a healed n1 stayed in `sync` 5 s under
            # `hostile`, chaos seed 2, session 43: the serve was a request in its name)
            raise Refused(409, "sync-busy", f"a sync to {hop} under another id ({cur.sid!r}) "
                          "is under way; ask again once it ends")
        if cur is not None:
            raise Refused(200, "sync-coalesced", f"a sync to {hop} is under way; request "
                          "joined to it")
        last = self.last_start.get(hop)
        if last is not None and now - last < self.lim.min_interval_s:
            raise Refused(429, "sync-rate-limited", f"a sync to {hop} started "
                          f"{now - last:.3f} s ago; ask again after {self.lim.min_interval_s} s")
        if after is None:
            self.full_gen[hop] = gen
        s = Serve(sid, self.full_gen.get(hop, -1), after, list(skip or ()), prev_start=last)
        self.serves[hop] = s
        self.last_start[hop] = now
        return s

    def _give_back(self, hop: str, prev: float | None) -> None:
        """A serve whose first batch failed or was refused (its peer asked for another sync,
        or none: a request in its name from a holder of its key) does not count against the
        rate limit. Else such requests, while the peer is owed a sync, kept the slot and got
        the real peer's own requests refused 429 until the attacker let go (a healed node
        synced 2 s late under `hostile`, session 42)."""
        if prev is None:
            self.last_start.pop(hop, None)
        else:
            self.last_start[hop] = prev

    def next_batch(self, hop: str, page: Pager) -> tuple[tuple[Item, ...], bool]:
        """The next batch's items and whether it is the last: pages from the cursor, never
        across the start of a range to skip, jumping over each such range when reached."""
        s = self.serves[hop]
        cur = s.after
        while True:
            while s.skip and s.skip[0][0] == cur:
                cur = s.skip.pop(0)[1]
                s.skipped += 1
            upto = s.skip[0][0] if s.skip else None
            items, done = page(cur, upto)
            complete = done and upto is None
            if done and upto is not None:
                end: str | None = upto
            else:
                end = items[-1].key if items else cur
            if items or complete:
                s.pending = end
                return items, complete
            cur = end

    def next_items(self, hop: str, kv: Mapping[str, Item]) -> tuple[tuple[Item, ...], bool]:
        return self.next_batch(hop, lambda after, upto: take_batch(kv, after, self.lim, upto))

    def sent(self, hop: str, b: SyncBatch) -> None:
        self.serves[hop].inflight = b

    def delivered(self, hop: str, b: SyncBatch, ok: bool) -> Serve | None:
        """The outcome of batch ``b``: the serve to continue (``after`` moved) or that just
        finished (``inflight.complete``); None when it is not ours or it failed (dropped)."""
        s = self.serves.get(hop)
        if s is None or s.inflight is None or (b.sync_id, b.counter) != (
                s.inflight.sync_id, s.inflight.counter):
            return None
        if not ok:
            del self.serves[hop]
            if s.batches == 0:  # the peer took nothing: the serve does not hold its slot
                self._give_back(hop, s.prev_start)
            return None
        s.batches += 1
        s.keys += len(b.items)
        s.after = s.pending
        if b.complete:
            del self.serves[hop]
        return s
