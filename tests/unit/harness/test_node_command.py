"""``--node-command`` templates, the external node's journal gaps, and the plugin's option."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.observations import load_observations
from checkers.result import Result, compose
from harness.node_command import NodeCommandError, node_argv, parse
from harness.pytest_plugin import correct_run_shortfalls, external_unknowns
from harness.spec import TestSpec

pytest_plugins = ["pytester"]


def test_a_template_becomes_the_nodes_argv() -> None:
    argv = node_argv("{python} -m nodes.garlicfarm --config={config} --name '{id} x'",
                     config=Path("/run/n2/config.json"), node_id="n2")
    assert argv == ["{python}", "-m", "nodes.garlicfarm", "--config=/run/n2/config.json",
                    "--name", "n2 x"]


@pytest.mark.parametrize("template,says", [
    ("", "is empty"),
    ("./mynode", "must pass the node its config"),
    ("./mynode {config} {port}", "names {port}; the placeholders are {config}, {python}, {id}"),
    ("./mynode '{config}", "does not split into words"),
    ("{python}3 {config}", "{python} must be a word of its own"),
    ("./mynode {config} {", "write {{ and }} for literal braces"),
])
def test_a_template_that_cannot_start_a_node_is_refused_with_the_fix(template: str, says: str
                                                                     ) -> None:
    with pytest.raises(NodeCommandError) as e:
        parse(template)
    assert says in str(e.value)


def test_a_spec_refuses_a_bad_template_before_anything_starts() -> None:
    with pytest.raises(NodeCommandError):
        TestSpec(name="t", node_command="./mynode")
    assert TestSpec(name="t", node_command="x {config}").describe()["node_command"] == "x {config}"


def _run_dir(tmp_path: Path) -> Path:
    """A run whose node n1 left neither a journal nor a state dump."""
    (tmp_path / "nodes" / "n1").mkdir(parents=True)
    return tmp_path


def test_a_missing_journal_of_an_external_node_names_the_command(tmp_path: Path) -> None:
    obs = load_observations(_run_dir(tmp_path), "./mynode {config}")
    journal, state = obs["nodes"]["n1"]["missing"]
    assert journal["detail"].startswith("no events.jsonl: an implementation started by "
                                        "--node-command (./mynode {config})")
    assert state["detail"].startswith("no state.json")  # only the journal is excused
    plain = load_observations(tmp_path)  # a reference node's gap stays a gap
    assert plain["nodes"]["n1"]["missing"][0]["detail"] == "no events.jsonl"


def _result(raft_note: str) -> Result:
    return compose("all", [
        Result("linearizable", True, examined={"ops": 10}),
        compose("raft", [Result("election-safety", "unknown", note=raft_note)]),
    ])


def test_an_external_nodes_run_passes_when_only_journal_checks_are_unknown_for_that() -> None:
    excused = _result("evidence is missing: n1: no events.jsonl: an implementation started by "
                      "--node-command (x) ...")
    assert external_unknowns(excused) == ["raft.election-safety"]
    assert correct_run_shortfalls(excused, ok_ops=5, min_ok=1, nemesis=False, external=True) == []
    # the same result from the reference node is not a pass
    assert correct_run_shortfalls(excused, ok_ops=5, min_ok=1, nemesis=False)
    # an unknown for another reason is not excused
    other = _result("evidence is missing: n1: no state.json")
    problems = correct_run_shortfalls(other, ok_ops=5, min_ok=1, nemesis=False, external=True)
    assert problems == ["the run is valid=unknown: raft.election-safety=unknown"]


PLUGIN = "def test_c(chaos_options):\n    print('CMD', chaos_options.node_command)\n"


def test_the_plugin_takes_the_node_command_from_option_ini_or_environment(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_c=PLUGIN)
    res = pytester.runpytest("-p", "no:randomly", "-s", "--chaos-node-command", "./a {config}")
    res.stdout.fnmatch_lines(["*CMD ./a {config}*"])
    monkeypatch.setenv("HARNESS_NODE_COMMAND", "./env {config}")
    res = pytester.runpytest("-p", "no:randomly", "-s")
    res.stdout.fnmatch_lines(["*CMD ./env {config}*"])
    pytester.makeini("[pytest]\nchaos_node_command = ./ini {config}\n")
    res = pytester.runpytest("-p", "no:randomly", "-s")
    res.stdout.fnmatch_lines(["*CMD ./ini {config}*"])  # the ini setting before the environment
    res = pytester.runpytest("-p", "no:randomly", "--chaos-node-command", "./a")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*must pass the node its config*"])
