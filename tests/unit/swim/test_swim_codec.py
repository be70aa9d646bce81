"""The SWIM codec: every message round-trips; arbitrary bytes never crash the decoder."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.swim import codec as c
from nodes.swim.core import Options, SwimCore

u32 = st.integers(0, c.MAX_U32)
u64 = st.integers(0, c.MAX_U64)
infos = st.builds(c.NodeInfo, u32, u32)
updates = st.builds(c.Update, st.sampled_from(list(c.UpdateKind)), infos, u32)
payloads = st.builds(c.Payload, u32, st.lists(updates, max_size=20).map(tuple),
                     st.lists(infos, max_size=20).map(tuple))
small_bytes = st.binary(max_size=64)
domains = st.binary(min_size=8, max_size=8)
etags = st.text(max_size=30)
addresses = st.one_of(
    st.builds(c.Address, st.just(c.ADDR_FAMILY_INET), st.integers(0, 65535),
              st.binary(min_size=4, max_size=4)),
    st.builds(c.Address, st.just(c.ADDR_FAMILY_INET6), st.integers(0, 65535),
              st.binary(min_size=16, max_size=16)),
)
messages = st.one_of(
    st.builds(c.JoinReq, infos, small_bytes, small_bytes, payloads),
    st.builds(c.JoinNak, domains, u64, etags),
    st.builds(c.JoinRedirect, addresses, domains, u64, etags),
    st.builds(c.JoinAck, infos, payloads),
    st.builds(c.Leave, infos),
    st.builds(c.PingRequest, u32, u32, st.integers(0, 255), payloads),
    st.builds(c.PingResponse, u32, u32, st.integers(0, 255), payloads),
    st.builds(c.Broadcast, infos),
)


@given(messages)
def test_round_trip(msg: c.Message) -> None:
    assert c.decode(c.encode(msg)) == msg


@given(payloads)
def test_payload_round_trip(p: c.Payload) -> None:
    assert c.decode_payload(c.encode_payload(p)) == p


@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_codec_errors(data: bytes) -> None:
    try:
        c.decode(data)
    except c.CodecError:
        pass


@given(messages, st.data())
def test_truncated_or_extended_is_malformed_or_still_whole(msg: c.Message, data: st.DataObject
                                                           ) -> None:
    raw = c.encode(msg)
    cut = data.draw(st.integers(1, len(raw) - 1)) if len(raw) > 1 else 1
    try:
        got = c.decode(raw[:cut])
    except c.MalformedMessage:
        return
    # a shorter datagram can only decode when the tail was an optional (empty) payload
    assert isinstance(got, c.JoinReq | c.JoinAck | c.PingRequest | c.PingResponse)


def test_layouts_match_the_issue() -> None:
    # NodeInfo = id u32 LE + gen u32 LE
    assert c.encode(c.Leave(c.NodeInfo(0x01020304, 7))) == bytes([69, 4, 3, 2, 1, 7, 0, 0, 0])
    assert c.encode(c.Broadcast(c.NodeInfo(1, 2)))[0] == 250
    # address: family u16 LE, then port and address in network order
    red = c.encode(c.JoinRedirect(c.Address.of("127.0.0.1", 0x1234), c.domain_tag("swim"), 1))
    assert red[:9] == bytes([65, 2, 0, 0x12, 0x34, 127, 0, 0, 1])
    # an empty-payload ping is exactly code + src + target + ttl
    assert c.decode(bytes([67]) + c.PING_HEAD.pack(3, 4, 1)) == c.PingRequest(3, 4, 1)


@pytest.mark.parametrize("first", [0, 1, 62, 70, 249, 251, 255])
def test_unknown_first_byte(first: int) -> None:
    with pytest.raises(c.UnknownMessage):
        c.decode(bytes([first, 1, 2, 3]))


def test_malformed_examples() -> None:
    for raw in (b"", bytes([68, 1, 2]), bytes([69]) + bytes(9),
                bytes([67]) + c.PING_HEAD.pack(1, 2, 0) + c.U32.pack(0) + bytes([1, 9]) + bytes(10),  # a truncated entry
                bytes([65]) + c.U16.pack(99) + bytes(30)):
        with pytest.raises(c.MalformedMessage):
            c.decode(raw)


def test_a_gossip_entry_of_an_unknown_kind_is_skipped_not_the_datagram() -> None:
    """Issue 25 item 5: payload extensions (key-chain updates, say) must not make every
    ping that carries one be dropped whole."""
    known = c.Update(c.UpdateKind.DEAD, c.NodeInfo(4, 2), 1)
    ping = c.PingRequest(1, 2, 0, c.Payload(seq=5, updates=(known,), sample=(c.NodeInfo(1, 0),)))
    raw = bytearray(c.encode(ping))
    at = raw.index(c.encode_payload(ping.payload)) + 4  # the payload's entry count
    assert raw[at] == 1
    raw[at] = 2
    raw[at + 1:at + 1] = bytes([42]) + bytes(12)  # kind 42, then id, gen, origin
    got = c.decode(bytes(raw))
    assert got == ping and got.payload.skipped == (42,)
    core = SwimCore(2, 0, {1: ("h", 1)}, [], Options(), random.Random(0))
    core.start(0.0)
    core.on_message(1, got, 0.1)
    assert core.counters.unknown_gossip == 1
