"""``--chaos-seed`` reseeds fault schedules: a spec's named faults are drawn from the seed the
spec has when its run starts, so the plugin's reseeding (and ``harness run --seed``) replays
the schedule; the same seed gives the same schedule, another seed another one."""

from __future__ import annotations

import random

import pytest

from harness.generators import Context, Generator, Pending
from harness.nemesis_generator import Faults
from harness.pytest_plugin import ChaosOptions
from harness.spec import TestSpec
from harness.suites.garlicfarm import PROTOCOL

pytest_plugins = ["pytester"]


def schedule(gen: Generator | None, n: int = 12) -> list[tuple[float, str, object]]:
    """The first ``n`` fault ops and when they are due, asking as the runner does."""
    assert gen is not None
    rng, t, out = random.Random(0), 0.0, []
    while len(out) < n:
        o = gen.op(Context(t, "nemesis", "nemesis", ("nemesis",), rng))
        if o is None:
            break
        if isinstance(o, Pending):
            assert o.until is not None and o.until > t
            t = o.until
            continue
        out.append((round(t, 6), o["f"], o.get("value")))
    return out


def spec(seed: int) -> TestSpec:
    return TestSpec(name="s", protocol=PROTOCOL, nodes=5, seed=seed,
                    faults=Faults("partition,kill,pause", 2.0))


def test_the_same_seed_gives_the_same_fault_schedule_and_another_seed_another() -> None:
    a, b = schedule(spec(42).nemesis_stream()), schedule(spec(42).nemesis_stream())
    assert len(a) == 12 and a == b
    assert schedule(spec(43).nemesis_stream()) != a


def test_chaos_seed_reseeds_the_schedule_of_a_spec_written_with_another_seed() -> None:
    written = spec(1)
    ChaosOptions("local", None, 42, None).apply(written)
    assert written.seed == 42
    assert schedule(written.nemesis_stream()) == schedule(spec(42).nemesis_stream())
    assert schedule(written.nemesis_stream()) != schedule(spec(1).nemesis_stream())


def test_faults_describe_the_run_and_exclude_a_built_nemesis() -> None:
    s = spec(5)
    assert s.describe()["nemesis"] == "partition,kill,pause"
    assert TestSpec(name="n", faults=Faults("none")).nemesis_stream() is None
    with pytest.raises(ValueError, match="not both"):
        TestSpec(name="x", faults=Faults("kill"), nemesis=spec(1).nemesis_stream())

SEEDS = """
def test_a(chaos_seed):
    print("SEED-A", chaos_seed)

def test_b(chaos_seed):
    print("SEED-B", chaos_seed)
"""


def _seeds(result: pytest.RunResult) -> dict[str, int]:
    out = {}
    for line in result.outlines:
        for name in ("SEED-A", "SEED-B"):
            if name in line:
                out[name] = int(line.split(name)[1].split()[0])
    return out


def test_the_seed_fixture_is_the_option_or_a_fixed_seed_per_test(pytester: pytest.Pytester
                                                                 ) -> None:
    pytester.makepyfile(test_inner=SEEDS)
    first = _seeds(pytester.runpytest("-s", "-p", "no:randomly"))
    again = _seeds(pytester.runpytest("-s", "-p", "no:randomly"))
    assert len(first) == 2 and first == again and first["SEED-A"] != first["SEED-B"]
    forced = _seeds(pytester.runpytest("-s", "-p", "no:randomly", "--chaos-seed", "42"))
    assert forced == {"SEED-A": 42, "SEED-B": 42}
