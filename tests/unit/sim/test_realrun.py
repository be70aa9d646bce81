"""A sim replay file read as a real run's nemesis schedule (harness/sim/realrun.py) and the
``harness run --from FILE`` refusals that start nothing."""

from __future__ import annotations

import json

import pytest

from checkers.result import Result
from harness.cli import main
from harness.last_send import HOLD_TIMEOUT_S
from harness.protocols import get_protocol
from harness.sim import realrun
from harness.sim.realrun import is_replay, nemesis_steps, spec_for, verdict_line


def rec(protocol: str, schedule: list[list[object]], bug: list[str] | None = None) -> dict:
    return {"protocol": protocol, "seed": 4, "bug": bug or [], "schedule": schedule,
            "ops": [], "witness": [{"checker": "vote-safety", "kind": "double-vote"}],
            "trace_sha256": "0" * 64}


def test_a_garlicfarm_schedule_becomes_nemesis_ops_at_its_times() -> None:
    r = rec("garlicfarm", [["loss", 0, 4, 0], ["partition", 392, 0, 0], ["crash", 0, 0, 0],
                           ["partition", 100, 1, 1], ["pause", 50, 0, 3], ["resume", 10, 0, 0],
                           ["delay", 5, 2, 1], ["delay", 5, 0, 0], ["restart", 20, 0, 2],
                           ["heal", 30, 0, 0], ["remove", 1, 0, 0], ["write", 1, 0, 0]])
    m = nemesis_steps(r)
    assert m.steps == [
        (2.392, {"f": "start-partition", "value": {"shape": "isolate", "node": "leader"}}),
        (0.0, {"f": "kill", "value": {"node": "leader"}}),
        (0.1, {"f": "start-partition", "value": {"shape": "explicit",
                                                  "groups": [["n1", "n2"], ["n3", "n4", "n5"]]}}),
        (0.05, {"f": "pause", "value": {"node": "follower"}}),
        (0.01, {"f": "resume", "value": None}),
        (0.005, {"f": "start-latency", "value": {"ms": 41, "jitter_ms": 10}}),
        (0.005, {"f": "stop-latency", "value": None}),
        (0.0, {"f": "start-latency", "value": {"ms": 1, "jitter_ms": 0}}),
        (0.02, {"f": "restart", "value": None}),  # the leader killed above comes back
        (0.03, {"f": "stop-partition", "value": None}),
        # server a=0 is n1, removed by an administrator's RemoveServer to the leader; the
        # sim's request met a leader elected since the heal, so the real one watches from it
        (0.0, {"f": "remove-server", "value": {"node": "n1", "next_leader": True,
                                               "hold": True, "wait_s": 2.001}}),
    ]
    # the remove-server's watch (its wait_s and a second) is part of the run
    assert m.duration_s == pytest.approx(2.0 + 0.614 + 3.001)
    assert [n.split(":")[0] for n in m.notes] == ["step 0 loss", "step 10 remove",
                                                  "step 11 write"]
    # a restart of a node that is up is a kill and a restart; waits scale
    m2 = nemesis_steps(rec("garlicfarm", [["restart", 100, 0, 1]]), scale=3.0)
    assert m2.steps == [(6.3, {"f": "kill", "value": {"node": "follower"}}),
                        (0.0, {"f": "restart", "value": None})]


def test_udp_protocols_keep_loss_and_duplication_and_pick_members_by_name() -> None:
    m = nemesis_steps(rec("swim", [["loss", 0, 3, 0], ["dup", 0, 2, 0], ["loss", 10, 0, 0],
                                   ["partition", 0, 0, 2], ["crash", 0, 0, 4]]))
    assert [o for _, o in m.steps] == [
        {"f": "start-loss", "value": {"p": 0.3}}, {"f": "start-duplicate", "value": {"p": 0.2}},
        {"f": "stop-loss", "value": None},
        {"f": "start-partition", "value": {"shape": "isolate", "node": "n3"}},
        {"f": "kill", "value": {"node": "n5"}}]
    assert m.steps[0][0] == 10.0 and not m.notes  # SWIM's group forms for 10 s first


def test_a_replay_file_is_told_from_a_test_json_and_specs_a_run() -> None:
    r = rec("garlicfarm", [["crash", 100, 0, 0]], bug=["forget-vote"])
    assert is_replay(r)
    assert not is_replay({"name": "x", "faults": None, "schedule": [], "trace_sha256": ""})
    spec, mapped = spec_for(r, get_protocol("garlicfarm"), quiesce_s=4.0)
    assert (spec.nodes, spec.bugs, spec.seed, spec.time_limit) == (5, ["forget-vote"], 4, 3.1)
    # the kill, then the sim's last heal restarting it as the schedule ends
    assert spec.nemesis_desc == "sim replay (2 ops)" and spec.nemesis is not None
    with pytest.raises(ValueError, match="cannot drive a real run yet"):
        nemesis_steps(rec("paxos", []))
    # no fault to play: no nemesis, so the faults checker does not ask for one
    spec, _ = spec_for(rec("drip", [["update", 5, 0, 0]]), get_protocol("drip"))
    assert (spec.nemesis, spec.nemesis_desc) == (None, "none")


def test_a_drip_schedule_keeps_its_mesh_and_its_cuts_add_up() -> None:
    r = rec("drip", [["cut", 0, 4, 0], ["isolate", 100, 0, 2], ["cut", 200, 0, 0],
                     ["stall", 0, 0, 3], ["rejoin", 100, 0, 0], ["crash", 1000, 0, 1],
                     ["restart", 100, 0, 1], ["loss", 0, 3, 0], ["heal", 0, 0, 0],
                     ["update", 0, 0, 0]], bug=["skip-sync"])
    m = nemesis_steps(r)
    cut = lambda *ls: {"f": "start-partition", "value": {"shape": "explicit", "cut": sorted(  # noqa: E731
        [list(e) for e in ls] + [[b, a] for a, b in ls])}}
    assert m.steps == [
        (1.0, cut(("n2", "n4"))),
        (0.1, cut(("n2", "n4"), ("n2", "n3"), ("n3", "n4"))),  # n3's links
        (0.2, cut(("n2", "n4"), ("n2", "n3"), ("n3", "n4"), ("n1", "n2"))),
        (0.0, {"f": "pause", "value": {"node": "n4"}}),
        (0.1, {"f": "kill", "value": {"node": "n1"}}),
        (0.0, {"f": "restart", "value": {"node": "n1"}}),
        (0.7, cut(("n2", "n4"), ("n1", "n2"))),  # n3's links back a + 1 = 1 s after its cut
        (0.2, {"f": "resume", "value": {"node": "n4"}}),  # the stall's end, a + 1 = 1 s on
        (0.1, {"f": "kill", "value": {"node": "n2"}}),
        (0.1, {"f": "restart", "value": {"node": "n2"}}),
        (0.0, {"f": "stop-partition", "value": None}),
    ]
    assert [n.split(":")[0] for n in m.notes] == [
        "step 1 isolate", "step 3 stall", "step 4 rejoin", "step 7 loss", "step 9 update"]
    # a stall, isolate or sever still on after the last step lasts its time, as the sim plays
    # it out before its last heal
    last = nemesis_steps(rec("drip", [["stall", 0, 3, 0], ["isolate", 0, 0, 1],
                                      ["sever", 0, 1, 2]]))
    assert [(t, o["f"]) for t, o in last.steps] == [
        (1.0, "pause"), (0.0, "start-partition"), (0.0, "start-partition"),
        (1.0, "start-partition"),  # n2's links back
        (3.0, "resume"),  # 4 s on
        (1.0, "stop-partition")]  # the sever's 5 s
    assert last.duration_s == 6.0
    spec, _ = spec_for(r, get_protocol("drip"))
    assert spec.edges() == [("n1", "n2"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4"),
                            ("n3", "n4")]
    assert (spec.nodes, spec.bugs_of("n1")) == (4, ["skip-sync"])


def test_an_antacid_schedule_has_the_sims_primary_replicas_and_restarts_only_the_down() -> None:
    r = rec("antacid", [["partition", 0, 0, 1], ["partition", 10, 1, 0], ["restart", 10, 0, 2],
                        ["crash", 10, 0, 0], ["restart", 10, 0, 0], ["write", 0, 0, 3]])
    m = nemesis_steps(r)
    assert [o for _, o in m.steps] == [
        {"f": "start-partition", "value": {"shape": "isolate", "node": "n2"}},
        {"f": "start-partition", "value": {"shape": "explicit",
                                           "groups": [["n1", "n2"], ["n3", "n4"]]}},
        {"f": "kill", "value": {"node": "n1"}}, {"f": "restart", "value": {"node": "n1"}}]
    spec, _ = spec_for(r, get_protocol("antacid"))
    assert spec.options["upstream"] == {"n2": ["n1"], "n3": ["n2", "n1"], "n4": ["n3", "n1"]}
    from harness.suites.antacid import _node_extra

    assert _node_extra(spec, 0, None)["options"] == {  # type: ignore[arg-type]
        "primary": "n1", "upstream": spec.options["upstream"]}


def test_a_mixed_cluster_runs_the_mode_on_the_named_servers_only() -> None:
    spec, _ = spec_for(rec("garlicfarm", [], bug=["forget-vote@1,3", "sync-loop"]),
                       get_protocol("garlicfarm"))
    assert [spec.bugs_of(n) for n in spec.node_ids] == [
        ["forget-vote", "sync-loop"], ["sync-loop"], ["forget-vote", "sync-loop"],
        ["sync-loop"], ["sync-loop"]]
    for bad in (["forget-vote@6"], ["forget-vote@x"], ["forget-vote@"]):
        with pytest.raises(ValueError, match="forget-vote@"):
            spec_for(rec("garlicfarm", [], bug=bad), get_protocol("garlicfarm"))


def test_the_verdict_names_both_runs_failures() -> None:
    leaf = Result("vote-safety", False)
    bad = Result("all", False, children=[Result("raft", False, children=[leaf])])
    assert verdict_line(bad, rec("garlicfarm", [])["witness"]).startswith(
        "CONFIRMED on real processes: the real run failed (raft.vote-safety); simulated "
        "witness: vote-safety/double-vote")
    assert verdict_line(Result("all", True), []).startswith("NOT confirmed: the real run passed")


@pytest.mark.parametrize("extra, says", [
    (["--nodes", "3"], "--nodes cannot change a sim replay"),
    (["--bug", "forget-vote"], "--bug cannot change a sim replay"),
])
def test_options_a_sim_replay_fixes_are_refused_before_anything_starts(
        tmp_path, capsys, extra, says) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(rec("garlicfarm", [["crash", 0, 0, 0]])))
    assert main(["run", "--from", str(f), "--store", str(tmp_path / "s"), *extra]) == 254
    assert says in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "s").exists()


def test_an_unmapped_protocol_or_a_scale_on_a_test_json_is_refused(tmp_path, capsys) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(rec("paxos", [])))
    assert main(["run", "--from", str(f)]) == 254
    assert "cannot drive a real run yet" in " ".join(capsys.readouterr().err.split())
    t = tmp_path / "test.json"
    t.write_text(json.dumps({"name": "x", "protocol": "garlicfarm", "faults": None}))
    assert main(["run", "--from", str(t), "--sim-scale", "2"]) == 254
    assert "--sim-scale is for a sim replay file" in " ".join(capsys.readouterr().err.split())


def test_an_antacid_file_of_two_zones_runs_the_sims_zones() -> None:
    r = {**rec("antacid", [["write", 0, 0, 3]]), "zones": 2}
    spec, _ = spec_for(r, get_protocol("antacid"))
    assert spec.options["zone_count"] == 2
    from harness.suites.antacid import _node_extra

    opts = _node_extra(spec, 0, None)["options"]  # type: ignore[arg-type]
    assert opts["primary"] == "n1" and opts["upstream"] == spec.options["upstream"]
    assert opts["zones"] == {"zone2.test": {"primary": "n2", "upstream": {
        "n3": ["n2"], "n4": ["n3", "n2"], "n1": ["n4", "n2"]}}}
    one, _ = spec_for(rec("antacid", []), get_protocol("antacid"))
    assert "zone_count" not in one.options


def test_a_drip_decommission_is_the_clusters_decommission_of_that_node() -> None:
    m = nemesis_steps(rec("drip", [["crash", 0, 0, 3], ["decommission", 100, 0, 3],
                                   ["decommission", 50, 4, 0]]))
    assert m.steps == [
        (1.0, {"f": "kill", "value": {"node": "n4"}}),  # the real run's first second settles
        (0.1, {"f": "decommission", "value": {"node": "n4"}}),
        (0.05, {"f": "decommission", "value": {"node": "n1"}}),
    ]
    assert m.notes == []


def test_a_node_gone_for_good_is_the_nemesis_kill_for_good_and_nothing_touches_it_after() -> None:
    m = nemesis_steps(rec("sds", [["gone", 100, 0, 1], ["crash", 10, 0, 1], ["restart", 0, 0, 1],
                                  ["pause", 0, 0, 1], ["partition", 0, 0, 1]], bug=["no-repair"]))
    assert m.steps == [(1.1, {"f": "kill", "value": {"node": "n2", "for_good": True}}),
                       (0.01, {"f": "start-partition",
                               "value": {"shape": "isolate", "node": "n2"}})]
    assert [n.split(":")[0] for n in m.notes] == ["step 1 crash", "step 2 restart",
                                                  "step 3 pause"]
    assert all("gone for good" in n for n in m.notes)


def test_an_sds_gone_with_last_words_cuts_the_peers_it_missed_sends_once_and_dies() -> None:
    # `harness sim run sds --bug no-repair --seed 2` shrinks to this: n1 (b=0) dies while
    # broadcasting; the send reached n2 (a=1, the next peer) only
    m = nemesis_steps(rec("sds", [["gone", 0, 1, 0]], bug=["no-repair"]))
    assert m.steps == [
        (1.0, {"f": "start-partition", "value": {"shape": "explicit", "cut": [
            ["n1", "n3"], ["n1", "n4"], ["n1", "n5"]]}}),
        (0.0, {"f": "last-send", "value": {"node": "n1", "reach": ["n2"]}}),
        (0.0, {"f": "kill", "value": {"node": "n1", "for_good": True}}),
        (0.0, {"f": "stop-partition", "value": None}),
    ]
    assert len(m.notes) == 1 and m.notes[0].startswith("step 0 gone: n1 dies broadcasting")
    assert m.duration_s == 1.0 + HOLD_TIMEOUT_S  # the kill comes after the longest wait
    # round from the node, as the sim's last_words: n4 (b=3) with a=2 reaches n5 and n1
    m = nemesis_steps(rec("sds", [["gone", 0, 2, 3]]))
    assert m.steps[1][1]["value"] == {"node": "n4", "reach": ["n5", "n1"]}
    assert m.steps[0][1]["value"]["cut"] == [["n4", "n2"], ["n4", "n3"]]


def test_a_last_words_gone_keeps_the_partition_on_and_waits_only_for_peers_it_can_reach() -> None:
    # n1 n2 | n3 n4 n5 is on; n4 (a=2) would reach n5 and n1, but the split cuts n1 off
    m = nemesis_steps(rec("sds", [["partition", 0, 1, 0], ["gone", 10, 2, 3], ["heal", 5, 0, 0]]))
    split = {"shape": "explicit", "groups": [["n1", "n2"], ["n3", "n4", "n5"]]}
    cross = {(x, y) for g, h in ((["n1", "n2"], ["n3", "n4", "n5"]),
                                 (["n3", "n4", "n5"], ["n1", "n2"])) for x in g for y in h}
    assert [o["f"] for _, o in m.steps] == ["start-partition", "start-partition", "last-send",
                                            "kill", "start-partition", "stop-partition"]
    assert {tuple(f) for f in m.steps[1][1]["value"]["cut"]} == cross | {("n4", "n2"),
                                                                        ("n4", "n3")}
    assert m.steps[2][1]["value"] == {"node": "n4", "reach": ["n5"]}
    assert m.steps[4][1]["value"] == split  # put back as it was, until the heal


def test_a_gone_of_a_crashed_node_or_without_last_words_is_the_plain_kill_for_good() -> None:
    for sched in ([["gone", 0, 0, 0]], [["gone", 0, 5, 0]],
                  [["crash", 0, 0, 0], ["gone", 10, 2, 0]]):
        m = nemesis_steps(rec("sds", sched, bug=["no-repair"]))
        assert m.steps[-1][1] == {"f": "kill", "value": {"node": "n1", "for_good": True}}
        assert "last-send" not in [o["f"] for _, o in m.steps] and m.notes == []


def test_a_skew_is_a_clock_rate_under_libfaketime_and_a_calendar_step_on_the_node() -> None:
    # SKEWS[a] = (rate, calendar step): a=2 double speed; a=4 true rate and +60 s (the
    # steps add up); a=0 true rate, already so: nothing; a=1 half speed
    r = rec("sds", [["skew", 0, 2, 0], ["skew", 10, 4, 0], ["skew", 0, 4, 0], ["skew", 0, 0, 0],
                    ["skew", 0, 1, 3]])
    m = nemesis_steps(r)
    assert [o for _, o in m.steps] == [
        {"f": "clock-rate", "value": {"node": "n1", "rate": 2.0}},
        {"f": "clock-rate", "value": {"node": "n1", "rate": 1.0}},
        {"f": "clock-skew", "value": {"node": "n1", "offset_s": 60.0}},
        {"f": "clock-skew", "value": {"node": "n1", "offset_s": 120.0}},
        {"f": "clock-rate", "value": {"node": "n4", "rate": 0.5}}]
    assert m.rates and not m.notes
    spec, _ = spec_for(r, get_protocol("sds"))
    assert spec.options["clock_rate"] is True  # the nodes start under libfaketime
    with pytest.raises(ValueError, match="only the local backend can do"):
        spec_for(r, get_protocol("sds"), backend="docker")
    # a calendar step alone needs no libfaketime
    spec, _ = spec_for(rec("sds", [["skew", 0, 3, 0]]), get_protocol("sds"), backend="docker")
    assert "clock_rate" not in spec.options


def test_a_swim_cut_is_one_way_for_its_time_and_adds_up_with_a_partition() -> None:
    # member b=0 (n1) and the one a % 4 = 1 picks: n3; the cut lasts 8 s (CUT_S)
    m = nemesis_steps(rec("swim", [["cut", 0, 1, 0], ["partition", 1000, 1, 0],
                                   ["heal", 1000, 0, 0], ["cut", 0, 0, 4]]))
    split = [[x, y] for g, h in ((["n1", "n2"], ["n3", "n4", "n5"]),
                                 (["n3", "n4", "n5"], ["n1", "n2"])) for x in g for y in h]
    assert m.steps == [
        (10.0, {"f": "start-partition", "value": {"shape": "explicit", "cut": [["n1", "n3"]]}}),
        (1.0, {"f": "start-partition", "value": {"shape": "explicit", "cut": sorted(split)}}),
        (1.0, {"f": "stop-partition", "value": None}),
        (0.0, {"f": "start-partition", "value": {"shape": "explicit", "cut": [["n5", "n1"]]}}),
        (8.0, {"f": "stop-partition", "value": None})]  # the sim plays the cut out
    assert m.duration_s == 20.0
    # alone, a cut's end gives the link back at its time
    m = nemesis_steps(rec("swim", [["cut", 0, 1, 0], ["loss", 9000, 2, 0]]))
    assert [(t, o["f"]) for t, o in m.steps] == [(10.0, "start-partition"),
                                                 (8.0, "stop-partition"), (1.0, "start-loss")]


def test_swim_leave_and_rejoin_are_the_workloads_ops_and_the_last_heal_rejoins() -> None:
    r = rec("swim", [["leave", 0, 0, 1], ["leave", 0, 0, 1], ["rejoin", 500, 0, 1],
                     ["leave", 0, 0, 2], ["crash", 0, 0, 3], ["leave", 0, 0, 3]])
    m = nemesis_steps(r)
    # n3, still out at the end, joins 1 s after the last heal (the nemesis's own heal-all op,
    # as the sim's last heal comes before its settle's rejoins), and the run goes on for
    # 7 periods of the sim's 1 s, twice the sim's gossip bound
    assert m.swim_plan == [[10.0, "leave", "n2"], [10.5, "join", "n2"], [10.5, "leave", "n3"],
                           [11.5, "join", "n3"]]
    assert [(t, o["f"]) for t, o in m.steps] == [(10.5, "kill"), (0.0, "heal-all")]
    assert m.duration_s == 18.5
    spec, _ = spec_for(r, get_protocol("swim"))
    assert spec.options["swim_plan"] == m.swim_plan
    assert spec.options["swim_plan_origin"] == "workload"  # the nemesis's origin too
    # nothing here lets a correct member suspect unexcused: none is allowed, as in the sim
    assert spec.options["swim_max_false_suspicions_per_member_hour"] == 0
    spec, _ = spec_for(rec("swim", [["cut", 0, 0, 0], ["loss", 0, 3, 0]]), get_protocol("swim"))
    assert "swim_max_false_suspicions_per_member_hour" not in spec.options


def test_a_swim_replay_runs_the_sims_timers_so_its_periods_are_the_sims() -> None:
    """The sim's SWIM runs 1 s periods (`swim_search.OPTS`), the suite 0.5 s by default: a
    replay's times and the sim's bounds (in periods) hold only at the sim's timers."""
    from harness.sim.swim_search import OPTS

    spec, _ = spec_for(rec("swim", [["crash", 0, 0, 1]]), get_protocol("swim"))
    node = spec.describe()["node_options"]
    assert (node["period_s"], node["probe_timeout_s"], node["suspicion_mult"],
            node["indirect_k"]) == (OPTS.period_s, OPTS.probe_timeout_s, OPTS.suspicion_mult,
                                    OPTS.indirect_k) == (1.0, 0.5, 4, 3)
    assert "swim_plan_origin" not in spec.options  # no plan: nothing to place
    spec, _ = spec_for(rec("sds", [["crash", 0, 0, 1]]), get_protocol("sds"))
    assert "period_s" not in spec.options


def test_a_swim_gossip_too_slow_finding_sets_the_real_dissemination_bound() -> None:
    """The sim's dissemination witness is judged on real nodes by the membership checker's
    dissemination leaf (at 5 members under the sim's bound: `swim_gossip_bound`); other SWIM
    replays leave it unset (report only)."""
    r = rec("swim", [["leave", 0, 0, 1], ["rejoin", 500, 0, 1]])
    spec, _ = spec_for(r, get_protocol("swim"))
    assert "swim_max_dissemination_periods" not in spec.options
    r["witness"] = [{"checker": "dissemination", "kind": "gossip-too-slow", "message": "m",
                     "witness": {"joiner": "n2", "gen": 2}}]
    spec, _ = spec_for(r, get_protocol("swim"))
    assert spec.options["swim_max_dissemination_periods"] == 2.5


def test_the_real_gossip_bound_stays_under_the_joiners_own_probe_floor() -> None:
    """A joiner's own probes reach the n - 2 members besides its seed in n - 2 periods with no
    gossip at all (one new member a period, stalest first): at 5 members the sim's 3.48 is
    past that floor of 3, so the real run judges at 2.5; at 10 the sim's 4.98 is under 7.5."""
    from harness.sim.swim_search import GOSSIP_PERIODS

    assert realrun.swim_gossip_bound(5, GOSSIP_PERIODS) == 2.5
    assert realrun.swim_gossip_bound(10, 1.5 * 3.321928) == 4.98
    assert realrun.swim_gossip_bound(5, 2.0) == 2.0  # the sim's when it is the lower


def test_a_slow_rejoin_is_sampled_three_times_in_quiet_stretches() -> None:
    """The seed-4 shape (`harness sim run swim --bug no-gossip-retransmit --seed 4`): n2
    leaves, n1 is isolated, the last heal, n2's settle rejoin too slow. The real run heals,
    n2 rejoins 1 s later, and leaves and rejoins twice more 16 s apart (past the checker's
    14 s window of each), then 7 periods; a slow rejoin in mid-schedule gets three at the
    end. No other SWIM replay gets any."""
    slow = [{"checker": "dissemination", "kind": "gossip-too-slow", "message": "m",
             "witness": {"joiner": "n2", "gen": 1, "bound_periods": 3.48}}]
    r = {**rec("swim", [["loss", 322, 0, 0], ["leave", 0, 0, 1], ["partition", 73, 0, 0]]),
         "witness": slow}
    m = nemesis_steps(r)
    assert m.steps == [(10.395, {"f": "start-partition",
                                 "value": {"shape": "isolate", "node": "n1"}}),
                       (0.0, {"f": "heal-all", "value": None})]
    assert m.swim_plan == [[10.322, "leave", "n2"], [11.395, "join", "n2"],
                           [26.395, "leave", "n2"], [27.395, "join", "n2"],
                           [42.395, "leave", "n2"], [43.395, "join", "n2"]]
    assert m.duration_s == 50.395
    assert any(n.startswith("gossip-too-slow: n2 rejoins") for n in m.notes)
    # the checker's join window at the sim's timers, which a sample's next leave must clear
    assert realrun.SWIM_SAMPLE_GAP_S - realrun.SWIM_REJOIN_AFTER_HEAL_S > (4 * 1 + 10) * 1.0
    m = nemesis_steps({**rec("swim", [["leave", 0, 0, 1], ["rejoin", 500, 0, 1],
                                      ["delay", 100, 1, 0]]), "witness": slow})
    assert m.swim_plan == [[10.0, "leave", "n2"], [10.5, "join", "n2"],
                           [11.6, "leave", "n2"], [12.6, "join", "n2"],
                           [27.6, "leave", "n2"], [28.6, "join", "n2"],
                           [43.6, "leave", "n2"], [44.6, "join", "n2"]]
    m = nemesis_steps(rec("swim", [["loss", 322, 0, 0], ["leave", 0, 0, 1]]))
    assert [p[1] for p in m.swim_plan] == ["leave", "join"]


def test_a_drip_add_is_the_clusters_add_member_of_a_fresh_node_on_the_sims_mesh() -> None:
    r = rec("drip", [["add", 100, 0, 0], ["add", 0, 0, 1], ["add", 0, 0, 2]])
    m = nemesis_steps(r)
    assert m.added == {"n5": 1.1, "n6": 1.1} and not m.steps
    assert "step 2 add: skipped" in m.notes[2]
    spec, _ = spec_for(r, get_protocol("drip"))
    assert (spec.nodes, spec.add_member) == (6, {"n5": 1.1, "n6": 1.1})
    edges = set(spec.topology(spec.node_ids))
    assert {("n1", "n5"), ("n4", "n5"), ("n1", "n6"), ("n5", "n6"), ("n2", "n4")} <= edges
    assert ("n1", "n3") not in edges  # the sim's own mesh stays as it was


def test_a_clock_rate_replay_on_another_backend_is_refused_before_anything_starts(
        tmp_path, capsys) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(rec("sds", [["skew", 0, 2, 0]])))
    assert main(["run", "--from", str(f), "--store", str(tmp_path / "s"),
                 "--backend", "docker"]) == 254
    said = " ".join(capsys.readouterr().err.split())
    assert "only the local backend can do" in said and "--backend local" in said, said
    assert not (tmp_path / "s").exists()


def test_the_clock_rate_nemesis_is_refused_off_the_local_backend(tmp_path, capsys) -> None:
    assert main(["run", "sds", "--nemesis", "partition,clock-rate", "--backend", "ssh",
                 "--store", str(tmp_path / "s")]) == 254
    assert "--nemesis clock-rate needs --backend local, not ssh" in " ".join(
        capsys.readouterr().err.split())
    assert not (tmp_path / "s").exists()


def test_a_garlicfarm_add_is_a_fresh_server_that_joins_through_the_leader() -> None:
    r = rec("garlicfarm", [["add", 100, 1, 0], ["remove", 100, 2, 0], ["add", 50, 2, 0],
                           ["add", 0, 0, 0], ["crash", 10, 0, 1]])
    m = nemesis_steps(r)
    assert m.steps == [(2.1, {"f": "join", "value": {"node": "n6"}}),
                       (0.1, {"f": "remove-server", "value": {
                           "node": "n3", "next_leader": False, "hold": False, "wait_s": 2.0}}),
                       (0.05, {"f": "join", "value": {"node": "n7"}}),
                       (0.01, {"f": "kill", "value": {"node": "follower"}}),
                       (0.0, {"f": "heal-all", "value": None})]
    assert m.late == ["n6", "n7"] and not m.added
    # what the sim meant is said: a member (refused by its leader), or one a remove took out
    assert "the sim's step asks to add server 2, a member (refused)" in m.notes[0]
    assert "the sim's step adds back server 3, removed at step 1" in m.notes[1]
    assert m.notes[2].startswith("step 3 add: skipped, 2 fresh servers were added already")
    spec, _ = spec_for(r, get_protocol("garlicfarm"))
    assert (spec.nodes, spec.options["late_nodes"], spec.add_member) == (7, ["n6", "n7"], {})
    from harness.suites.garlicfarm import node_extra

    n6 = node_extra(spec, 5, "/nonexistent")["options"]
    n1 = node_extra(spec, 0, "/nonexistent")["options"]
    assert n6["join"] is True and n1["members"] == [1, 2, 3, 4, 5] and "join" not in n1


def test_a_hostile_step_is_one_real_burst_at_its_node_with_the_sims_kinds() -> None:
    sched = [["hostile", 100, 1, 1], ["hostile", 200, 2, 2], ["hostile", 1000, 0, 0]]
    m = nemesis_steps(rec("swim", sched))
    start = {"f": "start-hostile", "value": {"nodes": ["n2"], "interval_s": 3600.0}}
    stop = {"f": "stop-hostile", "value": None}
    (t0, s0), (t1, s1), (t2, s2), (t3, s3), (t4, s4), (t5, s5) = m.steps
    # a burst is stopped by the next (0.2 s later, inside its 0.5 s) or after its 0.5 s
    assert [t0, t1, t2, t3, t4, t5] == [10.1, 0.2, 0.0, 0.5, 0.5, 0.5]
    assert (s1, s3, s5) == (stop, stop, stop)
    assert s0["value"]["nodes"] == ["n2"] and s0["value"]["interval_s"] == 3600.0
    # SWIM a=1: the attacker's own datagrams (the forged member-* left out); a=2: only those
    assert s0["value"]["skip"] and all(k.startswith("member-") for k in s0["value"]["skip"])
    assert s2["value"]["nodes"] == ["n3"] and "garbage" in s2["value"]["skip"] \
        and not any(k.startswith("member-") for k in s2["value"]["skip"])
    assert s4 == {**start, "value": {**start["value"], "nodes": ["n1"]}}  # a=0: every kind
    assert m.duration_s == pytest.approx(10.0 + 1.3 + 0.5)  # the last burst gets its time
    assert all("drawn from the run's seed" in n and "not matched" not in n for n in m.notes)
    # SDS a odd: only what decodes; ANTACID a odd cannot be matched, and says so
    sds = nemesis_steps(rec("sds", [["hostile", 0, 1, 3]])).steps[0][1]
    assert sds["value"] == {"nodes": ["n4"], "interval_s": 3600.0, "skip": ["garbage", "truncated"]}
    ant = nemesis_steps(rec("antacid", [["hostile", 0, 1, 0]]))
    assert "skip" not in ant.steps[0][1]["value"] and "not matched: the sim sent only" in ant.notes[0]
    assert ant.steps[1] == (1.0, stop)


def test_a_drip_hostile_step_sets_the_runs_flood_and_the_key_holders_lie() -> None:
    r = rec("drip", [["hostile", 0, 0, 1], ["hostile", 3000, 2, 3]], bug=["trust-relayed-voters"])
    m = nemesis_steps(r)
    assert [o["f"] for _, o in m.steps] == ["start-hostile", "stop-hostile"] * 2
    assert m.steps[1][0] == 2.0  # DRiP's burst (TLS, a signed token each) gets 2 s
    assert m.options == {"hostile_flood": 5, "hostile_rate": 500.0,
                         "hostile_key_holder_lies": True}
    assert "not matched: the sim's lying key holder waits" in m.notes[0]
    assert "the update the sim starts at n2 first (for the lie to land on) is left to the " \
        "workload" in m.notes[0]
    spec, _ = spec_for(r, get_protocol("drip"))
    assert spec.options["hostile_flood"] == 5 and spec.options["hostile_key_holder_lies"]
    plain = nemesis_steps(rec("drip", [["hostile", 0, 0, 1]]))
    assert plain.options["hostile_key_holder_lies"] is False and "not matched" not in plain.notes[0]


def _cut(*flows: tuple[str, str]) -> dict:
    return {"f": "start-partition", "value": {"shape": "explicit",
                                              "cut": sorted(map(list, flows))}}


def test_a_drip_stall_pauses_at_once_and_says_what_it_does_not_match() -> None:
    m = nemesis_steps(rec("drip", [["stall", 0, 2, 1], ["crash", 100, 0, 3],
                                   ["stall", 100, 0, 3], ["update", 4000, 0, 0]]))
    assert m.steps == [
        (1.0, {"f": "pause", "value": {"node": "n2"}}),
        (0.1, {"f": "kill", "value": {"node": "n4"}}),
        (2.9, {"f": "resume", "value": {"node": "n2"}}),  # a + 1 = 3 s on
    ]
    assert m.notes[0].startswith("step 0 stall: n2 paused at once for 3 s; not matched: ")
    assert "starts an update at n3 for it to take" in m.notes[0]
    assert m.notes[1].startswith("step 2 stall: skipped, n4 is down")


def test_a_drip_isolate_of_3_s_or_more_gives_its_first_link_back_first() -> None:
    m = nemesis_steps(rec("drip", [["isolate", 0, 2, 0], ["isolate", 4000, 1, 0],
                                   ["update", 3000, 0, 0]]))
    n1 = [("n1", "n2"), ("n2", "n1"), ("n1", "n4"), ("n4", "n1")]
    assert m.steps == [
        (1.0, _cut(*n1)),
        (1.0, _cut(("n1", "n4"), ("n4", "n1"))),  # n1-n2 (its first peer) back 1 s in
        (2.0, {"f": "stop-partition", "value": None}),  # the rest a + 1 = 3 s after the cut
        (1.0, _cut(*n1)),  # a = 1: all of them back 2 s on, at once
        (2.0, {"f": "stop-partition", "value": None}),
    ]
    assert m.notes[0].startswith("step 0 isolate: n1's links cut for 3 s, its link to n2 "
                                 "back 1 s in; the updates the sim starts at n1 then")
    assert m.notes[1].startswith("step 1 isolate: n1's links cut for 2 s; the update")


def test_a_drip_sever_cuts_one_way_and_with_a_even_decommissions_the_node() -> None:
    m = nemesis_steps(rec("drip", [["cut", 0, 2, 0], ["sever", 100, 0, 1],
                                   ["sever", 100, 1, 0], ["update", 6000, 0, 0]]))
    n34 = [("n3", "n4"), ("n4", "n3")]
    out2 = [("n2", "n1"), ("n2", "n3"), ("n2", "n4")]
    out1 = [("n1", "n2"), ("n1", "n4")]
    assert m.steps == [
        (1.0, _cut(*n34)),
        (0.1, _cut(*n34, *out2)),  # every link out of n2, one way, over the cut on
        (0.0, {"f": "decommission", "value": {"node": "n2"}}),  # a even: removed at once
        (0.1, _cut(*n34, *out2, *out1)),  # a odd: no decommission
        (3.9, _cut(*n34, *out1)),  # n2's sever ends 4 + a = 4 s on
        (1.1, _cut(*n34)),  # n1's 5 s on; the cut edge stays until the final heal
    ]
    assert [n.split(":")[0] for n in m.notes] == [
        "step 1 sever", "step 1 sever", "step 2 sever", "step 3 update"]
    assert m.notes[0].startswith("step 1 sever: every link out of n2 cut one way for 4 s; "
                                 "not matched: the sim cuts the moment its own update's")
    assert "3.5 s on updates the same key at n3" in m.notes[0]
    assert m.notes[1].startswith("step 1 sever: n2 decommissioned at once")
    # the sim's guard: no removal of a node removed already, nor one that leaves the rest
    # unlinked (n2 and n4 out leave n1 and n3, which no link joins)
    g = nemesis_steps(rec("drip", [["sever", 0, 0, 1], ["sever", 100, 2, 1],
                                   ["sever", 100, 0, 3], ["heal", 100, 0, 0]]))
    assert [o["value"]["node"] for _, o in g.steps if o["f"] == "decommission"] == ["n2"]
    assert [n for n in g.notes if "no decommission" in n] == [
        "step 1 sever: no decommission of n2, as in the sim (it was removed already, or the "
        "rest would be fewer than two or unlinked)",
        "step 2 sever: no decommission of n4, as in the sim (it was removed already, or the "
        "rest would be fewer than two or unlinked)"]
    assert g.steps[-1] == (0.1, {"f": "stop-partition", "value": None})  # heal ends the severs


def test_a_garlicfarm_hostile_step_is_a_real_burst_at_the_sims_pick_with_its_kinds() -> None:
    from nodes.garlicfarm.hostile import OUTSIDER

    m = nemesis_steps(rec("garlicfarm", [["hostile", 0, 0, 0], ["hostile", 100, 1, 1],
                                         ["hostile", 100, 2, 5], ["crash", 3000, 0, 0]]))
    assert [o["f"] for _, o in m.steps] == ["start-hostile", "stop-hostile"] * 3 + [
        "kill", "heal-all"]
    (_, s0), (_, s1), (_, s2), (_, s3), (_, s4) = m.steps[:5]
    # b counts from the leader: 0 and 5 the leader, 1 a follower, resolved by the nemesis
    assert s0["value"] == {"nodes": "leader", "interval_s": 3600.0}  # a=0: every kind
    assert s2["value"]["nodes"] == "follower" and s4["value"]["nodes"] == "leader"
    # a=1: only what any sender can make; a=2: only the extreme values on a member's link
    assert set(s2["value"]["skip"]).isdisjoint(OUTSIDER) and "vote-max-term" in s2["value"]["skip"]
    assert set(s4["value"]["skip"]) == OUTSIDER
    assert m.steps[1][0] == 0.1 and m.steps[5][0] == 2.0  # stopped by the next, or 2 s later
    assert "without credentials" in m.notes[0] and "not matched" in m.notes[0]
    assert "drawn from the run's seed" in m.notes[2] and "not matched" not in m.notes[2]


def test_a_swim_replay_waits_out_its_liveness_bound_at_the_sims_period() -> None:
    """The pause after the final heal covers SWIM's liveness bound at the replay's 1 s period
    ((4 + 1) x 1 s, + 0.5 s), not the suite's 0.5 s one (which gave 3 s: liveness
    'too soon to judge' and a correct replay 'unknown')."""
    from harness.cli import quiesce_for
    from harness.sim.realrun import profile

    swim = get_protocol("swim")
    assert quiesce_for(swim, 5) == 3.0
    assert quiesce_for(swim, 5, profile("swim").options) == 5.5


def test_a_garlicfarm_remove_that_met_a_just_elected_leader_watches_for_the_next_one() -> None:
    # `harness sim run garlicfarm --bug unsafe-config-change --seed 1`: the leader (n4 in the
    # sim) isolated twice; n2 is elected 0.8 ms before the removal of server 1 reaches it,
    # and appends the configuration before its term's first entry commits
    sched = [["delay", 298, 1, 2], ["partition", 128, 0, 0], ["partition", 168, 0, 0],
             ["remove", 281, 0, 0]]
    r = {**rec("garlicfarm", sched, ["unsafe-config-change"]), "seed": 1}
    m = nemesis_steps(r)
    assert m.steps[-1] == (0.0, {"f": "remove-server", "value": {
        "node": "n1", "next_leader": True, "hold": True, "wait_s": 2.281}})
    # watching from the step before (the second isolation), not at the removal's own time
    assert [t for t, _ in m.steps] == [2.298, 0.128, 0.168, 0.0]
    assert "step 3 remove: the sim's request met a leader in the moment after its election" \
        in m.notes[0]
    assert m.duration_s == pytest.approx(2.875 + 3.281)
    # at scale 3 the watch is as much longer as the waits
    assert nemesis_steps(r, 3.0).steps[-1][1]["value"]["wait_s"] == pytest.approx(6.843)


def test_a_garlicfarm_replay_runs_the_sims_flush_period_and_reaches_a_restarted_server_soon(
) -> None:
    """ack-before-fsync seed 2 (two followers crashed at once) was NOT confirmed at the
    server's defaults (its 60 s buffer; a leader that resends a lost request 1.2 s later and
    whose reconnect backoff grows to 1 s) and with the crashed servers restarted only at the
    time limit: a restarted follower campaigned before its leader reached it, and the new
    leader's fresh match indexes hid the stale one the sim's leader retries for ever."""
    from harness.sim.garlicfarm import GfSim
    from harness.suites.garlicfarm import PROTOCOL

    shortest = min(PROTOCOL.default_options["election_timeout_ms"])

    r = rec("garlicfarm", [["crash", 0, 0, 2], ["crash", 0, 0, 1]], bug=["ack-before-fsync"])
    spec, m = spec_for(r, get_protocol("garlicfarm"))
    # the sim's last heal restarts them the moment the schedule ends, not at the time limit
    assert m.steps == [(2.0, {"f": "kill", "value": {"node": "follower"}}),
                       (0.0, {"f": "kill", "value": {"node": "follower"}}),
                       (0.0, {"f": "heal-all", "value": None})]
    assert m.notes[-1].startswith("end: the servers still crashed restart as the schedule ends")
    # a leader resends a request lost to a server that was down before that server campaigns
    assert spec.options["rpc_timeout_ms"] < shortest
    assert spec.options["deferred_flush_ms"] == GfSim.DEFERRED_FLUSH_S * 1000
    # under the shortest election timeout and about one heartbeat: reached before it campaigns
    assert spec.options["reconnect_max_ms"] < shortest
    assert spec.options["reconnect_max_ms"] <= 2 * PROTOCOL.default_options["heartbeat_ms"]
    # every Garlic Farm replay runs them; other protocols do not get them
    spec, _ = spec_for(rec("sds", [["crash", 0, 0, 2]]), get_protocol("sds"))
    assert "reconnect_max_ms" not in spec.options
