"""The packet budget (issue 25, item 5): every datagram the core builds fits ``max_packet``
bytes on the wire, sealed or not. A JoinAck's view is split across datagrams (the joiner
still learns all of it); piggy-backed gossip is cut, least-sent items first."""

from __future__ import annotations

import random

import pytest

from nodes.swim import codec as c
from nodes.swim import crypto
from nodes.swim.core import (
    JOIN_ACK_PARTS,
    SEAL_RESERVE,
    TICK,
    Member,
    Options,
    Send,
    State,
    SwimCore,
    Update,
    UpdateKind,
)

N = 200
KEYRING = crypto.Keyring(["00" * 32])


def wire(msg: c.Message) -> int:
    """Bytes on the wire with encryption on (the larger of the two)."""
    return len(crypto.seal(KEYRING, c.encode(msg)))


def big_member(opts: Options, n: int = N) -> SwimCore:
    """Member 1 of an ``n``-member group (ids 2..n+1; the joiner 1000 in its book)."""
    ids = range(2, n + 2)
    book = {x: ("10.0.0.1", x) for x in [*ids, 1000]}
    core = SwimCore(1, 0, book, [], opts, random.Random(0))
    core.start(0.0)
    for x in ids:
        core.members[x] = Member(x, 0, State.ALIVE, 0.0, heard=0.0)
    return core


def sends(effects: list) -> list[Send]:
    return [e for e in effects if isinstance(e, Send)]


def test_seal_reserve_is_the_seal_overhead() -> None:
    assert SEAL_RESERVE == crypto.OVERHEAD


def test_a_200_member_join_ack_is_split_and_the_joiner_learns_the_whole_view() -> None:
    seed = big_member(Options())
    joiner = SwimCore(1000, 0, {x: ("10.0.0.1", x) for x in range(1, N + 2)}, [1], Options(),
                      random.Random(1))
    (req,) = sends(joiner.start(0.0))  # its JoinReq's nonce: every part echoes it
    acks = sends(seed.on_message(1000, req.msg, 0.1))
    assert len(acks) == 2 and all(isinstance(a.msg, c.JoinAck) for a in acks)
    assert max(wire(a.msg) for a in acks) <= 1400
    assert len(c.encode(acks[0].msg)) > 1000  # the budget is used, not wasted
    for a in acks:
        joiner.on_message(1, a.msg, 0.2)
    assert joiner.joined and set(joiner.members) == set(range(1, N + 2))


def test_a_smaller_budget_splits_into_more_parts_each_within_it() -> None:
    seed = big_member(Options(max_packet=600), n=120)
    acks = sends(seed.on_message(1000, c.JoinReq(c.NodeInfo(1000, 0)), 0.1))
    assert len(acks) == 3  # 49 NodeInfos a part
    assert all(wire(a.msg) <= 600 for a in acks)
    assert sum(len(a.msg.payload.sample) for a in acks) == 120


def test_a_join_ack_has_at_most_join_ack_parts_datagrams() -> None:
    """Beyond what JOIN_ACK_PARTS datagrams hold the view is sampled (shuffled), so one
    JoinReq never buys unbounded answers; the joiner learns the rest by gossip."""
    seed = big_member(Options(max_packet=300), n=150)
    acks = sends(seed.on_message(1000, c.JoinReq(c.NodeInfo(1000, 0)), 0.1))
    assert len(acks) == JOIN_ACK_PARTS and all(wire(a.msg) <= 300 for a in acks)


def test_pings_cut_piggybacked_gossip_to_the_budget_least_sent_first() -> None:
    core = big_member(Options(max_piggyback=255))
    for x in range(2, N + 2):
        core._enqueue(Update(UpdateKind.ALIVE, c.NodeInfo(x, 1), x))
    core._gossip[2].sent = 5  # sent most: the last to go out again
    pings = []
    for t in (1.0, 2.0, 3.0):
        pings += [s for s in sends(core.on_timer(TICK, t)) if isinstance(s.msg, c.PingRequest)]
    assert pings and all(wire(p.msg) <= 1400 for p in pings)
    first = pings[0].msg.payload.updates
    assert 90 < len(first) < N  # cut by the budget, not by max_piggyback
    assert all(u.node.id != 2 for u in first)


def test_the_unbounded_gossip_bug_still_respects_the_budget() -> None:
    """The bug mode ignores max_piggyback (the dissemination checker's leaf), not the
    datagram size: an oversized datagram would be the codec's error, not the bug's."""
    core = SwimCore(1, 0, {x: ("h", x) for x in range(2, N + 2)}, [], Options(),
                    random.Random(0), bugs=["unbounded-gossip"])
    core.start(0.0)
    for x in range(2, N + 2):
        core.members[x] = Member(x, 0, State.ALIVE, 0.0)
        core._enqueue(Update(UpdateKind.ALIVE, c.NodeInfo(x, 1), x))
    pings = [s for s in sends(core.on_timer(TICK, 1.0)) if isinstance(s.msg, c.PingRequest)]
    assert pings and all(8 < len(p.msg.payload.updates) and wire(p.msg) <= 1400 for p in pings)


def test_a_budget_too_small_is_refused_with_the_minimum() -> None:
    with pytest.raises(ValueError, match="max_packet 100 is below"):
        Options.from_dict({"max_packet": 100})
