"""SWIM wire codec: bytes <-> typed messages, no I/O (docs/swim.md, "Wire").

Every datagram starts with a one-byte message code (the origin implementation's codes; Leave
is ours). Integers are little-endian except inside an address, which is family (u16 LE) then
port and address bytes in network order, as the issue fixes. The spec names no field for a
whole message's size: a message ends where the datagram ends, so the trailing gossip
``payload`` is "the rest of the datagram".

``decode`` raises `UnknownMessage` for an unrecognised first byte (the node drops it silently)
and `MalformedMessage` for anything else that does not parse exactly (dropped and counted).
It never raises anything else, whatever the bytes.
"""

from __future__ import annotations

import enum
import ipaddress
import socket
import struct
from dataclasses import dataclass, field

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
NODE_INFO = struct.Struct("<II")
PING_HEAD = struct.Struct("<IIB")  # srcId, targetId, ttl
ADDR_FAMILY_INET = socket.AF_INET.value
ADDR_FAMILY_INET6 = socket.AF_INET6.value

MAX_U32 = 2**32 - 1
MAX_U16 = 2**16 - 1
MAX_U64 = 2**64 - 1


class Code(enum.IntEnum):
    JOIN_REQ = 63
    JOIN_ACK = 64
    JOIN_REDIRECT = 65
    JOIN_NAK = 66
    PING_REQUEST = 67
    PING_RESPONSE = 68
    LEAVE = 69  # ours: the spec names Leave but gives no code; 69 is unused by the origin
    BROADCAST = 250


class UpdateKind(enum.IntEnum):
    """What a gossip entry says about a member (the payload's closed set)."""

    ALIVE = 1  # joined, or refuted a suspicion with a higher generation
    SUSPECT = 2
    DEAD = 3
    LEFT = 4


class CodecError(ValueError):
    """Base of the codec's errors: the datagram is not a message we can use."""


class UnknownMessage(CodecError):
    """The first byte is no message code: drop the datagram (the spec's rule)."""


class MalformedMessage(CodecError):
    """A known code with a body that does not parse: drop the datagram and count it."""


@dataclass(frozen=True)
class NodeInfo:
    """A member's identity: NodeID u32 + generation u32 (a restart or refutation bumps gen)."""

    id: int
    gen: int


@dataclass(frozen=True)
class Update:
    """One gossip entry: ``kind`` about ``node`` (at its generation), first said by ``origin``."""

    kind: UpdateKind
    node: NodeInfo
    origin: int


@dataclass(frozen=True)
class Payload:
    """The gossip piggy-backed on pings, join answers and join requests.

    Layout (ours, compact): ``seq u32 | n u8 | n * (kind u8, id u32, gen u32, origin u32) |
    m u8 | m * (id u32, gen u32)``. ``seq`` matches a ping response to its probe (0 where
    unused); ``updates`` are the disseminated events; ``sample`` lists alive members (the
    "welcome" details of a JoinAck). An empty payload (zero bytes) is `Payload()`.
    Entries are fixed-size, so one of a kind we do not know (an extension such as a key-chain
    update) is skipped, not the whole datagram; ``skipped`` lists their kinds (decoded only,
    never encoded or compared).
    """

    seq: int = 0
    updates: tuple[Update, ...] = ()
    sample: tuple[NodeInfo, ...] = ()
    skipped: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Address:
    """A socket address as the wire carries it: family, port, raw address bytes."""

    family: int
    port: int
    host: bytes

    @classmethod
    def of(cls, host: str, port: int) -> Address:
        ip = ipaddress.ip_address(host)
        fam = ADDR_FAMILY_INET if ip.version == 4 else ADDR_FAMILY_INET6
        return cls(fam, port, ip.packed)

    def to_tuple(self) -> tuple[str, int]:
        return str(ipaddress.ip_address(self.host)), self.port


@dataclass(frozen=True)
class JoinReq:
    src: NodeInfo
    token: bytes = b""
    auth: bytes = b""
    payload: Payload = field(default_factory=Payload)


@dataclass(frozen=True)
class JoinNak:
    domain: bytes  # 8 bytes: the error domain's tag, NUL-padded ASCII (b"swim")
    code: int  # u64
    etag: str = ""


@dataclass(frozen=True)
class JoinRedirect:
    address: Address
    domain: bytes
    code: int
    etag: str = ""  # ours: "node:<id>" names the member behind ``address`` (see docs/swim.md)


@dataclass(frozen=True)
class JoinAck:
    desc: NodeInfo
    payload: Payload = field(default_factory=Payload)


@dataclass(frozen=True)
class Leave:
    src: NodeInfo


@dataclass(frozen=True)
class PingRequest:
    src: int
    target: int
    ttl: int = 0
    payload: Payload = field(default_factory=Payload)


@dataclass(frozen=True)
class PingResponse:
    src: int  # the requester
    target: int  # the probed node, which answers
    ttl: int = 0
    payload: Payload = field(default_factory=Payload)


@dataclass(frozen=True)
class Broadcast:
    self_info: NodeInfo


Message = (JoinReq | JoinNak | JoinRedirect | JoinAck | Leave | PingRequest | PingResponse
           | Broadcast)


def domain_tag(name: str) -> bytes:
    """An 8-byte error domain from a short ASCII name."""
    raw = name.encode("ascii")
    if len(raw) > 8:
        raise ValueError(f"domain {name!r} is longer than 8 bytes")
    return raw.ljust(8, b"\0")


# ----------------------------------------------------------------------------- encoding


def _u16_bytes(b: bytes) -> bytes:
    if len(b) > MAX_U16:
        raise ValueError(f"field of {len(b)} bytes exceeds u16 size")
    return U16.pack(len(b)) + b


def _info(n: NodeInfo) -> bytes:
    return NODE_INFO.pack(n.id, n.gen)


def encode_payload(p: Payload) -> bytes:
    if len(p.updates) > 255 or len(p.sample) > 255:
        raise ValueError("a payload carries at most 255 updates and 255 sample entries")
    out = [U32.pack(p.seq), bytes([len(p.updates)])]
    for u in p.updates:
        out.append(bytes([u.kind]) + _info(u.node) + U32.pack(u.origin))
    out.append(bytes([len(p.sample)]))
    out.extend(_info(n) for n in p.sample)
    return b"".join(out)


def _address(a: Address) -> bytes:
    return U16.pack(a.family) + struct.pack("!H", a.port) + a.host


def encode(msg: Message) -> bytes:
    """One datagram for ``msg``. Raises ValueError for values the layout cannot hold."""
    match msg:
        case JoinReq():
            return (bytes([Code.JOIN_REQ]) + _info(msg.src) + _u16_bytes(msg.token)
                    + _u16_bytes(msg.auth) + encode_payload(msg.payload))
        case JoinNak():
            return (bytes([Code.JOIN_NAK]) + _domain(msg.domain) + U64.pack(msg.code)
                    + _u16_bytes(msg.etag.encode()))
        case JoinRedirect():
            return (bytes([Code.JOIN_REDIRECT]) + _address(msg.address) + _domain(msg.domain)
                    + U64.pack(msg.code) + _u16_bytes(msg.etag.encode()))
        case JoinAck():
            return bytes([Code.JOIN_ACK]) + _info(msg.desc) + encode_payload(msg.payload)
        case Leave():
            return bytes([Code.LEAVE]) + _info(msg.src)
        case PingRequest() | PingResponse():
            code = Code.PING_REQUEST if isinstance(msg, PingRequest) else Code.PING_RESPONSE
            return (bytes([code]) + PING_HEAD.pack(msg.src, msg.target, msg.ttl)
                    + encode_payload(msg.payload))
        case Broadcast():
            return bytes([Code.BROADCAST]) + _info(msg.self_info)
    raise TypeError(f"not a SWIM message: {msg!r}")


def _domain(d: bytes) -> bytes:
    if len(d) != 8:
        raise ValueError(f"domain must be 8 bytes, got {len(d)}")
    return d


# ----------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise MalformedMessage(f"truncated: need {n} bytes at offset {self.pos}, "
                                   f"datagram has {len(self.data)}")
        b = self.data[self.pos:end]
        self.pos = end
        return b

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        return s.unpack(self.take(s.size))

    def u8(self) -> int:
        return self.take(1)[0]

    def sized(self) -> bytes:
        (n,) = self.unpack(U16)
        return self.take(n)

    def info(self) -> NodeInfo:
        i, g = self.unpack(NODE_INFO)
        return NodeInfo(i, g)

    def rest(self) -> bytes:
        b = self.data[self.pos:]
        self.pos = len(self.data)
        return b

    def end(self) -> None:
        if self.pos != len(self.data):
            raise MalformedMessage(f"{len(self.data) - self.pos} trailing bytes")


def decode_payload(data: bytes) -> Payload:
    """The gossip payload; zero bytes is the empty payload."""
    if not data:
        return Payload()
    r = _Reader(data)
    (seq,) = r.unpack(U32)
    updates = []
    skipped = []
    for _ in range(r.u8()):
        k = r.u8()
        node = r.info()
        (origin,) = r.unpack(U32)
        if k in _KINDS:
            updates.append(Update(UpdateKind(k), node, origin))
        else:
            skipped.append(k)
    sample = tuple(r.info() for _ in range(r.u8()))
    r.end()
    return Payload(seq, tuple(updates), sample, tuple(skipped))


_KINDS = frozenset(k.value for k in UpdateKind)


def _read_address(r: _Reader) -> Address:
    (fam,) = r.unpack(U16)
    (port,) = struct.unpack("!H", r.take(2))
    if fam == ADDR_FAMILY_INET:
        host = r.take(4)
    elif fam == ADDR_FAMILY_INET6:
        host = r.take(16)
    else:
        raise MalformedMessage(f"unknown address family {fam}")
    return Address(fam, port, host)


def _etag(r: _Reader) -> str:
    try:
        return r.sized().decode()
    except UnicodeDecodeError:
        raise MalformedMessage("etag is not UTF-8") from None


def decode(data: bytes) -> Message:
    """Parse one datagram. Raises UnknownMessage or MalformedMessage, nothing else."""
    if not data:
        raise MalformedMessage("empty datagram")
    try:
        code = Code(data[0])
    except ValueError:
        raise UnknownMessage(f"unknown message code {data[0]}") from None
    r = _Reader(data, 1)
    msg: Message
    if code is Code.JOIN_REQ:
        src = r.info()
        token, auth = r.sized(), r.sized()
        msg = JoinReq(src, token, auth, decode_payload(r.rest()))
    elif code is Code.JOIN_NAK:
        domain = r.take(8)
        (c,) = r.unpack(U64)
        msg = JoinNak(domain, c, _etag(r))
    elif code is Code.JOIN_REDIRECT:
        addr = _read_address(r)
        domain = r.take(8)
        (c,) = r.unpack(U64)
        msg = JoinRedirect(addr, domain, c, _etag(r))
    elif code is Code.JOIN_ACK:
        msg = JoinAck(r.info(), decode_payload(r.rest()))
    elif code is Code.LEAVE:
        msg = Leave(r.info())
    elif code in (Code.PING_REQUEST, Code.PING_RESPONSE):
        src, target, ttl = r.unpack(PING_HEAD)
        payload = decode_payload(r.rest())
        cls = PingRequest if code is Code.PING_REQUEST else PingResponse
        msg = cls(src, target, ttl, payload)
    else:
        msg = Broadcast(r.info())
    r.end()
    return msg
