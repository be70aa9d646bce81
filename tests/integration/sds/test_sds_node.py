"""SDS nodes as real processes behind the UDP relay: broadcast, admin state, bad datagrams,
and kill -9 + restart keeping the delivered log (then catching up on what was missed)."""

from __future__ import annotations

import asyncio
import socket

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.sds import PROTOCOL
from nodes.sds.client import SdsClient
from tests.waiting import eventually


def test_broadcast_restart_and_bad_bytes(tmp_path) -> None:
    spec = TestSpec(name="sds-node", protocol=PROTOCOL, nodes=3, seed=3, store=str(tmp_path))

    async def body() -> None:
        async with open_cluster(spec, new_run("sds-node", tmp_path)) as c:
            clients = {n: SdsClient(c.client_addr(i).host, c.client_addr(i).port, i) for i, n in enumerate(c.nodes)}

            async def logs() -> dict[str, list[str]]:
                return {n: [e["id"] for e in (await c.admin(n, "GET", "/admin/state"))["log"]]
                        for n in c.nodes}

            async def converged(k: int) -> bool:
                got = await logs()
                first = got[c.nodes[0]]
                return len(first) == k and all(v == first for v in got.values())

            for i in range(6):
                r = await clients[c.nodes[i % 3]].send(f"c:{i}:x")
                assert r["id"]
            assert await eventually(lambda: converged(6))
            st = await c.admin("n1", "GET", "/admin/state")
            for key in ("lamport", "log", "incoming_buffer", "outgoing_buffer", "bloom",
                        "repair", "counters", "io"):
                assert key in st
            assert st["bloom"]["bits"] == 150_000 and st["bloom"]["hashes"] == 10

            # garbage on the real peer port: counted, the node keeps serving
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"\xff\xfe not protobuf", ("127.0.0.1", c.ports["n1"]["peer"]))
            assert await eventually(lambda: _wire_errors(c, "n1"))

            # kill -9 n2, send while it is down, restart: old log kept, new ones caught up
            await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
            for i in range(6, 9):
                await clients["n1"].send(f"c:{i}:y")
            await c.nemesis_invoke({"f": "restart", "value": {"node": "n2"}})
            assert await eventually(lambda: converged(9), 15.0)
            ev = (await c.admin("n2", "GET", "/admin/events?since=0"))["events"]
            starts = [e for e in ev if e["type"] == "start"]
            assert len(starts) == 2 and starts[1]["log_len"] >= 6
            for cl in clients.values():
                await cl.close()

    asyncio.run(body())


async def _wire_errors(c, n: str) -> bool:
    st = await c.admin(n, "GET", "/admin/state")
    return st["counters"]["wire_errors"] >= 1
