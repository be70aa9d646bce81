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
from nodes.drip.sync import (
    Feeder,
    Puller,
    Refused,
    SyncLimits,
    item_bytes,
    matched,
    summarize,
    take_batch,
)


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


def test_feeder_coalesces_repeats_rate_limits_and_resumes_even_after_a_drop() -> None:
    f = Feeder(SyncLimits(batch_items=2, min_interval_s=1.0))
    store = kv(5)
    s = f.request("n2", None, "s1", gen=0, now=0.0)
    for sid, named in (("s1", True), ("s9", False)):  # a repeat, or a request naming no id
        with pytest.raises(Refused) as e:
            f.request("n2", None, sid, gen=0, now=0.1, named=named)
        assert (e.value.status, e.value.reason) == (200, "sync-coalesced")
    with pytest.raises(Refused) as e:  # it would refuse s1's batches: it must ask again
        f.request("n2", None, "s2", gen=0, now=0.1)
    assert (e.value.status, e.value.reason) == (409, "sync-busy")
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
    # commits for n2 were dropped since its first part (gen 0 -> 1): the serve still goes on
    # from the cursor (it used to start over, and under load never finished) but keeps the
    # first part's generation, so it pays no debt: n2 stays owed what it missed
    s4 = f.request("n2", "k0001", "s4", gen=1, now=3.0)
    assert (s4.after, s4.gen) == ("k0001", 0)
    del f.serves["n2"]
    # a source that never served n2 from the start (it restarted): resumes, pays nothing
    assert Feeder(SyncLimits(2)).request("n2", "k0001", "s5", gen=0, now=0.0).gen == -1


def test_sync_request_carries_its_cursor_on_the_wire() -> None:
    for msg in (SyncRequest("n2"), SyncRequest("n2", "k0042"),
                SyncRequest("n2", "k0042", "id1", summarize(kv(100), "k0042"))):
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


def test_a_serve_its_peer_refused_does_not_hold_the_rate_limit_slot() -> None:
    """Chaos seed 5 of the hostile run (session 42): a request in n2's name from a holder of
    its key, while n2 was owed a sync, started a serve whose batch the real n2 refused; the
    serve kept the 1 s slot, so n2's own request got 429 (and the attacker took the slot
    again at its next burst). A serve that delivered nothing gives the slot back; one that
    delivered a batch keeps it (a flood is still one serve a second)."""
    c = _core()
    c.d.kv.update(kv(5))
    c.peer_state["n2"] = "sync"
    [forged] = _serves(c.on_message(Inbound("n2", 1), SyncRequest("n2", None, "forged"), 1.0))
    c.on_message("n2", Outcome(forged.msg, 409, {"reason": "sync-stale"}), 1.05)
    [real] = _serves(c.on_message(Inbound("n2", 2), SyncRequest("n2", None, "real"), 1.1))
    assert real.msg.sync_id == "real" and real.msg.complete
    c.on_message("n2", Outcome(real.msg, 200, {}), 1.15)  # taken: this one holds the slot
    out = c.on_message(Inbound("n2", 3), SyncRequest("n2", None, "again"), 1.2)
    assert not _serves(out) and c.refusals.counts == {"sync-rate-limited": 1}


def test_a_request_naming_its_own_sync_id_is_not_joined_to_a_serve_under_another() -> None:
    """Chaos seed 2 of the hostile run (session 43): a request in n2's name with no sync id
    (from a holder of its key) was being served when the real n2, just healed, asked with its
    own id; it was answered 200 "joined", its puller refused the serve's batches as stale,
    and it waited out its 5 s sync timeout in `sync` while every update needed its vote. Now
    it is refused 409 (it asks again at its next heartbeat round) and, once the other serve
    is gone, served under its own id."""
    c = _core()
    c.d.kv.update(kv(5))
    c.peer_state["n2"] = "sync"
    [forged] = _serves(c.on_message(Inbound("n2", 1), SyncRequest("n2"), 1.0))
    out = c.on_message(Inbound("n2", 2), SyncRequest("n2", None, "real"), 1.01)
    assert not _serves(out) and out[-1].msg.status == 409
    assert c.refusals.counts == {"sync-busy": 1}
    c.on_message("n2", Outcome(forged.msg, 409, {"reason": "sync-stale"}), 1.05)
    [real] = _serves(c.on_message(Inbound("n2", 3), SyncRequest("n2", None, "real"), 1.3))
    assert real.msg.sync_id == "real" and real.msg.complete


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


def _keys(items: tuple[Item, ...]) -> list[str]:
    return [i.key for i in items]


def test_a_summary_never_skips_a_range_the_requester_lacks_or_holds_older() -> None:
    """Hand-made: of five ranges of the requester (4 keys each, the last 2), only the one it
    holds exactly as the source does is skipped; an older version, a key missing in the
    middle of a range, a key missing between two ranges (after one's last key, before the
    next one's first), the same version under another update id and keys past the last
    range are all sent."""
    src = kv(24)
    mine = dict(src)
    mine["k0005"] = Item("k0005", "old", 0, "u-old", "n1")  # range 1: an older version
    del mine["k0010"]  # range 2 (k0007, k0012]: a key missing in the middle
    del mine["k0013"]  # range 3 (k0012, k0017] starts at k0014: k0013 missing in the gap
    mine["k0019"] = Item("k0019", "x" * 10, 1, "other", "n1")  # range 4: same version, other id
    del mine["k0020"], mine["k0021"], mine["k0022"], mine["k0023"]  # past the last range
    summary = summarize(mine, None, per=4)
    assert [hi for hi, _ in summary] == ["k0003", "k0007", "k0012", "k0017", "k0019"]
    assert matched(src, None, summary) == [(None, "k0003")]  # range 0 alone
    f = Feeder(SyncLimits(batch_items=100))
    s = f.request("n2", None, "s1", gen=0, now=0.0, skip=matched(src, None, summary))
    sent: list[str] = []
    while True:
        items, done = f.next_items("n2", src)
        b = batch("n1", "s1", items, done, c=len(sent) + 1)
        f.sent("n2", b)
        f.delivered("n2", b, True)
        sent += _keys(items)
        if done:
            break
    assert sent == [f"k{i:04d}" for i in range(4, 24)] and s.skipped == 1
    # the summary of a store identical to the source's skips every range: one empty batch
    f2 = Feeder(SyncLimits(batch_items=100))
    f2.request("n2", None, "s2", gen=0, now=0.0, skip=matched(src, None, summarize(src, None, 4)))
    assert f2.next_items("n2", src) == ((), True)
    # a resumed request's summary starts after its cursor
    after = summarize(src, "k0009", per=4)
    assert after[0][0] == "k0013" and matched(src, "k0009", after)[0] == ("k0009", "k0013")


def test_a_skipped_range_is_never_crossed_by_a_page_of_the_store(tmp_path) -> None:
    from nodes.drip.records import Merged
    from nodes.drip.store import Store
    st = Store(tmp_path / "s.sqlite3", lean=True)
    try:
        st.commit_records([Merged(tuple(kv(10).values()))])
        items, done = st.page("k0002", 100, 10**6, upto="k0005")
        assert _keys(items) == ["k0003", "k0004", "k0005"] and done
        items, done = st.page(None, 2, 10**6, upto="k0005")
        assert _keys(items) == ["k0000", "k0001"] and not done
    finally:
        st.close()


def test_a_resync_of_a_node_holding_the_same_versions_moves_no_item() -> None:
    """A whole mesh restart: each non-lowest node syncs from the first active one and, holding
    the same versions, takes no item (it used to be sent the whole store again); a joiner's
    owed sync back to the others moves nothing they hold either."""
    cfg = CoreConfig(sync_batch=7, sync_batch_bytes=4000)
    sim = DripSim([("n1", "n2"), ("n2", "n3"), ("n1", "n3")], cfg=cfg)
    for i in range(40):
        sim.update("n1", f"k{i:03d}", "v" * 40, f"u{i}")
        sim.run_for(0.02)
    sim.run_for(1.0)
    for n in ("n1", "n2", "n3"):
        sim.crash(n)
    for n in ("n1", "n2", "n3"):
        sim.restart(n)
    sim.run_for(5)
    assert [sim.core(n).state for n in ("n1", "n2", "n3")] == ["active"] * 3
    done = [e for n in ("n2", "n3") for e in sim.events_of(n, "sync-done") if e["source"]]
    assert done and all(e["items"] == 0 for e in done), done
    sim.members("n1", "m1", add=["n4"])
    sim.run_for(3)
    assert sim.committed("m1")
    sim.join("n4", ["n1", "n2"])
    sim.run_for(5)
    assert sim.core("n4").state == "active" and len(sim.core("n4").d.kv) >= 40
    back = [e for n in ("n1", "n2") for e in sim.events_of(n, "sync-done") if e["source"] == "n4"]
    assert back and all(e["items"] == 0 for e in back), back


def test_a_sync_resumes_from_its_cursor_after_commits_were_dropped_and_stays_owed() -> None:
    """While the joiner is cut off, n1 takes a newer version of a key before the joiner's
    cursor and drops it for the joiner (the source owes it: `_drop_for`, as when a queued
    commit's delivery fails). The resumed sync goes on from the cursor (it used to start over
    from the first key, again and again under load); it pays no debt, so the joiner, active,
    is still owed and pulls that key by the owed sync, ending with every key at n1's version."""
    from nodes.drip.records import Merged
    cfg = CoreConfig(sync_batch=5, sync_batch_bytes=400, sync_timeout_s=0.5)
    sim = DripSim([("n1", "n2"), ("n2", "n3"), ("n1", "n3")], cfg=cfg)
    for i in range(300):
        sim.update("n1", f"k{i:03d}", "v" * 40, f"u{i}")
        sim.run_for(0.005)
    sim.run_for(1.0)
    sim.members("n1", "m1", add=["n4"])  # so n1 heartbeats n4 (and says what it owes)
    sim.run_for(3)
    assert sim.committed("m1")
    sim.join("n4", ["n1"])
    sim.run_for(0.02)
    sim.cut("n1", "n4")
    sim.run_for(2.0)  # the sync is abandoned, its cursor kept
    taken = sorted(k for k in sim.core("n4").d.kv if k.startswith("k"))
    assert 0 < len(taken) < 300
    n1 = sim.core("n1")
    new = Item(taken[0], "new", 7, "u-new", "n1")
    made = [n1._p(Merged((new,))), *n1._drop_for("n4", "test: a commit for n4 dropped")]
    sim.nodes["n1"].durable += [e for e in made if isinstance(e, Persist)]  # as the runtime
    assert "n4" in n1.d.owed
    sim.heal()
    sim.run_for(8.0)
    serves = sim.events_of("n1", "sync-serve")
    assert serves[1]["after"] == taken[-1], serves  # resumed at the cursor, not restarted
    (done,) = sim.events_of("n4", "sync-done")
    assert done["items"] == 301 - len(taken) - 1, done  # the rest only (and drip:members)
    assert sim.core("n4").state == "active" and "n4" in n1.d.owed  # the resume paid no debt
    # the sim wires n1 to n4 at its next start only (DripSim.join): then it heartbeats n4,
    # says what it owes, and n4 pulls it, summary first
    sim.crash("n1")
    sim.restart("n1")
    sim.run_for(8.0)
    n1 = sim.core("n1")
    owed = [e for e in sim.events_of("n4", "sync-done") if e["reason"] == "owed"]
    assert owed and sum(e["items"] for e in owed) < 40, owed  # one range, not the store
    assert sim.core("n4").state == "active" and sim.core("n4").d.kv[taken[0]].uid == "u-new"
    assert "n4" not in n1.d.owed
    assert {k: (i.version, i.uid) for k, i in sim.core("n4").d.kv.items()} \
        == {k: (i.version, i.uid) for k, i in n1.d.kv.items()}


@pytest.mark.parametrize("have", [
    [["k2", "0" * 32], ["k1", "0" * 32]],  # keys not increasing
    [["k0", "0" * 32]],  # not after the cursor ("k1")
    [["k2", "XYZ"]],  # not a digest
    [["k2"]],
    "k2",
])
def test_a_malformed_summary_is_refused_with_what_to_send(have: object) -> None:
    import json as _json

    from nodes.drip.codec import CodecError
    body = _json.dumps({"after": "k1", "have": have}).encode()
    with pytest.raises(CodecError, match="body.have: expected") as e:
        decode("PUT", "/sync/node/n2", {"DRiP-Node-ID": "n2"}, body, None)
    assert e.value.status == 400
