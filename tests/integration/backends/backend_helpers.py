"""Shared helpers for the backend tests: leftovers by label, waiting, sshd present."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness.backends.docker import LABEL_RUN_DIR

__all__ = ["docker_leftovers", "eventually", "sshd_available"]


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
