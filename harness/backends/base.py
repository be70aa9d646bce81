"""The one interface every backend (local, docker, ssh) gives the runner and the nemesis."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class NodeSpec:
    """Everything a backend needs to run one node; paths are on the control machine."""

    id: str
    argv: list[str]
    config_path: Path
    data_dir: Path
    log_path: Path
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)


class BackendError(RuntimeError):
    pass


class Backend(Protocol):
    name: str

    async def start(self, node: NodeSpec) -> None:
        """Start the node (again, after kill/stop: its data dir is kept)."""

    async def stop(self, node_id: str) -> None:
        """Ask politely (SIGTERM), then SIGKILL after a grace period."""

    async def kill(self, node_id: str) -> None:
        """SIGKILL: no chance to flush anything."""

    async def pause(self, node_id: str) -> None: ...

    async def resume(self, node_id: str) -> None: ...

    def is_running(self, node_id: str) -> bool: ...

    async def fetch(self, node_id: str, name: str, dest: Path) -> bool:
        """Copy ``name`` from the node's data dir to ``dest``; False when it is not there."""

    async def close(self) -> None:
        """Kill everything this backend started. Idempotent; safe in ``finally`` and atexit."""


def copy_local(src: Path, dest: Path) -> bool:
    """Fetch a node file that is on this machine: copy ``src`` to ``dest`` (unless they are
    the same file); False when there is no such file."""
    if not src.exists():
        return False
    if src.resolve() != dest.resolve():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return True
