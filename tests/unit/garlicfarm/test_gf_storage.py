import os

from nodes.garlicfarm.codec import ClusterConfig, ClusterServer, LogEntry, ValueType
from nodes.garlicfarm.raft import (
    PersistAppend,
    PersistRemoved,
    PersistSnapshot,
    PersistState,
    PersistTruncate,
)
from nodes.garlicfarm.storage import RaftStorage


def E(t, v):
    return LogEntry(t, ValueType.APPLICATION, v)


def fill(d, bugs=frozenset()):
    s = RaftStorage(d, bugs)
    s.load()
    s.persist(PersistState(3, 2))
    s.persist(PersistAppend(((1, E(1, b"a")), (2, E(1, b"b")), (3, E(2, b"c")))))
    s.persist(PersistTruncate(3))
    s.persist(PersistAppend(((3, E(3, b"C")),)))
    s.sync()
    return s


def test_reload_after_crash(tmp_path):
    fill(tmp_path)  # no close: like kill -9 after sync
    st = RaftStorage(tmp_path).load()
    assert (st.term, st.voted_for) == (3, 2)
    assert [e.value for e in st.entries] == [b"a", b"b", b"C"]


def test_torn_log_tail_repaired(tmp_path):
    fill(tmp_path)
    p = tmp_path / "raft-log.rec"
    os.truncate(p, p.stat().st_size - 2)
    s = RaftStorage(tmp_path)
    st = s.load()
    assert [e.value for e in st.entries] == [b"a", b"b"]  # the truncate record survives
    assert s.report.log.dropped_bytes > 0
    p2 = tmp_path / "raft-meta.rec"
    with open(p2, "ab") as f:
        f.write(b"\x00\x00\x00\x10garbage")
    assert RaftStorage(tmp_path).load().term == 3


def test_forget_vote_and_ack_before_fsync(tmp_path):
    fill(tmp_path / "a", frozenset({"forget-vote"}))
    st = RaftStorage(tmp_path / "a").load()
    assert st.term == 3 and st.voted_for is None
    fill(tmp_path / "b", frozenset({"ack-before-fsync"}))  # buffered, never flushed: "SIGKILL"
    assert RaftStorage(tmp_path / "b").load().entries == []


def test_snapshot_compacts_log(tmp_path):
    s = fill(tmp_path)
    cfg = ClusterConfig(0, 0, (ClusterServer(1, "tcp://a:1"),))
    s.persist(PersistSnapshot(2, 1, cfg, b"STATE", ((3, E(3, b"C")),)))
    s.persist(PersistAppend(((4, E(3, b"D")),)))
    s.sync()
    st = RaftStorage(tmp_path).load()
    assert st.snapshot.last_index == 2 and st.snapshot.data == b"STATE" and st.snapshot.config == cfg
    assert [e.value for e in st.entries] == [b"C", b"D"]


def test_removed_flag_is_durable_and_last_record_wins(tmp_path):
    s = fill(tmp_path)
    assert RaftStorage(tmp_path).load().removed is False
    s.persist(PersistRemoved(True))
    s.sync()  # no close: like kill -9 after sync
    st = RaftStorage(tmp_path).load()
    assert st.removed is True and (st.term, st.voted_for) == (3, 2)
    s.persist(PersistRemoved(False))
    s.sync()
    assert RaftStorage(tmp_path).load().removed is False


def test_unreadable_membership_record_is_a_clear_error(tmp_path):
    import pytest

    from nodes.common.records import rewrite_records
    from nodes.garlicfarm.storage import StorageError

    fill(tmp_path)
    rewrite_records(tmp_path / "membership.rec", [b"not json"])
    with pytest.raises(StorageError, match="membership"):
        RaftStorage(tmp_path).load()
