"""Issue 24: a peer, honest or not, cannot wedge the SDS core. Hand-made messages into the
sans-IO core: a held copy is replaced by a deliverable one, held and repair entries expire as
``lost``, limits refuse what would grow state or break the clock, an exception keeps the
effects already produced, resends are fresh and ephemerals do not suppress sync."""

from __future__ import annotations

import random

from harness.sim.sds import EPOCH_MS
from nodes.common.effects import Emit, Send
from nodes.sds.core import SdsCore, SdsOptions, message_id
from nodes.sds.wire import HistoryEntry, Kind, Message, decode

FAST = SdsOptions.from_dict(dict(resend_unacked_ms=500, resend_possibly_ms=1500,
                                 sync_interval_ms=500, t_min_ms=200, t_max_ms=2000,
                                 lost_after_ms=2000))


def core(me: str = "a", **kw) -> SdsCore:
    return SdsCore(me, ("a", "b", "c"), kw.pop("options", FAST), rng=random.Random(1),
                   wall_ms=EPOCH_MS, **kw)


def msg(sender: str, content: str, lamport: int, deps: tuple[str, ...] = (),
        reqs: tuple[str, ...] = ()) -> Message:
    return Message(sender, message_id(sender, lamport, content.encode()), "0", lamport,
                   tuple(HistoryEntry(d) for d in deps), None,
                   tuple(HistoryEntry(r) for r in reqs), content.encode())


def events(fx, type_: str) -> list[dict]:
    return [e.fields for e in fx if isinstance(e, Emit) and e.type == type_]


def sent(fx, kind: Kind | None = None) -> list[Message]:
    return [m for m in (decode(e.msg) for e in fx if isinstance(e, Send))
            if kind is None or m.kind is kind]


def test_a_deliverable_copy_replaces_a_held_one() -> None:
    c = core()
    held = msg("b", "x", EPOCH_MS + 5, ("never-comes",))
    c.receive_message(held, 0)
    assert held.message_id in c.incoming and "never-comes" in c.repair_out
    copy = msg("b", "x", EPOCH_MS + 5)  # same id, a history we can meet (e.g. a retry)
    fx = c.receive_message(copy, 10)
    assert [e["id"] for e in events(fx, "deliver")] == [held.message_id]
    assert c.log[held.message_id].deps == []
    assert not c.incoming and "never-comes" not in c.waiting


def test_held_and_repair_entries_expire_as_lost_and_a_later_copy_heals() -> None:
    c = core()
    held = msg("b", "x", EPOCH_MS + 5, ("never-comes",))
    c.receive_message(held, 0)
    c.tick(100, EPOCH_MS)
    snap = c.snapshot(1_500)  # what the checker reads: the entries' ages and the bound
    assert snap["lost_after_ms"] == 2000
    assert [(e["id"], e["age_ms"]) for e in snap["repair"]["outgoing"]] == [("never-comes", 1500)]
    assert [e["age_ms"] for e in snap["incoming_buffer"]] == [1500]
    fx = c.tick(2_200, EPOCH_MS)
    lost = {(e["id"], e["where"]) for e in events(fx, "lost")}
    assert lost == {(held.message_id, "incoming"), ("never-comes", "repair")}
    assert not c.incoming and held.message_id not in c.bloom
    # the given-up message is asked for once by repair (a live holder may have logged it
    # after its filter showed ours), with a fresh age; nobody answers, so it goes too
    assert list(c.repair_out) == [held.message_id] and c.repair_since[held.message_id] == 2_200
    assert c.repair_out[held.message_id][1].sender_id == "b"
    fx = c.tick(4_100, EPOCH_MS)
    assert held.message_id in c.repair_out and not events(fx, "lost")
    fx = c.tick(4_300, EPOCH_MS)
    assert [(e["id"], e["where"]) for e in events(fx, "lost")] == [(held.message_id, "repair")]
    assert not c.repair_out and not c.incoming
    fx = c.receive_message(msg("b", "x", EPOCH_MS + 5), 4_400)  # a later, deliverable copy
    assert [e["id"] for e in events(fx, "deliver")] == [held.message_id]


def test_a_given_up_held_message_is_asked_for_and_a_holder_serves_it() -> None:
    """A held message given up after its dependencies never came is asked for by repair;
    a peer that logged it answers (SDS-R from its local history), and the copy is held again
    with its dependencies asked afresh: the holder's relay track had ended on our filter."""
    c = core()
    dep = msg("b", "dep", EPOCH_MS + 1)
    held = msg("b", "x", EPOCH_MS + 5, (dep.message_id,))
    c.receive_message(held, 0)
    c.tick(2_200, EPOCH_MS)
    assert held.message_id in c.repair_out
    ask = c.repair_out[held.message_id][0]
    fx = c.tick(ask, EPOCH_MS)  # due: the next broadcast carries the request
    assert any(held.message_id in {r.message_id for r in m.repair_request or ()}
               for m in sent(fx))
    c.receive_message(msg("b", "x", EPOCH_MS + 5, (dep.message_id,)), ask + 10)  # a holder's answer
    assert held.message_id in c.incoming and held.message_id not in c.repair_out
    assert c.repair_since[dep.message_id] == ask + 10  # asked afresh
    fx = c.receive_message(dep, ask + 20)
    assert [e["id"] for e in events(fx, "deliver")] == [dep.message_id, held.message_id]


def test_a_lamport_time_far_ahead_is_refused_and_sends_keep_working() -> None:
    c = core()
    fx = c.receive_message(msg("b", "evil", 2**64 - 1), 0)
    assert events(fx, "refused")[0]["reason"] == "lamport-ahead"
    assert not c.log and c.lamport == EPOCH_MS
    m, _ = c.send(b"fine", 0, EPOCH_MS)
    assert m.lamport_timestamp == EPOCH_MS + 1
    assert c.snapshot(0)["refused"] == {"lamport-ahead": 1}


def test_oversize_ids_senders_and_histories_are_refused() -> None:
    c = core()
    long_id = Message("b", "i" * 50_000, "0", EPOCH_MS, (), None, (), b"x")
    long_sender = Message("s" * 50_000, "id", "0", EPOCH_MS, (), None, (), b"x")
    big_history = msg("b", "h", EPOCH_MS, tuple(f"d{i}" for i in range(1000)))
    long_dep = msg("b", "d", EPOCH_MS, ("d" * 5000,))
    for m in (long_id, long_sender, big_history, long_dep):
        c.receive_message(m, 0)
    assert not c.log and not c.incoming and not c.repair_out
    assert c.snapshot(0)["refused"] == {"history-entry-too-long": 1, "history-too-long": 1,
                                        "id-too-long": 1, "sender-id-too-long": 1}


def test_repair_requests_are_capped_per_message_and_per_requester() -> None:
    c = core()
    for i in range(40):
        c.send(f"m{i}".encode(), 0, EPOCH_MS)
    ids = [m.message_id for m in c.ordered_log()]
    fx = c.receive_message(msg("b", "ask", EPOCH_MS + 50, reqs=tuple(ids)), 0)
    assert events(fx, "refused")[0]["reason"] == "repair-requests-over-limit"
    assert len(c.repair_in) <= FAST.max_repair_requests_in


def test_ids_are_unique_per_send_and_a_squatted_id_is_refused() -> None:
    a, b = core("a"), core("b")
    ma, _ = a.send(b"hello", 0, EPOCH_MS)
    mb, _ = b.send(b"hello", 0, EPOCH_MS)  # same text, same Lamport time, another sender
    assert ma.message_id != mb.message_id
    a.receive_message(mb, 0)
    assert len(a.log) == 2
    squat = Message("b", message_id("c", EPOCH_MS + 9, b"c's text"), "0", EPOCH_MS + 9, (),
                    None, (), b"other text")
    fx = a.receive_message(squat, 0)
    assert events(fx, "refused")[0]["reason"] == "id-mismatch"
    assert squat.message_id not in a.log and squat.message_id not in a.bloom


def test_bloom_filters_of_unknown_senders_acknowledge_nothing() -> None:
    c = core()
    m, _ = c.send(b"x", 0, EPOCH_MS)
    ones = b"\xff" * len(c.bloom.to_bytes())
    for s in ("eve1", "eve2", "eve3"):
        c.receive_message(Message(s, f"sync{s}", "0", EPOCH_MS, (), ones, (), None), 0)
    c.tick(10, EPOCH_MS)
    assert m.message_id in c.outgoing and not c.peer_blooms
    assert c.snapshot(0)["refused"]["bloom-from-unknown-sender"] == 3


def test_an_exception_keeps_the_effects_already_produced() -> None:
    c = core()
    dep = msg("b", "dep", EPOCH_MS)
    late = msg("b", "late", EPOCH_MS + 5, (dep.message_id,))
    c.receive_message(late, 0)
    c.log[dep.message_id] = dep.stripped()  # arrived out of band
    c.log_keys.append((EPOCH_MS, dep.message_id))

    def boom(*_a) -> None:
        raise RuntimeError("bug")

    c._review_blooms = boom  # type: ignore[method-assign]
    fx = c.on_timer("tick", 0.1)
    assert [e["id"] for e in events(fx, "deliver")] == [late.message_id]
    assert events(fx, "core-error")[0]["error"] == "RuntimeError: bug"


def test_a_resend_carries_the_current_filter_and_the_repairs_due_now() -> None:
    c = core()
    m, _ = c.send(b"x", 0, EPOCH_MS)
    c.receive_message(msg("b", "y", EPOCH_MS + 1, ("gone",)), 0)  # wants "gone" repaired
    fx = c.tick(1_999, EPOCH_MS)  # T_req is due (< T_max), the entry not yet lost
    again = [r for r in sent(fx, Kind.CONTENT) if r.message_id == m.message_id]
    assert again and again[0].lamport_timestamp == m.lamport_timestamp
    assert again[0].bloom_filter == c.bloom.to_bytes() != m.bloom_filter
    assert [e.message_id for e in again[0].repair_request] == ["gone"]


def test_ephemerals_and_resends_do_not_suppress_the_periodic_sync() -> None:
    c = core()
    c.send(b"x", 0, EPOCH_MS)
    syncs = 0
    for t in range(0, 5_000, 50):
        fx = [*c.send_ephemeral(f"e{t}".encode()), *c.tick(t, EPOCH_MS)]
        syncs += len(sent(fx, Kind.SYNC))
    assert syncs >= 5
