"""SWIM node processes for real: over the harness's UDP relay (membership, bad datagrams,
leave/join through HTTP), and broadcast seed discovery on loopback without any relay."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.swim import PROTOCOL
from nodes.swim import codec as c
from osutil.ports import free_port
from tests.swim_group import OPTS, converged_group
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]


def test_group_over_the_relay(tmp_path: Path) -> None:
    spec = TestSpec(name="swim-int", protocol=PROTOCOL, nodes=3, seed=3, store=str(tmp_path),
                    options=OPTS)

    async def body() -> None:
        async with open_cluster(spec, new_run("swim-int", tmp_path)) as cl:
            async def views() -> dict[str, list[str]]:
                return {n: (await cl.admin(n, "GET", "/admin/state"))["alive"] for n in cl.nodes}

            async def converged() -> bool:
                v = await views()
                return all(v[n] == sorted(set(cl.nodes) - {n}) for n in cl.nodes)

            assert await eventually(converged), await views()
            # garbage on the peer port: an unknown code is dropped, a bad body counted
            port = cl.ports["n2"]["peer"]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(bytes([1, 2, 3]), ("127.0.0.1", port))
                s.sendto(bytes([c.Code.PING_REQUEST, 1]), ("127.0.0.1", port))

            async def counted() -> bool:
                stats = (await cl.admin("n2", "GET", "/admin/state"))["stats"]
                return stats["unknown"] == 1 and stats["malformed"] == 1

            assert await eventually(counted, 5)
            st = await cl.admin("n2", "GET", "/admin/state")
            assert st["stats"]["unknown"] == 1 and st["stats"]["malformed"] == 1
            # voluntary leave, then rejoin with a higher generation
            gen0 = st["gen"]
            async with aiohttp.ClientSession() as http:
                async with http.post(cl.admin_url("n2") + "/swim/leave") as r:
                    assert (await r.json())["left"] is True

                async def n2_left() -> bool:
                    v = await views()
                    return v["n1"] == ["n3"] and v["n3"] == ["n1"]

                assert await eventually(n2_left), await views()
                async with http.post(cl.admin_url("n2") + "/swim/join") as r:
                    assert (await r.json())["gen"] == gen0 + 1
            assert await eventually(converged), await views()
            ev = (await cl.admin("n1", "GET", "/admin/events?since=0"))["events"]
            assert {"start", "join-ok", "joined", "left", "alive"} <= {e["type"] for e in ev}
            assert all("mono" in e and "period" in e for e in ev if e["type"] == "left")

    asyncio.run(body())


def test_forged_top_generations_neither_stop_a_node_nor_poison_a_member(tmp_path: Path) -> None:
    """Issue 25 item 1: one 29-byte SUSPECT naming a node at generation 2^32-1 made it
    refute with 2^32, after which every encode raised and its period timer died."""
    top = 2**32 - 1

    async def body() -> None:
        async with converged_group("swim-gen", 4, tmp_path) as g:
            cl, ids, state, converged = g.cl, g.ids, g.state, g.converged
            suspect_me = c.PingRequest(ids["n1"], ids["n2"], 0, c.Payload(seq=1, updates=(
                c.Update(c.UpdateKind.SUSPECT, c.NodeInfo(ids["n2"], top), ids["n1"]),)))
            poison = c.PingRequest(ids["n2"], ids["n1"], 0, c.Payload(
                seq=2, sample=(c.NodeInfo(ids["n3"], top),)))
            assert len(c.encode(suspect_me)) == 29
            probes0 = (await state("n2"))["stats"]["probes"]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(c.encode(suspect_me), ("127.0.0.1", cl.ports["n2"]["peer"]))
                s.sendto(c.encode(poison), ("127.0.0.1", cl.ports["n1"]["peer"]))

            async def refused() -> bool:
                # from an address outside the book: refused before its generations are read
                # (the generation guard itself: tests/unit/swim/test_swim_generations.py)
                got = [(await state(n))["stats"]["refused"] for n in ("n1", "n2")]
                return all(r.get("unknown-address") == 1 for r in got)

            assert await eventually(refused, 5)
            await asyncio.sleep(2.0)  # ten periods: a dead timer loop would show by now
            n2 = await state("n2")
            assert n2["gen"] < 2**16 and n2["stats"]["probes"] >= probes0 + 5
            members = [m for n in cl.nodes for m in (await state(n))["members"]]
            assert all(m["gen"] < 2**16 for m in members), members
            assert await converged()
            errors = [e for n in cl.nodes for e in (await cl.admin(
                n, "GET", "/admin/events?since=0"))["events"] if e["type"] == "node-error"]
            assert errors == []

    asyncio.run(body())


def test_broadcast_seed_discovery(tmp_path: Path) -> None:
    bport = free_port(kind=socket.SOCK_DGRAM)
    ids = ["n1", "n2", "n3"]
    ports = {n: {"peer": free_port(kind=socket.SOCK_DGRAM), "client": free_port(),
                 "admin": free_port()} for n in ids}
    procs = []
    try:
        for i, n in enumerate(ids):
            opts: dict[str, Any] = {**OPTS, "broadcast_port": bport, "seeds": []}
            if n == "n1":
                opts["announce_periods"] = 2
            else:
                opts["discover"] = True
            cfg = {"id": n, "num_id": i + 1, "host": "127.0.0.1",
                   "data_dir": str(tmp_path / n), "ports": ports[n], "seed": i,
                   "peers": {p: {"num_id": j + 1, "peer": f"127.0.0.1:{ports[p]['peer']}"}
                             for j, p in enumerate(ids) if p != n},
                   "bugs": [], "options": opts}
            path = tmp_path / f"{n}.json"
            path.write_text(json.dumps(cfg))
            procs.append(subprocess.Popen([sys.executable, "-m", "nodes.swim", "--config",
                                           str(path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))

        async def body() -> None:
            async with aiohttp.ClientSession() as http:
                async def state(n: str) -> dict[str, Any] | None:
                    try:
                        url = f"http://127.0.0.1:{ports[n]['admin']}/admin/state"
                        async with http.get(url) as r:
                            return await r.json()
                    except aiohttp.ClientError:
                        return None

                async def converged() -> bool:
                    sts = [await state(n) for n in ids]
                    return all(s is not None and len(s["alive"]) == 2 for s in sts)

                assert await eventually(converged, 15)
                ev = [e for e in (await state("n2") or {}).get("members", [])]
                assert ev

        asyncio.run(body())
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
