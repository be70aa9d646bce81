"""Real DRiP node processes on loopback, peers wired directly (no proxy): for integration tests
and the bench, independent of the harness's Toxiproxy cluster."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from harness.spec import TestSpec
from harness.suites.drip import PROTOCOL, node_extra
from nodes.common.config import parse_config
from nodes.drip.core import BUGS
from nodes.drip.material import ensure_ca, ensure_jwt_keypair, issue_node_cert
from nodes.drip.records import Item
from nodes.drip.server import DripNode, Extra
from nodes.drip.store import Store
from osutil.ports import free_port

ROOT = Path(__file__).resolve().parents[3]


class Mesh:
    """``n`` nodes with the given undirected edges; ``start``/``close`` bracket their life."""

    def __init__(self, root: Path, n: int, edges: list[tuple[str, str]] | None = None,
                 bugs: list[str] | None = None, options: dict[str, Any] | None = None) -> None:
        self.root = root
        self.spec = TestSpec("mesh", protocol=PROTOCOL, nodes=n, options=dict(options or {}))
        self.ids = self.spec.node_ids
        self.edges = edges if edges is not None else self.spec.edges()
        self.bugs = list(bugs or [])
        self.ports = {i: {"peer": free_port(), "client": free_port(), "admin": free_port()}
                      for i in self.ids}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.configs: dict[str, Path] = {}
        self.extra: dict[str, dict[str, Any]] = {}
        for k, nid in enumerate(self.ids):
            nbrs = sorted({b for a, b in self.edges if a == nid} | {a for a, b in self.edges if b == nid})
            extra = node_extra(self.spec, k, root)
            self.extra[nid] = extra
            cfg = {"id": nid, "num_id": k + 1, "host": "127.0.0.1",
                   "data_dir": str(root / nid / "data"), "ports": self.ports[nid],
                   "peers": {p: {"num_id": self.ids.index(p) + 1,
                                 "peer": f"127.0.0.1:{self.ports[p]['peer']}"} for p in nbrs},
                   "bugs": self.bugs, "seed": k, "options": dict(options or {}), **extra}
            path = root / nid / "config.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cfg, indent=1))
            self.configs[nid] = path

    def configure_new(self, nid: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Configure ``nid``, a node none of the mesh knows (no config of theirs names it), to
        join with every node as its peer; returns what an operator gives
        ``POST /admin/members`` as ``addresses[nid]`` (its address, certificate, JWT key)."""
        tls = self.root / "tls"
        files = issue_node_cert(tls, nid, ensure_ca(tls))
        jwt_cfg = dict(self.extra[self.ids[0]]["jwt"])
        entry: dict[str, Any] = {"cert": files.cert.read_text()}
        if jwt_cfg["mode"] == "public":
            priv, pub = ensure_jwt_keypair(tls, nid)
            jwt_cfg = {**jwt_cfg, "private_key_file": str(priv),
                       "public_keys": {**jwt_cfg["public_keys"], nid: str(pub)}}
            entry["jwt_key"] = pub.read_text()
        self.ports[nid] = {"peer": free_port(), "client": free_port(), "admin": free_port()}
        entry["peer"] = f"127.0.0.1:{self.ports[nid]['peer']}"
        cfg = {"id": nid, "num_id": len(self.ids) + 1, "host": "127.0.0.1",
               "data_dir": str(self.root / nid / "data"), "ports": self.ports[nid],
               "peers": {p: {"num_id": k + 1, "peer": f"127.0.0.1:{self.ports[p]['peer']}"}
                         for k, p in enumerate(self.ids)},
               "bugs": self.bugs, "seed": len(self.ids), "options": dict(options or {}),
               "tls": {"ca": str(files.ca), "cert": str(files.cert), "key": str(files.key)},
               "jwt": jwt_cfg, "mesh_members": [*self.ids, nid]}
        path = self.root / nid / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
        self.configs[nid] = path
        return entry

    def preload(self, nodes: Iterable[str], items: Callable[[], Iterable[Item]],
                chunk: int = 100) -> None:
        """Fill the stores of ``nodes`` (not running) as a sync would, ``chunk`` items per
        transaction from ``items()`` (called once per node: a generator keeps memory bounded)."""
        for nid in nodes:
            (self.root / nid / "data").mkdir(parents=True, exist_ok=True)
            st = Store(self.root / nid / "data" / "drip.sqlite3")
            it = iter(items())
            while batch := list(itertools.islice(it, chunk)):
                st.apply_items(batch)
            st.close()

    def set_options(self, nid: str, **options: Any) -> None:
        """Change node options in ``nid``'s config before it starts (e.g. ``join=True``)."""
        cfg = json.loads(self.configs[nid].read_text())
        cfg["options"].update(options)
        self.configs[nid].write_text(json.dumps(cfg))

    def start_node(self, nid: str) -> None:
        log = open(self.root / nid / "log.txt", "ab")  # noqa: SIM115 - owned by the process
        self.procs[nid] = subprocess.Popen(
            [sys.executable, "-m", "nodes.drip", "--config", str(self.configs[nid])],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    async def start(self) -> None:
        for nid in self.ids:
            self.start_node(nid)
        await asyncio.gather(*(self.wait_healthy(n) for n in self.ids))

    @contextlib.asynccontextmanager
    async def in_process(self, nid: str) -> AsyncIterator[DripNode]:
        """``nid`` run in this process (so a test can reach into it: its store, its
        connections), every other node as a process; yields once all are active, stops it
        on the way out (`close` ends the processes)."""
        raw = json.loads(self.configs[nid].read_text())
        node = DripNode(parse_config(raw, BUGS), Extra.from_raw(raw))
        others = [n for n in self.ids if n != nid]
        for other in others:
            self.start_node(other)
        await node.start()
        try:
            await asyncio.gather(*(self.wait_healthy(n) for n in others))
            async with aiohttp.ClientSession() as s:
                await self.wait_all_active(s)
            yield node
        finally:
            await node.stop()

    async def wait_healthy(self, nid: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as s:
            while time.monotonic() < deadline:
                if self.procs[nid].poll() is not None:
                    raise RuntimeError(f"{nid} exited: {self.log(nid)}")
                try:
                    async with s.get(self.admin(nid) + "/admin/health") as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{nid} not healthy: {self.log(nid)}")

    def log(self, nid: str) -> str:
        p = self.root / nid / "log.txt"
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""

    def admin(self, nid: str) -> str:
        return f"http://127.0.0.1:{self.ports[nid]['admin']}"

    def client(self, nid: str) -> str:
        return f"http://127.0.0.1:{self.ports[nid]['client']}"

    def kill(self, nid: str) -> None:
        p = self.procs[nid]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def pause(self, nid: str) -> None:
        os.kill(self.procs[nid].pid, signal.SIGSTOP)

    def resume(self, nid: str) -> None:
        os.kill(self.procs[nid].pid, signal.SIGCONT)

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()

    async def update(self, s: aiohttp.ClientSession, nid: str, key: str, value: Any, uid: str,
                     timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
        async with s.post(self.client(nid) + "/client/update", json={"id": uid, "key": key,
                                                                     "value": value},
                          timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            return r.status, await r.json()

    async def read(self, s: aiohttp.ClientSession, nid: str, key: str) -> dict[str, Any]:
        async with s.get(self.client(nid) + "/client/read", params={"key": key}) as r:
            return await r.json()

    async def state(self, s: aiohttp.ClientSession, nid: str) -> dict[str, Any]:
        async with s.get(self.admin(nid) + "/admin/state") as r:
            return await r.json()

    async def locks_once_released(self, s: aiohttp.ClientSession,
                                  timeout: float = 10.0) -> dict[str, dict[str, Any]]:
        """Every node's locks, polled until none holds any or ``timeout`` passes: an update
        answers 200 once its commit is durable at the initiator, and its commits reach the
        voters after that, so a voter can still hold the lock for an instant."""
        deadline = time.monotonic() + timeout
        while True:
            locks = {n: (await self.state(s, n))["locks"] for n in self.ids}
            if not any(locks.values()) or time.monotonic() >= deadline:
                return locks
            await asyncio.sleep(0.1)

    async def wait_all_active(self, s: aiohttp.ClientSession, timeout: float = 20.0,
                              nodes: list[str] | None = None) -> None:
        deadline = time.monotonic() + timeout
        nodes = nodes or self.ids
        while time.monotonic() < deadline:
            try:
                sts = [await self.state(s, n) for n in nodes]
                if all(st["state"] == "active" and all(
                        p["up"] for name, p in st["peers"].items() if name in nodes)
                       for st in sts):
                    return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.3)  # a state holds every value: polls cost
        raise TimeoutError("nodes not all active: " + str([
            (n, (await self.state(s, n))["state"]) for n in nodes]))


#: the five nodes of the spec's figure 1
IDS5 = [f"n{i}" for i in range(1, 6)]


def figure1_meshes(root: Path) -> Iterator[Callable[..., Mesh]]:
    """A fixture's body: five-node figure-1 meshes made on demand under ``root`` (keyword
    arguments as `Mesh`'s), every one closed when the test ends."""
    from nodes.drip.topology import figure1

    made: list[Mesh] = []

    def make(**kw: Any) -> Mesh:
        m = Mesh(root / f"m{len(made)}", 5, figure1(IDS5), **kw)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


async def batch_counters(m: Mesh, s: aiohttp.ClientSession) -> dict[str, dict[str, int]]:
    """Each node's ``batches`` counters from /admin/state."""
    return {n: (await m.state(s, n))["batches"] for n in m.ids}
