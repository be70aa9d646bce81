"""Shared helpers for the backend tests: leftovers by label, waiting, sshd present, a run to
interrupt."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness.backends.docker import LABEL_RUN_DIR

__all__ = ["docker_leftovers", "eventually", "interrupt_a_run", "sshd_available"]

ROOT = Path(__file__).resolve().parents[3]


def sshd_available() -> bool:
    return Path("/usr/sbin/sshd").exists() and shutil.which("ssh-keygen") is not None


def docker_leftovers(client: Any, run_dir: Path | str) -> list[str]:
    """Containers, volumes and networks labelled with this run dir (should be none)."""
    filt = {"label": f"{LABEL_RUN_DIR}={run_dir}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=filt)]
            + [f"volume {v.name}" for v in client.volumes.list(filters=filt)]
            + [f"network {n.name}" for n in client.networks.list(filters=filt)])


async def eventually(pred: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await pred():
                return True
        except Exception:
            pass
        await asyncio.sleep(0.1)
    return False


def interrupt_a_run(store: Path, backend: str, running: Callable[[Path], bool],
                    gone: Callable[[Path], bool]) -> None:
    """Start a 3-node echo run on ``backend`` in a child process, wait until it records
    history and ``running(run_dir)`` holds, send it SIGINT (Ctrl-C), and check that
    ``gone(run_dir)`` holds after it exits and that the run is marked as not finished."""
    code = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.integration.harness.test_cluster import ECHO
from harness.runner import run
from harness.spec import TestSpec
print("go", flush=True)
run(TestSpec(name="ctrlc", protocol=ECHO, nodes=3, seed=2, store={str(store)!r},
             time_limit=60, backend={backend!r}))
"""
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "go"
        deadline = time.monotonic() + 60
        rd = None
        while time.monotonic() < deadline and p.poll() is None:
            runs = list((store / "ctrlc").glob("*/history.jsonl"))
            if runs and runs[0].stat().st_size > 200:
                rd = runs[0].parent
                break
            time.sleep(0.1)
        assert rd is not None, (p.stderr.read() if p.stderr and p.poll() is not None
                                else "run did not start")
        assert running(rd), "the run's nodes were not there to clean up"
        os.kill(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        assert gone(rd)
        assert json.loads((rd / "test.json").read_text())["status"] in ("failed", "interrupted")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
