"""A member added at run time, decommissioned while down, learns it left when it restarts
(issue 23), real processes over mutual TLS on loopback: every old member refuses its heartbeat
with 403 not-a-peer at the later epoch, so it reports ``decommissioned`` in ``/admin/state``,
journals it, and answers client updates with a clear 503 instead of sitting ``inactive``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
from drip_mesh import Mesh
from test_drip_add_member import change, events

OLD = ["n1", "n2", "n3"]


async def until(m: Mesh, s: aiohttp.ClientSession, nodes: list[str], pred, timeout: float
                ) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        sts = [await m.state(s, n) for n in nodes]
        if all(pred(st) for st in sts) or time.monotonic() > deadline:
            return sts
        await asyncio.sleep(0.1)


def test_a_decommissioned_run_time_member_learns_it_left_on_restart(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public"})
    entry = m.configure_new("n4", {"join": True})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            status, body = await change(m, s, "n2", {"id": "m1", "add": ["n4"],
                                                     "addresses": {"n4": entry}})
            assert status == 200, body
            await until(m, s, OLD, lambda st: st["epoch"] == 1, 10)
            m.start_node("n4")
            await m.wait_healthy("n4")
            await m.wait_all_active(s, nodes=[*OLD, "n4"], timeout=40)

            m.kill("n4")  # down while the mesh decommissions it: it never hears of epoch 2
            status, body = await change(m, s, "n1", {"id": "m2", "remove": ["n4"]})
            assert status == 200, body
            sts = await until(m, s, OLD, lambda st: st["epoch"] == 2, 10)
            assert all("n4" not in st["members"] for st in sts), sts

            m.start_node("n4")
            await m.wait_healthy("n4")
            (st,) = await until(m, s, ["n4"], lambda st: st["state"] == "decommissioned", 20)
            assert st["state"] == "decommissioned", st
            assert st["decommissioned_at"] == 2 and st["left"] is True, st
            (ev,) = events(m, "n4", "decommissioned")
            assert ev["epoch"] == 2 and ev["own_epoch"] == 1 and ev["by"] == OLD, ev
            status, body = await m.update(s, "n4", "x", 1, "u-n4")
            assert status == 503, body
            assert "decommissioned from the mesh at epoch 2" in body["error"], body
            assert (await m.update(s, "n1", "x", 2, "u-n1"))[0] == 200  # the mesh goes on

    try:
        asyncio.run(go())
    finally:
        m.close()
