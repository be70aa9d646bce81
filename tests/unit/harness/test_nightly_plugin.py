"""The plugin's side of the nightly: the session time limit (``--chaos-time``, the
``chaos_time`` ini setting, ``$HARNESS_TIME_LIMIT``, in that order, checked), how a spec
takes it, ``min_ok`` scaled to it, and ``--chaos-replay``/``--chaos-outcomes``."""

from __future__ import annotations

import json

import pytest

from faults import schedules as sch
from harness.nemesis_generator import Faults, from_schedule
from harness.pytest_plugin import ChaosOptions, resolve_time, scaled_min_ok
from harness.spec import TestSpec
from harness.suites.garlicfarm import PROTOCOL

pytest_plugins = ["pytester"]


def test_the_time_limit_comes_from_the_option_then_ini_then_env() -> None:
    assert resolve_time("20", "30", "40") == 20
    assert resolve_time(None, "30", "40") == 30
    assert resolve_time(None, "", "40") == 40
    assert resolve_time(None, "", None) is None
    assert resolve_time(None, " ", "") is None


@pytest.mark.parametrize("args,source", [(("0", "", None), "--chaos-time"),
                                         ((None, "soon", None), "chaos_time ini"),
                                         ((None, "", "-5"), r"\$HARNESS_TIME_LIMIT"),
                                         ((None, "", "inf"), r"\$HARNESS_TIME_LIMIT"),
                                         ((None, "", "nan"), r"\$HARNESS_TIME_LIMIT")])
def test_a_bad_time_limit_names_its_source(args: tuple, source: str) -> None:
    with pytest.raises(ValueError, match=f"{source}.*positive number of seconds"):
        resolve_time(*args)


def _faults_spec() -> TestSpec:
    return TestSpec(name="f", protocol=PROTOCOL, faults=Faults("kill", 2.0), time_limit=20)


def _explicit_spec() -> TestSpec:
    steps = sch.explicit([(1.0, sch.op("kill", {"node": "n1"}))])
    return TestSpec(name="e", protocol=PROTOCOL, nemesis=from_schedule(steps),
                    nemesis_desc="explicit", time_limit=13)


def test_named_faults_take_the_session_time_an_explicit_schedule_is_only_lengthened() -> None:
    assert ChaosOptions("local", None, None, 5).apply(_faults_spec()).time_limit == 5
    assert ChaosOptions("local", None, None, 60).apply(_faults_spec()).time_limit == 60
    assert ChaosOptions("local", None, None, 5).apply(_explicit_spec()).time_limit == 13
    assert ChaosOptions("local", None, None, 60).apply(_explicit_spec()).time_limit == 60
    assert ChaosOptions("local", None, None, None).apply(_faults_spec()).time_limit == 20


def test_min_ok_scales_down_with_a_shorter_run_never_up() -> None:
    assert scaled_min_ok(100, 20, 10) == 50
    assert scaled_min_ok(100, 20, 60) == 100
    assert scaled_min_ok(5, 20, 1) == 1
    assert scaled_min_ok(3, 10, 3.4) == 2  # rounded up: never asks less than the share


PROBE = '''
import pytest

@pytest.mark.chaos
def test_a(chaos_seed):
    print("SEED-A", chaos_seed)

@pytest.mark.chaos
@pytest.mark.parametrize("x", [1, 2])
def test_b(chaos_seed, x):
    assert x == 1, chaos_seed
'''


def test_replay_runs_only_the_named_tests_each_with_its_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=PROBE)
    replay = pytester.path / "retry.json"
    replay.write_text(json.dumps({"tests": [{"nodeid": "test_probe.py::test_a", "seed": 17},
                                            {"nodeid": "test_probe.py::test_b[2]", "seed": 23},
                                            {"nodeid": "test_probe.py::test_gone", "seed": 1}]}))
    res = pytester.runpytest("-s", "-p", "no:randomly", "--chaos-replay", str(replay),
                             "--chaos-outcomes", "out.json", "--chaos-seed", "99", "--chaos-no-reap")
    res.assert_outcomes(passed=1, failed=1, deselected=1)
    assert any("SEED-A 17" in line for line in res.outlines)
    res.stdout.fnmatch_lines(["*seeds from*retry.json*",
                              "*--chaos-replay names test_probe.py::test_gone, which was not "
                              "collected*"])
    out = json.loads((pytester.path / "out.json").read_text())
    assert {t["nodeid"]: (t["outcome"], t["seed"]) for t in out["tests"]} == {
        "test_probe.py::test_a": ("passed", 17), "test_probe.py::test_b[2]": ("failed", 23)}
    assert out["missing"] == ["test_probe.py::test_gone"]


def test_outcomes_carry_the_session_seed_and_a_bad_time_fails_the_session(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_probe=PROBE)
    res = pytester.runpytest("-p", "no:randomly", "-m", "chaos", "--chaos-outcomes", "o.json",
                             "--chaos-seed", "5", "--chaos-no-reap")
    res.assert_outcomes(passed=2, failed=1)
    out = json.loads((pytester.path / "o.json").read_text())
    assert {t["seed"] for t in out["tests"]} == {5}
    monkeypatch.setenv("HARNESS_TIME_LIMIT", "soon")
    bad = pytester.runpytest("-p", "no:randomly", "-m", "chaos")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*$HARNESS_TIME_LIMIT='soon'*positive number of seconds*"])
    monkeypatch.setenv("HARNESS_TIME_LIMIT", "7")
    ok = pytester.runpytest("-p", "no:randomly", "-m", "chaos", "--chaos-no-reap")
    ok.stdout.fnmatch_lines(["*time limit 7 s*"])


def test_a_missing_replay_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=PROBE)
    res = pytester.runpytest("-p", "no:randomly", "--chaos-replay", "nope.json")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--chaos-replay nope.json: no such file*"])
