"""Shared helpers for the backend tests: leftovers by label, sshd present."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from harness.backends.docker import LABEL_RUN_DIR

__all__ = ["docker_leftovers", "sshd_available"]

ROOT = Path(__file__).resolve().parents[3]


def sshd_available() -> bool:
    return Path("/usr/sbin/sshd").exists() and shutil.which("ssh-keygen") is not None


def docker_leftovers(client: Any, run_dir: Path | str) -> list[str]:
    """Containers, volumes and networks labelled with this run dir (should be none)."""
    filt = {"label": f"{LABEL_RUN_DIR}={run_dir}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=filt)]
            + [f"volume {v.name}" for v in client.volumes.list(filters=filt)]
            + [f"network {n.name}" for n in client.networks.list(filters=filt)])
