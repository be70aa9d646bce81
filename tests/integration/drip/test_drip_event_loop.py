"""The nodes' event loop (option ``event_loop``): real processes run on uvloop unless told
asyncio, and the two kinds commit together over the same lanes and mutual TLS (the peer
identity comes from the TLS transport, which each loop implements in its own way)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from drip_mesh import Mesh

from tests.waiting import eventually

IDS3 = ["n1", "n2", "n3"]


@pytest.fixture
def mesh3(tmp_path: Path):
    m = Mesh(tmp_path, 3, options={"max_initiating": 8})
    yield m
    m.close()


def test_uvloop_is_the_default_and_commits_beside_an_asyncio_node(mesh3: Mesh) -> None:
    m = mesh3
    m.set_options("n2", event_loop="asyncio")

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            loops = {n: (await m.state(s, n))["event_loop"] for n in IDS3}
            assert loops == {"n1": "uvloop", "n2": "asyncio", "n3": "uvloop"}, loops
            res = await asyncio.gather(*(m.update(s, IDS3[i % 3], f"k{i}", i, f"u{i}")
                                         for i in range(9)))
            assert all(st == 200 for st, _ in res), res

            async def everywhere() -> bool:
                return all([(await m.read(s, n, f"k{i}"))["value"] == i
                            for n in IDS3 for i in range(9)])
            assert await eventually(everywhere, 10)
            for n in IDS3:
                st = await m.state(s, n)
                assert not st["refused"], (n, st["refused"])  # every peer identity read
                assert st["batches"]["lane_exchanges"] > 0, (n, st["batches"])
    asyncio.run(go())
