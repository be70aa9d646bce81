"""SWIM's hostile messages for the ``hostile`` fault (faults/hostile.py), built with its codec.

One burst gives every target the datagrams issue 25 drove real nodes with: forged
SUSPECT/DEAD about a live member (generation 2^32-1 and random), about the target itself at
2^32-1, ALIVE at a huge generation, a forged Leave for another member, PingResponses with
guessed sequence numbers, JoinReqs from unknown and from configured ids, an unknown gossip kind,
a replayed ping, truncated and garbage datagrams, and oversize ones (a 64 KB padded ping, a
Nak with a 60 KB etag). None of those comes from a member's address, so a node that checks its
sender refuses them all; `INTENT` says what each kind must decode to.

The ``member-*`` kinds are forged from a live member's address (``via``: the fault sends them
through the relay link from that member) and name that member as their sender, so they pass the
address book and origin checks and meet the deeper ones: implausible generations, a Leave for
another member (origin), an ack with a guessed sequence number, and stale gossip. A stale DEAD
and SUSPECT (generation 0) follow an ALIVE at generation 1 about the same member in the same
burst, so they are below what the target holds whatever it held: a correct node ignores them
(and the subject refutes the ALIVE above it); a node that takes a stale death is caught by the
membership checker's ``stale-gossip-death``. A forged DEAD at the current generation is not
sent: without authentication (``encrypt``) it is indistinguishable from a member's verdict.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from nodes.swim import codec as c
from nodes.swim.codec import MAX_U32, NodeInfo, Payload, Update, UpdateKind

#: the largest payload one loopback UDP datagram carries
MAX_UDP = 65_507
#: what a provider yields: (target node name, kind, datagram, member it is forged from or None)
Hostile = tuple[str, str, bytes, str | None]


class Target(Protocol):
    """A node to attack (faults.hostile.Target): its name and its SWIM NodeID."""

    @property
    def node(self) -> str: ...
    @property
    def num_id(self) -> int: ...


#: a gossip kind outside `UpdateKind` (an extension the node must skip, not choke on)
UNKNOWN_KIND = 0xEE
#: what each kind decodes to: a message class, or the codec error it must raise; None: anything
INTENT: dict[str, type | None] = {
    "suspect-self-max-gen": c.PingRequest,
    "suspect-max-gen": c.PingRequest,
    "suspect-random-gen": c.PingRequest,
    "dead-max-gen": c.PingRequest,
    "dead-random-gen": c.PingRequest,
    "alive-huge-gen": c.PingRequest,
    "forged-leave": c.Leave,
    "forged-ping-response": c.PingResponse,
    "join-unknown-id": c.JoinReq,
    "join-configured-id": c.JoinReq,
    "unknown-gossip-kind": c.PingRequest,
    "replay": c.PingRequest,
    "nak-oversize-etag": c.JoinNak,
    "oversize-datagram": c.MalformedMessage,
    "truncated": c.MalformedMessage,
    "garbage": None,
    "member-alive-next-gen": c.PingRequest,
    "member-dead-stale": c.PingRequest,
    "member-suspect-stale": c.PingRequest,
    "member-dead-max-gen": c.PingRequest,
    "member-suspect-self-max-gen": c.PingRequest,
    "member-forged-leave": c.Leave,
    "member-forged-ping-response": c.PingResponse,
}
#: the kinds forged from a member's address (they need another member to forge from)
VIA_MEMBER = frozenset(k for k in INTENT if k.startswith("member-"))


def _gossip(src: int, target: int, *updates: Update, seq: int = 0) -> c.PingRequest:
    return c.PingRequest(src, target, 0, Payload(seq, tuple(updates)))


def _unknown_kind_ping(src: int, target: int, about: NodeInfo) -> bytes:
    """A ping whose only gossip entry has an unknown kind: the codec cannot build one, so the
    kind byte of an ALIVE entry is rewritten (header 1 + 9, then seq 4 + count 1)."""
    raw = bytearray(c.encode(_gossip(src, target, Update(UpdateKind.ALIVE, about, src))))
    raw[1 + c.PING_HEAD.size + 5] = UNKNOWN_KIND
    return bytes(raw)


def _for(rng: random.Random, t: Target, targets: Sequence[Target]) -> Iterator[Hostile]:
    others = [o.num_id for o in targets if o.num_id != t.num_id]
    other = rng.choice(others) if others else t.num_id + 1  # a configured peer's id, or a guess
    forger = rng.choice(others) if others else t.num_id + 2
    stranger = rng.randrange(10_000, MAX_U32)
    me = t.num_id

    def h(kind: str, data: bytes) -> Hostile:
        return (t.node, kind, data, None)

    def upd(kind: UpdateKind, about: int, gen: int) -> bytes:
        return c.encode(_gossip(forger, me, Update(kind, NodeInfo(about, gen), forger)))

    yield h("suspect-self-max-gen", upd(UpdateKind.SUSPECT, me, MAX_U32))
    yield h("suspect-max-gen", upd(UpdateKind.SUSPECT, other, MAX_U32))
    yield h("suspect-random-gen", upd(UpdateKind.SUSPECT, other, rng.randrange(MAX_U32)))
    yield h("dead-max-gen", upd(UpdateKind.DEAD, other, MAX_U32))
    yield h("dead-random-gen", upd(UpdateKind.DEAD, other, rng.randrange(MAX_U32)))
    yield h("alive-huge-gen", upd(UpdateKind.ALIVE, other, MAX_U32 - rng.randrange(1 << 16)))
    yield h("forged-leave", c.encode(c.Leave(NodeInfo(other, rng.randrange(4)))))
    # the answer to a probe of `other` the target may have in flight: seqs are guessed small
    yield h("forged-ping-response", c.encode(c.PingResponse(
        me, other, 0, Payload(rng.randrange(1, 1000)))))
    yield h("join-unknown-id", c.encode(c.JoinReq(NodeInfo(stranger, 0))))
    yield h("join-configured-id", c.encode(c.JoinReq(NodeInfo(other, rng.randrange(4)))))
    yield h("unknown-gossip-kind", _unknown_kind_ping(forger, me, NodeInfo(other, 0)))
    replayed = c.encode(_gossip(forger, me, Update(UpdateKind.ALIVE, NodeInfo(forger, 0), forger),
                                seq=rng.randrange(1, 1000)))
    yield h("replay", replayed)
    yield h("replay", replayed)
    etag = "x" * (MAX_UDP - 1 - 8 - 8 - 2)
    yield h("nak-oversize-etag", c.encode(c.JoinNak(c.domain_tag("swim"), 1, etag)))
    ping = c.encode(_gossip(forger, me, Update(UpdateKind.ALIVE, NodeInfo(forger, 0), forger)))
    yield h("oversize-datagram", ping + rng.randbytes(MAX_UDP - len(ping)))
    whole = upd(UpdateKind.SUSPECT, other, MAX_U32)
    # a cut right after the ping header leaves a valid ping with an empty payload: not that one
    cuts = [n for n in range(1, len(whole)) if n != 1 + c.PING_HEAD.size]
    for n in (rng.choice(cuts), rng.choice(cuts)):
        yield h("truncated", whole[:n])
    yield h("garbage", rng.randbytes(rng.randrange(1, 200)))
    yield from _from_member(rng, t, targets)


def _from_member(rng: random.Random, t: Target, targets: Sequence[Target]) -> Iterator[Hostile]:
    """The ``member-*`` kinds for ``t``, each forged from one other target (by its address and
    its id as sender) about a third one where there is one."""
    others = [o for o in targets if o.num_id != t.num_id]
    if not others:
        return
    via = rng.choice(others)
    about = rng.choice([o for o in others if o.num_id != via.num_id] or others).num_id
    me, forger = t.num_id, via.num_id

    def h(kind: str, msg: c.Message) -> Hostile:
        return (t.node, kind, c.encode(msg), via.node)

    def upd(kind: UpdateKind, x: int, gen: int) -> c.PingRequest:
        # seq 0: one-way gossip, which never counts as a sign of the forger's life
        return _gossip(forger, me, Update(kind, NodeInfo(x, gen), forger))

    yield h("member-alive-next-gen", upd(UpdateKind.ALIVE, about, 1))
    yield h("member-dead-stale", upd(UpdateKind.DEAD, about, 0))
    yield h("member-suspect-stale", upd(UpdateKind.SUSPECT, about, 0))
    yield h("member-dead-max-gen", upd(UpdateKind.DEAD, about, MAX_U32))
    yield h("member-suspect-self-max-gen", upd(UpdateKind.SUSPECT, me, MAX_U32))
    if about != forger:  # a Leave about the forger from its own address would be its own
        yield h("member-forged-leave", c.Leave(NodeInfo(about, rng.randrange(4))))
    # the forger's ack to a probe the target may have in flight: the seq is a guess
    yield h("member-forged-ping-response", c.PingResponse(
        me, forger, 0, Payload(rng.randrange(1, MAX_U32))))


def messages(rng: random.Random, targets: Sequence[Target]) -> Iterator[Hostile]:
    """One burst: every kind of `INTENT` for every target, in target order."""
    for t in targets:
        yield from _for(rng, t, targets)


#: the node's counters of what it refused or dropped (its /admin/state ``stats``)
REFUSAL_STATS = ("unknown", "malformed", "unknown_sender", "refused_generations",
                 "unknown_gossip", "refused_strangers")


def refusals(state: Mapping[str, Any]) -> dict[str, int]:
    """Refusal counters from a SWIM /admin/state: the known ones, any ``refused_*`` a newer
    node adds, and the trust-boundary reasons of ``stats.refused`` as ``refused:<reason>``
    (but ``unknown-address``, which ``unknown_sender`` already counts)."""
    stats = state.get("stats") or {}
    out = {k: int(v) for k, v in stats.items()
           if (k in REFUSAL_STATS or k.startswith("refused")) and isinstance(v, int)}
    nested = stats.get("refused")
    if isinstance(nested, Mapping):
        out.update({f"refused:{r}": int(n) for r, n in nested.items()
                    if r != "unknown-address" and isinstance(n, int)})
    return dict(sorted(out.items()))
