"""The ``harness`` command line end to end: run, check, ls, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def test_run_check_ls(tmp_path):
    store = str(tmp_path / "store")
    r = harness("run", "garlicfarm", "--nodes", "3", "--time-limit", "4", "--nemesis", "kill",
                "--nemesis-interval", "1.5", "--seed", "7", "--store", store)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "seed 7" in r.stderr and "raft.vote-safety" in r.stderr
    run_dir = (tmp_path / "store" / "latest").resolve()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True and results["seed"] == 7
    test = json.loads((run_dir / "test.json").read_text())
    assert test["status"] == "complete" and test["nemesis"] == "kill"
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(o["process"] == "nemesis" and o["f"] == "kill" for o in ops)

    c = harness("check", str(run_dir))
    assert c.returncode == 0, c.stderr[-3000:]
    ls = harness("ls", "--store", store)
    assert ls.returncode == 0 and "garlicfarm" in ls.stdout and "True" in ls.stdout


def test_errors_say_what_to_do(tmp_path):
    r = harness("run", "nosuch", "--store", str(tmp_path))
    assert r.returncode == 3 and "available: " in r.stderr
    r = harness("run", "garlicfarm", "--nemesis", "meteor", "--store", str(tmp_path))
    assert r.returncode == 3 and "known:" in r.stderr
    r = harness("check", str(tmp_path))
    assert r.returncode == 3 and "harness ls" in r.stderr
