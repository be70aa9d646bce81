"""Node sync (spec 4.6) as sans-IO bookkeeping: which batch comes next, which batch we take.

Why it is its own module: a sync must finish on a store of large values and must not be
started by anyone who was not asked. Our rules (the spec leaves them open):

* **Bounded batches.** The source cuts its store, in key order, into batches of at most
  ``batch_items`` items and ``batch_bytes`` bytes of JSON (one item always fits, whatever its
  size). It builds only the next batch once the previous one was acknowledged, so a sync of
  any store costs one batch of memory per peer on each side.
* **Resumable.** Each batch's last key is the cursor. A sync that stops (timeout, lost
  connection) is asked again *after* that key from the same source. The source serves the
  rest only if it dropped nothing queued for that peer since the first part; else from the
  start, so nothing committed meanwhile is skipped.
* **Coalesced and rate-limited per peer.** A sync request from a peer being served is
  answered 200 and starts nothing; a new serve to one peer starts at most once per
  ``min_interval_s`` (else 429).
* **Only what we asked for.** A receiver takes a batch only from the source it asked (after
  that source said it is active), with the sync id of that serve; anything else is refused
  and applies nothing.
* The sync's timer is an *idle* timer: each batch taken restarts it, so a long sync that
  keeps moving is never abandoned, and a stalled one is.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field

from nodes.drip.codec import Item, SyncBatch

#: a batch's JSON, at most (one larger item still goes, alone)
BATCH_BYTES = 4 * 1024 * 1024
BATCH_ITEMS = 1000


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


def take_batch(kv: Mapping[str, Item], after: str | None, lim: SyncLimits
               ) -> tuple[tuple[Item, ...], bool]:
    """The items after key ``after`` (None: from the start) that fit one batch, and whether
    they are the last."""
    keys = sorted(kv)
    i = 0 if after is None else bisect_right(keys, after)
    items: list[Item] = []
    size = 0
    while i < len(keys) and len(items) < lim.batch_items:
        it = kv[keys[i]]
        n = item_bytes(it)
        if items and size + n > lim.batch_bytes:
            break
        items.append(it)
        size += n
        i += 1
    return tuple(items), i >= len(keys)


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
    gen: int  # the peer's owed generation when the first part of this sync was served
    after: str | None
    inflight: SyncBatch | None = None
    batches: int = 0
    keys: int = 0


@dataclass
class Feeder:
    """Source side: one serve per peer, started at most once per ``min_interval_s``."""

    lim: SyncLimits = field(default_factory=SyncLimits)
    serves: dict[str, Serve] = field(default_factory=dict)
    last_start: dict[str, float] = field(default_factory=dict)
    #: the owed generation when the peer last got a sync from its start
    full_gen: dict[str, int] = field(default_factory=dict)

    def request(self, hop: str, after: str | None, sid: str, gen: int, now: float) -> Serve:
        """A sync request: a new serve, or `Refused` (coalesced 200, rate-limited 429)."""
        if hop in self.serves:
            raise Refused(200, "sync-coalesced", f"a sync to {hop} is under way; request "
                          "joined to it")
        last = self.last_start.get(hop)
        if last is not None and now - last < self.lim.min_interval_s:
            raise Refused(429, "sync-rate-limited", f"a sync to {hop} started "
                          f"{now - last:.3f} s ago; ask again after {self.lim.min_interval_s} s")
        if after is not None and self.full_gen.get(hop) != gen:
            after = None  # commits for it were dropped since its first part: start over
        if after is None:
            self.full_gen[hop] = gen
        s = Serve(sid, self.full_gen[hop], after)
        self.serves[hop] = s
        self.last_start[hop] = now
        return s

    def next_items(self, hop: str, kv: Mapping[str, Item]) -> tuple[tuple[Item, ...], bool]:
        return take_batch(kv, self.serves[hop].after, self.lim)

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
            return None
        s.batches += 1
        s.keys += len(b.items)
        if b.items:
            s.after = b.items[-1].key
        if b.complete:
            del self.serves[hop]
        return s
