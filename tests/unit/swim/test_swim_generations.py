"""Generations a peer cannot poison (issue 25, item 1): one forged datagram naming a
generation at the top of the u32 range must not stop a node, nor a member everywhere."""

from __future__ import annotations

import random

from nodes.swim import codec as c
from nodes.swim.core import MAX_GEN_STEP, TICK, Emit, Options, Persist, Send, SwimCore
from nodes.swim.core import UpdateKind as K

TOP = 2**32 - 1


def member(me: int = 1, gen: int = 3) -> SwimCore:
    """``me`` already joined with members 2 and 3 (founder of the group)."""
    core = SwimCore(me, gen, {2: ("h", 2), 3: ("h", 3)}, [], Options(), random.Random(0))
    core.start(0.0)
    for other in (2, 3):
        core.on_message(other, c.JoinReq(c.NodeInfo(other, 0)), 0.1)
    return core


def ping(src: int, *updates: c.Update, sample: tuple[c.NodeInfo, ...] = ()) -> c.PingRequest:
    return c.PingRequest(src, 1, 0, c.Payload(seq=7, updates=updates, sample=sample))


def encodes(effects: list) -> None:
    for e in effects:
        if isinstance(e, Send):
            c.encode(e.msg)  # raises on a generation outside u32


def test_a_forged_suspicion_at_the_top_generation_is_refused_and_counted() -> None:
    core = member()
    fx = core.on_message(2, ping(2, c.Update(K.SUSPECT, c.NodeInfo(1, TOP), 2)), 1.0)
    encodes(fx)
    assert core.gen == 3
    assert core.counters.refused_generations == 1
    assert [e.fields for e in fx if isinstance(e, Emit) and e.type == "refused-generation"]
    for t in (2.0, 3.0, 4.0, 5.0):  # the node goes on probing: every send still encodes
        encodes(core.on_timer(TICK, t))


def test_a_suspicion_a_plausible_step_ahead_is_refuted_durably() -> None:
    core = member()
    fx = core.on_message(2, ping(2, c.Update(K.SUSPECT, c.NodeInfo(1, 3 + MAX_GEN_STEP), 2)),
                         1.0)
    assert core.gen == 4 + MAX_GEN_STEP
    assert Persist("generation", core.gen) in fx  # a restart never goes below a refutation
    encodes(fx)


def test_alive_about_ourselves_above_our_generation_is_adopted_plus_one() -> None:
    """Our generation file was lost, or a refutation was: the group holds us at a higher
    generation and would ignore everything we say until we go past it."""
    core = member(gen=0)
    fx = core.on_message(2, ping(2, c.Update(K.ALIVE, c.NodeInfo(1, 40), 2)), 1.0)
    assert core.gen == 41
    assert Persist("generation", 41) in fx
    assert any(isinstance(e, Emit) and e.type == "refute" for e in fx)


def test_a_member_cannot_be_poisoned_with_a_top_generation() -> None:
    core = member()
    for fx in (core.on_message(2, ping(2, c.Update(K.ALIVE, c.NodeInfo(3, TOP), 2)), 1.0),
               core.on_message(2, ping(2, sample=(c.NodeInfo(3, TOP),)), 1.1),
               core.on_message(2, ping(2, c.Update(K.DEAD, c.NodeInfo(3, TOP), 2)), 1.2)):
        encodes(fx)
    assert core.members[3].gen == 0 and core.members[3].state.value == "alive"
    assert core.counters.refused_generations == 3


def test_an_unknown_member_far_up_the_range_is_refused() -> None:
    core = SwimCore(1, 0, {2: ("h", 2)}, [], Options(), random.Random(0))
    core.start(0.0)
    core.on_message(2, c.JoinReq(c.NodeInfo(2, TOP - 1)), 0.1)
    assert 2 not in core.members
    core.on_message(2, c.JoinReq(c.NodeInfo(2, 5)), 0.2)
    assert core.members[2].gen == 5


def test_a_join_from_outside_the_address_book_applies_nothing() -> None:
    """Issue 25 item 4 (in part): a stranger's JoinReq used to have its gossip applied (a
    forged DEAD of a live member, say) and its id remembered in `_redirected`."""
    core = member()
    forged = c.JoinReq(c.NodeInfo(99, 0), payload=c.Payload(
        updates=(c.Update(K.DEAD, c.NodeInfo(3, 0), 99),)))
    fx = core.on_message(None, forged, 1.0)
    assert not [e for e in fx if isinstance(e, Send)]
    assert core.members[3].state.value == "alive" and 99 not in core.members
    assert core.counters.refused == {"unknown-address": 1}
    # from a member's address, claiming another id: refused as a forged origin
    core.on_message(2, forged, 1.1)
    assert core.members[3].state.value == "alive" and 99 not in core.members
    assert core.counters.refused["origin-mismatch"] == 1


def test_a_flood_of_implausible_generations_is_counted_but_journaled_rate_limited() -> None:
    """A member's address can carry a forged top generation in every datagram (the hostile
    fault's member-* kinds): each is counted, but at most REFUSED_EVENTS_PER_PERIOD journal
    events per period, the next one saying how many went unjournaled."""
    from nodes.swim.core import REFUSED_EVENTS_PER_PERIOD

    core = member()
    fx: list = []
    for i in range(40):
        fx += core.on_message(2, ping(2, c.Update(K.DEAD, c.NodeInfo(3, TOP - i), 2)), 1.0)
    assert core.counters.refused_generations == 40
    events = [e.fields for e in fx if isinstance(e, Emit) and e.type == "refused-generation"]
    assert 1 <= len(events) <= REFUSED_EVENTS_PER_PERIOD
    assert events[0]["member"] == 3 and events[0]["by"] == 2
    for t in (2.0, 3.0, 4.0):  # later periods
        core.on_timer(TICK, t)
    later = [e.fields for e in core.on_message(
        2, ping(2, c.Update(K.DEAD, c.NodeInfo(3, TOP), 2)), 4.1)
        if isinstance(e, Emit) and e.type == "refused-generation"]
    assert later and later[0].get("unjournaled_before", 0) > 0, later
