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
    assert r.returncode == 254 and "available: " in r.stderr
    r = harness("run", "garlicfarm", "--nemesis", "meteor", "--store", str(tmp_path))
    assert r.returncode == 254 and "known:" in r.stderr
    r = harness("check", str(tmp_path))
    assert r.returncode == 254 and "harness ls" in r.stderr


def test_usage_errors_exit_254_and_leave_no_run_dir(tmp_path):
    store = tmp_path / "store"
    for args, says in [(("--time-limit", "-1"), "number >= 0"), (("--nodes", "0"), "positive"),
                       (("--nodes", "-3"), "positive"), (("--concurrency", "0"), "positive"),
                       (("--nemesis-interval", "0"), "positive"), (("--bug", "nosuch"), "forget-vote"),
                       (("--workload", "nosuch"), "append, kv"), (("--backend", "moon"), "choice")]:
        r = harness("run", "garlicfarm", *args, "--store", str(store), timeout=60)
        assert r.returncode == 254, (args, r.returncode, r.stderr[-2000:])
        assert says in r.stderr, (args, r.stderr[-2000:])
    assert not store.exists()
    assert harness("--help").stdout.count("254") == 1 and "255" in harness("run", "--help").stdout


def test_a_run_with_no_time_is_unknown_and_says_why(tmp_path):
    """``--time-limit 0``: only the final reads run, no write ever happens: nothing proved."""
    r = harness("run", "garlicfarm", "--nodes", "3", "--time-limit", "0", "--nemesis", "none",
                "--store", str(tmp_path / "store"))
    assert r.returncode == 2, r.stderr[-3000:]
    assert "nothing to judge" in r.stderr and "unknown" in r.stderr


def test_a_cluster_that_never_elects_a_leader_is_unknown(tmp_path):
    """Election timeouts far past the run: no leader, every op fails, nothing committed."""
    import asyncio

    from harness.protocols import get_protocol
    from harness.runner import run_test
    from harness.spec import TestSpec

    proto = get_protocol("garlicfarm")
    spec = TestSpec(name="no-leader", protocol=proto, nodes=3, time_limit=3, quiesce_s=0.5,
                    nemesis=None, seed=5, store=str(tmp_path / "store"),
                    options={"election_timeout_ms": [600_000, 700_000]})
    res = asyncio.run(run_test(spec))
    assert res.valid == "unknown", res.result.explain()
    stats = res.result.find("stats")
    assert stats is not None and stats.valid == "unknown" and "ok_write=0" in stats.note
