"""DripCore on the simulator (harness.sim.drip): votes, commits, counters, state, sync; and
the core alone where one input says enough."""

from __future__ import annotations

from harness.sim.drip import DripSim
from nodes.common.effects import Effect, Emit, Persist, Send
from nodes.drip import codec
from nodes.drip.codec import Item, Update
from nodes.drip.core import HEARTBEAT, Answer, ClientUpdate, CoreConfig, DripCore, Inbound, Outcome
from nodes.drip.entitlement import key_ownership
from nodes.drip.records import Durable
from nodes.drip.seen import Seen

LINE4 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4")]
RING4 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n1", "n4")]


def settle(sim: DripSim, t: float = 1.0) -> None:
    sim.run_for(t)


def until_decided(sim: DripSim, uid: str, limit: float = 10.0) -> None:
    end = sim.now + limit
    while sim.outcome(uid) is None and sim.now < end:
        sim.run_for(0.0005)
    assert sim.outcome(uid) is not None, f"{uid} undecided after {limit}s"


def test_update_commits_on_every_node_with_votes_from_beyond_the_direct_peers() -> None:
    sim = DripSim(LINE4)
    sim.update("n1", "k", 7, "u1")
    settle(sim)
    assert sim.committed("u1")
    assert all(sim.value(n, "k") == 7 for n in sim.ids)
    (dec,) = sim.events_of("n1", "decide")
    assert dec["outcome"] == "commit" and dec["voters"] == ["n1", "n2", "n3", "n4"]
    (v4,) = sim.events_of("n4", "vote")
    assert v4["vote"] == "yes" and v4["from"] == "n3"  # n4 is two hops beyond n1's peers
    assert all(not sim.core(n).d.locks for n in sim.ids)
    assert all(sim.stored(n).kv == sim.core(n).d.kv for n in sim.ids)  # durable, not just held


def test_versions_grow_per_key_and_the_highest_wins_everywhere() -> None:
    sim = DripSim(RING4)
    for i, n in enumerate(["n1", "n3", "n2"]):
        sim.update(n, "k", i, f"u{i}")
        settle(sim)
    assert [sim.item(n, "k").version for n in sim.ids] == [3, 3, 3, 3]  # type: ignore[union-attr]
    assert {sim.value(n, "k") for n in sim.ids} == {2}


def test_concurrent_updates_of_one_key_never_both_commit() -> None:
    sim = DripSim(RING4)
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")  # both lock k before any vote travels
    settle(sim, 10)
    assert not (sim.committed("ua") and sim.committed("ub"))
    assert any(e["vote"] == "no" for n in sim.ids for e in sim.events_of(n, "vote"))


def test_an_abort_frees_the_voters_locks_at_once() -> None:
    """Without the abort message a voter holds the key until its lock TTL (3 s): every update
    of a hot key in that window is refused."""
    sim = DripSim(RING4)
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")
    settle(sim, 1)  # well within lock_ttl_s
    aborted = [u for u in ("ua", "ub") if not sim.committed(u)]
    assert aborted
    assert all(sim.core(n).d.locks.get("k", (None,))[0] not in aborted for n in sim.ids)
    assert any(str(e["why"]).startswith("aborted by") for n in sim.ids
               for e in sim.events_of(n, "release"))
    sim.update("n2", "k", "c", "uc")  # the key is free again everywhere
    settle(sim, 1)
    assert sim.committed("uc")


def test_forwarders_answer_before_the_initiator_gives_up_when_a_link_below_hangs() -> None:
    """Ring n1..n5, the n1-n5 link swallows requests: n4's vote reaches everyone by other
    paths, but n1 and n5 each wait on the other. They must answer their senders before n4's
    timeout (DRiP-Vote-Budget-Ms), or every update aborts while the link hangs."""
    ring5 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5"), ("n5", "n1")]
    sim = DripSim(ring5)
    sim.cut("n1", "n5")
    sim.update("n4", "k", "v", "u1")
    settle(sim, 5)
    assert sim.committed("u1"), sim.outcome("u1")
    assert all(sim.value(n, "k") == "v" for n in ("n2", "n3", "n4"))


def test_forget_in_progress_bug_lets_both_commit() -> None:
    sim = DripSim(RING4, bugs={"forget-in-progress"})
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")
    settle(sim, 10)
    assert sim.committed("ua") and sim.committed("ub")


def test_votes_route_around_a_cut_link() -> None:
    sim = DripSim(RING4)
    sim.cut("n1", "n2")
    settle(sim, 3)  # a heartbeat round times out on the cut link
    assert sim.core("n1").peer_up["n2"] is False
    sim.update("n1", "k", 1, "u1")
    settle(sim, 5)
    assert sim.committed("u1")
    assert sim.value("n2", "k") == 1  # through n4 -> n3 -> n2


def test_an_unreachable_member_aborts_the_update_instead_of_splitting() -> None:
    sim = DripSim(RING4)
    sim.crash("n3")
    settle(sim, 1)  # refused at once: n3 is down for its peers after one round
    sim.update("n1", "k", 1, "u1")
    settle(sim, 5)
    a = sim.outcome("u1")
    assert a is not None and a.status == 409 and "n3" in a.body["error"]
    assert all(sim.value(n, "k") is None for n in ("n1", "n2", "n4"))


def test_partial_vote_bug_commits_without_a_member() -> None:
    sim = DripSim(RING4, bugs={"commit-partial-vote"})
    sim.crash("n3")
    settle(sim, 1)
    sim.update("n1", "k", 1, "u1")
    settle(sim, 5)
    assert sim.committed("u1")
    assert sim.events_of("n1", "decide")[0]["missing"] == ["n3"]


def test_timeout_aborts_and_late_responses_change_nothing() -> None:
    sim = DripSim([("n1", "n2")])
    sim.pause("n2")  # the request waits for n2; n1's vote timer runs out first
    sim.update("n1", "k", 1, "u1")
    settle(sim, 2.5)
    a = sim.outcome("u1")
    assert a is not None and a.status == 409
    sim.resume("n2")  # n2 takes the request now; its "yes" is late
    settle(sim, 1)
    assert sim.events_of("n1", "late-vote")
    assert sim.value("n1", "k") is None and sim.value("n2", "k") is None


def _asking_n2_and_n3(bugs: frozenset[str] = frozenset()) -> tuple[DripCore, list[Effect]]:
    c = DripCore("n1", ["n2", "n3"])
    c.start(0)
    c.peer_up.update({"n2": True, "n3": True})
    return c, c.on_command(ClientUpdate(Update("u1", "k", 1)), 7, 0)


def test_a_bare_vote_counts_only_as_its_senders_own_vote() -> None:
    """The spec's vote response has no body: it names no update and vouches for nobody else."""
    c, _ = _asking_n2_and_n3()
    assert c.on_message(Inbound("n2", 1), codec.VoteResponse("n2", True, None, None, None), 0)\
        [-1] == Send(Inbound("n2", 1), Answer(200, {"ok": True}))
    assert c.tallies["u1"].voters == {"n1", "n2"} and c.tallies["u1"].pending == {"n3"}
    out = c.on_message(Inbound("n3", 2), codec.VoteResponse("n3", True, None, None, None), 0)
    (dec,) = [e for e in out if isinstance(e, Emit) and e.type == "decide"]
    assert dec.fields["outcome"] == "commit"


def test_a_bare_no_aborts_and_an_ambiguous_bare_vote_is_ignored() -> None:
    c, _ = _asking_n2_and_n3()
    out = c.on_message(Inbound("n2", 1), codec.VoteResponse("n2", False, None, None, None), 0)
    (dec,) = [e for e in out if isinstance(e, Emit) and e.type == "decide"]
    assert dec.fields["outcome"] == "abort" and dec.fields["no_voters"] == ["n2"]
    c.peer_up.update({"n2": True, "n3": True})
    c.on_command(ClientUpdate(Update("u2", "a", 1)), 8, 0)
    c.on_command(ClientUpdate(Update("u3", "b", 1)), 9, 0)
    out = c.on_message(Inbound("n2", 3), codec.VoteResponse("n2", True, None, None, None), 0)
    (late,) = [e for e in out if isinstance(e, Emit)]
    assert late.type == "late-vote" and "2 open votes" in late.fields["why"]
    assert all("n2" in c.tallies[u].pending for u in ("u2", "u3"))


def test_the_abort_counter_survives_a_restart() -> None:
    """An abort takes a counter; were it not durable, the next update after a restart would
    reuse it and every peer would take the vote request for a duplicate."""
    sim = DripSim(RING4)
    sim.crash("n3")
    settle(sim, 1)
    sim.update("n1", "k", 1, "u1")
    settle(sim, 5)
    assert not sim.committed("u1") and sim.core("n1").counter == 2  # vote, then abort
    sim.restart("n1")
    sim.restart("n3")
    settle(sim, 3)
    assert sim.core("n1").counter == 2
    sim.update("n1", "k", 2, "u2")
    settle(sim, 3)
    assert sim.committed("u2"), sim.outcome("u2")


def test_seen_counters_stop_propagation_and_reset_starts_a_new_epoch() -> None:
    s, top = Seen({}), 2**64 - 1
    assert s.before("n1", top - 1, False) is False
    assert s.before("n1", top - 1, False) is True
    assert s.before("n1", top - 2, False) is False  # overtaken by top-1, still new once
    assert s.before("n1", top - 2, False) is True
    assert s.before("n1", 0, True) is False  # wrapped: reset flag makes 0 new
    assert s.before("n1", 0, True) is True  # the same reset seen again on another path
    assert s.before("n1", 1, False) is False
    assert s.row("n1")[:3] == ("n1", 1, 0)
    restored = Seen({"n1": (1, 0, None)})  # a store from before windows: everything up to 1
    assert restored.before("n1", 1, False) is True and restored.before("n1", 2, False) is False


def test_a_duplicate_voting_is_answered_duplicate_and_not_forwarded() -> None:
    c = DripCore("n2", ["n1", "n3"])
    c.start(0)
    v = codec.Voting("n1", 10, False, Update("u1", "k", 1))
    first = c.on_message(Inbound("n1", 1), v, 0)
    assert any(isinstance(e, Send) and e.to == "n3" for e in first)  # forwarded
    again = c.on_message(Inbound("n3", 2), v, 0)
    # answered in the HTTP answer itself: no vote response of its own, nothing forwarded
    assert again == [Send(Inbound("n3", 2), Answer(200, {"ok": True, "duplicate": True}))]


def test_a_relay_stops_waiting_on_a_peer_that_answers_its_voting_duplicate() -> None:
    """n2 forwards n1's /voting to n3 and n4; n3 already had it (its answer says so), n4
    votes yes: n2 answers n1 at once with n4's yes, without waiting for anything from n3."""
    c = DripCore("n2", ["n1", "n3", "n4"])
    c.start(0)
    v = codec.Voting("n1", 10, False, Update("u1", "k", 1))
    fwd = {e.to: e.msg for e in c.on_message(Inbound("n1", 1), v, 0)
           if isinstance(e, Send) and isinstance(e.to, str)}
    assert set(fwd) == {"n3", "n4"}
    assert c.on_message("n3", Outcome(fwd["n3"], 200, {"ok": True, "duplicate": True}), 0) == []
    yes = codec.VoteResponse("n4", True, "n1", 10, "u1", ("n4",))
    up = [e for e in c.on_message(Inbound("n4", 2), yes, 0)
          if isinstance(e, Send) and e.to == "n1"]
    assert [(e.msg.yes, e.msg.voters) for e in up] == [(True, ("n2", "n4"))]
    # a plain 200 (a peer that answers duplicates by a vote response) leaves n3 awaited
    c2 = DripCore("n2", ["n1", "n3"])
    c2.start(0)
    (f,) = [e for e in c2.on_message(Inbound("n1", 1), v, 0)
            if isinstance(e, Send) and e.to == "n3"]
    assert c2.on_message("n3", Outcome(f.msg, 200, {"ok": True}), 0) == []
    assert c2.tallies["u1"].pending == {"n3"}


def test_own_counter_wraps_with_the_reset_flag() -> None:
    c = DripCore("n1", ["n2"], Durable(counter=2**64 - 1))
    c.start(0)
    eff = c.on_command(ClientUpdate(Update("u1", "k", 1)), 1, 0)
    (send,) = [e for e in eff if isinstance(e, Send)]
    assert send.msg.counter == 0 and send.msg.reset is True
    # the wrapped counter is persisted before the request leaves
    saved = [e for e in eff[:eff.index(send)] if isinstance(e, Persist)]
    assert any(getattr(p.record, "rows", None) == (("__self__", 0, None, None),) for p in saved)


def test_losing_every_peer_makes_a_node_inactive_then_it_syncs_back() -> None:
    sim = DripSim(LINE4)
    sim.crash("n1")  # n1 is n2's other neighbour; isolate n2 from n3 too
    sim.cut("n2", "n3")
    settle(sim, 3)
    assert sim.core("n2").state == "inactive"
    # an inactive node refuses peers' requests (503) and its clients' updates
    out = sim.core("n2").on_message(
        Inbound("n3", 0), codec.Voting("n3", 99, False, Update("x", "k", 1)), sim.now)
    assert out == [Send(Inbound("n3", 0), Answer(503, {"error": "node n2 is inactive"}))]
    sim.heal()
    settle(sim, 3)
    assert sim.core("n2").state == "active"
    kinds = [e.type for e in sim.events if e.node == "n2"]
    assert "sync-done" in kinds
    assert kinds.index("sync-done") < len(kinds) - 1 - kinds[::-1].index("state")


def test_dropped_commits_are_owed_and_recovered_by_sync() -> None:
    sim = DripSim(LINE4)
    sim.update("n1", "k", 1, "u1")
    until_decided(sim, "u1")  # the vote completes, then n4's link goes before the commit
    sim.cut("n3", "n4")
    settle(sim, 3)
    assert sim.value("n4", "k") is None and "n4" in sim.core("n3").d.owed
    sim.heal()  # n4 went inactive (its only peer) -> sync; it is also told it is owed
    settle(sim, 3)
    assert sim.value("n4", "k") == 1 and sim.core("n4").state == "active"
    assert "n4" not in sim.core("n3").d.owed


def test_commits_learned_by_sync_travel_on_down_a_line() -> None:
    """n1 commits, its link to n2 goes before the commit leaves: n2 learns it only by sync,
    and must pass it on (n3, n4 are beyond n2; n1's dropped queue never reaches them)."""
    sim = DripSim(LINE4)
    sim.update("n1", "k", 1, "u1")  # the /voting request to n2 is on its way
    sim.net.cut_one_way("n1", "n2")  # n2's votes come back; n1's commit will not get through
    until_decided(sim, "u1")
    assert sim.committed("u1")
    settle(sim, 3)
    assert [sim.value(n, "k") for n in ("n2", "n3", "n4")] == [None, None, None]
    sim.heal()
    settle(sim, 6)
    assert [sim.value(n, "k") for n in ("n1", "n2", "n3", "n4")] == [1, 1, 1, 1]
    assert any("learned commits by sync" in e["why"] for e in sim.events_of("n2", "owe-sync"))
    # each node journals the commit it learned by sync, as the checkers need (liveness held
    # a node that learned it this way to have never got it)
    for n in ("n2", "n3", "n4"):
        (ap,) = [e for e in sim.events_of(n, "apply") if e["uid"] == "u1"]
        assert ap["via"] == "sync" and ap["version"] == 1 and ap["value"] == 1


def test_restart_keeps_committed_data_and_syncs_before_going_active() -> None:
    sim = DripSim(LINE4)
    sim.update("n1", "k", 1, "u1")
    settle(sim)
    sim.crash("n4")
    settle(sim, 1)
    sim.boot("n4")
    sim.run_for(0)
    assert sim.core("n4").state == "sync" and sim.value("n4", "k") == 1
    settle(sim, 1)
    assert sim.core("n4").state == "active"
    assert sim.events_of("n4", "sync-done")


def test_skip_sync_bug_goes_active_at_once() -> None:
    sim = DripSim([("n1", "n2")], bugs={"skip-sync"})
    sim.update("n1", "k", 1, "u1")
    settle(sim)
    sim.restart("n2")
    sim.run_for(0)
    assert sim.core("n2").state == "active"


def test_an_update_of_an_initiator_that_restarts_is_released_and_never_commits() -> None:
    sim = DripSim(RING4)
    sim.pause("n3")  # the vote cannot complete
    sim.update("n1", "k", 1, "u1")
    settle(sim, 0.01)
    sim.restart("n1")
    sim.resume("n3")
    settle(sim, 5)
    assert sim.outcome("u1") is None  # its client lost the answer with the process
    assert all(sim.value(n, "k") is None for n in sim.ids)
    assert any(e["why"] == "restart" for e in sim.events_of("n1", "release"))
    assert all("k" not in sim.core(n).d.locks for n in sim.ids)


def test_ownership_policy_votes_no_for_another_owner() -> None:
    d = Durable(kv={"+1555": Item("+1555", "route-a", 1, "u0", "carrierA")})
    c = DripCore("n2", ["n1"], d, CoreConfig(), policy=key_ownership)
    c.start(0)
    eff = c.on_message(Inbound("n1", 1), codec.Voting(
        "n1", 1, False, Update("u1", "+1555", "route-b", "carrierB")), 0)
    (resp,) = [e for e in eff if isinstance(e, Send) and e.to == "n1"]
    assert resp.msg.yes is False
    (vote,) = [e for e in eff if isinstance(e, Emit) and e.type == "vote"]
    assert "owned by 'carrierA'" in vote.fields["reason"]


def test_same_seed_same_trace() -> None:
    def run(seed: int) -> bytes:
        sim = DripSim(RING4, seed=seed, jitter=0.01, loss=0.05)
        for i in range(6):
            sim.update(sim.ids[i % 4], "k", i, f"u{i}")
            sim.run_for(0.7)
        sim.crash("n2")
        sim.run_for(1)
        sim.boot("n2")
        sim.run_for(4)
        return sim.trace_bytes()

    assert run(3) == run(3)
    assert run(3) != run(4)



def _active(me: str, peers: list[str]) -> DripCore:
    c = DripCore(me, peers)
    c.start(0)
    c.state = "active"
    return c


def test_a_commit_without_our_yes_vote_is_refused_409_and_applies_nothing() -> None:
    """Issue 26 "no commit without its vote round": the check is on the message's initiator
    and our own vote, so a relay (hop n3) may deliver it but a stranger's commit is refused."""
    c = _active("n2", ["n1", "n3"])
    stray = codec.Commit("n1", 5, False, Update("u9", "k", 1), 1)
    out = c.on_message(Inbound("n3", 1), stray, 0)
    assert out[-1].msg.status == 409 and "vote" in out[-1].msg.body["error"]
    assert "u9" not in c.d.applied and "k" not in c.d.kv
    assert c.refusals.snapshot().get("commit-without-vote") == 1
    c.on_message(Inbound("n1", 2), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)
    other = codec.Commit("n3", 7, False, Update("u1", "k", 1), 1)  # we voted for n1's u1
    out = c.on_message(Inbound("n3", 3), other, 0)
    assert out[-1].msg.status == 409 and "u1" not in c.d.applied
    assert c.refusals.snapshot().get("commit-other-initiator") == 1
    ok = codec.Commit("n1", 8, False, Update("u1", "k", 1), 1)
    out = c.on_message(Inbound("n3", 4), ok, 0)  # relayed by n3: still our vote's commit
    assert out[-1].msg.status == 200 and c.d.kv["k"].value == 1
    again = c.on_message(Inbound("n1", 5), codec.Voting("n1", 9, False, Update("u1", "k", 2)), 0)
    assert again[-1].msg.status == 409  # a re-vote of an applied update
    assert c.refusals.snapshot().get("revote-applied") == 1


def test_a_commit_arriving_after_our_lock_expired_still_applies() -> None:
    c = _active("n2", ["n1"])
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)
    out = c.on_timer(("lock", "k", "u1"), 10)
    # the TTL does not release the key: the initiator is asked what it decided
    assert c.d.locks == {"k": ("u1", "n1")}
    assert [e.msg for e in out if isinstance(e, Send)] == [codec.OutcomeQuery("n2", "u1", "n1", 6)]
    out = c.on_message(Inbound("n1", 2), codec.Commit("n1", 7, False, Update("u1", "k", 1), 1), 11)
    assert out[-1].msg.status == 200 and c.d.kv["k"].value == 1 and not c.d.locks


def test_the_initiators_lock_expires_like_a_voters_and_its_client_is_answered() -> None:
    """Issue 26 "locks and waiters always end": a round whose vote timer is lost still ends."""
    c = _active("n1", ["n2"])
    out = c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    assert any(getattr(e, "name", None) == ("lock", "k", "u1") for e in out)
    assert c.d.locks["k"][0] == "u1"
    out = c.on_timer(("lock", "k", "u1"), c.cfg.lock_ttl_s)  # the vote timer never fired
    assert not c.d.locks and "u1" not in c.tallies
    (reply,) = [e for e in out if getattr(e, "token", None) == "tok"]
    assert reply.value.status == 409 and "timeout" in reply.value.body["error"]


def test_the_outbox_sends_up_to_its_window_and_retries_only_what_failed() -> None:
    """Several commits to one peer travel at once (one at a time capped each link at one
    round trip per commit); a delivered one frees its place, a failed one waits for the
    retry timer and is the only one sent again."""
    from nodes.drip.core import Outcome
    from nodes.drip.records import Queued

    c = DripCore("n1", ["n2"], cfg=CoreConfig(outbox_window=2))
    c.start(0)
    c.state, c.peer_up["n2"] = "active", True
    commits = [codec.Commit("n1", i, False, Update(f"u{i}", f"k{i}", i), 1) for i in (1, 2, 3)]
    c.d.outbox["n2"] = {i: Queued(i, "n2", m) for i, m in enumerate(commits, 1)}
    sent = [e.msg for e in c._pump("n2") if isinstance(e, Send)]
    assert sent == commits[:2]  # the window, not one
    assert c._pump("n2") == []  # both on their way: nothing more
    out = c.on_message("n2", Outcome(commits[1], 200, {"ok": True}), 1.0)
    assert [e.msg for e in out if isinstance(e, Send)] == [commits[2]]  # u2 done: u3 goes
    assert any(isinstance(e, Persist) for e in out) and 2 not in c.d.outbox["n2"]
    out = c.on_message("n2", Outcome(commits[0], 0, "timeout"), 1.5)
    assert not [e for e in out if isinstance(e, Send)]  # waits for the retry timer
    again = [e.msg for e in c.on_timer(("outbox", "n2"), 2.0) if isinstance(e, Send)]
    assert again == [commits[0]]  # u3 is still on its way: only u1 again


def test_a_commit_the_entitlement_policy_refuses_is_refused_409_and_counted() -> None:
    """Issue 26: the policy is checked on commit too. A yes given while syncing checked no
    policy, and a commit may name another key than the update voted on; either way a commit
    of a key its initiator is not entitled to applies nothing."""
    d = Durable(kv={"+1555": Item("+1555", "route-a", 1, "u0", "carrierA")}, fresh=False)
    c = DripCore("n2", ["n1"], d, CoreConfig(), policy=key_ownership)
    c.start(0)
    assert c.state == "sync"  # votes yes to everything (spec 4.6)
    c.on_message(Inbound("n1", 1), codec.Voting(
        "n1", 1, False, Update("u1", "+1555", "route-b", "carrierB")), 0)
    c.state = "active"
    out = c.on_message(Inbound("n1", 2), codec.Commit(
        "n1", 2, False, Update("u1", "+1555", "route-b", "carrierB"), 2), 0)
    assert out[-1].msg.status == 409 and "owned by 'carrierA'" in out[-1].msg.body["error"]
    assert c.d.kv["+1555"].value == "route-a" and "u1" not in c.d.applied
    c.on_message(Inbound("n1", 3), codec.Voting(  # a yes for a free key ...
        "n1", 3, False, Update("u2", "free", "x", "carrierB")), 0)
    out = c.on_message(Inbound("n1", 4), codec.Commit(  # ... then a commit of an owned one
        "n1", 4, False, Update("u2", "+1555", "route-c", "carrierB"), 2), 0)
    assert out[-1].msg.status == 409 and c.d.kv["+1555"].value == "route-a"
    assert c.refusals.snapshot().get("commit-not-entitled") == 2
    ok = codec.Commit("n1", 5, False, Update("u2", "free", "x", "carrierB"), 1)
    assert c.on_message(Inbound("n1", 5), ok, 0)[-1].msg.status == 200


def test_a_heartbeat_timeout_with_nothing_missed_owes_no_sync() -> None:
    """Issue 26: a link that drops heartbeats for a while made both ends owe each other a
    full sync though nothing was missed; now only a commit for the peer that could not be
    queued or delivered owes it one."""
    sim = DripSim(RING4)
    settle(sim, 1)
    sim.cut("n1", "n2")
    settle(sim, 4)  # several failed heartbeat rounds: each marks the other down
    assert not sim.core("n1").peer_up["n2"] and not sim.core("n2").peer_up["n1"]
    assert "n2" not in sim.core("n1").d.owed and "n1" not in sim.core("n2").d.owed
    sim.update("n1", "k", 1, "u1")  # votes go round by n4 and n3; n2 is down for n1
    until_decided(sim, "u1")
    assert "n2" in sim.core("n1").d.owed  # this commit was addressed to it and dropped
    sim.heal()
    settle(sim, 4)
    assert all(sim.value(n, "k") == 1 for n in sim.ids)


def test_an_initiator_gone_inactive_aborts_its_open_vote_and_never_applies_it() -> None:
    """Spec 4.7: an inactive node does not update key-value data. Before the fix, n1 went
    inactive with u1's vote open and committed and applied it when n2's late yes came (the
    sim search found it: tests/unit/sim/test_drip_search.py). Now going inactive aborts the
    vote it initiated: its client gets a definite 409, its lock is released."""
    c = _active("n1", ["n2"])
    c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    counter = c.tallies["u1"].counter
    c.on_timer(HEARTBEAT, 0.5)
    out = c.on_timer(("round", c.rounds), 5)  # n2 never answered the heartbeat
    assert c.state == "inactive"
    (reply,) = [e for e in out if getattr(e, "token", None) == "tok"]
    assert reply.value.status == 409 and "inactive" in reply.value.body["error"]
    assert not c.d.locks and "u1" not in c.tallies
    yes = codec.VoteResponse("n2", True, "n1", counter, "u1", voters=("n2",))
    c.on_message(Inbound("n2", 1), yes, 6)  # the late yes changes nothing
    c.on_timer(("vote", "u1"), 7)
    assert "u1" not in c.d.applied and "k" not in c.d.kv


def test_a_queued_flooded_message_is_not_sent_back_to_the_peer_that_sent_it_to_us() -> None:
    """`DripNode._spare`: a /voting or /commit that n3 sent us while ours to it waited is
    dropped from n3's queue and its known answer goes to the core (``duplicate`` for a
    /voting, 200 for a commit); other messages, and the same ones for other peers, stay."""
    from types import SimpleNamespace

    from nodes.drip.server import DripNode, _flood_key

    up = Update("u1", "k", 1)
    vote, commit = codec.Voting("n1", 10, False, up), codec.Commit("n1", 11, False, up, 1)
    other = codec.Voting("n1", 12, False, Update("u2", "k2", 1))
    node = SimpleNamespace(_peer_has={"n3": {_flood_key(vote): None, _flood_key(commit): None}},
                           batch_stats={"spared": 0}, queued=[])
    node._queue = node.queued.append
    q = [(vote, "tok"), (other, "tok"), (commit, None)]
    DripNode._spare(node, "n3", q)
    assert q == [(other, "tok")]
    assert [(o.request, o.status, o.body) for _, _, o in node.queued] == [
        (vote, 200, {"ok": True, "duplicate": True}), (commit, 200, {"ok": True})]
    assert node.batch_stats["spared"] == 2
    q4 = [(vote, "tok")]
    DripNode._spare(node, "n4", q4)  # n4 never sent it: it goes
    assert q4 == [(vote, "tok")]
