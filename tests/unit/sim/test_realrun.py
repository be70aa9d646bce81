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
    ]
    assert m.duration_s == pytest.approx(2.0 + 0.614)
    assert [n.split(":")[0] for n in m.notes] == ["step 0 loss", "step 10 remove", "step 11 write"]
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
        nemesis_steps(rec("drip", []))


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
    f.write_text(json.dumps(rec("drip", [])))
    assert main(["run", "--from", str(f)]) == 254
    assert "cannot drive a real run yet" in " ".join(capsys.readouterr().err.split())
    t = tmp_path / "test.json"
    t.write_text(json.dumps({"name": "x", "protocol": "garlicfarm", "faults": None}))
    assert main(["run", "--from", str(t), "--sim-scale", "2"]) == 254
    assert "--sim-scale is for a sim replay file" in " ".join(capsys.readouterr().err.split())
