"""nodes.drip.sync alone (batches, cursor, coalescing, rate limit, who may send a batch) and
through DripCore / the simulator (an unsolicited batch, a sync of many items in small batches
that resumes after a cut)."""

from __future__ import annotations

import pytest

from harness.sim.drip import DripSim
from nodes.common.effects import Emit, Persist, Send
from nodes.drip.codec import (
    Heartbeat,
    Item,
    StateQuery,
    SyncBatch,
    SyncRequest,
    decode,
    encode,
)
from nodes.drip.core import Answer, CoreConfig, DripCore, Inbound, Outcome
from nodes.drip.records import Owe
from nodes.drip.sync import Feeder, Puller, Refused, SyncLimits, item_bytes, take_batch


def kv(n: int, size: int = 10) -> dict[str, Item]:
    return {f"k{i:04d}": Item(f"k{i:04d}", "x" * size, 1, f"u{i}", "n1") for i in range(n)}


def test_batches_are_bounded_by_items_and_bytes_and_one_large_item_still_goes() -> None:
    store = kv(10, 100)
    one = item_bytes(store["k0000"])
    items, done = take_batch(store, None, SyncLimits(batch_items=4, batch_bytes=10**6))
    assert [i.key for i in items] == ["k0000", "k0001", "k0002", "k0003"] and not done
    items, done = take_batch(store, "k0003", SyncLimits(batch_items=100, batch_bytes=3 * one))
    assert [i.key for i in items] == ["k0004", "k0005", "k0006"] and not done
    items, done = take_batch(store, None, SyncLimits(batch_bytes=1))
    assert len(items) == 1  # larger than the bound alone: sent alone, never stuck
    items, done = take_batch(store, "k0008", SyncLimits())
    assert [i.key for i in items] == ["k0009"] and done
    assert take_batch({}, None, SyncLimits()) == ((), True)
    with pytest.raises(ValueError, match="batch_items"):
        SyncLimits(batch_items=0)


def batch(src: str, sid: str, items: tuple[Item, ...], complete: bool, c: int = 1
          ) -> SyncBatch:
    return SyncBatch(src, c, False, complete, sid, items)


def test_puller_takes_only_the_sync_it_asked_for_and_resumes_from_its_cursor() -> None:
    p = Puller()
    b = batch("n2", "s1", tuple(kv(2).values()), False)
    with pytest.raises(Refused) as e:
        p.check("n2", b)
    assert (e.value.status, e.value.reason) == (409, "sync-unsolicited")
    p.begin("n2", "join", 0.0)
    with pytest.raises(Refused):  # asked its state, not yet sent the request
        p.check("n2", b)
    assert p.cur is not None
    p.cur.asked = True
    with pytest.raises(Refused, match="asked from n2, not n3"):
        p.check("n3", batch("n3", "s9", (), True))
    p.check("n2", b)
    t0 = p.cur.token
    p.took(b, 2)
    assert p.cur.after == "k0001" and p.cur.token != t0 and p.resume == ("n2", "k0001")
    with pytest.raises(Refused) as e:
        p.check("n2", batch("n2", "s0", (), True))  # an older serve of the same source
    assert e.value.reason == "sync-stale"
    assert p.stop("n3") is None and p.stop("n2") is not None
    assert p.begin("n2", "retry", 1.0).after == "k0001"  # resumes where it stopped
    assert p.begin("n3", "retry", 2.0).after is None  # another source: from the start
    p.cur.asked = True
    p.took(batch("n3", "s2", (), True), 0)
    assert p.cur is None and p.resume is None


def test_feeder_coalesces_repeats_rate_limits_and_resumes_only_when_nothing_was_dropped() -> None:
    f = Feeder(SyncLimits(batch_items=2, min_interval_s=1.0))
    store = kv(5)
    s = f.request("n2", None, "s1", gen=0, now=0.0)
    with pytest.raises(Refused) as e:
        f.request("n2", None, "s2", gen=0, now=0.1)
    assert (e.value.status, e.value.reason) == (200, "sync-coalesced")
    items, done = f.next_items("n2", store)
    b = batch("n1", "s1", items, done, c=1)
    f.sent("n2", b)
    assert f.delivered("n2", batch("n1", "s1", items, done, c=99), True) is None  # not ours
    assert f.delivered("n2", b, True) is s and s.after == "k0001"
    items, done = f.next_items("n2", store)
    b = batch("n1", "s1", items, done, c=2)
    f.sent("n2", b)
    assert f.delivered("n2", b, False) is None and "n2" not in f.serves  # failed: dropped
    with pytest.raises(Refused) as e:
        f.request("n2", "k0001", "s3", gen=0, now=0.5)
    assert (e.value.status, e.value.reason) == (429, "sync-rate-limited")
    assert f.request("n2", "k0001", "s3", gen=0, now=1.5).after == "k0001"
    del f.serves["n2"]
    # commits for n2 were dropped since its first part (gen 0 -> 1): the cursor is ignored
    assert f.request("n2", "k0001", "s4", gen=1, now=3.0).after is None


def test_sync_request_carries_its_cursor_on_the_wire() -> None:
    for msg in (SyncRequest("n2"), SyncRequest("n2", "k0042")):
        r = encode(msg)
        assert decode(r.method, r.path, r.headers, r.body_bytes() or b"", None) == msg


def _core() -> DripCore:
    c = DripCore("n1", ["n2", "n3"], cfg=CoreConfig())
    c.start(0.0)
    return c


def test_an_unsolicited_batch_is_refused_counted_and_changes_nothing() -> None:
    c = _core()
    c.state = "active"
    before = (dict(c.d.kv), set(c.d.owed))
    out = c.on_message(Inbound("n2", 7), batch("n2", "evil", tuple(kv(20000, 1).values()),
                                                True), 1.0)
    assert out[-1] == Send(Inbound("n2", 7), out[-1].msg)
    assert isinstance(out[-1].msg, Answer) and out[-1].msg.status == 409
    assert not [e for e in out if isinstance(e, Persist)]
    assert (dict(c.d.kv), set(c.d.owed)) == before  # nothing applied, no peer owed a sync
    assert c.refusals.counts == {"sync-unsolicited": 1}
    assert [e.fields["reason"] for e in out if isinstance(e, Emit) and e.type == "refused"] \
        == ["sync-unsolicited"]


def test_a_flood_of_sync_requests_starts_one_serve() -> None:
    c = _core()
    c.d.kv.update(kv(50))
    c.peer_state["n2"] = "sync"  # its heartbeat said it is syncing
    sends = []
    for i in range(100):
        out = c.on_message(Inbound("n2", i), SyncRequest("n2"), 1.0 + i / 1000)
        sends += [e for e in out if isinstance(e, Send) and isinstance(e.msg, SyncBatch)]
    assert len(sends) == 1
    assert c.refusals.counts == {"sync-coalesced": 99}


def _serves(out: list) -> list:
    return [e for e in out if isinstance(e, Send) and isinstance(e.msg, SyncBatch)]


def test_a_sync_request_from_an_active_member_owed_nothing_is_refused_and_serves_nothing() -> None:
    """A flood in the name of an active member (its key stolen) made us serve the real
    member, which refused each batch as unsolicited: a third of the commit rate lost."""
    c = _core()
    c.d.kv.update(kv(50))
    c.on_message(Inbound("n2", 0), Heartbeat("n2", "active", ("n1", "n2", "n3")), 0.5)
    sends, journaled = [], []
    for i in range(100):
        out = c.on_message(Inbound("n2", i), SyncRequest("n2"), 1.0 + i / 10)
        sends += _serves(out)
        journaled += [e for e in out if isinstance(e, Emit) and e.type == "refused"]
        assert out[-1].msg.status == 409
    assert sends == [] and c.feeder.serves == {} and c.puller.cur is None
    assert c.refusals.counts == {"sync-not-needed": 100}
    assert len(journaled) == 1  # at the refusal rate (one per 10 s), not once per request


def test_a_sync_is_served_to_a_peer_that_said_it_syncs_or_was_inactive_or_is_owed() -> None:
    for state, owed in (("sync", False), ("inactive", False), ("active", True)):
        c = _core()
        c.d.kv.update(kv(5))
        c.on_message(Inbound("n2", 0), Heartbeat("n2", state, ("n1", "n2", "n3")), 0.5)
        if owed:  # e.g. commits for it were dropped while it was cut off
            c.d.apply(Owe(("n2",)))
        out = c.on_message(Inbound("n2", 1), SyncRequest("n2"), 1.0)
        assert len(_serves(out)) == 1, (state, owed)
        assert c.refusals.counts == {}


def test_a_batch_forged_in_the_sources_name_before_its_first_real_one_is_refused() -> None:
    """The requester chooses the sync id: a batch without it is refused even while the real
    sync from that source is outstanding and no real batch came yet (it used to fix the id)."""
    c = _core()
    c.new_sync_id = lambda: "secret-1"
    c.state = "sync"
    c._start_sync("n2", "recovering", 1.0)
    out = c.on_message("n2", Outcome(StateQuery("n1"), 200, {"state": "active"}), 1.1)
    req = next(e.msg for e in out if isinstance(e, Send) and isinstance(e.msg, SyncRequest))
    assert req.sync_id == "secret-1"
    forged = batch("n2", "n2-7", (Item("k", "forged", 99, "f1", "n2"),), True, c=5)
    out = c.on_message(Inbound("n2", 1), forged, 1.2)
    assert out[-1].msg.status == 409 and "k" not in c.d.kv
    assert c.refusals.counts == {"sync-stale": 1}
    real = batch("n2", "secret-1", (Item("k", "real", 1, "r1", "n2"),), True, c=6)
    out = c.on_message(Inbound("n2", 2), real, 1.3)
    assert out[-1].msg.status == 200 and c.d.kv["k"].value == "real" and c.state == "active"


def test_the_source_serves_under_the_requesters_sync_id() -> None:
    c = _core()
    c.d.kv.update(kv(3))
    c.peer_state["n2"] = "sync"
    out = c.on_message(Inbound("n2", 0), SyncRequest("n2", None, "secret-2"), 1.0)
    assert [e.msg.sync_id for e in _serves(out)] == ["secret-2"]
    r = encode(SyncRequest("n2", "k1", "secret-2"))
    assert decode(r.method, r.path, r.headers, r.body_bytes() or b"", None) \
        == SyncRequest("n2", "k1", "secret-2")


def test_a_joiner_syncs_many_items_in_bounded_batches_and_resumes_after_a_cut() -> None:
    cfg = CoreConfig(sync_batch=7, sync_batch_bytes=400, sync_timeout_s=0.5)
    sim = DripSim([("n1", "n2"), ("n2", "n3"), ("n1", "n3")], cfg=cfg)
    for i in range(60):
        sim.update("n1", f"k{i:03d}", "v" * 40, f"u{i}")
        sim.run_for(0.05)
    sim.run_for(1.0)
    assert all(sim.committed(f"u{i}") for i in range(60))
    sim.join("n4", ["n1"])
    sim.run_for(0.02)  # a few batches in, the link goes
    sim.cut("n1", "n4")
    sim.run_for(2.0)
    taken = len(sim.core("n4").d.kv)
    assert 0 < taken < 60 and sim.core("n4").state == "sync"
    sim.heal()
    sim.run_for(5.0)
    assert sim.core("n4").state == "active" and len(sim.core("n4").d.kv) == 60
    serves = sim.events_of("n1", "sync-serve")
    assert len(serves) >= 2 and serves[-1]["after"] is not None  # resumed, not from the start


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_mesh_all_of_whose_nodes_restarted_goes_active_and_commits(seed: int) -> None:
    """n1 dies first (n2 and n3 owe it a sync), then n2 and n3: a power cut. A syncing node
    asks only an active peer for an owed sync, so the round finds no sync under way, n1 (the
    lowest id, every reachable peer syncing) goes active and the others sync from it. Before,
    n1 asked its syncing peers again on each heartbeat and all three stayed in sync for good."""
    sim = DripSim([("n1", "n2"), ("n2", "n3"), ("n1", "n3")], seed=seed)
    sim.update("n2", "k", 1, "u1")
    sim.run_for(1)
    assert sim.committed("u1")
    sim.crash("n1")
    sim.run_for(1.5)
    sim.crash("n2")
    sim.crash("n3")
    for n in ("n1", "n2", "n3"):
        sim.restart(n)
    sim.run_for(5)
    assert [sim.core(n).state for n in ("n1", "n2", "n3")] == ["active"] * 3
    sim.update("n1", "k", 2, "u2")
    sim.run_for(3)
    assert sim.committed("u2"), sim.outcome("u2")
    assert all(sim.value(n, "k") == 2 for n in ("n1", "n2", "n3"))
    assert all(sim.stored(n).kv["k"].version == 2 for n in ("n1", "n2", "n3"))
