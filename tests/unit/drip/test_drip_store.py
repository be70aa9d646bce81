"""The SQLite store means what `Durable.apply` says a record means: whatever records a core
persists, what the store loads back equals their fold, and a transaction cut off before its
commit leaves no trace (a crash mid-write loses the whole group, never part of it)."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.drip.codec import Commit, Item, Update
from nodes.drip.records import (
    OWN,
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
)
from nodes.drip.store import Store

NODES = st.sampled_from(["n1", "n2", "n3"])
KEYS = st.sampled_from(["a", "b"])
UIDS = st.sampled_from(["u1", "u2", "u3", "u4"])
items = st.builds(Item, KEYS, st.integers(0, 9), st.integers(1, 4), UIDS,
                  st.none() | st.just("o"))


_SEQS = itertools.count(1)


def _applied(it: Item, peers: list[str], counter: int) -> Applied:
    """An applied commit queued for ``peers``: outbox seqs are unique, as the core's are."""
    commit = Commit("n1", counter, False, Update(it.uid, it.key, it.value, it.owner),
                    it.version, "Bearer t")
    return Applied(it, tuple(Queued(next(_SEQS), p, commit) for p in peers))


records = st.one_of(
    st.just(Init()),
    st.builds(lambda rows: Counters(tuple(rows)), st.lists(st.tuples(
        st.sampled_from([OWN, "n2", "n3"]), st.integers(0, 2**64 - 1),
        st.none() | st.integers(0, 2**64 - 1), st.none() | st.just("[null,1,3,[[5,9]]]")),
        min_size=1, max_size=3)),
    st.builds(lambda ns: Members(tuple(ns)), st.lists(NODES, min_size=1, max_size=3)),
    st.builds(Lock, KEYS, UIDS, NODES, st.none() | st.integers(0, 2**64 - 1)),
    st.builds(Unlock, KEYS, UIDS),
    st.builds(_applied, items, st.lists(NODES, max_size=2, unique=True), st.integers(1, 50)),
    st.builds(lambda its: Merged(tuple(its)), st.lists(items, max_size=3)),
    st.builds(Delivered, NODES, st.integers(1, 5000)),
    st.builds(Dropped, NODES),
    st.builds(lambda ps: Owe(tuple(ps)), st.lists(NODES, min_size=1, max_size=2)),
    st.builds(Paid, NODES),
    st.builds(Fence, KEYS, st.integers(1, 2**63 - 1)),
)


def _same(a: Durable, b: Durable) -> None:
    # applied ids are asked, not listed: the store's are read from it as needed
    applied = [[u for u in ("u1", "u2", "u3", "u4", "u5") if u in d.applied] for d in (a, b)]
    assert (a.fresh, a.counter, a.counters, a.members, a.kv, applied[0], a.locks,
            a.lock_rounds, a.owed, a.fences) == (b.fresh, b.counter, b.counters, b.members,
                                                 b.kv, applied[1], b.locks, b.lock_rounds,
                                                 b.owed, b.fences)
    assert {p: sorted(r) for p, r in a.outbox.items()} == \
        {p: sorted(r) for p, r in b.outbox.items()}
    for p, rows in a.outbox.items():
        for seq, q in rows.items():
            got = b.outbox[p][seq]
            assert (got.peer, got.commit, got.commit.auth) == (q.peer, q.commit, q.commit.auth)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(records, min_size=1, max_size=4), max_size=8))
def test_what_the_store_loads_is_the_fold_of_what_was_written(groups: list[list[Record]]
                                                              ) -> None:
    s = Store(":memory:")
    for g in groups:
        for r in g:
            s.write(r)
        s.commit()
    _same(Durable.of([r for g in groups for r in g]), s.load())
    s.close()


def test_a_group_cut_off_before_its_commit_is_lost_whole(tmp_path: Path) -> None:
    path = tmp_path / "drip.sqlite3"
    s = Store(path)
    kept: list[Record] = [Init(), Counters(((OWN, 5, None, None),)), Lock("a", "u1", "n1")]
    for r in kept:
        s.write(r)
    s.commit()
    s.write(Counters(((OWN, 6, None, None),)))  # a vote's counter and lock, never committed
    s.write(Lock("b", "u2", "n1"))
    s.close()  # the process dies here
    again = Store(path)
    _same(Durable.of(kept), again.load())
    again.close()


def test_a_fresh_store_loads_as_fresh_and_init_marks_it_used(tmp_path: Path) -> None:
    s = Store(tmp_path / "d.sqlite3")
    assert s.load().fresh is True
    s.write(Init())
    s.commit()
    s.close()
    assert Store(tmp_path / "d.sqlite3").load().fresh is False


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(records, min_size=0, max_size=4), max_size=8))
def test_commit_records_loads_as_the_fold_of_its_groups(groups: list[list[Record]]) -> None:
    """The node's committer path (one call per group, Delivered-only groups unsynced) keeps
    the same durable state as writing and committing record by record."""
    s = Store(":memory:")
    for g in groups:
        s.commit_records(list(g))
    _same(Durable.of([r for g in groups for r in g]), s.load())
    s.close()


def test_sync_pages_from_the_store_match_the_in_memory_batches(tmp_path: Path) -> None:
    """Keyset pages by the resume cursor (`Store.page`) cut exactly as `take_batch` does on
    the same items, by count and by bytes (one item larger than the byte bound goes alone)."""
    from nodes.drip.sync import SyncLimits, take_batch

    kv = {f"k{i:03d}": Item(f"k{i:03d}", "v" * (i * 37 % 500), 1, f"u{i}", None)
          for i in range(120)}
    kv["k050"] = Item("k050", "x" * 3000, 2, "big", "o")
    kv["k060"] = Item("k060", {"b": ["é" * 40, 1.5], "a": None}, 3, "dict", None)  # non-ASCII
    s = Store(tmp_path / "d.sqlite3", lean=True)
    s.apply_items(list(kv.values()))
    for lim in (SyncLimits(7, 10**9), SyncLimits(1000, 2000), SyncLimits(1, 1)):
        after, pages = None, 0
        while True:
            got = s.page(after, lim.batch_items, lim.batch_bytes)
            assert got == take_batch(kv, after, lim), (lim, after)
            pages += 1
            if got[1]:
                break
            after = got[0][-1].key
        assert pages > 1
    s.close()


def test_a_lean_store_loads_metadata_and_reads_values_back(tmp_path: Path) -> None:
    s = Store(tmp_path / "d.sqlite3", lean=True)
    s.apply_items([Item("k", {"big": "v" * 1000}, 3, "u1", "o"),
                   Item("drip:members", ["n1", "n2"], 2, "m1", "n1")])
    d = s.load()
    assert d.lean and d.kv["k"] == Item("k", None, 3, "u1", "o")
    assert d.kv["drip:members"].value == ["n1", "n2"]  # the core reads the membership
    assert s.item("k") == Item("k", {"big": "v" * 1000}, 3, "u1", "o") and s.item("x") is None
    d.apply(Merged((Item("k", "newer", 4, "u2", None),)))
    assert d.kv["k"].value is None and d.kv["k"].version == 4
    s.close()


def _bytes_read() -> int:
    """Bytes this process has read through read(2) so far (``rchar``, page cache included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io: is this Linux?")


def test_a_lean_start_and_a_sync_merge_read_no_stored_value(tmp_path: Path) -> None:
    """A start-up over a store of large values reads only the metadata, and merging a synced
    item reads only the (version, uid) it compares with: each used to walk every value's
    overflow pages (``value`` sits before ``version`` in the row), so a start over 5 GB read
    5 GB. The store is reopened as an older one would be (no index yet: built on open)."""
    path = tmp_path / "d.sqlite3"
    s = Store(path)
    big = "v" * 256 * 1024
    s.apply_items([Item(f"k{i:03d}", big, 1, f"u{i}", None) for i in range(48)])  # 12 MiB
    s.db.execute("DROP INDEX IF EXISTS kv_meta")  # a store written before the index existed
    s.close()
    Store(path).close()  # the first open builds the index (one scan)
    s = Store(path, lean=True)
    before = _bytes_read()
    d = s.load()
    s.apply_items([Item(f"k{i:03d}", big, 1, f"u{i}", None) for i in range(0, 48, 2)])
    read = _bytes_read() - before
    assert len(d.kv) == 48 and d.kv["k007"] == Item("k007", None, 1, "u7", None)
    assert read < 1024 * 1024, f"load + 24 merges read {read} bytes of a 12 MiB store"
    s.close()


def _older_store(tmp_path: Path, *sql: str) -> Path:
    """A store file as an older node left it: one table made and filled by ``sql``."""
    path = tmp_path / "drip.sqlite3"
    db = sqlite3.connect(path)
    for stmt in sql:
        db.execute(stmt)
    db.commit()
    db.close()
    return path


def test_a_store_from_before_saved_windows_loads_its_counters_as_the_spec_floor(
        tmp_path: Path) -> None:
    """An older store's counters table has no ``seen`` column: it is added (NULL: every
    counter up to the saved one counts as seen), and windows are saved from then on."""
    path = _older_store(tmp_path, "CREATE TABLE counters (node TEXT PRIMARY KEY, "
                        "counter TEXT NOT NULL, reset_at TEXT)",
                        "INSERT INTO counters VALUES ('n2', '7', NULL)")
    s = Store(path)
    assert s.load().counters == {"n2": (7, None, None)}
    s.write(Counters((("n2", 9, None, "[7,8,9,[]]"),)))
    s.commit()
    s.close()
    again = Store(path)
    assert again.load().counters == {"n2": (9, None, "[7,8,9,[]]")}
    again.close()


def test_a_lock_keeps_its_round_and_a_store_from_before_rounds_still_opens(
        tmp_path: Path) -> None:
    """A lock is saved with its voting round (u64 as TEXT) and read back with it; an older
    store's locks table has no ``counter`` column: it is added, and its rows load without a
    round (the lock asks as before) while new locks save theirs."""
    path = _older_store(tmp_path, "CREATE TABLE locks (key TEXT PRIMARY KEY, uid TEXT NOT NULL, "
                        "initiator TEXT NOT NULL)", "INSERT INTO locks VALUES ('a', 'u1', 'n1')")
    s = Store(path)
    d = s.load()
    assert (d.locks, d.lock_rounds) == ({"a": ("u1", "n1")}, {})
    s.write(Lock("b", "u2", "n3", 2**64 - 1))
    s.commit()
    s.close()
    again = Store(path)
    d = again.load()
    assert d.locks == {"a": ("u1", "n1"), "b": ("u2", "n3")}
    assert d.lock_rounds == {"b": 2**64 - 1}
    again.write(Unlock("b", "u2"))
    again.write(Lock("a", "u3", "n1", 7))
    again.commit()
    assert (again.load().locks, again.load().lock_rounds) == ({"a": ("u3", "n1")}, {"a": 7})
    again.close()


def test_a_sync_page_decodes_only_the_values_it_returns(tmp_path: Path, monkeypatch) -> None:
    """A page is sized from the stored JSON: the row past the page and rows that do not fit
    are never decoded (the source used to decode and re-encode every 1 MiB value to size it)."""
    import nodes.drip.store as store_mod

    s = Store(tmp_path / "d.sqlite3", lean=True)
    s.apply_items([Item(f"k{i}", "v" * 1000, 1, f"u{i}", None) for i in range(10)])
    decoded: list[str] = []
    real = store_mod.json.loads
    monkeypatch.setattr(store_mod.json, "loads", lambda v: decoded.append(v) or real(v))
    items, done = s.page(None, 3, 10**6)
    assert [it.key for it in items] == ["k0", "k1", "k2"] and not done
    assert len(decoded) == 3  # not the fourth row read to know the page is not the last
    items, done = s.page("k2", 100, 2500)  # two fit in 2,500 bytes
    assert len(items) == 2 and len(decoded) == 5
    s.close()


def test_a_newer_value_and_a_new_window_rewrite_their_rows_in_place(tmp_path: Path) -> None:
    """Why upserts: ``INSERT OR REPLACE`` deletes the row and inserts it under a new rowid,
    so each rewrite of a key or of an initiator's counters also rewrote the key's index
    entry, more pages per group commit (session 52). The rowid stays now."""
    s = Store(tmp_path / "s.sqlite3")
    up = Update("u1", "a", 1)
    s.commit_records([Applied(Item("a", 1, 1, "u1", None), ()),
                      Counters((("n2", 1, None, None),))])
    rowids = (s.db.execute("SELECT rowid FROM kv WHERE key='a'").fetchone(),
              s.db.execute("SELECT rowid FROM counters WHERE node='n2'").fetchone())
    s.commit_records([Applied(Item("a", 2, 2, "u2", "o"), (Queued(1, "n3", Commit(
        "n1", 1, False, up, 1)),)), Counters((("n2", 7, 3, "7:"),))])
    assert (s.db.execute("SELECT rowid FROM kv WHERE key='a'").fetchone(),
            s.db.execute("SELECT rowid FROM counters WHERE node='n2'").fetchone()) == rowids
    d = s.load()
    assert d.kv["a"] == Item("a", 2, 2, "u2", "o")
    assert s.db.execute("SELECT counter, reset_at, seen FROM counters WHERE node='n2'"
                        ).fetchone() == ("7", "3", "7:")
    s.close()
