"""Single-server membership changes on the simulator: Ongaro's rule (raft-dev, 2015) that a
leader commits an entry of its own term before it starts a configuration change, and the
JRaft-exact edges of AddServer/RemoveServer."""

from harness.sim.garlicfarm import GfSim
from nodes.garlicfarm.codec import (
    ClusterServer,
    LogEntry,
    MsgType,
    Request,
    Response,
    ValueType,
    encode_cluster_server,
)


def _server_req(t: MsgType, sid: int, endpoint: str | None = None) -> Request:
    ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(sid, endpoint)))
    return Request(t, sid, 0, 0, entries=(ent,))


def committed_by_index(sim: GfSim) -> dict[int, set[str]]:
    """index -> the digests any server journaled as committed there."""
    out: dict[int, set[str]] = {}
    for e in sim.of("commit"):
        out.setdefault(e.fields["index"], set()).add(e.fields["digest"])
    return out


def _step_until_leader(sim: GfSim, among: set[int], limit: float = 5.0) -> int:
    """Run in steps shorter than one network delay, so the caller acts before the new
    leader's first AppendEntries lands."""
    end = sim.now + limit
    while sim.now < end:
        sim.run_for(0.0002)
        ls = [i for i in sim.leaders() if i in among]
        if ls:
            return ls[0]
    raise AssertionError(f"no leader among {sorted(among)}")


def replay_add_then_remove(bugs: tuple[str, ...] = ()) -> tuple[GfSim, Response]:
    """Ongaro's scenario. C0 = {s1..s4}, s1 leads term 1. AddServer(s5): the configuration
    C1 = C0 + s5 reaches s1 and s5 only; both crash. s2 wins term 2 under C0 (votes of s3,
    s4; s4 crashes before s2's no-op reaches it), then RemoveServer(s4): C2 = {s1, s2, s3}
    needs only s2 and s3. s1, s4, s5 come back cut off from s2, s3: C1 needs s1, s4, s5,
    whose logs hold nothing of term 2. Without the rule, both sides commit an index."""
    sim = GfSim([1, 2, 3, 4], seed=7, bugs=bugs)
    s1 = sim.wait_leader()
    s2, s3, s4 = [i for i in (1, 2, 3, 4) if i != s1]
    for k in range(3):
        sim.client_request(s1, Request(MsgType.CLIENT_REQUEST, 0, 0, 0,
                                       entries=(LogEntry(0, ValueType.APPLICATION, b'%d' % k),)))
    sim.run_for(0.5)
    sim.add(5, {})
    sim.partition({s1, 5}, {s2, s3, s4})
    add = sim.client_request(s1, _server_req(MsgType.ADD_SERVER_REQUEST, 5, "tcp://127.0.0.1:9005"))
    sim.run_for(0.05)
    assert sim.replies[add].accepted
    assert sorted(sim.raft(s1).servers) == [1, 2, 3, 4, 5] == sorted(sim.raft(5).servers)
    sim.crash(s1)
    sim.crash(5)
    sim.heal()
    new = _step_until_leader(sim, {s2, s3, s4})
    s2, s3, s4 = new, *[i for i in (s2, s3, s4) if i != new]
    sim.crash(s4)  # voted for s2, never sees its term
    rm = sim.client_request(s2, _server_req(MsgType.REMOVE_SERVER_REQUEST, s4))
    sim.run_for(0.5)
    sim.partition({s1, s4, 5}, {s2, s3})
    for i in (s1, s4, 5):
        sim.restart(i)
    sim.run_for(5)
    return sim, sim.replies[rm]


def test_config_change_waits_for_a_commit_of_the_leaders_term():
    sim, rm = replay_add_then_remove()
    split = {i: d for i, d in committed_by_index(sim).items() if len(d) > 1}
    assert split == {}, f"indexes committed with two entries: {split}"
    assert not rm.accepted  # s2 had not committed an entry of term 2


def test_unsafe_config_change_bug_commits_one_index_twice():
    sim, rm = replay_add_then_remove(("unsafe-config-change",))
    assert rm.accepted
    split = {i: d for i, d in committed_by_index(sim).items() if len(d) > 1}
    assert split, "the bug mode should replay the split"


def test_change_accepted_once_the_leaders_noop_commits():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    r = sim.raft(lead)
    sim.run_for(0.2)
    assert r.term_at(r.commit) == r.term
    sim.add(4, {})
    add = sim.client_request(lead, _server_req(MsgType.ADD_SERVER_REQUEST, 4, "tcp://127.0.0.1:9004"))
    sim.run_for(1)
    assert sim.replies[add].accepted and sorted(r.servers) == [1, 2, 3, 4]


def _settled_three() -> tuple[GfSim, int, int]:
    """Three servers, a leader and 0.2 s for its no-op to commit: (sim, leader, a follower)."""
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    sim.run_for(0.2)
    return sim, lead, next(i for i in (1, 2, 3) if i != lead)


def test_add_server_for_a_member_is_refused_as_jraft_does():
    sim, lead, other = _settled_three()
    before = sim.raft(lead).last_index
    add = sim.client_request(lead, _server_req(MsgType.ADD_SERVER_REQUEST, other, "tcp://127.0.0.1:9009"))
    sim.run_for(0.2)
    assert not sim.replies[add].accepted
    assert sim.raft(lead).last_index == before and not sim.of("join-start")


def test_remove_server_sends_leave_cluster_before_the_configuration():
    sim, lead, victim = _settled_three()
    before = sim.raft(lead).config_index
    rm = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, victim))
    assert sim.replies[rm].accepted and sim.raft(lead).config_index == before
    busy = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, 6 - lead - victim))
    assert not sim.replies[busy].accepted  # one change at a time
    sim.run_for(1)
    assert sim.raft(victim).removed and victim not in sim.raft(lead).servers
    done = [e for e in sim.of("leave-complete") if e.node == lead]
    assert done and done[-1].fields["answered"] is True
    left = min(e.t for e in sim.of("left-cluster") if e.node == victim)
    cfg = min(e.t for e in sim.of("config") if e.node == lead and victim not in e.fields["servers"])
    assert left < cfg


def test_unreachable_server_is_removed_after_leave_timeout():
    sim = GfSim([1, 2, 3, 4, 5])
    lead = sim.wait_leader()
    sim.run_for(0.2)
    victim = next(i for i in sim.ids if i != lead)
    sim.crash(victim)
    rm = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, victim))
    sim.run_for(sim.raft(lead).opt.leave_timeout + 1)
    assert sim.replies[rm].accepted and victim not in sim.raft(lead).servers
    assert [e.fields["answered"] for e in sim.of("leave-complete")] == [False]


def test_removed_flag_survives_a_restart():
    """A removed server restarted from its durable state does not campaign."""
    sim, lead, victim = _settled_three()
    rm = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, victim))
    sim.run_for(1)
    assert sim.replies[rm].accepted and sim.raft(victim).removed
    assert sim.stored(victim).removed
    sim.partition({victim}, {i for i in sim.ids if i != victim})
    sim.restart(victim)
    sim.run_for(0.001)
    term = sim.raft(victim).term
    sim.run_for(5)
    assert sim.raft(victim).removed and sim.raft(victim).term == term
    assert not [e for e in sim.of("vote") if e.node == victim and e.fields["candidate"] == victim
                and e.fields["term"] > term]


def test_a_server_invited_back_does_not_campaign_until_a_committed_configuration_names_it():
    """A removed server never receives the configuration without it, so its own log still
    names it. Invited back (JoinCluster clears ``removed``) and then cut off before the join
    completes, it must not campaign on that stale configuration (JRaft's ``catchingUp``):
    its ever higher terms would depose every leader (found by the sim search, seed 11, see
    tests/unit/sim/data/gf_rejoiner_campaigns.json). Once a join completes it campaigns again."""
    sim = GfSim([1, 2, 3, 4, 5])
    lead = sim.wait_leader()
    sim.run_for(0.2)
    victim = next(i for i in sim.ids if i != lead)
    rm = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, victim))
    sim.run_for(1)
    assert sim.replies[rm].accepted and sim.raft(victim).removed
    assert victim in sim.raft(victim).servers  # the stale configuration
    sim.client_request(lead, _server_req(MsgType.ADD_SERVER_REQUEST, victim,
                                         f"tcp://127.0.0.1:{9000 + victim}"))
    sim.run_for(0.0015)  # the invitation lands, nothing after it
    assert [e for e in sim.of("join-invited") if e.node == victim]
    # ``removed`` stays, durably, until a committed configuration names it (seed 21: a
    # rejoiner that crashed lost the in-memory flag and campaigned after its restart)
    assert sim.raft(victim).removed and sim.raft(victim).catching_up
    sim.partition({victim}, {i for i in sim.ids if i != victim})
    term = sim.raft(victim).term
    sim.run_for(sim.raft(lead).opt.join_timeout + 2)  # the leader abandons the join
    assert [e for e in sim.of("join-abandoned") if e.node == lead]
    sim.crash(victim)
    sim.restart(victim)
    sim.heal()
    sim.run_for(3)
    assert sim.raft(victim).term == term
    assert not [e for e in sim.of("vote") if e.node == victim and e.fields["candidate"] == victim]
    assert len({sim.raft(i).term for i in sim.ids if i != victim}) == 1  # no leader deposed
    again = sim.client_request(sim.leaders()[0], _server_req(
        MsgType.ADD_SERVER_REQUEST, victim, f"tcp://127.0.0.1:{9000 + victim}"))
    sim.run_for(2)
    assert sim.replies[again].accepted and not sim.raft(victim).catching_up
    assert sim.raft(victim).can_elect() and not sim.stored(victim).removed
