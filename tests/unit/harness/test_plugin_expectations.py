"""The chaos plugin's expectations: what a correct-node run must show, what a bug-mode run and
its correct-node control must show. Pure checks on hand-made Result trees, then ``chaos_run``
itself through pytester on in-process runs (the real runner, no cluster)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from checkers.result import Anomaly, Result, compose
from harness.pytest_plugin import (
    caught_shortfalls,
    control_shortfalls,
    correct_run_shortfalls,
    ok_client_ops,
    vacuous_true_leaves,
)

pytest_plugins = ["pytester"]


def leaf(name: str, valid: Any = True, *, anomalies: list[Anomaly] | None = None,
         note: str = "", **examined: int) -> Result:
    return Result(name, valid, anomalies or [], note=note, examined=dict(examined))


def run_tree(*, faults: Any = True, vote: Result | None = None, stats: Result | None = None
             ) -> Result:
    """A Garlic Farm-shaped tree: history, linearizable, raft.{vote-safety,log-matching},
    stats, faults."""
    raft = compose("raft", [vote or leaf("vote-safety", votes=12),
                            leaf("log-matching", entries=40)])
    parts = [leaf("history", ops=200), leaf("linearizable", ops=90, keys=3), raft,
             stats or leaf("stats", invocations=100, ok_read=50, ok_write=30)]
    if faults is not None:
        parts.append(leaf("faults", faults, requested_kinds=2, faults_applied=3 if faults is True
                          else 0, faults_failed=0,
                          note="" if faults is True else "kill: never applied (2 attempts "
                                                        "failed, first: kill: no leader)"))
    return compose("all", parts)


# ---------------------------------------------------------------- correct-node runs

def test_a_valid_run_with_ops_applied_faults_and_evidence_passes() -> None:
    assert correct_run_shortfalls(run_tree(), ok_ops=80, min_ok=50, nemesis=True) == []


def test_too_few_ok_ops_fail_with_both_numbers() -> None:
    (p,) = correct_run_shortfalls(run_tree(), ok_ops=7, min_ok=50, nemesis=True)
    assert "7 client ops completed ok" in p and "at least 50" in p


def test_a_requested_fault_never_applied_fails_with_the_faults_leafs_reason() -> None:
    problems = correct_run_shortfalls(run_tree(faults="unknown"), ok_ops=80, min_ok=1,
                                      nemesis=True)
    assert "the run is valid=unknown, expected True" in problems
    assert any(p.startswith("faults: valid=unknown") and "no leader" in p for p in problems)


def test_a_run_with_a_nemesis_must_have_a_faults_leaf() -> None:
    (p,) = correct_run_shortfalls(run_tree(faults=None), ok_ops=80, min_ok=1, nemesis=True)
    assert "no faults leaf" in p
    assert correct_run_shortfalls(run_tree(faults=None), ok_ops=80, min_ok=1, nemesis=False) == []


def test_a_true_leaf_that_examined_nothing_is_named() -> None:
    tree = run_tree(vote=leaf("vote-safety", votes=0))
    assert correct_run_shortfalls(tree, ok_ops=80, min_ok=1, nemesis=True) == [
        "raft.vote-safety is True but examined nothing (votes=0)"]
    tree = run_tree(vote=leaf("vote-safety"))
    assert vacuous_true_leaves(tree) == ["raft.vote-safety is True but examined nothing (no counts)"]


def test_a_zero_count_beside_a_non_zero_one_is_information_not_vacuity() -> None:
    # faults_failed=0 in the faults leaf; an unknown or False leaf is judged elsewhere
    tree = compose("all", [leaf("faults", requested_kinds=1, faults_applied=2, faults_failed=0),
                           leaf("append", "unknown", note="nothing to judge: appends=0")])
    assert vacuous_true_leaves(tree) == []


def test_ok_client_ops_counts_client_completions_only() -> None:
    ops = [{"process": 0, "type": "invoke"}, {"process": 0, "type": "ok"},
           {"process": 1, "type": "fail"}, {"process": 2, "type": "info"},
           {"process": "nemesis", "type": "info"}, {"process": "nemesis", "type": "ok"}]
    assert ok_client_ops(ops) == 1


def test_ok_client_ops_leave_out_the_final_reads() -> None:
    """A minimum of ok ops is about the run's work: final reads after it do not count."""
    ops = [{"process": 0, "type": "ok", "f": "update", "time": 1_000_000_000},
           *({"process": p, "type": "ok", "f": "read", "time": 9_000_000_000} for p in range(50))]
    assert ok_client_ops(ops, before_s=8.0) == 1
    assert ok_client_ops(ops) == 51


# ---------------------------------------------------------------- bug-mode runs

def vote_violation() -> Result:
    return leaf("vote-safety", False, votes=12, anomalies=[
        Anomaly("double-vote", "n2 voted for n1 and n3 in term 4")])


def test_the_named_leaf_invalid_is_a_catch() -> None:
    assert caught_shortfalls(run_tree(vote=vote_violation()), "raft.vote-safety") == []
    assert caught_shortfalls(run_tree(vote=vote_violation()), "raft.vote-safety",
                             "double-vote") == []


def test_the_named_leaf_valid_is_no_catch() -> None:
    (p,) = caught_shortfalls(run_tree(), "raft.vote-safety")
    assert p == "expected raft.vote-safety to be invalid, got valid=True"


def test_another_leaf_invalid_does_not_count() -> None:
    tree = run_tree()
    tree.children[1] = leaf("linearizable", False, ops=9,
                            anomalies=[Anomaly("nonlinearizable", "read 3 after write 4")])
    assert caught_shortfalls(tree, "raft.vote-safety") != []


def test_a_composite_is_refused_with_its_leaves() -> None:
    (p,) = caught_shortfalls(run_tree(vote=vote_violation()), "raft")
    assert "'raft' is a composite, not a leaf" in p
    assert "raft.vote-safety, raft.log-matching" in p


def test_an_unknown_path_lists_the_leaves() -> None:
    (p,) = caught_shortfalls(run_tree(), "raft.vote-safty")
    assert "no checker 'raft.vote-safty'" in p and "raft.vote-safety" in p


def test_the_anomaly_kind_must_match_when_named() -> None:
    (p,) = caught_shortfalls(run_tree(vote=vote_violation()), "raft.vote-safety", "lost-vote")
    assert "['double-vote'], not 'lost-vote'" in p


def test_an_invalid_leaf_without_a_witness_is_no_catch() -> None:
    (p,) = caught_shortfalls(run_tree(vote=leaf("vote-safety", False, votes=1)),
                             "raft.vote-safety")
    assert "without a witness" in p
    # a threshold leaf (membership.dissemination) explains itself in its note
    assert caught_shortfalls(run_tree(vote=leaf("vote-safety", False, votes=1, note="slow")),
                             "raft.vote-safety") == []


def test_the_control_must_clear_the_leaf_with_evidence_ops_and_faults() -> None:
    ok = dict(ok_ops=80, min_ok=10, nemesis=True)
    assert control_shortfalls(run_tree(), "raft.vote-safety", **ok) == []
    (p,) = control_shortfalls(run_tree(vote=vote_violation()), "raft.vote-safety", **ok)
    assert "correct node has raft.vote-safety valid=False" in p and "flags this schedule" in p
    (p,) = control_shortfalls(run_tree(vote=leaf("vote-safety", votes=0)), "raft.vote-safety",
                              **ok)
    assert "examined nothing (votes=0)" in p
    (p,) = control_shortfalls(run_tree(faults="unknown"), "raft.vote-safety", **ok)
    assert p.startswith("faults: valid=unknown")
    (p,) = control_shortfalls(run_tree(), "raft.vote-safety", ok_ops=3, min_ok=10, nemesis=True)
    assert "3 client ops completed ok" in p


def test_the_control_does_not_need_other_leaves_valid() -> None:
    tree = run_tree()
    tree.children[1] = leaf("linearizable", "unknown", note="budget", ops=9)
    assert control_shortfalls(tree, "raft.vote-safety", ok_ops=80, min_ok=1, nemesis=True) == []


# ---------------------------------------------------------------- chaos_run itself

INNER = '''
from checkers.result import Anomaly, Result, compose
from harness import generators as g
from harness.spec import TestSpec, Workload

class Ok:
    node = None
    def __init__(self, addr, process):
        pass
    async def invoke(self, op):
        return {"type": "ok"}
    async def close(self):
        pass

def demo(test, history, obs):
    bugged = "lose" in test["bugs"]
    n = sum(o["type"] == "ok" for o in history)
    caught = Result("caught", not bugged, [Anomaly("lost", "the bug lost it")] if bugged else [],
                    examined={"ops": n})
    always = Result("always", False, [Anomaly("noise", "flags any run")], examined={"ops": n})
    return compose("demo", [caught, always, Result("empty", True, examined={"ops": 0})])

def build(bugs=(), seed=5, ops=10):
    wl = Workload(client=Ok, generator=lambda s: g.limit(ops, g.repeat({"f": "read"})),
                  checkers={"demo": demo})
    return TestSpec(name="demo", workload=wl, concurrency=2, seed=seed, time_limit=5,
                    bugs=list(bugs))

def test_caught_with_control(chaos_run, chaos_store):
    before = set(chaos_store.glob("demo-control/*/results.json"))
    res = chaos_run(lambda: build(["lose"]), expect="demo.caught", anomaly="lost", min_ok=10)
    assert res.result.find("demo.caught").valid is False
    assert res.run_dir.path.parent.parent == chaos_store.resolve()
    assert len(set(chaos_store.glob("demo-control/*/results.json")) - before) == 1

def test_wrong_anomaly_kind(chaos_run):
    chaos_run(lambda: build(["lose"]), expect="demo.caught", anomaly="duplicated")

def test_leaf_that_flags_any_schedule(chaos_run):
    chaos_run(lambda: build(["lose"]), expect="demo.always")

def test_composite(chaos_run):
    chaos_run(lambda: build(["lose"]), expect="demo")

def test_control_with_too_few_ops(chaos_run):
    chaos_run(lambda: build(["lose"]), expect="demo.caught", min_ok=11)

def test_spec_instead_of_factory(chaos_run):
    chaos_run(build(["lose"]), expect="demo.caught")

def test_factory_without_a_fixed_seed(chaos_run):
    import itertools
    seeds = itertools.count(1)
    chaos_run(lambda: build(["lose"], seed=next(seeds)), expect="demo.caught")

def test_no_bug_turned_on(chaos_run):
    chaos_run(lambda: build(), expect="demo.caught")

def test_correct_run_is_held_to_every_leaf(chaos_run):
    chaos_run(build(), min_ok=5)
'''


#: each failing inner test and what its failure must say
FAILS = {
    "test_wrong_anomaly_kind": "with anomalies ['lost'], not 'duplicated'",
    "test_leaf_that_flags_any_schedule": "the correct node has demo.always valid=False",
    "test_composite": "'demo' is a composite, not a leaf",
    "test_control_with_too_few_ops": "10 client ops completed ok, the test demands at least 11",
    "test_spec_instead_of_factory": "needs a spec factory",
    "test_factory_without_a_fixed_seed": "give the builder a fixed seed",
    "test_no_bug_turned_on": "turns on no bug mode",
    "test_correct_run_is_held_to_every_leaf": "demo.empty is True but examined nothing (ops=0)",
}


def failure_sections(out: str) -> dict[str, str]:
    """Each failed test's report section, by test name."""
    parts = re.split(r"\n_{3,} (test_\w+) _{3,}\n", out)
    return {name: body for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_chaos_run_runs_the_bug_then_the_control_and_fails_saying_why(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    store = pytester.path / "nightly-store"
    res = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                             f"--chaos-store={store}", "--junitxml=junit.xml")
    res.assert_outcomes(passed=1, failed=len(FAILS))
    sections = failure_sections(res.stdout.str())
    assert set(sections) == set(FAILS)
    wrong = {t: sections[t][-1500:] for t, m in FAILS.items() if m not in sections[t]}
    assert not wrong, wrong
    # every run went into the session's store, where `harness report --store` finds it
    runs = sorted(store.glob("*/*/results.json"))
    assert {r.parent.parent.name for r in runs} == {"demo", "demo-control"}
    # each test that ran something has its seed and run dirs as JUnit properties ...
    junit = (pytester.path / "junit.xml").read_text()
    props = re.findall(r'<property name="(seed|run_dir)" value="([^"]*)"', junit)
    assert ("seed", "5") in props
    assert {v for k, v in props if k == "run_dir"} == {str(r.parent) for r in runs}
    # ... and the summary names the run dirs of the failed ones
    out = res.stdout.str()
    summary = out[out.index("chaos run dirs of the failed tests"):]
    assert "test_inner.py::test_composite: " + str(store.resolve()) in summary
    assert "test_caught_with_control" not in summary
    assert f"store {store}" in out  # the header line


def test_the_store_comes_from_option_then_ini_then_environment_then_default(tmp_path) -> None:
    from harness.pytest_plugin import resolve_store

    assert resolve_store("o", "i", "e", tmp_path) == tmp_path / "o"
    assert resolve_store(None, "i", "e", tmp_path) == tmp_path / "i"
    assert resolve_store(None, "", "e", tmp_path) == tmp_path / "e"
    assert resolve_store(None, "", None, tmp_path) == tmp_path / "store"
    assert resolve_store("/abs/s", "i", "e", tmp_path) == tmp_path.joinpath("/abs/s")


SELECTION = '''
import pytest

@pytest.mark.chaos
def test_chaos():
    pass

def test_plain():
    pass
'''


@pytest.mark.parametrize("args, passed, message", [
    ((), 1, True),                      # a plain run leaves the chaos test out, and says so
    (("--chaos",), 2, False),
    (("-m", "chaos"), 1, False),
    (("-m", "not chaos"), 1, False),
    (("test_sel.py",), 2, False),       # the file named on the command line
    (("test_sel.py::test_chaos",), 1, False),
])
def test_chaos_tests_run_only_when_selected(pytester: pytest.Pytester, args: tuple[str, ...],
                                            passed: int, message: bool) -> None:
    pytester.makepyfile(test_sel=SELECTION)
    res = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)
    res.assert_outcomes(passed=passed)
    said = "1 chaos tests not selected: run them with -m chaos or --chaos" in res.stdout.str()
    assert said is message


def test_the_backend_is_validated_at_start_from_option_ini_or_environment(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_b="def test_b(chaos_options):\n    print('BACKEND', chaos_options.backend)\n")
    res = pytester.runpytest("-p", "no:randomly", "-s", "--chaos-backend", "ssh")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*BACKEND ssh*"])
    res = pytester.runpytest("-p", "no:randomly", "--chaos-backend", "moon")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    monkeypatch.setenv("HARNESS_BACKEND", "moon")
    res = pytester.runpytest("-p", "no:randomly")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*chaos backend 'moon' (from $HARNESS_BACKEND)*choose one of*local*"])
    monkeypatch.setenv("HARNESS_BACKEND", "docker")
    pytester.makeini("[pytest]\nchaos_backend = ssh\n")
    res = pytester.runpytest("-p", "no:randomly", "-s")
    res.stdout.fnmatch_lines(["*BACKEND ssh*"])  # the ini setting before the environment
    pytester.makeini("[pytest]\nchaos_backend = moon\n")
    res = pytester.runpytest("-p", "no:randomly")
    res.stderr.fnmatch_lines(["*chaos backend 'moon' (from the chaos_backend ini setting)*"])


SHARED = '''
import json, urllib.request

URLS = []

def test_one(chaos_toxiproxy):
    URLS.append(chaos_toxiproxy)

def test_two(chaos_toxiproxy):
    URLS.append(chaos_toxiproxy)
    assert URLS[0] == URLS[1]
    with urllib.request.urlopen(chaos_toxiproxy + "/version", timeout=2) as r:
        assert r.status == 200
'''


def test_the_session_shares_one_toxiproxy_server_and_stops_it(pytester: pytest.Pytester
                                                               ) -> None:
    import urllib.error
    import urllib.request

    pytester.makepyfile(test_shared=SHARED + "\ndef test_three():\n    print('URL', URLS[0])\n")
    res = pytester.runpytest_subprocess("-p", "no:randomly", "-s")
    res.assert_outcomes(passed=3)
    url = re.search(r"URL (http://\S+)", res.stdout.str()).group(1)
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(url + "/version", timeout=1)  # gone with the session
