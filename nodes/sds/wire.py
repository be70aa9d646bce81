"""SDS wire format: the spec's protobuf messages, built at runtime, and a typed decode.

The message classes are made from a ``FileDescriptorProto`` written out here field by field
(the spec's ``HistoryEntry`` and ``Message``, proto3, exact field numbers, ``optional`` fields
as proto3 synthetic oneofs), so the project needs no ``protoc``/``grpcio-tools`` and no
generated file to keep in sync. The wire bytes are what ``protoc`` output would produce.

Kinds (spec "Wire protocol", "Periodic Sync Message", "Ephemeral Messages"):

* **ephemeral**: ``lamport_timestamp`` unset (its ``causal_history``/``bloom_filter`` SHOULD be
  unset too); delivered at once, never logged;
* **sync**: ``lamport_timestamp`` set, ``content`` unset or empty; never logged;
* **content**: ``lamport_timestamp`` set and non-empty ``content``.

``decode`` turns any bytes into a `Message` or raises `WireError`: garbage from the network
never crashes a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

_F = descriptor_pb2.FieldDescriptorProto


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="nodes/sds/sds.proto", package="sds",
                                            syntax="proto3")

    def add(msg: descriptor_pb2.DescriptorProto, name: str, number: int, typ: int,
            label: int = _F.LABEL_OPTIONAL, optional: bool = False,
            type_name: str | None = None) -> None:
        f = msg.field.add(name=name, number=number, type=typ, label=label, json_name=name)
        if type_name:
            f.type_name = type_name
        if optional:  # proto3 `optional`: a synthetic oneof named "_<field>"
            f.proto3_optional = True
            f.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{name}")

    he = fd.message_type.add(name="HistoryEntry")
    add(he, "message_id", 1, _F.TYPE_STRING)
    add(he, "retrieval_hint", 2, _F.TYPE_BYTES, optional=True)
    add(he, "sender_id", 3, _F.TYPE_STRING, optional=True)

    m = fd.message_type.add(name="Message")
    add(m, "sender_id", 1, _F.TYPE_STRING)
    add(m, "message_id", 2, _F.TYPE_STRING)
    add(m, "channel_id", 3, _F.TYPE_STRING)
    add(m, "lamport_timestamp", 10, _F.TYPE_UINT64, optional=True)
    add(m, "causal_history", 11, _F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
        type_name=".sds.HistoryEntry")
    add(m, "bloom_filter", 12, _F.TYPE_BYTES, optional=True)
    add(m, "repair_request", 13, _F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
        type_name=".sds.HistoryEntry")
    add(m, "content", 20, _F.TYPE_BYTES, optional=True)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())
#: the generated protobuf classes (use `Message`/`HistoryEntry` dataclasses in the node)
PbHistoryEntry: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("sds.HistoryEntry"))
PbMessage: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("sds.Message"))

#: a datagram must fit one loopback UDP packet
MAX_DATAGRAM = 65_507
#: spec: "For simple group communications without individual channels, channel_id SHOULD be 0"
DEFAULT_CHANNEL = "0"


class WireError(ValueError):
    """Bytes that are not an SDS message (or violate its rules); the datagram is dropped."""


class Kind(StrEnum):
    CONTENT = "content"
    SYNC = "sync"
    EPHEMERAL = "ephemeral"


@dataclass(frozen=True)
class HistoryEntry:
    message_id: str
    sender_id: str | None = None
    retrieval_hint: bytes | None = None


@dataclass(frozen=True)
class Message:
    """One SDS message; ``None`` means the optional field is unset on the wire."""

    sender_id: str
    message_id: str
    channel_id: str = DEFAULT_CHANNEL
    lamport_timestamp: int | None = None
    causal_history: tuple[HistoryEntry, ...] = ()
    bloom_filter: bytes | None = None
    repair_request: tuple[HistoryEntry, ...] = ()
    content: bytes | None = None

    @property
    def kind(self) -> Kind:
        if self.lamport_timestamp is None:
            return Kind.EPHEMERAL
        return Kind.CONTENT if self.content else Kind.SYNC

    @property
    def deps(self) -> list[str]:
        return [h.message_id for h in self.causal_history]

    def stripped(self) -> Message:
        """The message as cached in the log for repair rebroadcasts: no bloom filter and no
        repair requests (both describe the sender's state at send time, not the message)."""
        return Message(self.sender_id, self.message_id, self.channel_id, self.lamport_timestamp,
                       self.causal_history, None, (), self.content)


def _entry_pb(h: HistoryEntry) -> Any:
    pb = PbHistoryEntry(message_id=h.message_id)
    if h.sender_id is not None:
        pb.sender_id = h.sender_id
    if h.retrieval_hint is not None:
        pb.retrieval_hint = h.retrieval_hint
    return pb


def _entry(pb: Any) -> HistoryEntry:
    return HistoryEntry(pb.message_id,
                        pb.sender_id if pb.HasField("sender_id") else None,
                        pb.retrieval_hint if pb.HasField("retrieval_hint") else None)


def encode(msg: Message) -> bytes:
    pb = PbMessage(sender_id=msg.sender_id, message_id=msg.message_id,
                   channel_id=msg.channel_id)
    if msg.lamport_timestamp is not None:
        pb.lamport_timestamp = msg.lamport_timestamp
    pb.causal_history.extend(_entry_pb(h) for h in msg.causal_history)
    if msg.bloom_filter is not None:
        pb.bloom_filter = msg.bloom_filter
    pb.repair_request.extend(_entry_pb(h) for h in msg.repair_request)
    if msg.content is not None:
        pb.content = msg.content
    data: bytes = pb.SerializeToString()
    if len(data) > MAX_DATAGRAM:
        raise WireError(f"encoded message is {len(data)} bytes, over one UDP datagram "
                        f"({MAX_DATAGRAM}); shorten the causal history or content")
    return data


def decode(data: bytes, max_entries: int | None = None) -> Message:
    """Bytes -> `Message`, or `WireError` saying why not.

    ``max_entries``: convert at most this many entries of each repeated field (causal
    history, repair requests). Parsing is cheap (upb, C); making ~1,300 Python entries out of
    a datagram-filling list costs ~7 ms, which a receiver that refuses any list longer than
    its limit need not pay: it passes its limit + 1, and a longer list still looks too long."""
    pb = PbMessage()
    try:
        pb.ParseFromString(bytes(data))
    except (DecodeError, ValueError, TypeError) as e:  # upb raises DecodeError; be generous
        raise WireError(f"not an SDS protobuf Message ({len(data)} bytes): {e}") from None
    if not pb.sender_id or not pb.message_id:
        raise WireError("an SDS message needs sender_id and message_id")
    return Message(
        sender_id=pb.sender_id, message_id=pb.message_id, channel_id=pb.channel_id,
        lamport_timestamp=pb.lamport_timestamp if pb.HasField("lamport_timestamp") else None,
        causal_history=tuple(_entry(h) for h in pb.causal_history[:max_entries]),
        bloom_filter=pb.bloom_filter if pb.HasField("bloom_filter") else None,
        repair_request=tuple(_entry(h) for h in pb.repair_request[:max_entries]),
        content=pb.content if pb.HasField("content") else None,
    )

