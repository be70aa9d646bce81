"""SDS's hostile messages for the ``hostile`` fault (faults/hostile.py), built with its wire codec.

One burst gives every target what issue 24 drove the node with: a Lamport time of 2^64-1, a
50,000-character message id, unknown sender ids, a huge causal history, a big
``repair_request`` list, an all-ones bloom filter, a replayed message, truncated protobuf and
garbage. Forged senders use another member's id (a configured peer) or a made-up one.
`INTENT` says what each kind must decode to.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from nodes.sds import bloom
from nodes.sds.wire import DEFAULT_CHANNEL, HistoryEntry, Kind, Message, WireError, encode
from nodes.sds.wire import MAX_DATAGRAM as MAX_UDP

#: what a provider yields: (target node name, kind, datagram)
Hostile = tuple[str, str, bytes]


class Target(Protocol):
    """A node to attack (faults.hostile.Target): its name is its SDS sender id."""

    @property
    def node(self) -> str: ...


MAX_U64 = 2**64 - 1
LONG_ID = 50_000
#: what each kind decodes to: the message kind, `WireError`, or None (anything)
INTENT: dict[str, Kind | type | None] = {
    "lamport-max": Kind.CONTENT,
    "long-message-id": Kind.CONTENT,
    "unknown-sender": Kind.CONTENT,
    "huge-causal-history": Kind.CONTENT,
    "big-repair-request": Kind.SYNC,
    "all-ones-bloom": Kind.SYNC,
    "replay": Kind.CONTENT,
    "truncated": WireError,
    "garbage": None,
}


def _hex(rng: random.Random, n: int = 64) -> str:
    return rng.randbytes(n // 2).hex()


#: the datagram-filling entry lists, serialized once per process: (field, entries) -> the
#: field's bytes. Making ~1,300 random entries and encoding them costs ~10 ms a list, which
#: at 10,000 hostile datagrams was most of the sender's CPU (it competes with the clients).
_FILL_CACHE: dict[tuple[str, int], bytes] = {}
#: room left for the message's own fields (ids, sender names of other lengths) when sizing
_FILL_SLACK = 256


def _fill(rng: random.Random, field: str, make: Any) -> bytes:
    """The message ``make(entries)`` with as many entries (random 40-char ids, 4-char
    senders, all the same encoded size) in ``field`` as one datagram holds. The entries are
    made once and appended as serialized bytes (protobuf concatenation appends to a repeated
    field): each burst still varies the message's own id and sender."""
    def entry(r: random.Random) -> HistoryEntry:
        return HistoryEntry(_hex(r, 40), sender_id=f"s{r.randrange(100, 1000)}")

    head = encode(make(()))
    each = len(encode(make((entry(rng),)))) - len(head)
    n = (MAX_UDP - _FILL_SLACK) // each
    blob = _FILL_CACHE.get((field, n))
    if blob is None:
        # its own seeded rng: a burst is the same whether or not the cache was filled first;
        # only the list: empty strings and an unset Lamport time are not serialized
        own = random.Random(f"{field}:{n}")
        entries = tuple(entry(own) for _ in range(n))
        blob = encode(Message("", "", "", **{field: entries}))
        _FILL_CACHE[(field, n)] = blob
    return head + blob


def _for(rng: random.Random, t: Target, targets: Sequence[Target]) -> Iterator[Hostile]:
    others = [o.node for o in targets if o.node != t.node]
    peer = rng.choice(others) if others else f"{t.node}-peer"
    stranger = f"mallory-{_hex(rng, 8)}"

    def h(kind: str, msg: Message | bytes) -> Hostile:
        return (t.node, kind, msg if isinstance(msg, bytes) else encode(msg))

    def content(sender: str, **kw: Any) -> Message:
        fields: dict[str, Any] = {"lamport_timestamp": rng.randrange(1, 1000),
                                  "content": b"hostile:" + rng.randbytes(16), **kw}
        return Message(sender, _hex(rng), DEFAULT_CHANNEL, **fields)

    yield h("lamport-max", content(peer, lamport_timestamp=MAX_U64))
    yield h("long-message-id", Message(stranger, "i" * LONG_ID, DEFAULT_CHANNEL,
                                       lamport_timestamp=rng.randrange(1, 1000),
                                       content=b"long id"))
    yield h("unknown-sender", content(stranger))
    hist_id, sync_id = "hist-" + _hex(rng, 16), "sync-" + _hex(rng, 16)
    yield h("huge-causal-history", _fill(rng, "causal_history", lambda hist: Message(
        peer, hist_id, DEFAULT_CHANNEL, 1, hist, content=b"deps")))
    yield h("big-repair-request", _fill(rng, "repair_request", lambda req: Message(
        stranger, sync_id, DEFAULT_CHANNEL, 0, repair_request=req)))
    yield h("all-ones-bloom", Message(stranger, "bloom-" + _hex(rng, 16), DEFAULT_CHANNEL, 0,
                                      bloom_filter=b"\xff" * (bloom.BITS // 64 + 1) * 8))
    replayed = encode(content(peer))
    yield h("replay", replayed)
    yield h("replay", replayed)
    whole = encode(content(stranger, content=rng.randbytes(200)))
    # content (field 20) is serialized last: a cut inside it is a truncated length-delimited field
    yield h("truncated", whole[:len(whole) - rng.randrange(1, 200)])
    yield h("garbage", rng.randbytes(rng.randrange(1, 200)))


def messages(rng: random.Random, targets: Sequence[Target]) -> Iterator[Hostile]:
    """One burst: every kind of `INTENT` for every target, in target order."""
    for t in targets:
        yield from _for(rng, t, targets)


def refusals(state: Mapping[str, Any]) -> dict[str, int]:
    """Refusal counters from an SDS /admin/state: ``counters.wire_errors``, any counter
    named ``refused*``/``*_refused`` (core counters and socket ``io``), and the per-reason
    ``refused`` map (nodes/common/refusals.py) as ``refused:<reason>``."""
    out: dict[str, int] = {}
    for reason, n in (state.get("refused") or {}).items():
        if isinstance(n, int):
            out[f"refused:{reason}"] = n
    for group in ("counters", "io"):
        for k, v in (state.get(group) or {}).items():
            if isinstance(v, int) and (k == "wire_errors" or "refused" in k):
                out[k] = v
    return dict(sorted(out.items()))

