"""The hostile commit attacks reach the core's vote-round checks on a real mesh (issue 26):
with a counter inside the window (just ahead of the compromised member's own) and a commit
validly signed by a second compromised member, the nodes refuse them as
``commit-without-vote``, ``commit-other-initiator`` and ``revote-applied`` (409), not at the
counter window or the token check, and the mesh still commits."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

from faults.hostile import Target
from nodes.drip.hostile import driver

CORE = ("commit-without-vote", "commit-other-initiator", "revote-applied")


def test_hostile_commit_attacks_are_refused_by_the_core_checks(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public"})  # full mesh: n2's peers are n1, n3
    configs = {n: json.loads(m.configs[n].read_text()) for n in m.ids}
    h = driver([Target("n2", 2, "127.0.0.1", m.ports["n2"]["peer"])], random.Random(5), configs)
    assert h.creds["n2"].node == "n1" and h.second["n2"].node == "n3"
    h.flood, h.rate, h.interval_s = 1, 40.0, 0.3

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for i in range(3):  # applied update ids for revote-applied
                status, body = await m.update(s, "n1", f"k{i}", i, f"before-{i}")
                assert status == 200, body
            h.start()
            await asyncio.sleep(4.0)  # a burst a second at most: several of each kind
            await h.stop()
            counts = h.counts()["n2"]
            refused = (await m.state(s, "n2"))["refused"]
            print(json.dumps(counts["status"], indent=1), refused)
            for kind in CORE:
                assert counts["status"][kind].get("409", 0) >= 1, (kind, counts["status"])
                assert set(counts["status"][kind]) <= {"409"}, (kind, counts["status"])
                assert refused.get(kind, 0) >= counts["status"][kind]["409"], (kind, refused)
            # the vote before the other-initiator commit was taken (a yes), not refused
            assert set(counts["status"]["commit-other-initiator:setup"]) == {"200"}
            await asyncio.sleep(3.5)  # the hostile votes' locks expire
            status, body = await m.update(s, "n1", "k0", "after", "after-attack")
            assert status == 200, body
            for n in m.ids:
                assert "hostile" not in json.dumps((await m.state(s, n))["kv"]), n

    try:
        asyncio.run(go())
    finally:
        h.close()
        m.close()
