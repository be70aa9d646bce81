"""A stored test.json back into the TestSpec that ran (harness.replay), and ``run --from``'s
command line: overrides, the explicit equivalent command, refusals that say why."""

from __future__ import annotations

import json

import pytest

from harness import cli
from harness.nemesis_generator import Faults
from harness.protocols import get_protocol
from harness.replay import FixedTopology, ReplayError, command_line, spec_from_record
from harness.spec import TestSpec


def spec_of(*argv: str):
    return cli.run_spec(cli.parser().parse_args(["run", *argv]))


def stored(spec: TestSpec) -> dict:
    """test.json as the runner writes it (through JSON, with the runner's own keys)."""
    desc = {**spec.describe(), "status": "complete", "run_dir": "/x", "started": "s", "ops": 3}
    return json.loads(json.dumps(desc))


@pytest.mark.parametrize("argv", [
    ("garlicfarm", "--nodes", "3", "--seed", "7", "--nemesis", "kill", "--time-limit", "2.5"),
    ("garlicfarm", "--workload", "append", "--bug", "forget-vote", "--nemesis", "clock,partition",
     "--nemesis-interval", "0.7", "--concurrency", "9", "--backend", "docker"),
    ("garlicfarm", "--nemesis", "none", "--time-limit", "0", "--name", "zero", "--store", "/s"),
    ("swim",),
    ("garlicfarm", "--node-command", "./mynode --config {config} --id {id}"),
    ("garlicfarm", "--kill-for-good", "n1@2.5", "--nemesis", "none", "--time-limit", "10"),
    ("antacid", "--kill-for-good", "n1", "--kill-for-good", "n3@1", "--nemesis", "partition"),
    ("drip", "--nodes", "4", "--bug", "skip-sync@2,4", "--bug", "syncing-votes-no"),
])
def test_a_command_line_spec_round_trips_to_an_equal_spec(argv):
    spec = spec_of(*argv)
    back = spec_from_record(stored(spec))
    assert back == spec
    assert back.describe() == spec.describe()


def test_a_spec_built_in_code_round_trips_with_its_options_timing_and_topology():
    ring = lambda ids: [(a, b) for a, b in zip(ids, ids[1:] + ids[:1], strict=True)]  # noqa: E731
    spec = TestSpec(name="t", protocol=get_protocol("garlicfarm"), nodes=4, seed=3,
                    faults=Faults("partition", 0.4), options={"election_timeout_ms": [9, 10]},
                    op_timeout=1.5, quiesce_s=0.25, topology=ring)
    back = spec_from_record(stored(spec))
    assert back.describe() == spec.describe()
    assert back.topology == FixedTopology((("n1", "n2"), ("n2", "n3"), ("n3", "n4"),
                                           ("n4", "n1")))
    assert (back.options, back.op_timeout, back.quiesce_s) == ({"election_timeout_ms": [9, 10]},
                                                               1.5, 0.25)
    # the schedule is drawn from these two (test_chaos_seed: same seed, same schedule)
    assert (back.faults, back.seed) == (Faults("partition", 0.4), 3)
    with pytest.raises(ReplayError, match="cannot keep it"):
        spec_from_record(stored(spec), {"nodes": 5})
    cmd = command_line(stored(spec))
    assert cmd.not_expressible == ["options {'election_timeout_ms': [9, 10]}", "op_timeout 1.5",
                                   "quiesce_s 0.25", "topology [['n1', 'n2'], ['n2', 'n3'], "
                                   "['n3', 'n4'], ['n4', 'n1']]"]


def test_options_beside_from_override_the_stored_ones(tmp_path):
    spec = spec_of("garlicfarm", "--nodes", "3", "--seed", "7", "--nemesis", "kill",
                   "--nemesis-interval", "1.5", "--bug", "forget-vote")
    run = tmp_path / "store" / "garlicfarm-kv" / "20260101T000000-abcdef"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps(stored(spec)))
    replay = spec_of("--from", str(run / "test.json"))
    assert replay == TestSpec(**{**spec.__dict__, "store": str(tmp_path / "store")})
    changed = spec_of("--from", str(run), "--backend", "docker", "--time-limit", "9",
                      "--nemesis", "partition", "--seed", "8", "--store", "/elsewhere")
    assert (changed.backend, changed.time_limit, changed.seed, changed.store) == \
        ("docker", 9.0, 8, "/elsewhere")
    assert changed.faults == Faults("partition", 1.5)  # the stored interval is kept
    assert (changed.nodes, changed.bugs, changed.concurrency) == (3, ["forget-vote"], 3)
    with pytest.raises(cli.UsageError, match="no bug mode 'nosuch'"):
        spec_of("--from", str(run), "--bug", "nosuch")
    with pytest.raises(cli.UsageError, match="not both"):
        spec_of("garlicfarm", "--from", str(run))
    # a mode on some servers only (a mixed cluster): the name and the servers are checked
    mixed = spec_of("sds", "--nodes", "3", "--bug", "no-resend@1,3")
    assert [mixed.bugs_of(n) for n in mixed.node_ids] == [["no-resend"], [], ["no-resend"]]
    with pytest.raises(cli.UsageError, match=r"servers are numbered 1\.\.3"):
        spec_of("sds", "--nodes", "3", "--bug", "no-resend@4")
    with pytest.raises(cli.UsageError, match="no bug mode 'nosuch@1'"):
        spec_of("sds", "--bug", "nosuch@1")
    with pytest.raises(cli.UsageError, match="give a PROTOCOL"):
        spec_of()


@pytest.mark.parametrize("extra", [(), ("--node-command", "./my node '{config}'")])
def test_the_explicit_command_line_builds_the_same_spec(extra):
    spec = spec_of("garlicfarm", "--nodes", "3", "--seed", "7", "--nemesis", "clock,kill",
                   "--nemesis-interval", "0.5", "--bug", "forget-vote", "--time-limit", "2.5",
                   *extra)
    cmd = command_line(stored(spec))
    assert cmd.not_expressible == []
    assert cmd.argv[:2] == ["harness", "run"]
    assert spec_of(*cmd.argv[2:]) == spec
    assert cmd.text.startswith("harness run garlicfarm --nodes 3 --concurrency 3 --time-limit 2.5"
                               " --nemesis clock,kill --nemesis-interval 0.5 --seed 7")


def test_what_cannot_be_replayed_says_why():
    spec = spec_of("garlicfarm", "--seed", "1")
    rec = stored(spec)
    with pytest.raises(ReplayError, match="built in code"):
        spec_from_record({**rec, "nemesis": "custom", "faults": None})
    # a named nemesis given instead of the generator makes it replayable
    assert spec_from_record({**rec, "nemesis": "custom", "faults": None},
                            {"nemesis": "kill"}).faults == Faults("kill", 5.0)
    with pytest.raises(ReplayError, match="workload was built in code"):
        spec_from_record({**rec, "workload": "custom"})
    with pytest.raises(ReplayError, match="no protocol"):
        spec_from_record({**rec, "protocol": None})
    with pytest.raises(ReplayError, match="no 'seed'"):
        spec_from_record({k: v for k, v in rec.items() if k != "seed"})
    with pytest.raises(ValueError, match="available"):
        spec_from_record({**rec, "protocol": "nosuch"})


def test_a_record_from_before_the_fault_interval_was_stored_uses_the_cli_defaults():
    spec = spec_of("garlicfarm", "--seed", "4", "--nemesis", "kill")
    old = {k: v for k, v in stored(spec).items() if k not in ("faults", "quiesce_s", "store")}
    back = spec_from_record(old)
    assert back.faults == Faults("kill", 5.0) and back.quiesce_s == 3.0 and back.seed == 4


def test_a_named_topology_runs_replays_and_is_written_back_as_its_name():
    from nodes.drip.topology import ring

    spec = spec_of("drip", "--topology", "ring", "--nodes", "5", "--seed", "3")
    assert spec.edges() == ring(spec.node_ids) != spec_of("drip").edges()
    back = spec_from_record(stored(spec))
    assert back.describe() == spec.describe()
    cmd = command_line(stored(spec))
    assert cmd.argv[cmd.argv.index("--topology") + 1] == "ring" and not cmd.not_expressible
    assert spec_of(*cmd.argv[2:]).describe() == {**spec.describe()}


@pytest.mark.parametrize("argv,match", [
    (("drip", "--topology", "star"), "no topology 'star'; choose one of: full, figure1"),
    (("swim", "--topology", "ring"), "no topology 'ring'; choose one of: full$"),
])
def test_an_unknown_topology_is_refused_with_the_choices(argv, match):
    with pytest.raises(cli.UsageError, match=match):
        spec_of(*argv)


def test_kill_for_good_on_the_command_line_and_in_the_nemesis_stream():
    from harness.generators import drain

    spec = spec_of("garlicfarm", "--nodes", "3", "--time-limit", "9", "--nemesis", "none",
                   "--kill-for-good", "n2")
    assert spec.kill_for_good == {"n2": 3.0}  # a third of the time limit
    assert spec.describe()["nemesis"] == "kill-for-good"  # the faults checker asks for a kill
    ops = drain(spec.nemesis_stream(), threads=("nemesis",))
    assert [(t, o["value"]) for t, _, o in ops] == [(3.0, {"node": "n2", "for_good": True})]
    assert "--kill-for-good n2@3" in command_line(stored(spec)).text
    for bad, why in [(["--kill-for-good", "n7"], "not nodes of this run"),
                     (["--kill-for-good", "n1@x"], "NODE@SECONDS"),
                     (["--kill-for-good", "n1@30"], "after the run's --time-limit")]:
        with pytest.raises(cli.UsageError, match=why):
            spec_of("garlicfarm", "--nodes", "3", "--time-limit", "9", *bad)


def test_add_member_on_the_command_line_in_the_record_and_the_nemesis_stream(tmp_path):
    """``--add-member n5@4``: n5 beyond --nodes 4, late and unknown to the others, added then
    started half a second later; recorded in test.json, replayed by --from and by the
    explicit command line (issue 23)."""
    from harness.generators import drain

    spec = spec_of("drip", "--nodes", "4", "--time-limit", "15", "--nemesis", "none",
                   "--seed", "3", "--add-member", "n5@4")
    assert (spec.nodes, spec.add_member, spec.concurrency) == (5, {"n5": 4.0}, 4)
    assert spec.options == {"late_nodes": ["n5"], "late_unknown": True}
    ops = drain(spec.nemesis_stream(), threads=("nemesis",))
    assert [(t, o["f"], o["value"]) for t, _, o in ops] == [
        (4.0, "add-member", {"node": "n5"}), (4.5, "join", {"node": "n5"})]
    rec = stored(spec)
    assert rec["add_member"] == {"n5": 4.0}
    assert spec_from_record(rec) == spec
    cmd = command_line(rec)
    assert "--nodes 4 " in cmd.text and "--add-member n5@4" in cmd.text
    assert cmd.not_expressible == []  # the late options are --add-member's own
    assert spec_of(*cmd.argv[2:]) == spec  # the command line builds the same spec
    run = tmp_path / "store" / "drip-registry" / "20260101T000000-abcdef"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps(rec))
    assert spec_of("--from", str(run)).add_member == {"n5": 4.0}
    for extra in (["--add-member", "n6"], ["--nodes", "3"]):
        with pytest.raises(cli.UsageError, match="cannot change a replayed run"):
            spec_of("--from", str(run), *extra)
    # a default time: a third of the time limit; faults drawn over the first members only
    assert spec_of("drip", "--nodes", "3", "--time-limit", "9",
                   "--add-member", "n4").add_member == {"n4": 3.0}


@pytest.mark.parametrize("argv, why", [
    (["garlicfarm", "--nodes", "3", "--add-member", "n4"], "garlicfarm has no add-member op"),
    (["drip", "--nodes", "4", "--add-member", "n3"], r"\['n3'\] clash with nodes of this run"),
    (["drip", "--nodes", "4", "--add-member", "n7"], "name the added nodes n5"),
    (["drip", "--nodes", "4", "--add-member", "n5", "--add-member", "n7"],
     "name the added nodes n5, n6"),
    (["drip", "--nodes", "4", "--add-member", "n5@x"], "--add-member 'n5@x': give NODE"),
    (["drip", "--nodes", "4", "--add-member", "n5@-1"], "must not be negative"),
    (["drip", "--nodes", "4", "--time-limit", "9", "--add-member", "n5@9"],
     "after the run's --time-limit"),
    (["drip", "--nodes", "4", "--add-member", "n5", "--kill-for-good", "n5"],
     "kill for good names first members only"),
    (["drip", "--nodes", "4", "--add-member", "n5", "--topology", "ring"],
     "joins a full mesh"),
])
def test_add_member_refusals_say_why(argv, why):
    with pytest.raises(cli.UsageError, match=why):
        spec_of(*argv)


def test_decommission_after_a_kill_for_good_is_played_recorded_and_replayed():
    from harness.generators import drain

    spec = spec_of("drip", "--nodes", "4", "--time-limit", "12", "--nemesis", "none",
                   "--kill-for-good", "n4@3", "--decommission", "n4")
    assert spec.decommission == {"n4": 8.0}  # two thirds of the time limit
    ops = drain(spec.nemesis_stream(), threads=("nemesis",))
    assert [(t, o["f"]) for t, _, o in ops] == [(3.0, "kill"), (8.0, "decommission")]
    rec = stored(spec)
    assert rec["decommission"] == {"n4": 8.0} and spec_from_record(rec) == spec
    cmd = command_line(rec)
    assert "--decommission n4@8" in cmd.text and spec_of(*cmd.argv[2:]) == spec
    for bad, why in [(["--decommission", "n3"], "decommission a node this run kills for good"),
                     (["--kill-for-good", "n3@5", "--decommission", "n3@4"],
                      "after its kill for good at 5s"),
                     (["--kill-for-good", "n3@5", "--decommission", "n3@12"],
                      "before --time-limit 12s")]:
        with pytest.raises(cli.UsageError, match=why):
            spec_of("drip", "--nodes", "4", "--time-limit", "12", *bad)
    with pytest.raises(cli.UsageError, match="garlicfarm has no membership op"):
        spec_of("garlicfarm", "--kill-for-good", "n1@2", "--decommission", "n1")
