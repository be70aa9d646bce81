"""The embedded default backend: one subprocess per node on 127.0.0.1.

Each node runs in its own process group (so SIGSTOP/SIGKILL reach any children too) and
asks the kernel to SIGKILL it if the harness dies (PR_SET_PDEATHSIG), so even a harness
killed with -9 leaves no node behind. ``close`` and an atexit hook kill whatever is left.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shlex
import signal
import subprocess
import sys
import weakref
from pathlib import Path

from harness.backends.base import BackendError, NodeSpec, copy_local
from osutil.procs import die_with_parent

_live: weakref.WeakSet[LocalBackend] = weakref.WeakSet()


class LocalBackend:
    name = "local"

    def __init__(self, stop_grace_s: float = 3.0) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.specs: dict[str, NodeSpec] = {}
        self.paused: set[str] = set()
        self.stop_grace_s = stop_grace_s
        _live.add(self)

    async def start(self, node: NodeSpec) -> None:
        old = self.procs.get(node.id)
        if old is not None and old.poll() is None:
            raise BackendError(f"{node.id} is already running (pid {old.pid}); kill or stop it first")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(node.log_path, "ab")  # noqa: SIM115 - the child owns it
        env = {**os.environ, **node.env, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable if a == "{python}" else a for a in node.argv]
        try:
            proc = subprocess.Popen(
                argv, cwd=node.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
            )
        except OSError as e:  # a --node-command that names no runnable file, say
            raise BackendError(f"cannot start {node.id} ({shlex.join(argv)}) in {node.cwd}: "
                               f"{e.strerror or e}; check the command's path and that it is "
                               "executable") from None
        finally:
            log.close()
        self.procs[node.id] = proc
        self.specs[node.id] = node
        self.paused.discard(node.id)

    def _proc(self, node_id: str) -> subprocess.Popen[bytes]:
        try:
            return self.procs[node_id]
        except KeyError:
            raise BackendError(f"unknown node {node_id!r}; known: {sorted(self.procs)}") from None

    def _signal(self, node_id: str, sig: int) -> None:
        p = self._proc(node_id)
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    async def kill(self, node_id: str) -> None:
        self._signal(node_id, signal.SIGKILL)
        await asyncio.to_thread(self._proc(node_id).wait)
        self.paused.discard(node_id)

    async def stop(self, node_id: str) -> None:
        p = self._proc(node_id)
        if p.poll() is not None:
            return
        if node_id in self.paused:
            self._signal(node_id, signal.SIGCONT)
            self.paused.discard(node_id)
        self._signal(node_id, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(p.wait), self.stop_grace_s)
        except TimeoutError:
            await self.kill(node_id)

    async def pause(self, node_id: str) -> None:
        self._signal(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    async def resume(self, node_id: str) -> None:
        self._signal(node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def is_running(self, node_id: str) -> bool:
        p = self.procs.get(node_id)
        return p is not None and p.poll() is None

    def pid(self, node_id: str) -> int:
        return self._proc(node_id).pid

    async def fetch(self, node_id: str, name: str, dest: Path) -> bool:
        return copy_local(self.specs[node_id].data_dir / name, dest)

    def kill_all_now(self) -> None:
        """Synchronous and signal-safe enough for atexit: SIGCONT then SIGKILL every group."""
        for p in self.procs.values():
            if p.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    async def close(self) -> None:
        for node_id in list(self.procs):
            await self.stop(node_id)
        self.kill_all_now()


@atexit.register
def _kill_leftovers() -> None:
    for b in list(_live):
        b.kill_all_now()
