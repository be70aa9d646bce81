"""Trust boundaries (issue 25, item 4), driven by hand-made datagrams into the sans-IO core:
nothing from an address outside the book is applied, a message naming its sender must come
from that member's address, acks are bound to a random sequence number and the probed
member, join answers and journal events are bounded."""

from __future__ import annotations

import random

from nodes.swim import codec as c
from nodes.swim.core import (
    ACK_PERIODS,
    JOIN_ANSWER_PERIODS,
    JOINS_PER_SENDER_PER_PERIOD,
    MAX_LOGGED,
    NAKS_PER_PERIOD,
    NAKS_PER_SENDER_PER_PERIOD,
    REFUSED_EVENTS_PER_PERIOD,
    TICK,
    Emit,
    Options,
    Send,
    SwimCore,
)
from nodes.swim.core import UpdateKind as K


def member(me: int = 1, others: tuple[int, ...] = (2, 3), seed: int = 0) -> SwimCore:
    """``me``, a founder, already joined by ``others``."""
    core = SwimCore(me, 3, {o: ("h", o) for o in others}, [], Options(), random.Random(seed))
    core.start(0.0)
    for o in others:
        core.on_message(o, c.JoinReq(c.NodeInfo(o, 0)), 0.1)
    return core


def state(core: SwimCore, x: int) -> str:
    return core.members[x].state.value


def refused_events(fx: list) -> list[dict]:
    return [e.fields for e in fx if isinstance(e, Emit) and e.type == "refused"]


def test_a_forged_dead_from_an_unknown_address_is_refused_counted_and_journaled() -> None:
    core = member()
    forged = c.PingRequest(2, 1, 0, c.Payload(seq=0, updates=(
        c.Update(K.DEAD, c.NodeInfo(3, 0), 2),)))
    fx = core.on_message(None, forged, 1.0)
    assert state(core, 3) == "alive"
    assert not [e for e in fx if isinstance(e, Send)]  # not even answered
    assert core.counters.refused == {"unknown-address": 1}
    (ev,) = refused_events(fx)
    assert ev["reason"] == "unknown-address" and ev["kind"] == "PingRequest"
    # the same datagram from member 2's address is gossip from a member: applied
    core.on_message(2, forged, 1.1)
    assert state(core, 3) == "dead"


def test_a_forged_leave_is_refused_from_anywhere_but_the_leaver() -> None:
    core = member()
    leave = c.Leave(c.NodeInfo(3, 0))
    core.on_message(None, leave, 1.0)
    core.on_message(2, leave, 1.1)  # a member cannot leave for another
    assert state(core, 3) == "alive"
    assert core.counters.refused == {"unknown-address": 1, "origin-mismatch": 1}
    core.on_message(3, leave, 1.2)
    assert state(core, 3) == "left"


def test_forged_join_reqs_cannot_evict_a_member() -> None:
    """At capacity a second JoinReq after a redirect evicts a member: forged twice from an
    unknown address, or from a member's address in another's name, it does nothing."""
    core = SwimCore(1, 3, {2: ("h", 2), 3: ("h", 3), 4: ("h", 4)}, [],
                    Options(capacity=2), random.Random(0))
    core.start(0.0)
    for o in (2, 3):
        core.on_message(o, c.JoinReq(c.NodeInfo(o, 0)), 0.1)
    forged = c.JoinReq(c.NodeInfo(4, 0))
    for t in (1.0, 1.1):
        assert not [e for e in core.on_message(None, forged, t) if isinstance(e, Send)]
        core.on_message(2, forged, t + 0.01)
    assert {state(core, 2), state(core, 3)} == {"alive"} and 4 not in core.members
    assert core.counters.refused == {"unknown-address": 2, "origin-mismatch": 2}


def _probe(core: SwimCore, now: float) -> c.PingRequest:
    fx = core.on_timer(TICK, now)
    (p,) = [e.msg for e in fx if isinstance(e, Send) and isinstance(e.msg, c.PingRequest)
            and e.msg.payload.seq != 0]
    return p


def _answered_seqs(core: SwimCore, n: int) -> list[int]:
    seqs = []
    for i in range(n):
        p = _probe(core, 1.0 + i)
        core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(seq=p.payload.seq)),
                        1.1 + i)
        seqs.append(p.payload.seq)
    return seqs


def test_probe_sequence_numbers_are_random_and_seeded() -> None:
    seqs = _answered_seqs(member(seed=5), 4)
    assert seqs == _answered_seqs(member(seed=5), 4)  # deterministic for a seed
    assert len(set(seqs)) == 4 and all(s > 0 for s in seqs)
    assert any(abs(x - y) > 1000 for x, y in zip(seqs, seqs[1:], strict=False))  # not +1


def test_a_forged_ack_does_not_keep_a_dead_member_alive() -> None:
    """The forger answers the probe with the right seq (it saw it, or guessed it) but from
    an address other than the probed member's: refused, so the probe fails."""
    core = member()
    p = _probe(core, 1.0)
    forged = c.PingResponse(1, p.target, 0, c.Payload(seq=p.payload.seq))
    other = 2 if p.target == 3 else 3
    core.on_message(None, forged, 1.1)
    core.on_message(other, forged, 1.2)
    assert core._probe is not None and not core._probe.acked
    assert core.counters.refused == {"unknown-address": 1, "origin-mismatch": 1}
    core.on_timer(TICK, 2.0)  # period over, unanswered: suspected
    assert state(core, p.target) == "suspect"


def test_an_ack_with_a_wrong_seq_from_the_target_does_not_ack() -> None:
    core = member()
    p = _probe(core, 1.0)
    core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(
        seq=(p.payload.seq + 1) & 0xFFFFFFFF or 1)), 1.1)
    assert not core._probe.acked
    core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(seq=p.payload.seq)),
                    1.2)
    assert core._probe.acked


def test_a_forged_ack_with_a_wrong_seq_is_refused_and_counted_not_applied() -> None:
    """Issue 25 (remaining 3): an ack naming a seq we never issued used to be dropped
    silently, its gossip applied; now it is refused as `ack-seq` before anything in it is."""
    core = member()
    p = _probe(core, 1.0)
    other = 2 if p.target == 3 else 3
    forged = c.PingResponse(1, p.target, 0, c.Payload(
        seq=(p.payload.seq + 1) & 0xFFFFFFFF or 1,
        updates=(c.Update(K.DEAD, c.NodeInfo(other, 0), p.target),)))
    fx = core.on_message(p.target, forged, 1.1)
    assert not core._probe.acked and state(core, other) == "alive"
    assert core.counters.refused == {"ack-seq": 1}
    (ev,) = refused_events(fx)
    assert ev["reason"] == "ack-seq" and ev["sender"] == p.target
    # a late answer to an earlier probe of ours is normal: not refused
    core.on_timer(TICK, 2.0)
    core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(seq=p.payload.seq)),
                    2.1)
    assert core.counters.refused == {"ack-seq": 1}
    # one-way gossip answers (seq 0) are no acks: never refused as such
    core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(seq=0)), 2.2)
    assert core.counters.refused == {"ack-seq": 1}


def test_a_seq_expires_after_ack_periods() -> None:
    core = member()
    p = _probe(core, 1.0)
    for t in range(2, 3 + ACK_PERIODS):
        core.on_timer(TICK, float(t))
    core.on_message(p.target, c.PingResponse(1, p.target, 0, c.Payload(seq=p.payload.seq)),
                    float(3 + ACK_PERIODS))
    assert core.counters.refused.get("ack-seq") == 1


def _joiner() -> tuple[SwimCore, c.JoinReq]:
    joiner = SwimCore(5, 0, {1: ("h", 1), 2: ("h", 2)}, [1], Options(), random.Random(0))
    (req,) = [e for e in joiner.start(0.0) if isinstance(e, Send)]
    assert req.to == 1 and isinstance(req.msg, c.JoinReq) and req.msg.payload.seq != 0
    return joiner, req.msg


def test_an_unsolicited_join_ack_is_refused_counted_and_never_applied() -> None:
    """Issue 25 (remaining 1): a JoinAck is applied (joined, its view taken) only when it
    answers a JoinReq we sent: from the member we asked, echoing that request's nonce."""
    joiner, req = _joiner()
    view = c.Payload(seq=req.payload.seq, sample=(c.NodeInfo(2, 7),))
    # from a member we did not ask, with the right nonce
    fx = joiner.on_message(2, c.JoinAck(c.NodeInfo(2, 0), view), 0.1)
    # from the member we asked, with a wrong nonce, and with none (seq 0)
    wrong = c.Payload(seq=(req.payload.seq + 1) & 0xFFFFFFFF or 1, sample=(c.NodeInfo(2, 7),))
    fx += joiner.on_message(1, c.JoinAck(c.NodeInfo(1, 0), wrong), 0.2)
    fx += joiner.on_message(1, c.JoinAck(c.NodeInfo(1, 0), c.Payload()), 0.3)
    assert not joiner.joined and not joiner.members
    assert joiner.counters.refused == {"unsolicited-join-ack": 3}
    assert [e["reason"] for e in refused_events(fx)] == ["unsolicited-join-ack"] * 3
    # the real answer: joined, its view taken
    joiner.on_message(1, c.JoinAck(c.NodeInfo(1, 0), view), 0.4)
    assert joiner.joined and set(joiner.members) == {1, 2}


def test_a_join_ack_after_the_answer_window_is_refused() -> None:
    joiner, req = _joiner()
    for t in range(1, 2 + JOIN_ANSWER_PERIODS):
        joiner.on_timer(TICK, float(t))  # asks again each period, with new nonces
    late = c.JoinAck(c.NodeInfo(1, 0), c.Payload(seq=req.payload.seq))
    joiner.on_message(1, late, 2.0 + JOIN_ANSWER_PERIODS)
    assert not joiner.joined and joiner.counters.refused == {"unsolicited-join-ack": 1}


def test_a_seed_echoes_the_join_nonce_in_every_join_ack_part() -> None:
    core = member()
    req = c.JoinReq(c.NodeInfo(2, 0), payload=c.Payload(seq=12345))
    fx = core.on_message(2, req, 1.5)
    acks = [e.msg for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinAck)]
    assert acks and all(a.payload.seq == 12345 for a in acks)


def test_naks_are_rate_limited_per_source() -> None:
    """Issue 25 (remaining 2): a forged JoinReq flood gets at most one Nak per source per
    period (and NAKS_PER_PERIOD in all), the rest counted as `nak-rate`: no amplifier."""
    core = SwimCore(1, 3, {o: ("h", o) for o in range(2, 40)}, [], Options(join_token="s"),
                    random.Random(0))
    core.start(0.0)
    naks = 0
    for i in range(50):
        fx = core.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 0.1 + i * 1e-3)
        naks += sum(1 for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinNak))
    assert naks == NAKS_PER_SENDER_PER_PERIOD
    assert core.counters.refused == {"nak-rate": 50 - naks}
    # many sources: at most NAKS_PER_PERIOD in all this period
    for o in range(3, 40):
        fx = core.on_message(o, c.JoinReq(c.NodeInfo(o, 0)), 0.5)
        naks += sum(1 for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinNak))
    assert naks == NAKS_PER_PERIOD
    core.on_timer(TICK, 1.0)  # the next period answers again
    fx = core.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 1.1)
    assert [e for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinNak)]


def test_a_flood_grows_the_counter_not_the_journal() -> None:
    core = member()
    events = 0
    for i in range(500):
        fx = core.on_message(None, c.Leave(c.NodeInfo(2, 0)), 1.0 + i * 1e-4)
        events += len(refused_events(fx))
    assert core.counters.refused == {"unknown-address": 500}
    assert events == REFUSED_EVENTS_PER_PERIOD
    fx = core.on_message(None, c.Leave(c.NodeInfo(2, 0)), 5.0)  # a new period: journaled
    fx += core.on_timer(TICK, 5.0) + core.on_message(None, c.Leave(c.NodeInfo(2, 0)), 5.0)
    assert refused_events(fx)


def test_join_answers_are_bounded_per_sender_per_period() -> None:
    core = member()
    acks = 0
    for i in range(20):
        fx = core.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 0.2 + i * 1e-3)
        acks += sum(1 for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinAck))
    assert acks == JOINS_PER_SENDER_PER_PERIOD - 1  # one was the join in member()
    assert core.counters.refused["join-rate"] == 20 - acks
    core.on_timer(TICK, 1.0)
    fx = core.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 1.1)
    assert [e for e in fx if isinstance(e, Send) and isinstance(e.msg, c.JoinAck)]


def test_unsolicited_naks_are_ignored_and_etags_truncated() -> None:
    core = member()
    huge = "x" * 65000
    fx = core.on_message(2, c.JoinNak(c.domain_tag("swim"), 7116, huge), 1.0)
    assert not [e for e in fx if isinstance(e, Emit)]  # we never asked 2 to join
    joiner = SwimCore(5, 0, {1: ("h", 1)}, [1], Options(), random.Random(0))
    joiner.start(0.0)  # asks 1
    fx = joiner.on_message(1, c.JoinNak(c.domain_tag("swim"), 7116, huge), 0.1)
    (ev,) = [e.fields for e in fx if isinstance(e, Emit) and e.type == "join-refused"]
    assert ev["etag"] == huge[:MAX_LOGGED]
