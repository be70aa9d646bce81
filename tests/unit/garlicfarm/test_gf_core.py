"""Raft and the node around it, on the simulator (harness.sim.garlicfarm)."""

import json
import random

from harness.sim.garlicfarm import GfSim, app_entry
from nodes.common.effects import Persist
from nodes.garlicfarm import raft as R
from nodes.garlicfarm.codec import (
    ClusterServer,
    LogEntry,
    MsgType,
    Request,
    Response,
    ValueType,
    encode_cluster_server,
)
from nodes.garlicfarm.core import GarlicFarmCore, Kv, Leave, NodeOptions


def client_req(*values):
    return Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=tuple(app_entry(v) for v in values))


def values(sim, i):
    return [d for _, d in sim.applied(i)]


def test_election_single_leader_and_votes_persisted():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    t = sim.raft(lead).term
    assert sim.stored(lead).voted_for == lead and sim.stored(lead).term == t
    for i in sim.ids:
        votes = sim.of("vote", granted=True, term=t)
        assert len([v for v in votes if v.node == i]) <= 1, (i, votes)
    sim.run_for(2)
    assert sim.leaders() == [lead]


def test_replication_commit_and_reply_after_commit():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    tok = sim.client_request(lead, client_req({"x": 1}, {"x": 2}))
    assert tok not in sim.replies  # not yet committed: no majority heard
    sim.run_for(0.5)
    r = sim.replies[tok]
    assert r.accepted and r.type == MsgType.APPEND_ENTRIES_RESPONSE and r.destination == lead
    idx = r.next_index - 1
    assert json.loads(sim.raft(lead).entry(idx).value) == {"x": 2}
    for i in sim.ids:
        assert values(sim, i) == [{"x": 1}, {"x": 2}]
        assert sim.stored(i).entries[idx - 1].value == app_entry({"x": 2}).value


def test_follower_redirects_raw_wire_client():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    sim.run_for(0.3)
    f = next(i for i in sim.ids if i != lead)
    r = sim.replies[sim.client_request(f, client_req({"y": 1}))]
    assert not r.accepted and r.destination == lead and r.next_index == 0
    assert sim.replies[sim.client_request(lead, client_req())].accepted


def test_kv_ops_on_any_server_forwarded_and_answered_after_apply():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    sim.run_for(0.3)
    f = next(i for i in sim.ids if i != lead)
    w = sim.command(f, Kv("write", "k", "r1", value=7))
    sim.run_for(0.5)
    assert sim.replies[w]["type"] == "ok" and sim.raft(f).applied >= sim.replies[w]["index"]
    r = sim.command(lead, Kv("read", "k", "r2"))
    c = sim.command(f, Kv("cas", "k", "r3", old=1, new=2))
    sim.run_for(0.5)
    assert sim.replies[r]["value"] == 7 and sim.replies[r]["type"] == "ok"
    assert sim.replies[c] == {"type": "fail", "error": "cas-mismatch", "value": 7,
                              "index": sim.replies[c]["index"]}
    assert sim.replies[c]["index"] > sim.replies[r]["index"] > sim.replies[w]["index"]


def test_kv_op_with_no_leader_fails_definitely_and_isolated_forward_is_indeterminate():
    sim = GfSim([1, 2, 3], opts=NodeOptions(request_timeout=1.0, meta_interval=0))
    lead = sim.wait_leader()
    sim.run_for(0.3)
    f = next(i for i in sim.ids if i != lead)
    sim.partition({f}, set(sim.ids) - {f})
    t = sim.command(f, Kv("write", "k", "lost", value=1))  # forwarded into the cut
    sim.run_for(1.5)
    assert sim.replies[t]["type"] == "info" and sim.replies[t]["error"] == "indeterminate"
    sim.run_for(3)  # f's leader contact times out; it campaigns alone and knows no leader
    assert sim.raft(f).leader in (None, f) and f not in sim.leaders()
    t2 = sim.command(f, Kv("write", "k", "never", value=2))
    sim.run_for(1.5)
    assert sim.replies[t2]["type"] == "fail" and sim.replies[t2]["error"] == "no-leader"


def test_local_reads_bug_answers_from_the_local_state():
    sim = GfSim([1, 2, 3], bugs={"local-reads"})
    lead = sim.wait_leader()
    f = next(i for i in sim.ids if i != lead)
    sim.partition({f}, set(sim.ids) - {f})
    w = sim.command(lead, Kv("write", "k", "w", value=1))
    sim.run_for(0.5)
    assert sim.replies[w]["type"] == "ok"
    r = sim.command(f, Kv("read", "k", "r"))
    assert sim.replies[r] == {"type": "ok", "value": None}  # at once, stale, no index


def test_minority_leader_cannot_commit_and_answers_unknown():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    others = [i for i in sim.ids if i != lead]
    sim.partition({lead}, set(others))
    t = sim.client_request(lead, client_req("lost"))
    sim.run_for(3)
    assert t not in sim.replies
    assert [i for i in sim.leaders() if i != lead]
    sim.heal()
    sim.run_for(2)
    assert sim.replies[t] is None  # deposed leader: outcome unknown, connection closed
    for i in sim.ids:
        assert "lost" not in values(sim, i)


def test_commit_without_majority_bug_commits_alone():
    sim = GfSim([1, 2, 3], bugs={"commit-without-majority"})
    lead = sim.wait_leader()
    sim.partition({lead}, {i for i in sim.ids if i != lead})
    assert sim.replies[sim.client_request(lead, client_req("bad"))].accepted


def test_figure8_old_term_entry_not_committed_by_counting():
    """A leader must not commit an older-term entry just because a majority stores it."""
    sim = GfSim([1, 2, 3, 4, 5])
    lead = sim.wait_leader()
    sim.run_for(0.3)
    c = sim.raft(lead)
    f1 = next(i for i in sim.ids if i != lead)
    sim.partition({lead, f1}, {i for i in sim.ids if i not in (lead, f1)})
    sim.client_request(lead, client_req("old"))  # reaches only one follower
    sim.run_for(0.2)
    old_idx, old_term = c.last_index, c.term
    # the leader loses leadership and comes back in a later term with the old entry on a
    # majority but no current-term entry yet
    sim.crash(lead)
    c.match_index = {p: old_idx for p in c.voters}
    c.term = old_term + 2
    c.role = R.Role.LEADER
    effects = c._advance_commit()
    assert c.commit < old_idx and not any(isinstance(e, R.Apply) for e in effects)
    # once a current-term entry is replicated, both commit together
    c.log.append(LogEntry(c.term, ValueType.APPLICATION, b'"new"'))
    c.match_index = {p: c.last_index for p in c.voters}
    c._advance_commit()
    assert c.commit == c.last_index > old_idx


def test_next_index_repair_after_divergence():
    sim = GfSim([1, 2, 3])
    old = sim.wait_leader()
    sim.run_for(0.3)
    sim.partition({old}, {i for i in sim.ids if i != old})
    junk = [sim.client_request(old, client_req(f"junk{k}")) for k in range(5)]
    sim.run_for(2)
    new = next(i for i in sim.leaders() if i != old)
    writes = [sim.client_request(new, client_req(k)) for k in range(20)]
    sim.run_for(0.5)
    assert all(sim.replies[w].accepted for w in writes)
    sim.heal()
    sim.run_for(3)
    lead = sim.wait_leader()
    lc, fc = sim.raft(lead), sim.raft(old)
    assert fc.last_index == lc.last_index and [e.term for e in fc.log] == [e.term for e in lc.log]
    vals = values(sim, old)
    assert list(range(20)) == [v for v in vals if isinstance(v, int)]
    assert not any(isinstance(v, str) and v.startswith("junk") for v in vals)
    assert all(sim.replies[j] is None for j in junk)


def _server_req(t, sid, endpoint=None):
    ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(sid, endpoint)))
    return Request(t, sid, 0, 0, entries=(ent,))


def test_membership_add_then_remove():
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    for k in range(10):
        sim.client_request(lead, client_req(k))
    sim.run_for(0.5)
    sim.add(4, {})  # a joiner with an empty configuration
    assert not sim.raft(4).can_elect()
    add = sim.client_request(lead, _server_req(MsgType.ADD_SERVER_REQUEST, 4, "tcp://127.0.0.1:9004"))
    assert sim.replies[add].accepted and sim.replies[add].type == MsgType.ADD_SERVER_RESPONSE
    sim.run_for(2)
    for i in sim.ids:
        assert sorted(sim.raft(i).servers) == [1, 2, 3, 4]
    assert list(range(10)) == [v for v in values(sim, 4) if isinstance(v, int)]
    victim = next(i for i in (1, 2, 3) if i != lead)
    rm = sim.client_request(lead, _server_req(MsgType.REMOVE_SERVER_REQUEST, victim))
    assert sim.replies[rm].accepted
    sim.run_for(2)
    assert sim.raft(victim).removed
    assert sorted(sim.raft(lead).servers) == sorted({1, 2, 3, 4} - {victim})
    sim.run_for(3)
    assert sim.leaders() == [lead]  # the removed server does not disrupt
    cfgs = [e.fields["servers"] for e in sim.of("config") if e.node == lead]
    assert cfgs[-1] == sorted({1, 2, 3, 4} - {victim})


def test_join_sequence_and_leave_run_in_the_core():
    """A node started with ``join`` asks the seeds, is added by the leader and catches up;
    a follower's Leave command removes it."""
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    w = sim.command(lead, Kv("write", "k", "before", value=1))
    sim.run_for(0.5)
    assert sim.replies[w]["type"] == "ok"
    sim.opts = NodeOptions(meta_interval=0, join=True, advertise="tcp://127.0.0.1:9004")
    sim.add(4, {})
    sim.run_for(3)
    assert sorted(sim.raft(lead).servers) == [1, 2, 3, 4] and sim.core(4).member
    assert [e.fields["accepted"] for e in sim.of("join-request") if e.node == 4][-1] is True
    assert sim.core(4).apps.kv.data == {"k": 1}
    victim = next(i for i in (1, 2, 3) if i != lead)
    t = sim.command(victim, Leave())
    sim.run_for(2)
    assert sim.replies[t] == (200, {"ok": True, "leader": lead})
    assert victim not in sim.raft(lead).servers and sim.raft(victim).removed
    assert sim.replies[sim.command(lead, Leave())][0] == 409  # the leader cannot leave


def test_meta_ls_publisher_runs_in_the_core_on_the_node_clock():
    sim = GfSim([1, 2, 3], opts=NodeOptions(meta_interval=0.5))
    sim.wait_leader()
    sim.run_for(4)
    statuses = [e for e in sim.of("apply") if isinstance(e.fields["data"], dict)
                and "cluster" in e.fields["data"]]
    senders = {e.fields["data"]["id"] for e in statuses}
    assert senders == {1, 2, 3}
    assert all(e.fields["data"]["date"] >= 1.8e12 for e in statuses)  # wall(now), in ms
    pubs = {i: sim.core(i).apps.metals.publisher for i in sim.ids}
    assert len(set(pubs.values())) == 1 and None not in pubs.values()


def test_snapshot_compaction_and_chunked_install():
    opts = NodeOptions(raft=R.Options(snapshot_chunk=7), snapshot_threshold=20, meta_interval=0)
    sim = GfSim([1, 2, 3], opts=opts)
    lead = sim.wait_leader()
    lagger = next(i for i in sim.ids if i != lead)
    sim.pause(lagger)
    for k in range(30):
        sim.command(lead, Kv("write", f"k{k % 5}", f"w{k}", value=k))
    sim.run_for(0.5)
    c = sim.raft(lead)
    assert c.snap.last_index >= 20 and [e for e in sim.of("snapshot") if e.node == lead]
    after = sim.command(lead, Kv("write", "after", "a", value=1))
    sim.crash(lagger)  # comes back empty-handed in memory, behind the snapshot on disk
    sim.restart(lagger)
    sim.run_for(3)
    assert sim.replies[after]["type"] == "ok"
    assert sim.leaders() == [lead]
    installed = [e for e in sim.of("snapshot") if e.node == lagger and "installed_from" in e.fields]
    assert installed and installed[-1].fields["installed_from"] == lead
    lc = sim.raft(lagger)
    assert lc.last_index == c.last_index and lc.snap.last_index > 0
    assert sim.core(lagger).apps.kv.data == sim.core(lead).apps.kv.data
    assert sim.core(lagger).apps.kv.data["after"] == 1


def test_forget_vote_bug_allows_two_votes_in_one_term():
    def vote_req(cand, term):
        return Request(MsgType.REQUEST_VOTE_REQUEST, cand, 3, term, 0, 0, 0)

    for bugs, expect_second in (({"forget-vote"}, True), (set(), False)):
        sim = GfSim([1, 2, 3], bugs=bugs)
        sim.raft(3).election_at = 1e9
        assert sim.replies[sim.client_request(3, vote_req(1, 5))].accepted
        sim.restart_with(3, bugs)
        sim.raft(3).election_at = 1e9
        second = sim.replies[sim.client_request(3, vote_req(2, 5))]
        assert second.accepted is expect_second
        granted = [e for e in sim.of("vote", term=5, granted=True) if e.node == 3]
        assert len(granted) == (2 if expect_second else 1)


def test_candidate_retries_request_vote():
    sim = GfSim([1, 2, 3])
    sim.partition({1}, {2, 3})
    c = sim.raft(1)
    for i in (2, 3):
        sim.raft(i).election_at = 1e9
    sim.run_until(c.election_at)
    assert c.role == R.Role.CANDIDATE
    sim.run_for(0.05)
    sim.heal()
    sim.run_for(0.3)  # a retry reaches them within the same term
    assert c.role == R.Role.LEADER and c.term == 1


def _vote_requests(effects) -> list[int]:
    return [e.to for e in effects if getattr(e, "msg", None) is not None
            and e.msg.type == MsgType.REQUEST_VOTE_REQUEST]


def test_a_candidate_asks_a_peer_that_said_no_in_its_term_no_more():
    """A no given in the candidate's own term is final for it, so the heartbeat retries go
    only to the peer that has not answered. The link to a peer carries one request at a time:
    a pointless retry in flight when the next term starts held that term's RequestVote back a
    round trip, and with 500 ms of latency each way the vote split term after term
    (test_elections_under_high_latency, nightly). A no from an older term (the peer still
    hears a leader) is not an answer to this term; the next term asks everyone again."""
    core = GarlicFarmCore(1, {1: "", 2: "", 3: ""}, R.StoredState(), random.Random(1))
    core.start(0.0)
    r = core.raft
    t0 = r.election_at
    assert sorted(_vote_requests(r.on_timer("election", t0))) == [2, 3]
    term = r.term
    no = MsgType.REQUEST_VOTE_RESPONSE
    assert r.on_response(Response(no, 2, 1, term, 0, False), t0 + 0.5) == []
    assert r.on_response(Response(no, 3, 1, term - 1, 0, False), t0 + 0.5) == []
    assert r.role == R.Role.CANDIDATE
    hb = r.opt.heartbeat
    assert t0 + 2.5 * hb < r.election_at  # the retries below are within the term
    assert _vote_requests(r.on_timer("heartbeat", t0 + 1.1 * hb)) == [3]
    assert _vote_requests(r.on_timer("heartbeat", t0 + 2.2 * hb)) == [3]
    assert sorted(_vote_requests(r.on_timer("election", r.election_at))) == [2, 3]
    assert r.term == term + 1


def test_an_undecodable_configuration_entry_is_reported_once_not_skipped_silently():
    stored = R.StoredState(entries=[LogEntry(1, ValueType.CONFIGURATION, b"\x01\x02")])
    core = GarlicFarmCore(1, {1: "", 2: "", 3: ""}, stored, random.Random(1))
    errors = [e for e in core.start(0.0) if getattr(e, "type", None) == "node-error"]
    assert len(errors) == 1 and errors[0].fields["evidence"] is True
    assert errors[0].fields["where"] == "configuration entry undecodable"
    assert errors[0].fields["error"].startswith("index 1: ")
    core.raft._recompute_config()
    assert core.raft.take_errors() == []  # once per entry, however often it is recomputed


def test_unexpected_peer_input_is_refused_not_fatal():
    core = GarlicFarmCore(1, {1: ""}, R.StoredState(), random.Random(1))
    core.start(0.0)
    out = core.on_message(7, Request(MsgType.CLIENT_REQUEST, 7, 1, 0), 0.1)
    assert [e.type for e in out] == ["node-error"] and out[0].fields["evidence"] is False
    assert not any(isinstance(e, Persist) for e in out)


def test_same_seed_same_trace_bytes():
    def run(seed):
        sim = GfSim([1, 2, 3], seed=seed, opts=NodeOptions(meta_interval=0.5))
        lead = sim.wait_leader()
        for k in range(5):
            sim.command(lead, Kv("write", "k", f"w{k}", value=k))
        sim.partition({lead}, set(sim.ids) - {lead})
        sim.run_for(2)
        sim.heal()
        sim.restart(lead)
        sim.run_for(2)
        return sim.trace_bytes()

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_a_leader_deposed_by_a_vote_it_refuses_campaigns_again():
    """A leader's election timer lapses unarmed while it leads. Deposed by a RequestVote of a
    higher term that it refuses (the candidate's log is shorter), it must arm it again: when
    it alone holds the longest log nobody else can win, and the cluster had no leader for
    good (found by the sim search, seed 12; tests/unit/sim/data/gf_deposed_leader_idle.json)."""
    sim = GfSim([1, 2, 3])
    lead = sim.wait_leader()
    sim.run_for(0.5)
    f = next(i for i in sim.ids if i != lead)
    sim.partition({f}, {i for i in sim.ids if i != f})
    sim.client_request(lead, client_req("a", "b"))
    sim.run_for(2)  # f campaigns alone: its term passes the leader's, its log stays short
    assert sim.raft(f).term > sim.raft(lead).term
    assert sim.raft(lead).election_at < sim.now  # lapsed while it led
    sim.heal()
    sim.net.cut_one_way(lead, f)  # so the leader learns f's term from its RequestVote only
    end = sim.now + 1
    while sim.raft(lead).role == R.Role.LEADER and sim.now < end:
        sim.run_for(0.001)
    down = [e for e in sim.of("vote", candidate=f) if e.node == lead]
    assert down and not any(e.fields["granted"] for e in down)  # deposed, f's log is short
    assert sim.raft(lead).role == R.Role.FOLLOWER
    assert sim.raft(lead).election_at > sim.now  # armed again
    sim.run_for(3)
    assert sim.leaders()
