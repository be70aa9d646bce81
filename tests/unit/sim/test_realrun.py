"""A sim replay file read as a real run's nemesis schedule (harness/sim/realrun.py) and the
``harness run --from FILE`` refusals that start nothing."""

from __future__ import annotations

import json

import pytest

from checkers.result import Result
from harness.cli import main
from harness.protocols import get_protocol
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
        (0.001, {"f": "leave", "value": {"node": "n1"}}),  # server a=0 is n1: its own leave
    ]
    assert m.duration_s == pytest.approx(2.0 + 0.614)
    assert [n.split(":")[0] for n in m.notes] == ["step 0 loss", "step 11 write"]
    assert "joins only as a late node" in nemesis_steps(rec("garlicfarm", [["add", 0, 1, 0]])).notes[0]
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
    assert spec.nemesis_desc == "sim replay (1 ops)" and spec.nemesis is not None
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
        "step 1 isolate", "step 4 rejoin", "step 7 loss", "step 9 update"]
    # an end due after the last step is left to the final heal, as the sim's heal does it
    assert [o["f"] for _, o in nemesis_steps(rec("drip", [["stall", 0, 3, 0]])).steps] == ["pause"]
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
