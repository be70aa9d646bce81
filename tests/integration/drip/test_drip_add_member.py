"""A node none of the mesh was configured with joins a running 5-node mesh (issue 23), real
processes over mutual TLS on loopback: the operator's ``POST /admin/members`` carries its
address, certificate and JWT public key; once that membership commits every member dials it and
accepts it, it syncs, and from then on an update commits only with its yes. Decommissioned and
killed, it is dropped again and updates commit without it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
from drip_mesh import Mesh

OLD = ["n1", "n2", "n3", "n4", "n5"]


async def change(m: Mesh, s: aiohttp.ClientSession, nid: str, body: dict[str, Any]
                 ) -> tuple[int, dict[str, Any]]:
    async with s.post(m.admin(nid) + "/admin/members", json=body,
                      timeout=aiohttp.ClientTimeout(total=15)) as r:
        return r.status, await r.json()


def events(m: Mesh, nid: str, kind: str) -> list[dict[str, Any]]:
    path = m.root / nid / "data" / "events.jsonl"
    return [e for e in (json.loads(line) for line in path.read_text().splitlines() if line)
            if e["type"] == kind]


async def until_epoch(m: Mesh, s: aiohttp.ClientSession, epoch: int) -> list[dict[str, Any]]:
    """The old members' states once all are at ``epoch`` (commits reach them after the answer)."""
    deadline = time.monotonic() + 10
    while True:
        sts = [await m.state(s, n) for n in OLD]
        if all(st["epoch"] == epoch for st in sts) or time.monotonic() > deadline:
            return sts
        await asyncio.sleep(0.05)


def test_a_sixth_node_added_at_run_time_syncs_votes_and_is_decommissioned(tmp_path: Path
                                                                           ) -> None:
    m = Mesh(tmp_path, 5, options={"jwt_mode": "public"})
    entry = m.configure_new("n6", {"join": True})
    assert not any("n6" in json.loads(m.configs[n].read_text())["jwt"]["public_keys"]
                   for n in OLD)  # no old member holds any of n6's trust material

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            assert (await m.update(s, "n1", "x", 1, "u1"))[0] == 200
            status, body = await change(m, s, "n2", {"id": "m0", "add": ["n6"]})
            assert status == 400 and "address" in body["error"], body  # nobody could reach it
            status, body = await change(m, s, "n2", {"id": "m1", "add": ["n6"],
                                                     "addresses": {"n6": entry}})
            assert status == 200, body
            sts = await until_epoch(m, s, 1)
            assert all("n6" in st["members"] and "n6" in st["peers"] for st in sts), sts

            m.start_node("n6")
            await m.wait_healthy("n6")
            await m.wait_all_active(s, nodes=[*OLD, "n6"], timeout=40)
            assert (await m.read(s, "n6", "x"))["value"] == 1  # synced before going active
            assert (await m.state(s, "n6"))["epoch"] == 1
            status, body = await m.update(s, "n3", "x", 2, "u2")
            assert status == 200, body
            (d2,) = [e for e in events(m, "n3", "decide") if e["uid"] == "u2"]
            assert "n6" in d2["voters"] and "n6" in d2["required"], d2
            assert any(e["uid"] == "u2" and e["vote"] == "yes" for e in events(m, "n6", "vote"))
            status, body = await m.update(s, "n6", "y", 1, "u3")  # n6 initiates: its JWT holds
            assert status == 200, body

            m.pause("n6")  # no yes from n6: nothing commits
            status, body = await m.update(s, "n4", "x", 3, "u4", timeout=15)
            assert status == 409 and "n6" in body["error"], body
            m.resume("n6")

            status, body = await change(m, s, "n5", {"id": "m2", "remove": ["n6"]})
            assert status == 200, body
            m.kill("n6")
            sts = await until_epoch(m, s, 2)
            assert all("n6" not in st["members"] and "n6" not in st["peers"] for st in sts), sts
            status, body = await m.update(s, "n1", "x", 5, "u5")
            assert status == 200, body
            (d5,) = [e for e in events(m, "n1", "decide") if e["uid"] == "u5"]
            assert d5["epoch"] == 2 and "n6" not in d5["required"], d5
            for n in OLD:
                wired = [e["peers"] for e in events(m, n, "wired")]
                assert wired[0] == ["n6"] and wired[-1] == [], (n, wired)

    try:
        asyncio.run(go())
    finally:
        m.close()
