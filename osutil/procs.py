"""Helper processes (toxiproxy-server, the UDP relay) that can never outlive the harness.

Three layers of cleanup, because a leaked proxy process keeps ports open and poisons later runs:
the owner's context manager / ``stop``; an ``atexit`` hook for a normal interpreter exit; and
Linux's ``PR_SET_PDEATHSIG`` so the kernel SIGKILLs the child if the harness itself dies from a
signal (even SIGKILL). The death signal fires when the *thread* that spawned the child exits, so
spawn from the main thread or another long-lived thread (not ``asyncio.to_thread``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

_PR_SET_PDEATHSIG = 1
try:
    # Resolved here, before any fork: the child only makes the call.
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: atexit and the owner still clean up
    _prctl = None


def die_with_parent() -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_live: set[subprocess.Popen[Any]] = set()


def spawn(argv: Sequence[str], stdout: IO[Any] | int | None = None,
          stderr: IO[Any] | int | None = None, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[Any]:
    """Start a child that dies with us; ``stop`` it when done."""
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
        cwd=cwd, preexec_fn=die_with_parent, close_fds=True,
    )
    _live.add(proc)
    return proc


def stop(proc: subprocess.Popen[Any], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; reaps the child. Idempotent."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _live.discard(proc)


@atexit.register
def stop_all() -> None:
    """Stop every child still alive (runs at interpreter exit)."""
    for proc in list(_live):
        stop(proc, grace_s=0.5)


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (where PID 1 does not reap, orphans stay Z)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True
