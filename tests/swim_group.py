"""A converged group of real SWIM nodes behind the harness's relay, for integration tests that
then send it hand-made datagrams: its state per node, its ids, and whether it is converged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cluster import Cluster, open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.swim import PROTOCOL
from tests.waiting import eventually

#: fast periods: a test sees detection and dissemination within seconds
OPTS = {"period_s": 0.2, "probe_timeout_s": 0.1}


@dataclass
class Group:
    cl: Cluster
    ids: dict[str, int]

    async def state(self, n: str) -> dict[str, Any]:
        return await self.cl.admin(n, "GET", "/admin/state")

    async def converged(self) -> bool:
        views = {n: (await self.state(n))["alive"] for n in self.cl.nodes}
        return all(views[n] == sorted(set(self.cl.nodes) - {n}) for n in self.cl.nodes)

    def port(self, n: str) -> tuple[str, int]:
        return ("127.0.0.1", self.cl.ports[n]["peer"])


@asynccontextmanager
async def converged_group(name: str, seed: int, tmp_path: Path,
                          nodes: int = 3) -> AsyncIterator[Group]:
    spec = TestSpec(name=name, protocol=PROTOCOL, nodes=nodes, seed=seed, store=str(tmp_path),
                    options=OPTS)
    async with open_cluster(spec, new_run(name, tmp_path)) as cl:
        g = Group(cl, {})
        assert await eventually(g.converged)
        g.ids = {n: (await g.state(n))["num_id"] for n in cl.nodes}
        yield g
