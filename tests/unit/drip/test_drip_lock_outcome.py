"""A voter's lock ends on its update's outcome, not on its TTL (docs/drip.md "Locks end on an
outcome"): an initiator that decided commit and then lost every send (cut off, then killed)
must not let the mesh give the same version of the key to another value."""

from __future__ import annotations

from harness.sim.drip import DripSim
from nodes.drip import codec
from nodes.drip.codec import Update
from nodes.drip.core import HEARTBEAT, CoreConfig, DripCore, Inbound, Outcome
from nodes.drip.records import Durable, Init, Lock

MESH3 = [("n1", "n2"), ("n1", "n3"), ("n2", "n3")]
LINE3 = [("n1", "n2"), ("n2", "n3")]


def _decided_then_cut_off(sim: DripSim, initiator: str = "n1") -> None:
    """``initiator`` starts u1 on k; once its votes are out, nothing it sends arrives (its
    answers and commits are lost), it decides commit on the yes votes, and is killed."""
    others = [n for n in sim.ids if n != initiator]
    sim.update(initiator, "k", "first", "u1")
    sim.run_for(0.0015)  # the /voting requests have arrived, the answers not yet
    for n in others:
        sim.net.cut_one_way(initiator, n)
    end = sim.now + 2
    while not sim.events_of(initiator, "decide") and sim.now < end:
        sim.run_for(0.0005)
    (dec,) = sim.events_of(initiator, "decide")
    assert dec["outcome"] == "commit" and dec["version"] == 1
    assert sim.committed("u1")  # its client was told "committed"
    sim.crash(initiator)
    sim.heal()
    assert all(sim.core(n).d.locks == {"k": ("u1", initiator)} for n in others)


def test_a_voter_keeps_the_lock_of_a_lost_commit_and_refuses_the_key_until_it_lands() -> None:
    sim = DripSim(MESH3)
    _decided_then_cut_off(sim)
    sim.run_for(2 * sim.cfg.lock_ttl_s)  # every voter lock TTL ran out, twice
    assert all(sim.core(n).d.locks == {"k": ("u1", "n1")} for n in ("n2", "n3"))
    assert sim.events_of("n2", "lock-expired")
    sim.update("n2", "k", "second", "u2")
    sim.run_for(1)
    out = sim.outcome("u2")
    assert out is not None and out.status == 409 and "in progress (u1)" in out.body["error"]
    assert not sim.committed("u2") and sim.item("n3", "k") is None
    sim.restart("n1")  # its durable outbox delivers the commit
    sim.run_for(2)
    assert all(sim.value(n, "k") == "first" and sim.item(n, "k").version == 1  # type: ignore[union-attr]
               for n in sim.ids)
    assert all(not sim.core(n).d.locks for n in sim.ids)
    sim.update("n3", "k", "third", "u3")
    sim.run_for(1)
    assert sim.committed("u3") and all(sim.value(n, "k") == "third" for n in sim.ids)


def test_the_old_ttl_release_gives_one_version_to_two_values() -> None:
    """The planted ``release-expired-locks`` is the old node, on the schedule of the seed-11
    chaos run: the initiator is killed for good after deciding, the voters' locks run out,
    the operator decommissions it, and another value commits at the version its client was
    promised. The correct node keeps the locks until the decommission and then goes past
    that version (`test_decommissioning_the_dead_initiator_releases_its_locks`)."""
    sim = DripSim(MESH3, bugs=["release-expired-locks"])
    _decided_then_cut_off(sim)
    sim.kill_for_good("n1")
    sim.run_for(sim.cfg.lock_ttl_s + 0.5)
    assert not sim.core("n2").d.locks  # released blind
    sim.members("n2", "m1", remove=["n1"])
    sim.run_for(1)
    sim.update("n2", "k", "second", "u2")
    sim.run_for(1)
    assert sim.committed("u2") and sim.item("n2", "k").version == 1  # type: ignore[union-attr]
    (dec,) = sim.events_of("n1", "decide")
    assert dec["uid"] == "u1" and dec["version"] == 1  # both committed as version 1


def test_an_aborted_update_is_released_by_asking_the_initiator() -> None:
    """Its abort was lost, so the voter asks after its TTL: the initiator (which has no commit
    of it and no open vote) answers "aborted", and the key is free."""
    c = DripCore("n2", ["n1"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)
    out = c.on_timer(("lock", "k", "u1"), 10)
    (q,) = [e.msg for e in out if getattr(e, "to", None) == "n1"
            and isinstance(e.msg, codec.OutcomeQuery)]
    n1 = DripCore("n1", ["n2"], cfg=CoreConfig())
    n1.start(0)
    n1.counter = 7  # it sent that /voting at 6 and its lost abort at 7
    (ans,) = [e.msg for e in n1.on_message(Inbound("n2", 9), q, 10)]
    assert ans.status == 200 and ans.body == {"outcome": "aborted"}
    out = c.on_message("n1", Outcome(q, 200, ans.body), 10)
    assert not c.d.locks
    assert any(getattr(e, "type", None) == "release" and "aborted (asked n1" in e.fields["why"]
               for e in out)


def test_unknown_and_committed_answers_keep_the_lock() -> None:
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)
    q = codec.OutcomeQuery("n2", "u1", "n1", 6)
    for body in ({"outcome": "unknown"}, {"outcome": "committed"}, {"outcome": "undecided"},
                 None):
        c.on_message("n3", Outcome(q, 200 if body else 0, body), 5)
        assert c.d.locks == {"k": ("u1", "n1")}
    # a relay answers only from what it learned: it does not know u1, so "unknown"
    n3 = DripCore("n3", ["n2"], cfg=CoreConfig())
    n3.start(0)
    (ans,) = [e.msg for e in n3.on_message(Inbound("n2", 3), q, 5)]
    assert ans.body == {"outcome": "unknown"}


def test_a_relay_passes_on_the_abort_it_learned_along_a_line() -> None:
    """Line n1-n2-n3: n3 cannot ask n1. n1 aborts (a no from nobody: it is cut off before
    any answer), the abort reaches n2 only; n3 asks n2 after its TTL and n2 knows."""
    sim = DripSim(LINE3)
    sim.update("n1", "k", "x", "u1")
    sim.run_for(0.0025)  # n3 has voted, n2's tally waits on n3's answer
    sim.net.cut_one_way("n2", "n3")  # n2's answers and the abort it passes on never reach n3
    sim.net.cut_one_way("n2", "n1")  # n1 hears no vote: it times out and aborts
    sim.run_for(sim.cfg.vote_timeout_s + 0.5)
    assert not sim.committed("u1") and sim.outcome("u1") is not None
    assert sim.core("n3").d.locks == {"k": ("u1", "n1")}
    sim.heal()
    sim.run_for(sim.cfg.lock_ttl_s + 1)
    assert all(not sim.core(n).d.locks for n in sim.ids)
    (rel,) = [e for e in sim.events_of("n3", "release") if e["uid"] == "u1"]
    assert rel["why"].startswith("aborted (asked n2")


def test_a_voter_asks_again_as_soon_as_the_initiator_is_back() -> None:
    """The ring5 chaos run that committed nothing (seed 4): the cut that lost the initiator's
    abort still held when the voter's TTL ran out, so its question reached nobody and the
    key stayed locked for another whole TTL. When the initiator comes back the voter asks
    it at once, not at its next retry (`outcome_retry_s`), and the key is free."""
    sim = DripSim([("n1", "n2")])
    sim.net.cut_one_way("n2", "n1")  # n2's yes never arrives: n1 times out and aborts
    sim.update("n1", "k", "x", "u1")
    while not sim.core("n2").d.locks:  # n2 has voted and holds k
        sim.run_for(0.0005)
    sim.cut("n1", "n2")  # and n1's abort is lost
    sim.run_for(sim.cfg.lock_ttl_s + 0.2)  # n1 aborted (lost), n2's TTL ran out: asked nobody
    assert not sim.committed("u1") and sim.outcome("u1") is not None
    assert sim.core("n2").d.locks == {"k": ("u1", "n1")}
    (exp,) = sim.events_of("n2", "lock-expired")
    assert exp["asked"] == []
    sim.heal()
    sim.run_for(2 * sim.cfg.heartbeat_s + sim.cfg.peer_timeout_s)  # n2 finds n1 again
    assert not sim.core("n2").d.locks
    (rel,) = [e for e in sim.events_of("n2", "release") if e["uid"] == "u1"]
    assert rel["why"].startswith("aborted (asked n1")
    back = [e for e in sim.events if e.node == "n2" and e.type == "peer" and e.fields["up"]]
    (ask,) = [e for e in sim.events if e.node == "n2" and e.type == "release"]
    assert back and ask.t - back[-1].t < 0.05  # asked as n1 came back, not at a later retry
    sim.run_for(1)  # n2 syncs from n1 before it is active again
    sim.update("n2", "k", "y", "u2")
    sim.run_for(1)
    assert sim.committed("u2") and all(sim.value(n, "k") == "y" for n in sim.ids)


def test_decommissioning_the_dead_initiator_releases_its_locks() -> None:
    sim = DripSim(MESH3)
    _decided_then_cut_off(sim)
    sim.kill_for_good("n1")
    sim.run_for(sim.cfg.lock_ttl_s + 0.5)
    assert sim.core("n2").d.locks == {"k": ("u1", "n1")}
    sim.members("n2", "m1", remove=["n1"])
    sim.run_for(1)
    assert sim.committed("m1")
    assert all(not sim.core(n).d.locks for n in ("n2", "n3"))
    assert any("initiator n1 decommissioned" in e["why"] for e in sim.events_of("n3", "release"))
    sim.update("n3", "k", "after", "u4")
    sim.run_for(1)
    assert sim.committed("u4")
    # n1 may have committed u1 as version 1 unseen: u4 goes past it, never shares it
    assert all(sim.item(n, "k").version == 2 for n in ("n2", "n3"))  # type: ignore[union-attr]


def test_the_fence_past_a_dead_initiators_version_survives_a_restart() -> None:
    """The version the decommissioned n1 may have used is fenced on disk: n2 and n3 restart
    after the decommission (the fence was in memory only before) and the next update of the
    key still goes past it."""
    sim = DripSim(MESH3)
    _decided_then_cut_off(sim)
    sim.kill_for_good("n1")
    sim.members("n2", "m1", remove=["n1"])
    sim.run_for(1)
    assert sim.committed("m1") and all(sim.core(n).d.fences == {"k": 1} for n in ("n2", "n3"))
    for n in ("n2", "n3"):
        sim.restart(n)
    sim.run_for(2)
    assert all(sim.core(n).d.fences == {"k": 1} for n in ("n2", "n3"))
    sim.update("n3", "k", "after", "u4")
    sim.run_for(1)
    assert sim.committed("u4")
    assert all(sim.item(n, "k").version == 2 for n in ("n2", "n3"))  # type: ignore[union-attr]


def test_the_outcome_query_round_trips_and_refuses_a_bad_body() -> None:
    q = codec.OutcomeQuery("n2", "u1", "n1")
    r = codec.encode(q)
    assert (r.method, r.path) == ("POST", "/outcome")
    assert codec.decode(r.method, r.path, r.headers, r.body_bytes()) == q
    for bad in (b"{}", b'{"id": "u1"}', b'{"id": "", "initiator": "n1"}', b"[1]"):
        try:
            codec.decode("POST", "/outcome", r.headers, bad)
        except codec.CodecError as e:
            assert e.status == 400 and ("outcome body" in str(e) or "initiator" in str(e))
        else:
            raise AssertionError(f"{bad!r} was taken")


def test_the_search_target_shows_the_old_release_and_passes_the_correct_node() -> None:
    """drip_search's ``sever`` step and a ``decommission`` of the severed initiator: the
    2PC checker finds ``conflicting-commits`` with ``release-expired-locks``, nothing without."""
    from harness.sim import drip_search

    schedule = [["sever", 0, 0, 1], ["decommission", 100, 0, 1]]
    assert drip_search.run(schedule, 1, ()).ok
    bad = drip_search.run(schedule, 1, ("release-expired-locks",))
    assert not bad.ok and "conflicting-commits" in {w.get("kind") for w in bad.witness}


RING5 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5"), ("n5", "n1")]


def test_a_vote_overtaken_by_its_abort_takes_no_lock() -> None:
    """The ring5 hot-key chaos run with no commit (seed 4): n4's update got a no from n5,
    so n4 aborted at once and the abort went round by n5 to n1 while the vote still crept
    the other way (n3, n2); n1 then locked the key for an update already aborted, and every
    update of the key was voted no until its TTL ran out. Here the link n2 -> n1 is slow;
    n1 must vote no on the stale round and hold nothing."""
    sim = DripSim(RING5)
    sim.core("n5").policy = lambda _cur, _up, _ini: "n5 refuses"
    sim.net.slow[("n2", "n1")] = 0.02
    sim.update("n4", "k", "x", "u1")
    sim.run_for(0.1)
    assert sim.outcome("u1") is not None and not sim.committed("u1")
    (vote,) = [e for e in sim.events_of("n1", "vote") if e["uid"] == "u1"]
    assert vote["vote"] == "no" and vote["reason"].startswith("aborted already: n4's abort")
    assert all(not sim.core(n).d.locks for n in sim.ids)
    sim.core("n5").policy = lambda _cur, _up, _ini: None
    sim.update("n1", "k", "y", "u2")  # the key is free at once, not a TTL later
    sim.run_for(0.2)
    assert sim.committed("u2") and all(sim.value(n, "k") == "y" for n in sim.ids)


def test_a_retry_of_an_aborted_id_is_voted_on() -> None:
    """Only a round older than the abort is stale: a retry of the same id comes with a
    later counter than its abort and takes the lock as usual."""
    c = DripCore("n1", ["n2", "n5"], cfg=CoreConfig(), mesh_members=["n3", "n4"])
    c.start(0)
    c.on_message(Inbound("n5", 1), codec.Abort("n4", 8, False, "u1", "k"), 0)
    out = c.on_message(Inbound("n2", 2), codec.Voting("n4", 7, False, Update("u1", "k", 1)), 0)
    (v,) = [e.fields for e in out if getattr(e, "type", None) == "vote"]
    assert v["vote"] == "no" and not c.d.locks
    c.on_message(Inbound("n2", 3), codec.Voting("n4", 9, False, Update("u1", "k", 2)), 0)
    assert c.d.locks == {"k": ("u1", "n4")}



def test_a_peer_back_is_asked_about_a_lock_before_its_ttl() -> None:
    """Seed 4 of the ring5 hot-key chaos run (session 42): the abort was cut off 0.04 s
    after n2 voted, the cut healed 1.6 s later, and n2 held the key to its TTL (1.4 s into
    the next open window). A peer that comes back is asked at once about every lock held for
    another initiator, whatever its age: an open vote is answered "undecided" and keeps the
    key, a proven abort frees it before the TTL."""
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)

    def back(now: float) -> codec.OutcomeQuery:
        c.on_message(Inbound("n3", 2), codec.NodeNotice("n3", False), now - 0.1)
        out = c.on_message(Inbound("n3", 3), codec.NodeNotice("n3", True), now)
        (q,) = [e.msg for e in out if getattr(e, "to", None) == "n3"
                and isinstance(e.msg, codec.OutcomeQuery)]
        return q

    q = back(0.5)
    assert (q.uid, q.initiator, q.counter) == ("u1", "n1", 6)
    c.on_message("n3", Outcome(q, 200, {"outcome": "undecided"}), 0.5)
    assert c.d.locks == {"k": ("u1", "n1")}
    q = back(1.6)
    assert 1.6 < c.cfg.lock_ttl_s
    c.on_message("n3", Outcome(q, 200, {"outcome": "aborted"}), 1.6)
    assert not c.d.locks


def _restarted_voter() -> tuple[DripCore, list[tuple[str, codec.Heartbeat]]]:
    """n2 read back from its store a lock it voted for n1 (round 6), and started again: its
    first heartbeat round is out."""
    c = DripCore("n2", ["n1", "n3"], durable=Durable.of([Init(), Lock("k", "u1", "n1", 6)]),
                 cfg=CoreConfig())
    c.start(0)
    hbs = _heartbeats(c, 0)
    assert c.d.locks == {"k": ("u1", "n1")} and len(hbs) == 2
    return c, hbs


def _heartbeats(c: DripCore, now: float) -> list[tuple[str, codec.Heartbeat]]:
    return [(e.to, e.msg) for e in c.on_timer(HEARTBEAT, now)
            if isinstance(getattr(e, "msg", None), codec.Heartbeat)]


def _asked(out: list) -> list[tuple[str, codec.OutcomeQuery]]:
    return [(e.to, e.msg) for e in out if isinstance(getattr(e, "msg", None), codec.OutcomeQuery)]


def test_a_restarted_voter_asks_about_its_stored_locks_at_first_contact() -> None:
    """Seed 7 of the 10-seed ring5 run (session 42): n5 was killed holding a lock for an
    update n1 had already aborted, and after its restart kept the key a whole TTL before
    asking. Every peer starts "up", so the first live heartbeat answer was no return and
    `_reask` never ran. The first contact with each peer after a start now is one: the
    stored lock is asked about at once and the initiator's proven abort frees it, long
    before the TTL; later rounds do not ask again (the TTL and its retries do)."""
    c, hbs = _restarted_voter()
    out: list = []
    for to, hb in hbs:
        out += c.on_message(to, Outcome(hb, 200, {"state": "active"}), 0.05)
    asked = _asked(out)
    assert sorted(to for to, _ in asked) == ["n1", "n3"]
    again = [e for to, hb in _heartbeats(c, 0.4)
             for e in c.on_message(to, Outcome(hb, 200, {"state": "active"}), 0.45)]
    assert not _asked(again)  # met once: the next question is the TTL's
    assert all((q.uid, q.initiator, q.counter) == ("u1", "n1", 6) for _, q in asked)
    c.on_message("n1", Outcome(asked[0][1], 200, {"outcome": "aborted"}), 0.1)
    assert not c.d.locks and 0.1 < c.cfg.lock_ttl_s


def test_a_voter_killed_before_the_abort_frees_the_key_soon_after_its_restart() -> None:
    """The same in the simulator: n2 votes for n1's u1 and is killed; n1 aborts (its abort to
    n2 is lost with the process); n2 restarts with the lock from its store. Its first
    heartbeat round finds n1 and n3 alive, it asks, and the key is free within that round,
    not a lock TTL after the restart."""
    sim = DripSim(MESH3)
    sim.update("n1", "k", "x", "u1")
    while not sim.core("n2").d.locks:  # n2 has voted and holds k
        sim.run_for(0.0005)
    sim.crash("n2")
    sim.run_for(sim.cfg.vote_timeout_s + 0.5)
    assert not sim.committed("u1") and sim.outcome("u1") is not None
    assert sim.stored("n2").locks == {"k": ("u1", "n1")}
    start = sim.now
    sim.restart("n2")
    sim.run_for(sim.cfg.lock_ttl_s - 0.5)
    (rel,) = [e for e in sim.events if e.node == "n2" and e.type == "release"]
    assert rel.fields["why"].startswith("aborted (asked n")
    assert rel.t - start < sim.cfg.heartbeat_s + 0.1 < sim.cfg.lock_ttl_s
    assert not sim.events_of("n2", "lock-expired")


def test_a_restarted_voter_asks_a_peer_whose_notice_comes_first() -> None:
    """A peer's "active" notice shows it alive as well as a heartbeat answer does: it is asked
    at once, and once only (its heartbeat answer after that asks nothing)."""
    c, hbs = _restarted_voter()
    (asked,) = _asked(c.on_message(Inbound("n3", 1), codec.NodeNotice("n3", True), 0.01))
    assert asked[0] == "n3" and asked[1].counter == 6
    out = [e for to, hb in hbs for e in c.on_message(to, Outcome(hb, 200, {"state": "active"}),
                                                      0.05)]
    assert [to for to, _ in _asked(out)] == ["n1"]
