"""The sans-IO SWIM core driven with simulated time (harness.sim.swim)."""

from __future__ import annotations

import dataclasses
import random
import statistics

import pytest

from harness.sim.swim import SwimSim as Sim
from nodes.swim import codec as c
from nodes.swim import join_token
from nodes.swim.core import (
    NAK_TOKEN_EXPECTED,
    REDIRECT_AT_CAPACITY,
    TICK,
    Emit,
    Options,
    Send,
    SwimCore,
    default_seeds,
)

FAST = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)


def test_group_forms_through_one_seed() -> None:
    s = Sim(5, FAST, seed=1)
    s.run_for(8)
    assert s.converged()
    assert len(s.of("join-ok")) == 5


def test_killed_member_is_detected_and_declared_dead_everywhere() -> None:
    firsts, alls = [], []
    for seed in range(12):
        s = Sim(5, FAST, seed=seed)
        s.run_for(8)
        victim = 2 + seed % 4
        s.crash(victim)
        t0 = s.now + random.Random(seed).uniform(0, 1)
        s.run_until(t0)
        s.run_for(12)
        sus = [e.t for e in s.of("suspect", member=victim)]
        dead_by = {e.node: e.t for e in reversed(s.of("dead", member=victim))}
        assert set(dead_by) == set(s.ids) - {victim}
        firsts.append(min(sus) - t0)
        alls.append(max(dead_by.values()) - t0)
    assert statistics.mean(firsts) < 2.0  # periods (1 s)
    assert max(alls) < 7.1  # memberlist's figure for 5 members with the same settings


def test_refutation_saves_a_briefly_paused_member() -> None:
    s = Sim(5, FAST, seed=3)
    s.run_for(8)
    s.pause(4)
    s.run_for(2.5)  # long enough to be suspected, shorter than the suspicion timeout
    assert s.of("suspect", member=4)
    s.resume(4)
    s.run_for(10)
    assert s.converged()
    assert s.cores[4].gen >= 1 and s.of("refute")


def test_without_refutation_a_paused_member_stays_dead() -> None:
    s = Sim(5, FAST, seed=3, bugs=("no-refutation",))
    s.run_for(8)
    s.pause(4)
    s.run_for(2.5)
    s.resume(4)
    s.run_for(20)
    assert not s.converged()
    assert any(s.states(i)[4] == "dead" for i in (1, 2, 3, 5))


def test_indirect_probe_bridges_a_one_way_cut() -> None:
    s = Sim(5, FAST, seed=4)
    s.run_for(8)
    s.net.cut |= {(1, 2)}  # 1 cannot reach 2; 2's replies to 1 still pass
    s.run_for(30)
    assert not s.of("suspect", member=2, by=1)
    bug = Sim(5, FAST, seed=4, bugs=("no-indirect-probes",))
    bug.run_for(8)
    bug.net.cut |= {(1, 2)}
    bug.run_for(30)
    assert bug.of("suspect", member=2, by=1)


def test_loss_false_suspicions_with_and_without_indirect_probes() -> None:
    def suspicions(bugs: tuple[str, ...]) -> int:
        s = Sim(5, FAST, seed=5, bugs=bugs)
        s.run_for(8)
        s.net.loss = 0.2
        s.run_for(120)
        return len(s.of("suspect", local=True))

    good, bad = suspicions(()), suspicions(("no-indirect-probes",))
    assert bad > 3 * max(good, 1)


def test_partition_heals_back_to_one_group() -> None:
    s = Sim(6, FAST, seed=6)
    s.run_for(8)
    s.partition([1, 2, 3], [4, 5, 6])
    s.run_for(15)
    assert s.alive_view(1) == {2, 3} and s.alive_view(5) == {4, 6}
    s.heal()
    s.run_for(40)
    assert s.converged()


def test_restart_with_higher_generation_rejoins() -> None:
    s = Sim(5, FAST, seed=7)
    s.run_for(8)
    s.crash(3)
    s.run_for(10)
    s.restart(3)
    s.run_for(10)
    assert s.converged()
    assert all(m["gen"] == 1 for i in (1, 2, 4, 5) for m in s.cores[i].view() if m["id"] == 3)


def test_voluntary_leave() -> None:
    s = Sim(5, FAST, seed=8)
    s.run_for(8)
    first = s.command(5, "leave")
    sent = s.sent
    again = s.command(5, "leave")  # idempotent: a second leave sends nothing
    assert s.sent == sent
    assert s.replies[first] == s.replies[again] == {"ok": True, "gen": 0, "left": True}
    s.run_for(5)
    assert all(s.states(i)[5] == "left" for i in (1, 2, 3, 4))
    assert not s.of("dead", member=5)
    assert s.replies[s.command(5, "rejoin")] == {"ok": True, "gen": 1, "left": False}
    s.run_for(8)
    assert s.converged()
    assert s.nodes[5].durable[-1].record == 1  # the new generation was made durable


def test_capacity_redirects_and_bounds_views() -> None:
    cap = Options(period_s=1.0, probe_timeout_s=0.5, capacity=2)
    s = Sim(6, cap, seed=9)
    s.run_for(20)
    assert all(len(s.alive_view(i)) <= 2 for i in s.ids)
    assert s.of("join-redirect")
    # every member is known by at least one other (the spec's membership rule)
    assert all(any(i in s.alive_view(j) for j in s.ids if j != i) for i in s.ids)
    bug = Sim(6, cap, seed=9, bugs=("ignore-capacity",))
    bug.run_for(20)
    assert any(len(bug.alive_view(i)) > 2 for i in bug.ids)


def test_gossip_without_retransmission_spreads_joins_slowly() -> None:
    # correct: joins reach everyone by gossip in a few periods; with each update sent once,
    # members only learn a joiner when it probes them (the senders' self-samples), ~n periods
    for seed in range(3):
        good = Sim(10, FAST, seed=seed)
        good.run_for(7)
        assert good.converged()
        bad = Sim(10, FAST, seed=seed, bugs=("no-gossip-retransmit",))
        bad.run_for(7)
        assert not bad.converged()


def test_token_join_as_in_the_spec_session() -> None:
    """The spec's session: a JoinReq without credentials gets Nak 7115 with a hint as etag;
    one carrying the hint as token and a proof as auth is admitted. The hint names the
    token and never reveals it (issue 25 item 3: the etag used to hand it to anyone)."""
    secret = "0x1232173fdsaf"
    seed = SwimCore(1, 2, {321: ("10.3.2.1", 1)}, [], Options(join_token=secret),
                    random.Random(0))
    seed.start(0.0)
    stranger = SwimCore(321, 0, {1: ("10.3.2.17", 1)}, [1], Options(), random.Random(1))
    (req,) = [e for e in stranger.start(0.0) if isinstance(e, Send)]
    assert isinstance(req.msg, c.JoinReq) and req.msg.token == req.msg.auth == b""
    (nak,) = [e for e in seed.on_message(321, req.msg, 0.1) if isinstance(e, Send)]
    assert nak.msg == c.JoinNak(c.domain_tag("swim"), NAK_TOKEN_EXPECTED, join_token.hint(secret))
    assert secret not in nak.msg.etag
    assert not [e for e in stranger.on_message(1, nak.msg, 0.2) if isinstance(e, Send)]
    forged = dataclasses.replace(req.msg, token=nak.msg.etag.encode(), auth=b"{some auth}")
    # one Nak per sender per period: the next period answers the forgery
    seed.on_timer(TICK, 1.2)
    (nak2,) = [e for e in seed.on_message(321, forged, 1.25) if isinstance(e, Send)]
    assert isinstance(nak2.msg, c.JoinNak)  # the hint alone is no credential

    new = SwimCore(321, 0, {1: ("10.3.2.17", 1)}, [1], Options(join_token=secret),
                   random.Random(1))
    (req,) = [e for e in new.start(0.0) if isinstance(e, Send)]
    assert req.msg.token == join_token.hint(secret).encode() and len(req.msg.auth) == 32
    (ack,) = [e for e in seed.on_message(321, req.msg, 1.3) if isinstance(e, Send)]
    assert isinstance(ack.msg, c.JoinAck) and ack.msg.desc == c.NodeInfo(1, 2)
    effects = new.on_message(1, ack.msg, 0.4)
    assert new.joined and any(isinstance(e, Emit) and e.type == "join-ok" for e in effects)
    assert {m["id"]: m["state"] for m in seed.view()} == {321: "alive"}
    tampered = dataclasses.replace(req.msg, src=c.NodeInfo(321, 9))  # the proof binds it all
    assert not join_token.verified(secret, tampered)


def test_a_partition_heals_with_a_token_set() -> None:
    """Reconnect and redirect JoinReqs carried no token and were refused for good."""
    opts = dataclasses.replace(FAST, join_token="s3cret")
    s = Sim(6, opts, seed=11)
    s.run_for(8)
    assert s.converged()
    s.partition({1, 2, 3}, {4, 5, 6})
    s.run_for(20)
    assert s.alive_view(1) == {2, 3} and s.alive_view(4) == {5, 6}  # the cut was real
    s.heal()
    s.run_for(30)
    assert s.converged(), {i: s.states(i) for i in s.ids}
    assert not [e for e in s.of("join-refused") if e.t > 8]


def test_ignore_and_refuse_joins() -> None:
    for opts, want in ((Options(accept_joins=False), None), (Options(refuse_joins=True), c.JoinNak)):
        seed = SwimCore(1, 0, {2: ("127.0.0.1", 2)}, [], opts, random.Random(0))
        seed.start(0.0)
        out = [e for e in seed.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 0.1)
               if isinstance(e, Send)]
        assert (type(out[0].msg) if out else None) is want


def test_redirect_names_the_member_to_ask() -> None:
    seed = SwimCore(1, 0, {2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)}, [],
                    Options(capacity=1), random.Random(0))
    seed.start(0.0)
    seed.on_message(2, c.JoinReq(c.NodeInfo(2, 0)), 0.1)
    (red,) = [e for e in seed.on_message(3, c.JoinReq(c.NodeInfo(3, 0)), 0.2)
              if isinstance(e, Send)]
    assert isinstance(red.msg, c.JoinRedirect)
    assert red.msg.code == REDIRECT_AT_CAPACITY and red.msg.etag == "node:2"
    assert red.msg.address.to_tuple() == ("127.0.0.1", 2)


def test_broadcast_discovery() -> None:
    opts = Options(period_s=1.0, probe_timeout_s=0.5)
    s = Sim(3, opts, seed=11, seeds_of=lambda i: [],
            opts_of=lambda i: Options(period_s=1.0, probe_timeout_s=0.5, announce_periods=2)
            if i == 1 else Options(period_s=1.0, probe_timeout_s=0.5, discover=True))
    s.run_for(10)
    assert s.of("seed-discovered") and s.converged()


def test_default_seeds_lowest_founds_and_a_restarted_member_asks_every_peer() -> None:
    assert default_seeds(1, [1, 2, 3], 0) == []
    assert default_seeds(3, [3, 2, 1], 0) == [1]
    assert default_seeds(1, [1, 2, 3], 1) == [2, 3]
    assert default_seeds(1, [1], 4) == []


def test_joiners_that_seed_each_other_elect_one_founder() -> None:
    """Every member has every peer as a seed and nobody has none (a restarted founder while the
    others wait on it): the lowest of the joiners founds once, and the group forms."""
    s = Sim(4, FAST, seed=5, seeds_of=lambda i: [j for j in range(1, 5) if j != i])
    s.run_for(30)
    assert [e.node for e in s.of("join-ok", seed=None)] == [1]
    assert s.converged()


def test_a_joiner_that_hears_no_other_joiner_waits_for_its_seed() -> None:
    """A seed that is down is no reason to found: founding alone beside a group it cannot
    reach would split it, so the joiner keeps asking."""
    core = SwimCore(2, 0, {1: ("h", 1), 3: ("h", 3)}, [1], FAST, random.Random(0))
    out = core.start(0.0)
    for k in range(1, 40):
        out += core.on_timer(TICK, float(k))
    assert not core.joined
    assert {e.to for e in out if isinstance(e, Send)} == {1}
    # a peer's JoinReq reaches it: still not founding, that peer is numbered lower
    core.on_message(1, c.JoinReq(c.NodeInfo(1, 0)), 40.1)
    for k in range(41, 50):
        core.on_timer(TICK, float(k))
    assert not core.joined
    # a higher-numbered joiner asks it: after the wait it founds and admits it
    core.on_message(3, c.JoinReq(c.NodeInfo(3, 0)), 50.1)
    for k in range(51, 60):
        core.on_timer(TICK, float(k))
    assert core.joined


def test_relayed_ping_is_forwarded_once_and_answered_to_the_requester() -> None:
    helper = SwimCore(2, 0, {1: ("h", 1), 3: ("h", 3)}, [], Options(), random.Random(0))
    helper.start(0.0)
    out = helper.on_message(1, c.PingRequest(1, 3, 1, c.Payload(seq=9)), 0.1)
    assert [e.to for e in out if isinstance(e, Send)] == [3]
    assert not [e for e in helper.on_message(1, c.PingRequest(1, 3, 0, c.Payload(seq=9)), 0.1)
                if isinstance(e, Send)]
    target = SwimCore(3, 0, {1: ("t", 1), 2: ("t", 2)}, [], Options(), random.Random(0))
    target.start(0.0)
    (resp,) = [e for e in target.on_message(2, out[0].msg, 0.2) if isinstance(e, Send)]
    assert resp.to == 1 and isinstance(resp.msg, c.PingResponse)
    assert (resp.msg.src, resp.msg.target, resp.msg.payload.seq) == (1, 3, 9)


def test_unknown_bug_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown bug"):
        SwimCore(1, 0, {}, [], Options(), random.Random(0), bugs=("nope",))


def test_saturated_capacity_group_still_admits_everyone() -> None:
    cap = Options(period_s=0.2, probe_timeout_s=0.1, capacity=3)
    for seed in range(15):
        s = Sim(6, cap, seed=seed)
        s.run_for(3)
        s.crash(6)
        s.run_for(4)
        s.restart(6)
        s.run_for(6)
        assert all(len(s.alive_view(i)) <= 3 for i in s.ids)
        assert all(any(i in s.alive_view(j) for j in s.ids if j != i) for i in s.ids), seed


def _sync_probe(sender: int, view: list[int]) -> c.PingRequest:
    sample = tuple(c.NodeInfo(i, 0) for i in [sender, *view])
    return c.PingRequest(sender, 1, 0, c.Payload(7, (), sample))


def _answer_sample(effects: list) -> set[int]:
    (ack,) = [e.msg for e in effects if isinstance(e, Send) and isinstance(e.msg, c.PingResponse)]
    return {info.id for info in ack.payload.sample}


def test_a_probe_carrying_a_view_is_answered_with_ours_once_a_period() -> None:
    """The sync (anti-entropy): a probe whose sample holds more than its sender gets our view
    back (the spec's PingResponse example: a sample of members); a second one from the same
    sender in the same period gets only our own entry (no reflector), and so does a plain
    probe; with a capacity there is no sync (views are partial by design)."""
    s = Sim(4, FAST, seed=1)
    s.run_for(6)
    assert s.converged()
    core = s.cores[1]
    now = s.now
    assert _answer_sample(core.on_message(2, _sync_probe(2, [3]), now)) == {1, 2, 3, 4}
    assert _answer_sample(core.on_message(2, _sync_probe(2, [3]), now)) == {1}
    assert _answer_sample(core.on_message(3, _sync_probe(3, []), now)) == {1}
    capped = Sim(4, dataclasses.replace(FAST, capacity=3), seed=1)
    capped.run_for(6)
    assert _answer_sample(capped.cores[1].on_message(2, _sync_probe(2, [3]), capped.now)) == {1}


def test_every_sync_periods_one_probe_carries_the_view() -> None:
    """The sync's probe: `sync_periods` after joining, and every that many periods after;
    it costs no extra datagram (the period's probe carries it)."""
    s = Sim(5, FAST, seed=2)
    s.run_for(4.5)
    assert all(core.counters.syncs == 0 for core in s.cores.values())
    s.run_for(30)
    assert all(core.counters.syncs >= 2 for core in s.cores.values())
    off = Sim(5, dataclasses.replace(FAST, sync_periods=0), seed=2)
    off.run_for(34.5)
    assert all(core.counters.syncs == 0 for core in off.cores.values())
