import os

import pytest

from nodes.common.records import HEADER, RecordFile, rewrite_records


def _write(path, payloads):
    rf = RecordFile.open(path)
    rf.append_many(payloads)
    rf.close()


def test_roundtrip_and_clean_report(tmp_path):
    p = tmp_path / "r.rec"
    _write(p, [b"a", b"", b"x" * 1000])
    rf = RecordFile.open(p)
    assert rf.records_at_open == [b"a", b"", b"x" * 1000]
    assert rf.report.clean and rf.report.reason is None
    rf.append(b"more")
    rf.close()
    assert RecordFile.open(p).records_at_open[-1] == b"more"


@pytest.mark.parametrize("cut", [1, HEADER.size - 1, HEADER.size + 2])
def test_torn_tail_truncated(tmp_path, cut):
    p = tmp_path / "r.rec"
    _write(p, [b"first", b"second-record"])
    full = p.stat().st_size
    last_len = HEADER.size + len(b"second-record")
    os.truncate(p, full - last_len + cut)
    rf = RecordFile.open(p)
    assert rf.records_at_open == [b"first"]
    assert rf.report.dropped_bytes == cut
    assert "torn" in rf.report.reason
    assert p.stat().st_size == full - last_len
    rf.append(b"after")
    rf.close()
    assert RecordFile.open(p).records_at_open == [b"first", b"after"]


def test_flipped_crc_drops_rest(tmp_path):
    p = tmp_path / "r.rec"
    _write(p, [b"one", b"two", b"three"])
    data = bytearray(p.read_bytes())
    off = HEADER.size + 3 + HEADER.size  # payload of record 2
    data[off] ^= 0xFF
    p.write_bytes(bytes(data))
    rf = RecordFile.open(p)
    assert rf.records_at_open == [b"one"]
    assert "CRC" in rf.report.reason
    assert rf.report.dropped_bytes == len(data) - (HEADER.size + 3)


def test_deferred_lost_without_sync(tmp_path):
    p = tmp_path / "r.rec"
    rf = RecordFile.open(p)
    rf.append(b"durable")
    rf.append_deferred(b"volatile")
    # simulate SIGKILL: drop the object without close/sync
    os.close(rf._fd)
    rf._fd = -1
    assert RecordFile.open(p).records_at_open == [b"durable"]


def test_rewrite_atomic(tmp_path):
    p = tmp_path / "r.rec"
    _write(p, [b"old"])
    rewrite_records(p, [b"n1", b"n2"])
    assert RecordFile.open(p).records_at_open == [b"n1", b"n2"]
