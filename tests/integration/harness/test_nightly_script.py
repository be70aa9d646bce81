"""``scripts/nightly`` end to end, on a probe suite that fails with one seed only: a night
prints and plays its seed, a failure is retried first the next night with the seed it failed
with, kept while it fails and dropped once it passes; every night is a line of nights.jsonl.
The chaos runs and the Spark report are left out (``--no-report``; a probe test runs no
cluster), so three nights take seconds; the real suite's nights are in docs/nightly.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = '''
import os

import pytest


@pytest.mark.chaos
def test_fails_with_a_bad_seed(chaos_seed):
    assert str(chaos_seed) not in os.environ["PROBE_BAD_SEEDS"].split(",")


@pytest.mark.chaos
def test_passes(chaos_seed):
    print("seed", chaos_seed)
'''


def night(tmp: Path, bad: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "HARNESS_STORE": str(tmp / "store"), "PROBE_BAD_SEEDS": bad,
           "NIGHTLY_SKIP_BACKEND_SETUP": "1"}
    env.pop("NIGHTLY_SEED", None)
    p = subprocess.run([str(ROOT / "scripts/nightly"), "--no-report", *args,
                        "--rootdir", str(tmp / "probe"), "-p", "no:cacheprovider",
                        str(tmp / "probe" / "test_probe.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def retries(tmp: Path) -> list[dict]:
    return json.loads((tmp / "store/_nightly/retry-seeds.json").read_text())["tests"]


def test_a_failing_seed_is_retried_first_the_next_night_until_it_passes(tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "pytest.ini").write_text("[pytest]\n")
    (probe / "test_probe.py").write_text(PROBE)

    rc, out = night(tmp_path, "111", "--seed", "111")
    assert rc == 1, out
    assert "night " in out and "seed 111 (replay it: scripts/nightly --seed 111" in out, out
    assert "retrying" not in out  # nothing to retry on the first night
    assert [(r["nodeid"], r["seed"]) for r in retries(tmp_path)] == [
        ("test_probe.py::test_fails_with_a_bad_seed", 111)], out

    rc, out = night(tmp_path, "111", "--seed", "222")
    assert rc == 1, out  # the retry with seed 111 failed again
    assert "retrying the failures of earlier nights first" in out, out
    assert "still failing: test_probe.py::test_fails_with_a_bad_seed (seed 111" in out, out
    assert [r["seed"] for r in retries(tmp_path)] == [111]

    rc, out = night(tmp_path, "none")  # fixed; the night picks its own seed
    assert rc == 0, out
    assert "fixed: test_probe.py::test_fails_with_a_bad_seed (seed 111 passed)" in out, out
    assert retries(tmp_path) == []
    seed3 = int(re.search(r"night \S+: seed (\d+)", out).group(1))
    nights = [json.loads(x) for x in
              (tmp_path / "store/_nightly/nights.jsonl").read_text().splitlines()]
    assert [n["seed"] for n in nights] == [111, 222, seed3]
    assert [n["chaos_rc"] for n in nights] == [1, 0, 0]
    assert [n["retry_rc"] for n in nights] == ["-", "1", "0"]
    # the night session's JUnit XML is where the workflow uploads it from
    junit = (tmp_path / "store/_chaos-junit.xml").read_text()
    assert "test_passes" in junit


def test_a_bad_seed_is_refused_before_anything_runs(tmp_path):
    p = subprocess.run([str(ROOT / "scripts/nightly"), "--seed", "zero", "--no-report"],
                       cwd=ROOT, env={**os.environ, "HARNESS_STORE": str(tmp_path / "s"),
                                      "NIGHTLY_SKIP_BACKEND_SETUP": "1"},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 254
    assert "is not a seed" in p.stderr
    assert not (tmp_path / "s/_chaos-junit.xml").exists()
