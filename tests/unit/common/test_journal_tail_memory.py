"""The journal's in-memory tail is bounded by event count, not by the size of event fields:
a DRiP joiner journals an ``apply`` event with every value it learns by sync."""

import hashlib
import json
import os
import tracemalloc

from nodes.common.clock import Clock
from nodes.common.journal import ELIDE_BYTES, Journal


def _value(i: int, n: int) -> str:
    return os.urandom(n // 2).hex()[:n - 1] + str(i % 10)


def test_tail_memory_does_not_grow_with_value_size(tmp_path):
    j = Journal(tmp_path / "events.jsonl", Clock(), tail_size=1_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):  # 200 x 64 KiB: the tail held ~13 MB of values before
            j.emit("apply", key=f"k{i}", value=_value(i, 65_536))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    j.close()
    assert held < 2 * 1024 * 1024, f"tail holds {held} bytes for 200 events"
    # the file keeps every value whole: the checkers read it
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert len(lines) == 200 and all(len(e["value"]) == 65_536 for e in lines)


def test_since_elides_large_fields_with_a_digest_of_the_file_bytes(tmp_path):
    path = tmp_path / "events.jsonl"
    j = Journal(path, Clock(), tail_size=3)
    big = "x" * (ELIDE_BYTES + 10)
    j.emit("apply", key="a", value=big, version=1)
    j.emit("apply", key="b", value="small", version=2)
    for _ in range(3):  # push seq 0 and 1 out of the tail: since(0) reads the file
        j.emit("tick")
    raw = json.dumps(big, separators=(",", ":")).encode()
    marker = {"elided_bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    from_file, nxt = j.since(0)
    assert nxt == 5 and from_file[0]["value"] == marker
    assert from_file[0]["key"] == "a" and from_file[0]["version"] == 1
    assert from_file[1] == {**from_file[1], "value": "small", "key": "b"}
    j.emit("apply", key="c", value=big)
    from_tail, _ = j.since(5)
    assert from_tail[0]["value"] == marker and from_tail[0]["type"] == "apply"
    j.close()
    j2 = Journal(path, Clock())  # reloaded tail is elided too; the file is unchanged
    assert j2.since(0)[0][0]["value"] == marker and j2.since(5)[0][0]["value"] == marker
    whole = [json.loads(x) for x in path.read_text().splitlines()]
    assert whole[0]["value"] == big and whole[5]["value"] == big
    j2.close()


def test_reopening_a_large_journal_reads_it_a_line_at_a_time(tmp_path):
    """Recovery on restart scanned a copy of the whole file (a joiner's journal of synced
    values is gigabytes): its memory is now bounded by one event, and a torn tail is still
    cut and reported."""
    path = tmp_path / "events.jsonl"
    j = Journal(path, Clock(), tail_size=1_000)
    for i in range(300):  # ~20 MB of apply events
        j.emit("apply", key=f"k{i}", value=_value(i, 65_536))
    j.close()
    with open(path, "ab") as f:
        f.write(b'{"seq":300,"t":1.0,"type":"apply","value":"cut sho')
    size = path.stat().st_size
    tracemalloc.start()
    try:
        j2 = Journal(path, Clock(), tail_size=1_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, f"recovery peaked at {peak} bytes for a {size}-byte file"
    assert j2.next_seq == 301 and j2.torn_type == "apply" and j2.torn_bytes == 50
    assert [e["seq"] for e in j2.since(298)[0]] == [298, 299, 300]
    assert j2.since(300)[0][0]["type"] == "journal-repaired"
    j2.close()


def test_every_nodes_journal_keeps_a_small_tail_by_default(tmp_path):
    """The shared bounds every protocol's node takes (2,000 events, 1 MiB of their JSON): a
    tail of 50,000 held ~27 MB in a garlicfarm node under 30 clients and ~25-40 MB in a DRiP
    node over a long attack. Older events come from the file, whole and in order."""
    j = Journal(tmp_path / "events.jsonl", Clock())
    try:
        for i in range(10_000):
            j.emit("apply", index=i, digest="0123456789abcdef", app="kv")
        assert j.tail_events <= 2_000
        events, nxt = j.since(0, limit=20_000)  # older than the tail: read from the file
        assert [e["index"] for e in events] == list(range(10_000)) and nxt == 10_000
        for i in range(300):
            j.emit("refused", error="y" * 4_000, n=i)
        assert j.tail_events * 4_000 <= 1.1 * (1 << 20)
    finally:
        j.close()
