"""The applied update ids stay exact and bounded in memory (issue 26, session 45): a node keeps
the last `APPLIED_RECENT` in memory and asks its store about older ones; it no longer loads
the whole ``applied`` table at start nor keeps one id per commit for its life."""

from __future__ import annotations

from pathlib import Path

from nodes.common.effects import Persist, Send
from nodes.drip import codec
from nodes.drip.codec import Update
from nodes.drip.core import DripCore, Inbound
from nodes.drip.records import ABSENT_KEPT, APPLIED_RECENT, Applied, AppliedIds
from nodes.drip.store import Store

CAP = 16


def _turn(store: Store, out: list) -> codec.Message:
    """Write a core turn's records as the server's group commit does; its answer."""
    store.commit_records([e.record for e in out if isinstance(e, Persist)])
    (a,) = [e.msg for e in out if isinstance(e, Send) and isinstance(e.to, Inbound)]
    return a


def test_an_old_applied_id_is_still_refused_and_answered_committed(tmp_path: Path) -> None:
    path = tmp_path / "n2.sqlite3"
    store = Store(path, applied_recent=CAP)
    c = DripCore("n2", ["n1", "n3"], durable=store.load())
    store.commit_records([e.record for e in c.start(0) if isinstance(e, Persist)])
    n = 3 * CAP
    for i in range(n):  # n1's updates: our yes, then its commit
        up = Update(f"u{i}", f"k{i}", i)
        assert _turn(store, c.on_message(Inbound("n1", i), codec.Voting(
            "n1", 2 * i + 1, False, up), i)).status == 200
        assert _turn(store, c.on_message(Inbound("n1", i), codec.Commit(
            "n1", 2 * i + 2, False, up, 1), i)).status == 200
    assert len(c.d.applied) == CAP  # memory: the last CAP ids (was one per commit)
    assert "u0" in c.d.applied and f"u{n - 1}" in c.d.applied and "u-none" not in c.d.applied
    # the oldest id, long forgotten in memory: still refused, answered, and not applied twice
    again = c.on_message(Inbound("n1", 99), codec.Voting("n1", 2 * n + 1, False,
                                                        Update("u0", "k0", "again")), n)
    assert again[-1].msg.status == 409 and "already applied" in again[-1].msg.body["error"]
    assert c.refusals.snapshot().get("revote-applied") == 1
    asked = c.on_message(Inbound("n3", 98), codec.OutcomeQuery("n3", "u0", "n1", 1), n)
    assert asked[-1].msg.body == {"outcome": "committed"}
    late = c.on_message(Inbound("n3", 97), codec.Commit("n1", 2, False,
                                                       Update("u0", "k0", 0), 1), n)
    assert late[-1].msg.status == 200 and not [
        e for e in late if isinstance(e, Persist) and isinstance(e.record, Applied)]
    assert c.d.applied.lookups >= 3
    store.close()
    # a restart reads none of them, and still knows every one
    d = Store(path, applied_recent=CAP).load()
    assert len(d.applied) == 0
    assert all(f"u{i}" in d.applied for i in range(n)) and "u-none" not in d.applied


def test_the_memory_stays_at_the_cap(tmp_path: Path) -> None:
    """At the node's own cap: more ids than it holds, the oldest answered by the store."""
    store = Store(tmp_path / "n.sqlite3")
    ids = AppliedIds(cap=APPLIED_RECENT, lookup=store.has_applied)
    n = APPLIED_RECENT + 5_000
    store.db.execute("BEGIN")  # one transaction (the store commits each statement alone)
    store.db.executemany("INSERT INTO applied VALUES (?, 'k', 1)",
                         ((f"u{i}",) for i in range(n)))
    store.db.execute("COMMIT")
    for i in range(n):
        ids.add(f"u{i}")
    assert len(ids) == APPLIED_RECENT and ids.lookups == 0
    assert "u0" in ids and f"u{n - 1}" in ids and "u-none" not in ids
    assert ids.lookups == 2  # the forgotten one and the unknown one
    assert list(ids.recent())[-1] == f"u{n - APPLIED_RECENT}"  # the oldest kept, last
    store.close()


def test_a_storage_failure_names_the_rolled_back_ids_from_a_few_reads(tmp_path: Path) -> None:
    """The journal's ``rolled_back`` was the difference of two sets of every id; now the
    newest ids in memory, read back to the first the disk holds."""
    store = Store(tmp_path / "n2.sqlite3", applied_recent=CAP)
    c = DripCore("n2", ["n1"], durable=store.load())
    store.commit_records([e.record for e in c.start(0) if isinstance(e, Persist)])
    for i in range(CAP + 4):
        up = Update(f"u{i}", f"k{i}", i)
        out = c.on_message(Inbound("n1", i), codec.Voting("n1", 2 * i + 1, False, up), i)
        out += c.on_message(Inbound("n1", i), codec.Commit("n1", 2 * i + 2, False, up, 1), i)
        if i < CAP + 2:  # the last two turns' group commit fails: rolled back
            store.commit_records([e.record for e in out if isinstance(e, Persist)])
    disk = store.load()
    before = disk.applied.lookups
    (ev,) = [e for e in c.storage_failed(disk) if getattr(e, "type", None) == "storage-failed"]
    assert ev.fields["rolled_back"] == [f"u{CAP + 2}", f"u{CAP + 3}"]
    assert disk.applied.lookups - before == 3  # the two lost, then the first one held
    assert f"u{CAP + 2}" not in c.d.applied and "u0" in c.d.applied


def test_a_miss_is_read_from_the_store_once_until_the_id_is_added() -> None:
    """A new update's id is asked for at each copy of its voting and at its commit: the store
    answers the first miss only (session 51); the remembered miss ends when the id is added,
    and the remembered misses are bounded."""
    asked: list[str] = []
    on_disk = {"old"}

    def lookup(uid: str) -> bool:
        asked.append(uid)
        return uid in on_disk

    ids = AppliedIds(cap=CAP, lookup=lookup)
    assert "new" not in ids and "new" not in ids and "new" not in ids
    assert asked == ["new"]
    ids.add("new")
    assert "new" in ids and asked == ["new"]
    for i in range(CAP + 1):  # "new" leaves memory; asked again, the store has it now
        ids.add(f"x{i}")
    on_disk.add("new")
    assert "new" in ids and asked == ["new", "new"]
    assert "old" in ids and "old" in ids and asked.count("old") == 2  # hits are not kept
    for i in range(ABSENT_KEPT + 1):
        assert f"m{i}" not in ids
    assert "m0" not in ids and asked.count("m0") == 2  # the oldest remembered miss went
    assert f"m{ABSENT_KEPT}" not in ids and asked.count(f"m{ABSENT_KEPT}") == 1
