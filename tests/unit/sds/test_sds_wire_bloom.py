"""Wire format (field numbers, kinds, bad bytes) and the interoperable bloom filter layout."""

from __future__ import annotations

import mmh3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.sds import bloom, repair
from nodes.sds.wire import (
    HistoryEntry,
    Kind,
    Message,
    PbMessage,
    WireError,
    decode,
    encode,
)

ids = st.text(min_size=1, max_size=20)
entries = st.builds(HistoryEntry, ids, st.none() | ids, st.none() | st.binary(max_size=8))
messages = st.builds(Message, ids, ids, st.text(max_size=5), st.none() | st.integers(0, 2**64 - 1),
                     st.lists(entries, max_size=4).map(tuple), st.none() | st.binary(max_size=64),
                     st.lists(entries, max_size=3).map(tuple), st.none() | st.binary(max_size=64))


@given(messages)
def test_round_trip(m: Message) -> None:
    assert decode(encode(m)) == m


@given(st.binary(max_size=200))
def test_garbage_is_a_typed_error_or_a_message(data: bytes) -> None:
    try:
        decode(data)
    except WireError:
        pass


def test_field_numbers_are_the_specs() -> None:
    fields = {f.name: f.number for f in PbMessage.DESCRIPTOR.fields}
    assert fields == {"sender_id": 1, "message_id": 2, "channel_id": 3, "lamport_timestamp": 10,
                      "causal_history": 11, "bloom_filter": 12, "repair_request": 13,
                      "content": 20}
    he = PbMessage.DESCRIPTOR.fields_by_name["causal_history"].message_type
    assert {f.name: f.number for f in he.fields} == {"message_id": 1, "retrieval_hint": 2,
                                                      "sender_id": 3}
    # field 10 (varint) on the wire: tag 0x50
    assert b"\x50\x07" in encode(Message("a", "b", lamport_timestamp=7))


def test_kinds() -> None:
    assert Message("a", "b", lamport_timestamp=1, content=b"x").kind is Kind.CONTENT
    assert Message("a", "b", lamport_timestamp=1, content=b"").kind is Kind.SYNC
    assert Message("a", "b", lamport_timestamp=1).kind is Kind.SYNC
    assert Message("a", "b", content=b"x").kind is Kind.EPHEMERAL


def test_missing_ids_rejected() -> None:
    with pytest.raises(WireError):
        decode(encode(Message("", "x")))


def test_bloom_positions_follow_the_reference_formula() -> None:
    mid = "some-message-id"
    ha = abs(mmh3.hash(mid, 0, signed=True)) % 150_000
    hb = abs(mmh3.hash(mid + " b", 0, signed=True)) % 150_000
    assert bloom.positions(mid) == tuple(abs(ha + i * hb) % 150_000 for i in range(10))


def test_bloom_serialization_is_big_endian_words() -> None:
    f = bloom.BloomFilter()
    assert len(f.to_bytes()) == 2344 * 8
    f._data[:] = bytes(len(f._data))
    off, mask = bloom._locate(0)
    assert (off, mask) == (7, 1)  # bit 0 is the low bit of word 0, its last byte in BE
    assert bloom._locate(64 + 9) == (8 + 6, 2)
    f.add("x")
    words = [int.from_bytes(f.to_bytes()[i:i + 8], "big") for i in range(0, 2344 * 8, 8)]
    got = {w * 64 + b for w, v in enumerate(words) for b in range(64) if v >> b & 1}
    assert got == set(bloom.positions("x"))
    g = bloom.BloomFilter.from_bytes(f.to_bytes())
    assert "x" in g and bloom.contains(f.to_bytes(), "x")
    with pytest.raises(bloom.BloomFormatError):
        bloom.BloomFilter.from_bytes(b"\x00" * 10)


def test_bloom_fill_ratio_counts_distinct_set_bits() -> None:
    f = bloom.BloomFilter()
    assert f.fill_ratio() == 0
    ids = [f"id{i}" for i in range(50)]
    for i in ids:
        f.add(i)
    bits = {p for i in ids for p in bloom.positions(i)}
    assert f.fill_ratio() == len(bits) / 150_000
    f.add(ids[0])  # again: no new bit
    assert f.fill_ratio() == len(bits) / 150_000


def test_bloom_false_positive_rate_at_capacity() -> None:
    f = bloom.BloomFilter()
    for i in range(10_000):
        f.add(f"id{i}")
    assert all(f"id{i}" in f for i in range(0, 10_000, 7))
    fp = sum(f"other{i}" in f for i in range(5_000)) / 5_000
    assert fp < 0.003


def test_repair_formulas() -> None:
    h = repair.sds_hash("ab")
    assert h == repair.sds_hash("a", "b") and 0 <= h < 2**64
    for mid in ("m1", "m2", "m3"):
        t = repair.t_req(1000, "p", mid, 30_000, 120_000)
        assert 1000 + 30_000 <= t < 1000 + 120_000
        assert repair.t_resp(1000, "s", "s", mid, 120_000) == 1000  # the sender answers first
        assert 1000 <= repair.t_resp(1000, "p", "s", mid, 120_000) < 121_000
        assert repair.in_response_group("s", "s", mid, 5)  # always in its own group
        assert repair.in_response_group("p", "s", mid, 1)
    assert repair.num_response_groups(127) == 1 and repair.num_response_groups(128) == 2
