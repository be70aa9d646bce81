"""The suite: how the harness runs the nodes, what clients do, and what is checked."""

from __future__ import annotations

from typing import Any

import aiohttp

from checkers.linearizable import checker as linearizable
from harness import generators as g
from harness.spec import DefiniteFailure, NodeAddr, ProtocolDef, TestSpec, Workload
from primary_register.node import BUGS


class RegisterClient:
    """One client process, talking to one node through the harness's client proxy."""

    def __init__(self, addr: NodeAddr | None, process: int) -> None:
        assert addr is not None
        self.node = addr.node  # the runner records which node each op went to
        self.url = f"http://{addr.host}:{addr.port}/op"
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        try:
            async with self.session.post(self.url, json=op) as r:
                out = await r.json()
        except aiohttp.ClientConnectorError as e:  # never reached the node
            raise DefiniteFailure(str(e)) from e
        if out.get("type") == "fail":
            raise DefiniteFailure(out.get("error", "fail"))
        # anything else we could not read is raised, and recorded as info (maybe happened)
        return {"type": out["type"], "value": out.get("value", op["value"]),
                **({"error": out["error"]} if "error" in out else {})}

    async def close(self) -> None:
        await self.session.close()


def generator(spec: TestSpec) -> g.Generator:
    return g.stagger(0.02, g.mix(g.repeat({"f": "read", "value": None}),
                                 lambda ctx: {"f": "write", "value": ctx.rng.randrange(5)}))


def register_workload() -> Workload:
    return Workload(client=RegisterClient, generator=generator,
                    checkers={"linearizable": linearizable("register", time_s=60.0)})


PROTOCOL = ProtocolDef(name="primary-register", module="primary_register.node",
                       workloads={"register": register_workload}, bugs=BUGS,
                       default_workload="register")
