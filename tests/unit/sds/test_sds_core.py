"""The sans-IO core under simulated time: Lamport clock, ordering, buffering, acks, resends,
sync and ephemeral messages, SDS-R repair, restart, convergence under loss, and bug modes."""

from __future__ import annotations

import random

import pytest

from harness.sim.sds import EPOCH_MS, SdsSim
from nodes.common.effects import EVERYONE, Emit, Persist, Reply, Send, SetTimer
from nodes.sds.core import (
    HELD,
    LOG,
    AckState,
    SdsCommand,
    SdsCore,
    SdsOptions,
    message_id,
)
from nodes.sds.wire import HistoryEntry, Kind, Message, decode, encode

FAST = SdsOptions(resend_unacked_ms=500, resend_possibly_ms=1500, sync_interval_ms=500,
                  t_min_ms=200, t_max_ms=2000)


def core(me: str = "a", peers: tuple[str, ...] = ("a", "b", "c"), **kw) -> SdsCore:
    return SdsCore(me, peers, kw.pop("options", FAST), rng=random.Random(1),
                   wall_ms=EPOCH_MS, **kw)


def msg(sender: str, content: str, lamport: int, deps: tuple[str, ...] = ()) -> Message:
    return Message(sender, message_id(sender, lamport, content.encode()), "0", lamport,
                   tuple(HistoryEntry(d) for d in deps), None, (), content.encode())


def datagrams(fx, kind: Kind | None = None) -> list[Message]:
    """The messages the effects send (of one kind: content, sync or ephemeral)."""
    return [m for m in (decode(e.msg) for e in fx if isinstance(e, Send))
            if kind is None or m.kind is kind]


def delivered(fx) -> list[str]:
    """Ids that entered the log (journal ``send`` or ``deliver``), in order."""
    return [e.fields["id"] for e in fx if isinstance(e, Emit) and e.type in ("send", "deliver")]


def test_lamport_is_max_of_now_and_previous_plus_one() -> None:
    c = core()
    m1, _ = c.send(b"x", 0, EPOCH_MS + 10)
    assert m1.lamport_timestamp == EPOCH_MS + 10
    m2, _ = c.send(b"y", 0, EPOCH_MS + 5)  # the clock went back: still increasing
    assert m2.lamport_timestamp == EPOCH_MS + 11
    c.receive_message(msg("b", "z", EPOCH_MS + 500), 0)
    assert c.lamport == EPOCH_MS + 500  # deliver raises the local clock
    m3, _ = c.send(b"w", 0, EPOCH_MS)
    assert m3.lamport_timestamp == EPOCH_MS + 501


def test_send_carries_history_bloom_and_is_idempotent() -> None:
    c = core()
    m1, _ = c.send(b"1", 0, EPOCH_MS)
    m2, _ = c.send(b"2", 0, EPOCH_MS)
    m, fx = c.send(b"3", 0, EPOCH_MS)
    assert m.deps == [m1.message_id, m2.message_id]
    assert m.message_id == message_id("a", m.lamport_timestamp, b"3")
    assert all(h.sender_id == "a" for h in m.causal_history)  # SDS-R sender ids
    assert m.bloom_filter and len(m.bloom_filter) == 18_752
    assert [type(e) for e in fx] == [Persist, Emit, Send]  # durable, journaled, then sent
    assert fx[0].what == LOG and decode(fx[0].record) == m.stripped()
    assert fx[2].to == EVERYONE and decode(fx[2].msg) == m
    again, fx2 = c.send(b"3", 0, EPOCH_MS)  # the same text again: a second entry
    assert again.message_id != m.message_id and fx2
    assert [x.content for x in c.ordered_log()] == [b"1", b"2", b"3", b"3"]
    assert c.ack_state(m.message_id) is AckState.UNACKNOWLEDGED


def test_total_order_by_lamport_then_id_whatever_the_arrival_order() -> None:
    ms = [msg("b", "p", 5), msg("c", "q", 5), msg("b", "r", 3), msg("c", "s", 9)]
    want = sorted(ms, key=lambda m: (m.lamport_timestamp, m.message_id))
    for perm in (ms, ms[::-1], ms[1:] + ms[:1]):
        c = core()
        for m in perm:
            c.receive_message(m, 0)
        assert [m.message_id for m in c.ordered_log()] == [m.message_id for m in want]


def test_missing_dependencies_are_buffered_then_delivered() -> None:
    c = core()
    m1 = msg("b", "one", 10)
    m2 = msg("b", "two", 11, (m1.message_id,))
    m3 = msg("c", "three", 12, (m2.message_id,))
    fx = c.receive_message(m3, 0) + c.receive_message(m2, 0)
    assert not delivered(fx)
    assert set(c.incoming) == {m2.message_id, m3.message_id}
    fx = c.receive_message(m1, 0)
    assert delivered(fx) == [m1.message_id, m2.message_id, m3.message_id]
    assert not c.incoming
    assert c.receive_message(m1, 0) == [] or c.c.duplicates == 1  # dedup


def test_ack_states_causal_bloom_and_threshold() -> None:
    a = core("a", ("a", "b", "c", "d"))
    m, _ = a.send(b"hello", 0, EPOCH_MS)
    b = core("b", ("a", "b", "c", "d"))
    b.receive_message(m, 0)
    # b's sync-like message with only a bloom -> possibly acknowledged
    sync_b, _ = b._stamp("s1", None, 0, EPOCH_MS)
    sync_b = Message(sync_b.sender_id, sync_b.message_id, "0", sync_b.lamport_timestamp, (),
                     sync_b.bloom_filter)
    a.receive_message(sync_b, 0)
    a.tick(0, EPOCH_MS)  # bloom filters are reviewed at the next tick
    assert a.ack_state(m.message_id) is AckState.POSSIBLY_ACKNOWLEDGED
    # a second participant's bloom -> acknowledged (threshold 2)
    c = core("c", ("a", "b", "c", "d"))
    c.receive_message(m, 0)
    sc, _ = c._stamp("s2", None, 0, EPOCH_MS)
    a.receive_message(Message("c", "s2", "0", sc.lamport_timestamp, (), sc.bloom_filter), 0)
    a.tick(0, EPOCH_MS)
    assert a.ack_state(m.message_id) is AckState.ACKNOWLEDGED
    # causal history alone acknowledges at once
    m2, _ = a.send(b"again", 0, EPOCH_MS)
    a.receive_message(msg("d", "reply", EPOCH_MS + 5, (m2.message_id,)), 0)
    assert a.ack_state(m2.message_id) is AckState.ACKNOWLEDGED


def test_unacknowledged_messages_are_resent_after_the_period() -> None:
    c = core()
    m, _ = c.send(b"x", 0, EPOCH_MS)
    assert not datagrams(c.tick(100, EPOCH_MS), Kind.CONTENT)
    again = datagrams(c.tick(600, EPOCH_MS), Kind.CONTENT)
    assert len(again) == 1  # same id, Lamport time and history; the current filter
    r = again[0]
    assert (r.message_id, r.lamport_timestamp, r.causal_history, r.content) == (
        m.message_id, m.lamport_timestamp, m.causal_history, m.content)
    assert r.bloom_filter == c.bloom.to_bytes() != m.bloom_filter


def test_sync_and_ephemeral_messages_are_never_logged() -> None:
    c = core()
    c.tick(0, EPOCH_MS)  # the first tick schedules the first sync
    fx = c.tick(10_000, EPOCH_MS)
    syncs = [e.msg for e in fx if isinstance(e, Send) and decode(e.msg).kind is Kind.SYNC]
    assert len(syncs) == 1
    s = decode(syncs[0])
    assert s.content is None and s.lamport_timestamp and s.bloom_filter
    d = core("b")
    d.receive(syncs[0], 0)
    assert not d.log and s.message_id not in d.bloom and not d.outgoing
    (e,) = c.send_ephemeral(b"typing")
    em = decode(e.msg)
    assert em.lamport_timestamp is None and em.bloom_filter is None and not em.causal_history
    fx = d.receive(e.msg, 0)
    assert fx == [Emit("ephemeral", {"sender": "a", "payload": "typing"})]
    assert not d.log and not d.incoming


def test_sync_is_skipped_after_other_broadcasts() -> None:
    c = core()
    c.tick(0, EPOCH_MS)
    c.send(b"x", 0, EPOCH_MS)
    assert not datagrams(c.tick(10_000, EPOCH_MS), Kind.SYNC)


def test_bad_bytes_are_counted_not_raised() -> None:
    c = core()
    assert c.receive(b"\xff\x00garbage", 0)[0].type == "wire-error"
    assert c.c.wire_errors == 1


def test_sds_r_repairs_a_gap_no_resend_could_fill() -> None:
    """b and c hold m1; a missed it and its sender is gone: only a repair brings it back."""
    net = SdsSim(["a", "b", "c"], FAST, seed=3)
    net.partition(["a"], ["b", "c"])
    m1 = net.send("b", "first")
    net.run_ms(100)
    net.heal()
    net.cores["b"].outgoing.clear()  # b believes m1 acknowledged (c had it)
    net.cores["b"].opt = SdsOptions(**{**vars(FAST), "rearm": False})
    net.send("c", "second")  # depends on m1
    net.run_ms(200)
    assert m1 in net.cores["a"].repair_out and net.cores["a"].incoming
    net.run_ms(4_000)
    assert m1 in net.cores["a"].log and not net.cores["a"].incoming
    notes = {(e.node, e.type) for e in net.events}
    assert ("a", "repair-request") in notes
    assert {("b", "repair-response"), ("c", "repair-response")} & notes


def test_repair_request_removes_the_entry_from_others_buffers() -> None:
    c = core("c")
    c.repair_out["x"] = (10**9, HistoryEntry("x", "b"))
    req = Message("a", "s", "0", EPOCH_MS, (), None, (HistoryEntry("x", "b"),))
    c.receive_message(req, 0)
    assert "x" not in c.repair_out


def test_responder_schedules_and_cancels_when_someone_else_answers() -> None:
    c = core("c")
    m = msg("b", "m", EPOCH_MS)
    c.receive_message(m, 0)
    c.receive_message(Message("a", "s", "0", EPOCH_MS, (), None,
                              (HistoryEntry(m.message_id, "b"),)), 0)
    assert m.message_id in c.repair_in
    c.receive_message(m, 1)  # someone rebroadcast it first
    assert m.message_id not in c.repair_in


def test_restart_restores_log_bloom_and_lamport() -> None:
    c = core()
    mine, _ = c.send(b"mine", 0, EPOCH_MS + 100)
    theirs = msg("b", "theirs", EPOCH_MS + 200)
    c.receive_message(theirs, 0)
    saved = [encode(m) for m in c.ordered_log()]
    r = core()
    r.restore([decode(x) for x in saved], EPOCH_MS)
    assert [m.message_id for m in r.ordered_log()] == [m.message_id for m in c.ordered_log()]
    assert theirs.message_id in r.bloom and r.lamport == EPOCH_MS + 200
    assert mine.message_id in r.own


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n,loss", [(3, 0.1), (5, 0.3), (9, 0.1)])
def test_converges_under_loss_duplication_and_reordering(seed: int, n: int, loss: float) -> None:
    names = [f"n{i}" for i in range(n)]
    net = SdsSim(names, FAST, seed=seed, loss=loss, dup=0.1, jitter_ms=40)
    for i in range(60):
        net.send(names[i % n], f"{names[i % n]}:{i}:x")
        net.run_ms(15)
    net.run_ms(15_000)
    logs = net.logs()
    first = logs[names[0]]
    assert len(first) == 60 and all(v == first for v in logs.values())
    for delivered in net.delivered.values():
        assert len(delivered) == len(set(delivered)) == 60
    c = net.cores[names[0]]
    assert [m.message_id for m in c.ordered_log()] == [
        k[1] for k in sorted((m.lamport_timestamp, m.message_id) for m in c.ordered_log())]


def test_partition_then_heal_converges() -> None:
    net = SdsSim(["a", "b", "c", "d", "e"], FAST, seed=7, loss=0.05)
    net.partition(["a", "b"], ["c", "d", "e"])
    for i in range(30):
        net.send("abcde"[i % 5], f"p{i}")
        net.run_ms(30)
    net.heal()
    net.run_ms(15_000)
    logs = list(net.logs().values())
    assert len(logs[0]) == 30 and all(v == logs[0] for v in logs)


# ---- bug modes: each visibly breaks a property ---------------------------------------------


def test_bug_deliver_without_deps() -> None:
    c = core(bugs=["deliver-without-deps"])
    m1 = msg("b", "one", 10)
    fx = c.receive_message(msg("b", "two", 11, (m1.message_id,)), 0)
    assert delivered(fx) and not c.incoming


def test_bug_order_by_arrival() -> None:
    c = core(bugs=["order-by-arrival"])
    c.receive_message(msg("b", "late", 9), 0)
    c.receive_message(msg("b", "early", 3), 0)
    assert [m.lamport_timestamp for m in c.ordered_log()] == [9, 3]


def test_bug_no_resend() -> None:
    c = core(bugs=["no-resend"])
    c.send(b"x", 0, EPOCH_MS)
    assert not datagrams(c.tick(10_000, EPOCH_MS), Kind.CONTENT)


def test_bug_resend_new_lamport() -> None:
    c = core(bugs=["resend-new-lamport"])
    m, _ = c.send(b"x", 0, EPOCH_MS)
    again = datagrams(c.tick(10_000, EPOCH_MS + 50), Kind.CONTENT)
    assert again[0].message_id == m.message_id
    assert again[0].lamport_timestamp != m.lamport_timestamp


def test_unknown_bug_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown SDS bug"):
        core(bugs=["nope"])


def test_restart_restores_the_incoming_buffer() -> None:
    c = core()
    m1 = msg("b", "one", 10)
    m2 = msg("b", "two", 11, (m1.message_id,))
    fx = c.receive_message(m2, 0)
    held = [decode(e.record) for e in fx if isinstance(e, Persist) and e.what == HELD]
    assert [m.message_id for m in held] == [m2.message_id]
    r = core()
    r.restore([], EPOCH_MS, held, 0)
    assert m2.message_id in r.incoming and m2.message_id in r.bloom
    fx = r.receive_message(m1, 5)
    assert delivered(fx) == [m1.message_id, m2.message_id]


# ---- the core interface -------------------------------------------------------------------


def test_the_interface_restores_at_start_ticks_on_its_timer_and_answers_commands() -> None:
    first = core()
    kept, _ = first.send(b"kept", 0, EPOCH_MS)
    r = SdsCore("a", ("a", "b", "c"), FAST, rng=random.Random(1), wall_ms=EPOCH_MS,
                wall=lambda now: EPOCH_MS / 1000 + 60 + now,
                durable=(first.ordered_log(), ()))
    assert r.start(2.0) == [SetTimer("tick", 2.05)]
    assert kept.message_id in r.log and r.lamport >= EPOCH_MS + 60_000  # wall(now) feeds it
    fx = r.on_command(SdsCommand("send", b"new"), "t1", 2.1)
    assert isinstance(fx[-1], Reply) and fx[-1].value["ok"] is True
    assert fx[-1].value["id"] == message_id("a", fx[-1].value["lamport"], b"new")
    retry = [SdsCommand("send", b"same", key="c:1"), SdsCommand("send", b"same", key="c:1")]
    answers = [r.on_command(cmd, "t", 2.1)[-1].value for cmd in retry]
    assert answers[0] == answers[1] and len(r.log) == 3  # a retry is not a second send
    reused = r.on_command(SdsCommand("send", b"other", key="c:1"), "t", 2.1)[-1].value
    assert reused["id"] != answers[0]["id"] and len(r.log) == 4  # same key, new payload
    assert r.on_command(SdsCommand("nope", b"x"), "t2", 2.1)[0].value["ok"] is False
    assert r.on_command(SdsCommand("send", b""), "t3", 2.1)[0].value["ok"] is False
    assert r.on_timer("other", 3.0) == []
    assert r.on_timer("tick", 3.0)[-1] == SetTimer("tick", 3.05)
    assert r.on_message("b", b"\xff\x00garbage", 3.1)[0].type == "wire-error"


def test_a_restart_on_the_simulator_keeps_the_log_and_the_held_messages() -> None:
    net = SdsSim(["a", "b", "c"], FAST, seed=2)
    net.partition(["a"], ["b", "c"])
    for i in range(5):
        net.send("b", f"m{i}")
        net.run_ms(20)
    net.crash("b")
    net.restart("b")
    net.run_ms(10)
    assert len(net.cores["b"].log) == 5  # every entry was persisted before it was sent
    net.heal()
    net.run_ms(8_000)
    logs = list(net.logs().values())
    assert len(logs[0]) == 5 and all(v == logs[0] for v in logs)


def test_peers_silent_past_the_stale_bound_stop_counting_towards_the_bloom_threshold() -> None:
    """a's peers c and d never speak (killed for good): b's filter alone holds a's message.
    Until c and d have been silent for ``peer_bloom_stale_ms`` the threshold stays 2 (possibly
    acknowledged); after, one filter is all the live peers can give, and it acknowledges
    (found by `harness sim run sds --gone --seed 13`: three of five gone, the outgoing buffer
    never drained and every message was resent for ever)."""
    opts = SdsOptions(resend_unacked_ms=500, resend_possibly_ms=1500, sync_interval_ms=500,
                      t_min_ms=200, t_max_ms=2000, peer_bloom_stale_ms=5000)
    peers = ("a", "b", "c", "d")
    a, b = core("a", peers, options=opts), core("b", peers, options=opts)
    m, _ = a.send(b"hello", 0, EPOCH_MS)
    b.receive_message(m, 0)

    def b_speaks(t: int) -> None:
        s, _ = b._stamp(f"s{t}", None, t, EPOCH_MS + t)
        a.receive_message(Message("b", s.message_id, "0", s.lamport_timestamp, (),
                                  s.bloom_filter), t)
        a.tick(t, EPOCH_MS + t)

    b_speaks(0)
    assert a.ack_state(m.message_id) is AckState.POSSIBLY_ACKNOWLEDGED
    b_speaks(4_000)
    assert a.ack_state(m.message_id) is AckState.POSSIBLY_ACKNOWLEDGED
    b_speaks(5_001)
    assert a.ack_state(m.message_id) is AckState.ACKNOWLEDGED
    assert m.message_id not in a.outgoing
