"""Garlic Farm binary frames, exactly as proposal 150 lays them out. No I/O.

After the HTTP handshake a connection carries frames. A request is a 45-byte header
(type u8, source u32, destination u32, term u64, last log term u64, last log index u64,
commit index u64, log entries size u32) followed by that many bytes of log entries
(term u64, value type u8, size u32, bytes). A response is 26 bytes (type u8, source u32,
destination u32, term u64, next index u64, is accepted u8). All big-endian unsigned.
A receiver tells requests from responses by the message type number.

Log values (Configuration, ClusterServer, LogPack, SnapshotSyncRequest) have their own
layouts here. LogPack follows JRaft's ``packLog``: gzip of (index data len u32, log data
len u32, index data = one u64 offset per entry, log data = for each entry term u64 + value
type u8 + bytes); each entry's length is the distance to the next offset. The offsets are
absolute positions in the sender's log file, as JRaft's ``FileBasedSequentialLogStore`` writes
them: entry k sits at ``offsets[k] - offsets[0]`` in the log data, and ``LogPack.base_offset``
keeps ``offsets[0]`` so a pack re-encodes to the same bytes. The gzip header is Java's
``GZIPOutputStream`` one (mtime 0, XFL 0, OS 0xff).

Any malformed input raises ``CodecError`` (and only that): the runtime closes that one
connection and nothing else.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum

REQ_HEADER = struct.Struct(">BIIQQQQI")
RESP = struct.Struct(">BIIQQB")
ENTRY_HEADER = struct.Struct(">QBI")
assert REQ_HEADER.size == 45 and RESP.size == 26

MAX_ENTRIES_SIZE = 64 * 1024 * 1024
MAX_GUNZIP = 256 * 1024 * 1024
U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
#: Destination of an answer from a node that knows no leader: JRaft's int -1 on the wire.
NO_LEADER = U32


class CodecError(ValueError):
    """Malformed frame or log value; close the connection that sent it."""


class MsgType(IntEnum):
    REQUEST_VOTE_REQUEST = 1
    REQUEST_VOTE_RESPONSE = 2
    APPEND_ENTRIES_REQUEST = 3
    APPEND_ENTRIES_RESPONSE = 4
    CLIENT_REQUEST = 5
    ADD_SERVER_REQUEST = 6
    ADD_SERVER_RESPONSE = 7
    REMOVE_SERVER_REQUEST = 8
    REMOVE_SERVER_RESPONSE = 9
    SYNC_LOG_REQUEST = 10
    SYNC_LOG_RESPONSE = 11
    JOIN_CLUSTER_REQUEST = 12
    JOIN_CLUSTER_RESPONSE = 13
    LEAVE_CLUSTER_REQUEST = 14
    LEAVE_CLUSTER_RESPONSE = 15
    INSTALL_SNAPSHOT_REQUEST = 16
    INSTALL_SNAPSHOT_RESPONSE = 17


REQUEST_TYPES = frozenset(
    {MsgType(t) for t in (1, 3, 5, 6, 8, 10, 12, 14, 16)}
)
RESPONSE_TYPES = frozenset(MsgType(t) for t in (2, 4, 7, 9, 11, 13, 15, 17))


class ValueType(IntEnum):
    APPLICATION = 1
    CONFIGURATION = 2
    CLUSTER_SERVER = 3
    LOG_PACK = 4
    SNAPSHOT_SYNC_REQUEST = 5


# What entries each request type may carry: (allowed value type, exact count or None=any).
_ENTRY_RULES: dict[MsgType, tuple[ValueType | None, int | None]] = {
    MsgType.REQUEST_VOTE_REQUEST: (None, 0),
    MsgType.APPEND_ENTRIES_REQUEST: (None, None),
    MsgType.CLIENT_REQUEST: (ValueType.APPLICATION, None),
    MsgType.ADD_SERVER_REQUEST: (ValueType.CLUSTER_SERVER, 1),
    MsgType.REMOVE_SERVER_REQUEST: (ValueType.CLUSTER_SERVER, 1),
    MsgType.SYNC_LOG_REQUEST: (ValueType.LOG_PACK, 1),
    MsgType.JOIN_CLUSTER_REQUEST: (ValueType.CONFIGURATION, 1),
    MsgType.LEAVE_CLUSTER_REQUEST: (None, 0),
    MsgType.INSTALL_SNAPSHOT_REQUEST: (ValueType.SNAPSHOT_SYNC_REQUEST, 1),
}


@dataclass(frozen=True)
class LogEntry:
    term: int
    vtype: ValueType
    value: bytes


@dataclass(frozen=True)
class Request:
    type: MsgType
    source: int
    destination: int
    term: int
    last_log_term: int = 0
    last_log_index: int = 0
    commit_index: int = 0
    entries: tuple[LogEntry, ...] = ()


@dataclass(frozen=True)
class Response:
    type: MsgType
    source: int
    destination: int
    term: int
    next_index: int = 0
    accepted: bool = False


Message = Request | Response


@dataclass(frozen=True)
class ClusterServer:
    """A server's id and endpoint ("tcp://host:port"); endpoint None is the remove form."""

    id: int
    endpoint: str | None = None


@dataclass(frozen=True)
class ClusterConfig:
    log_index: int
    last_log_index: int
    servers: tuple[ClusterServer, ...] = ()

    def ids(self) -> list[int]:
        return sorted(s.id for s in self.servers)


@dataclass(frozen=True)
class LogPack:
    """Entries packed for SyncLog; ``base_offset`` is the first entry's absolute file offset."""

    entries: tuple[LogEntry, ...] = ()
    base_offset: int = 0


@dataclass(frozen=True)
class SnapshotSyncRequest:
    last_log_index: int
    last_log_term: int
    config: ClusterConfig
    offset: int
    data: bytes = field(default=b"")
    done: bool = False


# ---------------------------------------------------------------- helpers


def _u(v: int, bits: int, what: str) -> int:
    if not isinstance(v, int) or v < 0 or v >> bits:
        raise CodecError(f"{what}={v!r} does not fit u{bits}")
    return v


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError(f"{self.what}: truncated (need {n} bytes at {self.pos}, have {len(self.data) - self.pos})")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack(">Q", self.take(8))[0]

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CodecError(f"{self.what}: {len(self.data) - self.pos} trailing bytes")


# ---------------------------------------------------------------- log values


def encode_cluster_server(s: ClusterServer) -> bytes:
    if s.endpoint is None:
        return struct.pack(">I", _u(s.id, 32, "server id"))
    ep = _ascii(s.endpoint)
    return struct.pack(">II", _u(s.id, 32, "server id"), len(ep)) + ep


def _ascii(s: str) -> bytes:
    try:
        return s.encode("ascii")
    except UnicodeEncodeError:
        raise CodecError(f"endpoint {s!r} is not ASCII") from None


def _read_server(r: _Reader) -> ClusterServer:
    sid = r.u32()
    n = r.u32()
    try:
        ep = r.take(n).decode("ascii")
    except UnicodeDecodeError:
        raise CodecError("endpoint is not ASCII") from None
    return ClusterServer(sid, ep)


def decode_cluster_server(b: bytes) -> ClusterServer:
    if len(b) == 4:
        return ClusterServer(struct.unpack(">I", b)[0], None)
    r = _Reader(b, "ClusterServer")
    s = _read_server(r)
    r.end()
    return s


def encode_config(c: ClusterConfig) -> bytes:
    out = [struct.pack(">QQ", _u(c.log_index, 64, "log index"), _u(c.last_log_index, 64, "last log index"))]
    for s in c.servers:
        if s.endpoint is None:
            raise CodecError("Configuration servers need endpoints")
        out.append(encode_cluster_server(s))
    return b"".join(out)


def decode_config(b: bytes) -> ClusterConfig:
    r = _Reader(b, "Configuration")
    li, lli = r.u64(), r.u64()
    servers = []
    while r.pos < len(b):
        servers.append(_read_server(r))
    return ClusterConfig(li, lli, tuple(servers))


def encode_log_pack(p: LogPack) -> bytes:
    index = []
    log = []
    off = _u(p.base_offset, 64, "LogPack base offset")
    for e in p.entries:
        index.append(struct.pack(">Q", off))
        chunk = struct.pack(">QB", _u(e.term, 64, "term"), _u(int(e.vtype), 8, "value type")) + e.value
        log.append(chunk)
        off += len(chunk)
    ib, lb = b"".join(index), b"".join(log)
    raw = struct.pack(">II", len(ib), len(lb)) + ib + lb
    return _gzip(raw)


#: Java's GZIPOutputStream header: magic, deflate, no flags, mtime 0, XFL 0, OS 255 (unknown).
_JAVA_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")


def _gzip(raw: bytes) -> bytes:
    """Gzip as Java's GZIPOutputStream does (default level 6), so JRaft packs re-encode byte for byte."""
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = c.compress(raw) + c.flush()
    return _JAVA_GZIP_HEADER + body + struct.pack("<II", zlib.crc32(raw), len(raw) & U32)


def gunzip(b: bytes) -> bytes:
    """A LogPack's gzip stream -> its raw bytes (at most ``MAX_GUNZIP``)."""
    try:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        raw = d.decompress(b, MAX_GUNZIP)
        if d.unconsumed_tail or not d.eof:
            raise CodecError("LogPack: gzip stream truncated or too large")
    except zlib.error as e:
        raise CodecError(f"LogPack: bad gzip: {e}") from None
    return raw


def log_pack_offsets(p: LogPack) -> list[int]:
    """Each entry's offset relative to the first (add ``p.base_offset`` for the absolute one)."""
    out, off = [], 0
    for e in p.entries:
        out.append(off)
        off += 9 + len(e.value)
    return out


def decode_log_pack(b: bytes) -> LogPack:
    raw = gunzip(b)
    r = _Reader(raw, "LogPack")
    ilen, llen = r.u32(), r.u32()
    if ilen % 8:
        raise CodecError(f"LogPack: index data length {ilen} not a multiple of 8")
    ib = r.take(ilen)
    lb = r.take(llen)
    r.end()
    offs = [struct.unpack_from(">Q", ib, i)[0] for i in range(0, ilen, 8)]
    base = offs[0] if offs else 0
    offs = [o - base for o in offs]
    entries = []
    for i, o in enumerate(offs):
        end = offs[i + 1] if i + 1 < len(offs) else llen
        if o < 0 or end > llen or end - o < 9:
            raise CodecError(f"LogPack: bad offset {o}..{end} for entry {i}")
        term, vt = struct.unpack_from(">QB", lb, o)
        entries.append(LogEntry(term, _vtype(vt), lb[o + 9 : end]))
    if not offs and llen:
        raise CodecError("LogPack: log data without index")
    return LogPack(tuple(entries), base)


def encode_snapshot_sync(s: SnapshotSyncRequest) -> bytes:
    cfg = encode_config(s.config)
    return (
        struct.pack(">QQI", _u(s.last_log_index, 64, "last log index"), _u(s.last_log_term, 64, "last log term"), len(cfg))
        + cfg
        + struct.pack(">QI", _u(s.offset, 64, "offset"), len(s.data))
        + s.data
        + bytes([1 if s.done else 0])
    )


def decode_snapshot_sync(b: bytes) -> SnapshotSyncRequest:
    r = _Reader(b, "SnapshotSyncRequest")
    lli, llt, clen = r.u64(), r.u64(), r.u32()
    cfg = decode_config(r.take(clen))
    off, dlen = r.u64(), r.u32()
    data = r.take(dlen)
    done = r.u8()
    r.end()
    if done > 1:
        raise CodecError(f"SnapshotSyncRequest: Is Done = {done}")
    return SnapshotSyncRequest(lli, llt, cfg, off, data, bool(done))


def decode_value(e: LogEntry) -> object:
    """Decode an entry's value by its type (Application -> bytes unchanged)."""
    if e.vtype == ValueType.CONFIGURATION:
        return decode_config(e.value)
    if e.vtype == ValueType.CLUSTER_SERVER:
        return decode_cluster_server(e.value)
    if e.vtype == ValueType.LOG_PACK:
        return decode_log_pack(e.value)
    if e.vtype == ValueType.SNAPSHOT_SYNC_REQUEST:
        return decode_snapshot_sync(e.value)
    return e.value


# ---------------------------------------------------------------- frames


#: wire byte -> enum member: a dict lookup is several times cheaper than calling the enum
_VTYPES: dict[int, ValueType] = {int(v): v for v in ValueType}
_MTYPES: dict[int, MsgType] = {int(t): t for t in MsgType}


def _vtype(v: int) -> ValueType:
    t = _VTYPES.get(v)
    if t is None:
        raise CodecError(f"unknown log value type {v}")
    return t


def _mtype(v: int) -> MsgType:
    t = _MTYPES.get(v)
    if t is None:
        raise CodecError(f"unknown message type {v}")
    return t


def encode_entries(entries: tuple[LogEntry, ...] | list[LogEntry]) -> bytes:
    out = []
    pack = ENTRY_HEADER.pack
    for e in entries:
        v = e.value
        try:  # the precompiled struct range-checks; `_u` only names what does not fit
            if type(e.term) is not int:
                raise struct.error
            out.append(pack(e.term, int(e.vtype), len(v)))
        except struct.error:
            out.append(ENTRY_HEADER.pack(_u(e.term, 64, "entry term"), _u(int(e.vtype), 8, "value type"), _u(len(v), 32, "entry size")))
        out.append(v)
    return b"".join(out)


def decode_entries(b: bytes) -> tuple[LogEntry, ...]:
    out = []
    pos, end, hsize = 0, len(b), ENTRY_HEADER.size
    unpack_from = ENTRY_HEADER.unpack_from
    while pos < end:
        if pos + hsize > end:
            raise CodecError(f"log entries: truncated (need {hsize} bytes at {pos}, have {end - pos})")
        term, vt, size = unpack_from(b, pos)
        vtype = _vtype(vt)
        pos += hsize
        if pos + size > end:
            raise CodecError(f"log entries: truncated (need {size} bytes at {pos}, have {end - pos})")
        out.append(LogEntry(term, vtype, b[pos : pos + size]))
        pos += size
    return tuple(out)


def _check_entries(t: MsgType, entries: tuple[LogEntry, ...]) -> None:
    vt, count = _ENTRY_RULES[t]
    if count is not None and len(entries) != count:
        raise CodecError(f"{t.name} must carry {count} log entr{'y' if count == 1 else 'ies'}, got {len(entries)}")
    if vt is not None and entries and any(e.vtype != vt for e in entries):
        raise CodecError(f"{t.name} may only carry {vt.name} entries")


def encode(msg: Message) -> bytes:
    """Typed message -> frame bytes (raises CodecError for values that do not fit).

    The fast path packs plain ``int`` fields with the precompiled structs, which range-check
    them; anything else (a value out of range, a non-int) takes `_encode_checked`, which
    names the field at fault. Both give the same bytes for every valid message."""
    try:
        if type(msg) is Response:
            if msg.type in RESPONSE_TYPES and type(msg.source) is type(msg.destination) is type(msg.term) is type(msg.next_index) is int:
                return RESP.pack(msg.type, msg.source, msg.destination, msg.term, msg.next_index,
                                 1 if msg.accepted else 0)
        elif type(msg) is Request and msg.type in REQUEST_TYPES:
            if (type(msg.source) is type(msg.destination) is type(msg.term) is type(msg.last_log_term)
                    is type(msg.last_log_index) is type(msg.commit_index) is int):
                entries = msg.entries
                _check_entries(msg.type, entries)
                body = encode_entries(entries) if entries else b""  # a heartbeat: no body
                if len(body) <= MAX_ENTRIES_SIZE:
                    return REQ_HEADER.pack(msg.type, msg.source, msg.destination, msg.term, msg.last_log_term,
                                           msg.last_log_index, msg.commit_index, len(body)) + body
    except struct.error:
        pass
    return _encode_checked(msg)


def _encode_checked(msg: Message) -> bytes:
    if isinstance(msg, Response):
        if msg.type not in RESPONSE_TYPES:
            raise CodecError(f"{msg.type!r} is not a response type")
        return RESP.pack(
            int(msg.type), _u(msg.source, 32, "source"), _u(msg.destination, 32, "destination"),
            _u(msg.term, 64, "term"), _u(msg.next_index, 64, "next index"), 1 if msg.accepted else 0,
        )
    if msg.type not in REQUEST_TYPES:
        raise CodecError(f"{msg.type!r} is not a request type")
    _check_entries(msg.type, msg.entries)
    body = encode_entries(msg.entries)
    if len(body) > MAX_ENTRIES_SIZE:
        raise CodecError(f"log entries size {len(body)} exceeds {MAX_ENTRIES_SIZE}")
    return REQ_HEADER.pack(
        int(msg.type), _u(msg.source, 32, "source"), _u(msg.destination, 32, "destination"),
        _u(msg.term, 64, "term"), _u(msg.last_log_term, 64, "last log term"),
        _u(msg.last_log_index, 64, "last log index"), _u(msg.commit_index, 64, "commit index"), len(body),
    ) + body


def frame_length(buf: bytes | bytearray, max_entries: int = MAX_ENTRIES_SIZE) -> int | None:
    """Total length of the frame at the start of ``buf``, or None if more bytes are needed."""
    if not buf:
        return None
    t = _mtype(buf[0])
    if t in RESPONSE_TYPES:
        return RESP.size
    if len(buf) < REQ_HEADER.size:
        return None
    size = struct.unpack_from(">I", buf, REQ_HEADER.size - 4)[0]
    if size > max_entries:
        raise CodecError(f"log entries size {size} exceeds limit {max_entries}")
    return REQ_HEADER.size + size


def decode(frame: bytes) -> Message:
    """Exactly one whole frame -> typed message."""
    if not frame:
        raise CodecError("empty frame")
    t = _mtype(frame[0])
    if t in RESPONSE_TYPES:
        if len(frame) != RESP.size:
            raise CodecError(f"response must be {RESP.size} bytes, got {len(frame)}")
        _, src, dst, term, nxt, acc = RESP.unpack(frame)
        if acc > 1:
            raise CodecError(f"Is Accepted = {acc}")
        return Response(t, src, dst, term, nxt, bool(acc))
    if len(frame) < REQ_HEADER.size:
        raise CodecError(f"request shorter than its {REQ_HEADER.size}-byte header ({len(frame)})")
    _, src, dst, term, llt, lli, ci, size = REQ_HEADER.unpack_from(frame)
    if size != len(frame) - REQ_HEADER.size:
        raise CodecError(f"log entries size {size} != {len(frame) - REQ_HEADER.size} bytes present")
    entries = decode_entries(frame[REQ_HEADER.size :]) if size else ()  # heartbeats: no slice
    _check_entries(t, entries)
    return Request(t, src, dst, term, llt, lli, ci, entries)


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, get whole messages; CodecError poisons it."""

    def __init__(self, max_entries: int = MAX_ENTRIES_SIZE) -> None:
        self._buf = bytearray()
        self.max_entries = max_entries

    def feed(self, data: bytes) -> list[Message]:
        self._buf += data
        out: list[Message] = []
        while True:
            n = frame_length(self._buf, self.max_entries)
            if n is None or len(self._buf) < n:
                return out
            frame = bytes(self._buf[:n])
            del self._buf[:n]
            out.append(decode(frame))

    @property
    def buffered(self) -> int:
        return len(self._buf)
