"""bench_sim's speed benches: every protocol's load really runs (the bench refuses a figure
when it did not), and an unknown protocol is a usage error naming the choices."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import bench_sim

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("name", ["drip", "antacid"])
def test_the_load_commits_and_is_counted(name: str) -> None:
    took, done = bench_sim.BENCHES[name](2.0, 0.02, 1)
    assert done >= 90  # 100 client ops in 2 simulated seconds, each decided
    assert took.wall > 0 and took.cpu > 0


def test_an_unknown_protocol_is_refused_with_the_choices() -> None:
    p = subprocess.run([sys.executable, "-m", "bench.bench_sim", "--only", "nope"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "invalid choice: 'nope'" in p.stderr and "antacid" in p.stderr and "drip" in p.stderr

