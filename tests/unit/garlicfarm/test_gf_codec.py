import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.garlicfarm import codec as c
from nodes.garlicfarm.codec import (
    ClusterConfig,
    ClusterServer,
    CodecError,
    FrameDecoder,
    LogEntry,
    LogPack,
    MsgType,
    Request,
    Response,
    SnapshotSyncRequest,
    ValueType,
)

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
endpoint = st.builds(lambda h, p: f"tcp://{h}:{p}", st.from_regex(r"[a-z0-9.]{1,20}", fullmatch=True), st.integers(1, 65535))
server = st.builds(ClusterServer, u32, endpoint)
config = st.builds(ClusterConfig, u64, u64, st.lists(server, max_size=5).map(tuple))
app_entry = st.builds(LogEntry, u64, st.just(ValueType.APPLICATION), st.binary(max_size=200))
any_entry = st.builds(LogEntry, u64, st.sampled_from(ValueType), st.binary(max_size=100))
pack = st.builds(LogPack, st.lists(any_entry, max_size=6).map(tuple))
snap = st.builds(SnapshotSyncRequest, u64, u64, config, u64, st.binary(max_size=300), st.booleans())

SETTINGS = settings(max_examples=60, deadline=None)


def entries_for(t: MsgType):
    if t in (MsgType.REQUEST_VOTE_REQUEST, MsgType.LEAVE_CLUSTER_REQUEST):
        return st.just(())
    if t == MsgType.APPEND_ENTRIES_REQUEST:
        return st.lists(any_entry, max_size=5).map(tuple)
    if t == MsgType.CLIENT_REQUEST:
        return st.lists(app_entry, max_size=5).map(tuple)
    if t in (MsgType.ADD_SERVER_REQUEST, MsgType.REMOVE_SERVER_REQUEST):
        v = st.builds(ClusterServer, u32, st.none() | endpoint).map(c.encode_cluster_server)
        return st.tuples(st.builds(LogEntry, u64, st.just(ValueType.CLUSTER_SERVER), v))
    if t == MsgType.SYNC_LOG_REQUEST:
        return st.tuples(st.builds(LogEntry, u64, st.just(ValueType.LOG_PACK), pack.map(c.encode_log_pack)))
    if t == MsgType.JOIN_CLUSTER_REQUEST:
        return st.tuples(st.builds(LogEntry, u64, st.just(ValueType.CONFIGURATION), config.map(c.encode_config)))
    assert t == MsgType.INSTALL_SNAPSHOT_REQUEST
    return st.tuples(st.builds(LogEntry, u64, st.just(ValueType.SNAPSHOT_SYNC_REQUEST), snap.map(c.encode_snapshot_sync)))


@st.composite
def requests(draw, t=None):
    t = t or draw(st.sampled_from(sorted(c.REQUEST_TYPES)))
    return Request(t, draw(u32), draw(u32), draw(u64), draw(u64), draw(u64), draw(u64), draw(entries_for(t)))


responses = st.builds(Response, st.sampled_from(sorted(c.RESPONSE_TYPES)), u32, u32, u64, u64, st.booleans())


@pytest.mark.parametrize("t", sorted(c.REQUEST_TYPES))
@SETTINGS
@given(data=st.data())
def test_request_roundtrip_each_type(t, data):
    msg = data.draw(requests(t))
    b = c.encode(msg)
    assert len(b) == 45 + struct.unpack_from(">I", b, 41)[0]
    assert c.decode(b) == msg
    if t != MsgType.APPEND_ENTRIES_REQUEST:  # AE entries here are arbitrary bytes
        for e in msg.entries:
            c.decode_value(e)  # every typed value decodes by its type


@SETTINGS
@given(responses)
def test_response_roundtrip(msg):
    b = c.encode(msg)
    assert len(b) == 26 and c.decode(b) == msg


@SETTINGS
@given(config)
def test_configuration_roundtrip(cfg):
    assert c.decode_config(c.encode_config(cfg)) == cfg


@SETTINGS
@given(st.builds(ClusterServer, u32, st.none() | endpoint))
def test_cluster_server_roundtrip(s):
    b = c.encode_cluster_server(s)
    assert c.decode_cluster_server(b) == s
    assert len(b) == (4 if s.endpoint is None else 8 + len(s.endpoint))


@SETTINGS
@given(pack)
def test_log_pack_roundtrip_and_gzipped(p):
    b = c.encode_log_pack(p)
    assert b[:2] == b"\x1f\x8b"
    assert c.decode_log_pack(b) == p


@SETTINGS
@given(snap)
def test_snapshot_sync_roundtrip(s):
    assert c.decode_snapshot_sync(c.encode_snapshot_sync(s)) == s


@SETTINGS
@given(st.lists(st.one_of(requests(), responses), max_size=6), st.integers(1, 50))
def test_stream_decoder_any_split(msgs, chunk):
    data = b"".join(c.encode(m) for m in msgs)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(data), chunk):
        out += dec.feed(data[i : i + chunk])
    assert out == msgs and dec.buffered == 0


@SETTINGS
@given(st.binary(max_size=120))
def test_garbage_only_raises_codec_error(data):
    try:
        FrameDecoder(max_entries=1 << 20).feed(data)
        c.decode(data)
    except CodecError:
        pass


def test_malformed_frames():
    good = c.encode(Request(MsgType.APPEND_ENTRIES_REQUEST, 1, 2, 3, entries=(LogEntry(1, ValueType.APPLICATION, b"x"),)))
    with pytest.raises(CodecError, match="shorter"):
        c.decode(good[:30])
    with pytest.raises(CodecError, match="entries size"):
        c.decode(good[:-1])
    with pytest.raises(CodecError, match="unknown message type"):
        c.decode(b"\x63" + good[1:])
    with pytest.raises(CodecError, match="unknown message type"):
        c.decode(b"\x00" * 26)
    huge = bytearray(good)
    huge[41:45] = struct.pack(">I", 2**32 - 1)
    with pytest.raises(CodecError, match="exceeds"):
        FrameDecoder().feed(bytes(huge))
    with pytest.raises(CodecError):  # entry size runs past the frame
        bad = bytearray(good)
        bad[45 + 9 : 45 + 13] = struct.pack(">I", 1000)
        c.decode(bytes(bad))
    with pytest.raises(CodecError, match="value type"):
        bad = bytearray(good)
        bad[45 + 8] = 9
        c.decode(bytes(bad))
    with pytest.raises(CodecError, match="response must be 26"):
        c.decode(c.encode(Response(MsgType.APPEND_ENTRIES_RESPONSE, 1, 2, 3)) + b"x")
    with pytest.raises(CodecError, match="Is Accepted"):
        c.decode(c.encode(Response(MsgType.APPEND_ENTRIES_RESPONSE, 1, 2, 3))[:-1] + b"\x02")
    with pytest.raises(CodecError, match="must carry 0"):
        c.encode(Request(MsgType.REQUEST_VOTE_REQUEST, 1, 2, 3, entries=(LogEntry(1, ValueType.APPLICATION, b""),)))
    with pytest.raises(CodecError, match="only carry APPLICATION"):
        ae = c.encode(Request(MsgType.APPEND_ENTRIES_REQUEST, 1, 2, 3, entries=(LogEntry(1, ValueType.CONFIGURATION, b""),)))
        c.decode(bytes([MsgType.CLIENT_REQUEST]) + ae[1:])


def test_bad_gzip_and_bad_pack():
    with pytest.raises(CodecError, match="gzip"):
        c.decode_log_pack(b"not gzip at all")
    with pytest.raises(CodecError, match="truncated"):
        c.decode_log_pack(c.encode_log_pack(LogPack((LogEntry(1, ValueType.APPLICATION, b"abc"),)))[:-4])
    with pytest.raises(CodecError, match="multiple of 8"):
        c.decode_log_pack(gzip.compress(struct.pack(">II", 3, 0) + b"abc"))
    with pytest.raises(CodecError, match="bad offset"):
        c.decode_log_pack(gzip.compress(struct.pack(">II", 8, 4) + struct.pack(">Q", 0) + b"abcd"))
    with pytest.raises(CodecError):
        c.decode_config(b"\x00" * 10)
    with pytest.raises(CodecError):
        c.decode_snapshot_sync(b"\x00" * 20)
    with pytest.raises(CodecError, match="u32"):
        c.encode(Response(MsgType.APPEND_ENTRIES_RESPONSE, 2**32, 2, 3))
