"""The node's SQLite data store: registry data, counters, in-progress votes, commit outbox.

WAL journal, ``synchronous=FULL``: every method that changes state commits before it returns,
so what a method reported done survives kill -9. Each method is one transaction, so e.g. a
commit's data, its "applied" mark, the release of its vote lock and its forwarding outbox
rows appear together or not at all. ``":memory:"`` gives a throw-away store for unit tests.

Ordering of commits is by ``(version, uid)``: a key only moves to a higher pair, so commits and
sync batches can arrive in any order and every node still ends on the same value.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from nodes.drip.codec import Item, Update

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL,
                               uid TEXT NOT NULL, owner TEXT);
CREATE TABLE IF NOT EXISTS applied (uid TEXT PRIMARY KEY, key TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS counters (node TEXT PRIMARY KEY, counter TEXT NOT NULL,
                                     reset_at TEXT);
CREATE TABLE IF NOT EXISTS locks (key TEXT PRIMARY KEY, uid TEXT NOT NULL, initiator TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, peer TEXT NOT NULL,
                                   payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS owed (peer TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS members (node TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""

OWN = "__self__"
#: (node, counter, reset_at) rows to save with a change; OWN is this node's own counter
Counters = list[tuple[str, int, int | None]] | tuple[()]


def newer(a: tuple[int, str], b: tuple[int, str] | None) -> bool:
    return b is None or a > b


class Store:
    """One SQLite database (``data_dir/drip.sqlite3``)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.fresh = self.path == ":memory:" or not Path(self.path).exists()
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        if not self.fresh and self.db.execute("SELECT v FROM meta WHERE k='init'").fetchone() is None:
            self.fresh = True  # the file existed but a crash came before the first commit
        self._tx(lambda c: c.execute("INSERT OR IGNORE INTO meta VALUES ('init', '1')"))

    def _tx(self, fn: Any) -> Any:
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            out = fn(cur)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
        return out

    def close(self) -> None:
        self.db.close()

    # ---- counters ------------------------------------------------------------------------
    def own_counter(self) -> int:
        r = self.db.execute("SELECT counter FROM counters WHERE node=?", (OWN,)).fetchone()
        return int(r[0]) if r else 0


    def saved_counters(self) -> dict[str, tuple[int, int | None]]:
        rows = self.db.execute("SELECT node, counter, reset_at FROM counters WHERE node != ?", (OWN,))
        return {n: (int(c), None if r is None else int(r)) for n, c, r in rows}

    def save_counters(self, counters: Counters) -> None:
        self._tx(lambda cur: self._counters(cur, counters))

    @staticmethod
    def _counters(cur: sqlite3.Cursor, counters: Counters) -> None:
        # TEXT columns: u64 values above SQLite's signed 64-bit range must not become REAL
        cur.executemany("INSERT OR REPLACE INTO counters VALUES (?, ?, ?)",
                        [(n, str(c), None if r is None else str(r)) for n, c, r in counters])

    # ---- membership ----------------------------------------------------------------------
    def members(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT node FROM members")}

    def add_members(self, nodes: set[str]) -> None:
        self._tx(lambda cur: cur.executemany("INSERT OR IGNORE INTO members VALUES (?)",
                                             [(n,) for n in nodes]))

    # ---- data ----------------------------------------------------------------------------
    def get(self, key: str) -> Item | None:
        r = self.db.execute("SELECT key, value, version, uid, owner FROM kv WHERE key=?",
                            (key,)).fetchone()
        return Item(r[0], json.loads(r[1]), int(r[2]), r[3], r[4]) if r else None

    def items(self) -> list[Item]:
        return [Item(k, json.loads(v), int(ver), u, o) for k, v, ver, u, o in
                self.db.execute("SELECT key, value, version, uid, owner FROM kv ORDER BY key")]

    def is_applied(self, uid: str) -> bool:
        return self.db.execute("SELECT 1 FROM applied WHERE uid=?", (uid,)).fetchone() is not None

    def _upsert(self, cur: sqlite3.Cursor, it: Item) -> bool:
        r = cur.execute("SELECT version, uid FROM kv WHERE key=?", (it.key,)).fetchone()
        if not newer((it.version, it.uid), (int(r[0]), r[1]) if r else None):
            return False
        cur.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?, ?, ?)",
                    (it.key, json.dumps(it.value), it.version, it.uid, it.owner))
        return True

    def apply_commit(self, up: Update, version: int, outbox: list[tuple[str, dict[str, Any]]],
                     counters: Counters = ()) -> tuple[bool, bool]:
        """Apply a commit once: (newly applied?, did the key's value change?)."""
        def fn(cur: sqlite3.Cursor) -> tuple[bool, bool]:
            self._counters(cur, counters)
            if cur.execute("SELECT 1 FROM applied WHERE uid=?", (up.uid,)).fetchone():
                return False, False
            cur.execute("INSERT INTO applied VALUES (?, ?, ?)", (up.uid, up.key, version))
            changed = self._upsert(cur, Item(up.key, up.value, version, up.uid, up.owner))
            cur.execute("DELETE FROM locks WHERE key=? AND uid=?", (up.key, up.uid))
            cur.executemany("INSERT INTO outbox (peer, payload) VALUES (?, ?)",
                            [(p, json.dumps(pl)) for p, pl in outbox])
            return True, changed
        return self._tx(fn)

    def apply_items(self, items: list[Item]) -> int:
        """Merge sync items (higher (version, uid) wins); how many keys changed."""
        return self._tx(lambda cur: sum(self._upsert(cur, it) for it in items))

    # ---- in-progress votes ---------------------------------------------------------------
    def locks(self) -> dict[str, tuple[str, str]]:
        return {k: (u, i) for k, u, i in self.db.execute("SELECT key, uid, initiator FROM locks")}

    def put_lock(self, key: str, uid: str, initiator: str, counters: Counters = ()) -> None:
        def fn(cur: sqlite3.Cursor) -> None:
            cur.execute("INSERT OR REPLACE INTO locks VALUES (?, ?, ?)", (key, uid, initiator))
            self._counters(cur, counters)
        self._tx(fn)

    def del_lock(self, key: str, uid: str) -> None:
        self._tx(lambda cur: cur.execute("DELETE FROM locks WHERE key=? AND uid=?", (key, uid)))

    # ---- outbox and owed syncs -----------------------------------------------------------
    def outbox_peek(self, peer: str, n: int = 16) -> list[tuple[int, dict[str, Any]]]:
        return [(s, json.loads(p)) for s, p in self.db.execute(
            "SELECT seq, payload FROM outbox WHERE peer=? ORDER BY seq LIMIT ?", (peer, n))]

    def outbox_delete(self, seq: int) -> None:
        """Forget a delivered row. Not fsynced: a delete lost to a power cut only means one
        more (idempotent) delivery, and with WAL a process kill loses nothing committed."""
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            self._tx(lambda cur: cur.execute("DELETE FROM outbox WHERE seq=?", (seq,)))
        finally:
            self.db.execute("PRAGMA synchronous=FULL")

    def outbox_count(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT peer, COUNT(*) FROM outbox GROUP BY peer").fetchall())

    def drop_outbox(self, peer: str) -> int:
        """Forget what was queued for ``peer`` and remember that it is owed a sync."""
        def fn(cur: sqlite3.Cursor) -> int:
            n = cur.execute("DELETE FROM outbox WHERE peer=?", (peer,)).rowcount
            cur.execute("INSERT OR IGNORE INTO owed VALUES (?)", (peer,))
            return n
        return self._tx(fn)

    def owe(self, peers: list[str]) -> None:
        """Remember that ``peers`` are owed a sync (their queued commits stay queued)."""
        self._tx(lambda cur: cur.executemany("INSERT OR IGNORE INTO owed VALUES (?)",
                                             [(p,) for p in peers]))

    def owed(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT peer FROM owed")}

    def clear_owed(self, peer: str) -> None:
        self._tx(lambda cur: cur.execute("DELETE FROM owed WHERE peer=?", (peer,)))
