"""The node's SQLite store: where the runtime writes the core's records (`nodes.drip.records`).

The core holds no store: it returns ``Persist(STORE, record)`` effects, the server writes each
one here at once (``write``, inside an open transaction) and commits before the next send or
reply leaves (``commit``: the runtime loop's ``Host.sync``). WAL journal, ``synchronous=FULL``,
so a committed transaction survives kill -9 and power loss; records written together are one
transaction, so they appear together or not at all. The one exception is ``Delivered`` (an
outbox row reached its peer): written alone it is committed without an fsync, as before this
store took records: losing it costs one more idempotent delivery. At start ``load`` reads
back the `Durable` value the core is built from.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from nodes.common import fastjson
from nodes.drip.codec import Item
from nodes.drip.records import (
    APPLIED_RECENT,
    OWN,
    Applied,
    AppliedIds,
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
    commit_from_payload,
    commit_payload,
)
from nodes.drip.sync import item_bytes

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL,
                               uid TEXT NOT NULL, owner TEXT);
CREATE TABLE IF NOT EXISTS applied (uid TEXT PRIMARY KEY, key TEXT NOT NULL, version INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (node TEXT PRIMARY KEY, counter TEXT NOT NULL,
                                     reset_at TEXT, seen TEXT);
CREATE TABLE IF NOT EXISTS locks (key TEXT PRIMARY KEY, uid TEXT NOT NULL, initiator TEXT NOT NULL,
                                  counter TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY, peer TEXT NOT NULL,
                                   payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS owed (peer TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS members (node TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fences (key TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_meta ON kv (key, version, uid, owner);
"""
#: Why ``WITHOUT ROWID`` (session 51): a table keyed by text keeps a rowid tree and an index on
#: its key, so each row written or deleted touched two B-trees; keyed by the key itself, one.
#: Every update writes and deletes a lock and writes an applied id at each node. ``kv`` keeps
#: its rowid (values up to 1 MiB sit badly in a key-ordered tree), ``counters`` too (a window
#: can be ~120 KB). A store made before keeps its tables as they are: the same SQL reads both.
#: Why ``kv_meta``: ``value`` sits before ``version, uid, owner`` in each row, so reading those
#: from the table walks the value's whole overflow-page chain: a start-up over a store of
#: 10,000 x 1 MiB read all 10 GB, and every sync merge read the old value it compared with.
#: The covering index answers both from a few pages. Built once (one full scan) the first
#: time an older store is opened.


class Store:
    """One SQLite database (``data_dir/drip.sqlite3``; ``":memory:"`` for tests)."""

    def __init__(self, path: Path | str, lean: bool = False,
                 applied_recent: int = APPLIED_RECENT) -> None:
        self.path = str(path)
        self.lean = lean
        #: applied update ids the loaded `Durable` keeps in memory (`records.AppliedIds`)
        self.applied_recent = applied_recent
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        if "seen" not in {r[1] for r in self.db.execute("PRAGMA table_info(counters)")}:
            # a store from before the remembered counters were saved: NULL, the spec's
            # "every counter up to the saved one was seen" (nodes.drip.seen.Window.decode)
            self.db.execute("ALTER TABLE counters ADD COLUMN seen TEXT")
        if "counter" not in {r[1] for r in self.db.execute("PRAGMA table_info(locks)")}:
            # a store from before lock rounds were saved: NULL, a lock of no known round
            # (its `OutcomeQuery` names none, as before)
            self.db.execute("ALTER TABLE locks ADD COLUMN counter TEXT")
        self._cur: sqlite3.Cursor | None = None  # the open transaction
        #: group commits: fsynced, unsynced (delivery marks only) and the records in them
        self.commit_stats = {"fsynced": 0, "unsynced": 0, "records": 0}
        # reads of values (sync pages, client reads) on their own connection: they see the
        # last committed state, never a half-written group (WAL readers do not block writes)
        self.reader = self.db if self.path == ":memory:" else sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False)

    def close(self) -> None:
        if self._cur is not None:
            self._cur.execute("ROLLBACK")
            self._cur = None
        if self.reader is not self.db:
            self.reader.close()
        self.db.close()

    # ---- reading values (a lean store keeps them here only) --------------------------------
    def item(self, key: str) -> Item | None:
        """``key``'s committed item, value included."""
        row = self.reader.execute("SELECT key, value, version, uid, owner FROM kv WHERE key=?",
                                  (key,)).fetchone()
        return None if row is None else _item(row)

    def page(self, after: str | None, max_items: int, max_bytes: int,
             upto: str | None = None) -> tuple[tuple[Item, ...], bool]:
        """The committed items after key ``after`` (keyset pagination: the sync cursor) and up
        to key ``upto`` (inclusive; None: no bound, the start of a range the requester already
        holds), at most ``max_items`` and ``max_bytes`` of item JSON (one larger item still
        goes, alone), and whether they are the last of that interval. Reads one row past the
        page, never the whole table."""
        bound = "" if upto is None else " AND key <= ?"
        cur = self.reader.execute(
            f"SELECT key, value, version, uid, owner FROM kv WHERE key > ?{bound} ORDER BY key "
            "LIMIT ?", ("" if after is None else after, *(() if upto is None else (upto,)),
                        max_items + 1))
        items: list[Item] = []
        size = 0
        for row in cur:
            # sized from the stored JSON, decoded only once it is in the page: the source used
            # to decode and re-encode every value (and decode the row past the page) to size it
            n = _row_bytes(row)
            if len(items) == max_items or (items and size + n > max_bytes):
                cur.close()
                return tuple(items), False
            items.append(_item(row))
            size += n
        return tuple(items), True

    def has_applied(self, uid: str) -> bool:
        """Is ``uid`` applied here (committed, or written in the open transaction)?"""
        return self.db.execute("SELECT 1 FROM applied WHERE uid=?", (uid,)).fetchone() is not None

    # ---- reading (at start) ----------------------------------------------------------------
    def load(self) -> Durable:
        db = self.db
        d = Durable(fresh=db.execute("SELECT 1 FROM meta WHERE k='init'").fetchone() is None)
        for n, c, r, w in db.execute("SELECT node, counter, reset_at, seen FROM counters"):
            if n == OWN:
                d.counter = int(c)
            else:
                d.counters[n] = (int(c), None if r is None else int(r), w)
        d.members = {r[0] for r in db.execute("SELECT node FROM members")}
        d.lean = self.lean
        if self.lean:  # metadata only (from kv_meta); values are read from here when needed
            d.kv = {k: Item(k, None, int(ver), u, o) for k, ver, u, o in db.execute(
                "SELECT key, version, uid, owner FROM kv INDEXED BY kv_meta")}
            # protocol keys (the member list) keep their value in memory; 'drip;' is the
            # next string after every 'drip:...' key, so this is a range of the primary key
            for k, v in db.execute("SELECT key, value FROM kv WHERE key >= 'drip:' AND "
                                   "key < 'drip;'"):
                d.kv[k] = replace(d.kv[k], value=json.loads(v))
        else:
            d.kv = {k: Item(k, json.loads(v), int(ver), u, o) for k, v, ver, u, o in
                    db.execute("SELECT key, value, version, uid, owner FROM kv")}
        # not read whole: the last APPLIED_RECENT ids applied are kept in memory as they come,
        # any other is a primary-key read here (`records.AppliedIds`)
        d.applied = AppliedIds(cap=self.applied_recent, lookup=self.has_applied)
        for k, u, i, c in db.execute("SELECT key, uid, initiator, counter FROM locks"):
            d.locks[k] = (u, i)
            if c is not None:
                d.lock_rounds[k] = int(c)
        for s, p, pl in db.execute("SELECT seq, peer, payload FROM outbox ORDER BY seq"):
            d.outbox.setdefault(p, {})[int(s)] = Queued(int(s), p, commit_from_payload(json.loads(pl)))
        d.owed = {r[0] for r in db.execute("SELECT peer FROM owed")}
        d.fences = {k: int(v) for k, v in db.execute("SELECT key, version FROM fences")}
        return d

    # ---- writing (Host.persist / Host.sync) ------------------------------------------------
    def write(self, r: Record) -> None:
        """Write one record now, in the open transaction (opened if none is)."""
        if isinstance(r, Delivered) and self._cur is None:
            self._unsynced(lambda cur: _write(cur, r))
            return
        if self._cur is None:
            self._cur = self.db.cursor()
            self._cur.execute("BEGIN IMMEDIATE")
        try:
            _write(self._cur, r)
        except BaseException:
            self._cur.execute("ROLLBACK")
            self._cur = None
            raise

    def commit(self) -> None:
        """Commit (and so fsync) what was written since the last commit."""
        if self._cur is not None:
            cur, self._cur = self._cur, None
            cur.execute("COMMIT")

    def commit_records(self, records: list[Record]) -> None:
        """Write ``records`` in one transaction and commit it (one fsync). Called by the
        node's committer, never while another write is open."""
        if not records:
            return
        self.commit_stats["records"] += len(records)
        if all(isinstance(r, Delivered) for r in records):
            self.commit_stats["unsynced"] += 1
            self._unsynced(lambda cur: [_write(cur, r) for r in records])
            return
        self.commit_stats["fsynced"] += 1
        assert self._cur is None, "commit_records while another transaction is open"
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            # each message taken saves its initiator's counters row (its window: up to
            # ~120 KB with 8,192 far-ahead counters listed, issue 26); one transaction shows
            # only its end state, so a group writes each initiator's last row once
            counters: dict[str, Any] = {}
            for r in records:
                if isinstance(r, Counters):
                    counters.update((row[0], row) for row in r.rows)
                else:
                    _write(cur, r)
            if counters:
                _write(cur, Counters(tuple(counters.values())))
            cur.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:  # a failed COMMIT (disk full) may leave it open
                cur.execute("ROLLBACK")
            raise

    def _unsynced(self, fn: Any) -> None:
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            cur = self.db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            fn(cur)
            cur.execute("COMMIT")
        finally:
            self.db.execute("PRAGMA synchronous=FULL")

    def apply_items(self, items: list[Item]) -> None:
        """Merge items as a sync would (bench and tests fill a store this way)."""
        self.write(Init())
        self.write(Merged(tuple(items)))
        self.commit()


def _write(cur: sqlite3.Cursor, r: Record) -> None:
    if isinstance(r, Init):
        cur.execute("INSERT OR IGNORE INTO meta VALUES ('init', '1')")
    elif isinstance(r, Counters):
        # TEXT columns: u64 values above SQLite's signed 64-bit range must not become REAL
        cur.executemany("INSERT INTO counters VALUES (?, ?, ?, ?) ON CONFLICT(node) DO UPDATE "
                        "SET counter=excluded.counter, reset_at=excluded.reset_at, "
                        "seen=excluded.seen",
                        [(n, str(c), None if x is None else str(x), w) for n, c, x, w in r.rows])
    elif isinstance(r, Members):
        cur.executemany("INSERT OR IGNORE INTO members VALUES (?)", [(n,) for n in r.nodes])
    elif isinstance(r, Lock):
        # TEXT counter, as in ``counters``: a u64 above SQLite's signed range
        cur.execute("INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?)",
                    (r.key, r.uid, r.initiator, None if r.counter is None else str(r.counter)))
    elif isinstance(r, Unlock):
        cur.execute("DELETE FROM locks WHERE key=? AND uid=?", (r.key, r.uid))
    elif isinstance(r, Applied):
        it = r.item
        cur.execute("INSERT OR IGNORE INTO applied VALUES (?, ?, ?)", (it.uid, it.key, it.version))
        _merge(cur, it)
        cur.execute("DELETE FROM locks WHERE key=? AND uid=?", (it.key, it.uid))
        cur.executemany("INSERT OR REPLACE INTO outbox VALUES (?, ?, ?)",
                        [(q.seq, q.peer, fastjson.dumps(commit_payload(q.commit)).decode())
                         for q in r.queued])
    elif isinstance(r, Merged):
        for it in r.items:
            _merge(cur, it)
    elif isinstance(r, Delivered):
        cur.execute("DELETE FROM outbox WHERE seq=? AND peer=?", (r.seq, r.peer))
    elif isinstance(r, Dropped):
        cur.execute("DELETE FROM outbox WHERE peer=?", (r.peer,))
        cur.execute("INSERT OR IGNORE INTO owed VALUES (?)", (r.peer,))
    elif isinstance(r, Owe):
        cur.executemany("INSERT OR IGNORE INTO owed VALUES (?)", [(p,) for p in r.peers])
    elif isinstance(r, Paid):
        cur.execute("DELETE FROM owed WHERE peer=?", (r.peer,))
    elif isinstance(r, Fence):
        cur.execute("INSERT INTO fences VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                    "version=max(version, excluded.version)", (r.key, r.version))
    else:
        raise TypeError(f"not a DRiP record: {r!r}")


def _merge(cur: sqlite3.Cursor, it: Item) -> None:
    """Keep the higher ``(version, uid)`` of the key (`records.newer`)."""
    row = cur.execute("SELECT version, uid FROM kv INDEXED BY kv_meta WHERE key=?",
                      (it.key,)).fetchone()
    if row is not None and (it.version, it.uid) <= (int(row[0]), row[1]):
        return
    cur.execute("INSERT INTO kv VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "value=excluded.value, version=excluded.version, uid=excluded.uid, "
                "owner=excluded.owner",
                (it.key, json.dumps(it.value, separators=(",", ":")), it.version, it.uid,
                 it.owner))


def _row_bytes(row: tuple[Any, ...]) -> int:
    """A stored item's JSON size on the wire (`sync.item_bytes`) from its row, without
    decoding the value: values are stored as compact JSON, so the stored text is the wire's
    (a store written before that keeps wider JSON: a bound a little above, still safe)."""
    k, v, ver, u, o = row
    return item_bytes(Item(k, None, int(ver), u, o)) - len("null") + len(v)


def _item(row: tuple[Any, ...]) -> Item:
    k, v, ver, u, o = row
    return Item(k, json.loads(v), int(ver), u, o)
