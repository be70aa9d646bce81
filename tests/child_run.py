"""A 3-node echo run in a child process, for tests of what a harness leaves behind when it is
interrupted (Ctrl-C) or killed outright (kill -9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.waiting import until

ROOT = Path(__file__).resolve().parents[1]


def start_echo_run(store: Path, name: str, backend: str) -> subprocess.Popen[str]:
    code = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.integration.harness.test_cluster import ECHO
from harness.runner import run
from harness.spec import TestSpec
run(TestSpec(name={name!r}, protocol=ECHO, nodes=3, seed=2, store={str(store)!r},
             time_limit=60, backend={backend!r}))
"""
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def recording(p: subprocess.Popen[str], tree: Path, timeout: float = 60) -> Path:
    """The run dir under ``tree`` once its history has ops in it (the nodes are up)."""
    def started() -> bool:
        return p.poll() is not None or any(h.stat().st_size > 200 for h in tree.glob("*/history.jsonl"))

    until(started, timeout, 0.1)
    runs = [h.parent for h in tree.glob("*/history.jsonl") if h.stat().st_size > 200]
    if not runs:
        p.kill()
        raise AssertionError(f"run did not start: {p.stderr.read() if p.stderr else ''}")
    return runs[0]


def kill9_a_run(store: Path, backend: str) -> Path:
    """Start a run, SIGKILL its harness once it records, and return the run dir."""
    p = start_echo_run(store, "k9", backend)
    rd = recording(p, store / "k9")
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    return rd


def interrupt_a_run(store: Path, backend: str, running: Callable[[Path], bool],
                    gone: Callable[[Path], bool]) -> None:
    """Start a run, wait until it records and ``running(run_dir)`` holds, send it SIGINT
    (Ctrl-C), and check that ``gone(run_dir)`` holds after it exits and that test.json says
    ``status: interrupted``."""
    p = start_echo_run(store, "ctrlc", backend)
    try:
        rd = recording(p, store / "ctrlc")
        assert running(rd), "the run's nodes were not there to clean up"
        os.kill(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        assert until(lambda: gone(rd), 10), "the run left something behind"
        assert json.loads((rd / "test.json").read_text())["status"] == "interrupted"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
