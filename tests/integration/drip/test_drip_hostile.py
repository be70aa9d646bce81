"""The DRiP hostile provider against a real 3-node mesh: every kind is sent, the nodes stay
alive and keep answering, and stop leaves no connection or task behind.

Whether each node *handles* each attack correctly (400s, no state change) is issue 26's
fixing work; this test asserts only that the attacks reach real nodes and that the provider
cleans up. The statuses seen are printed (``-s``) as evidence for that work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

from nodes.drip.hostile import INTENT, SOURCE, Creds, DripTarget, HostileDrip


def _open_sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


#: every kind but the answer to a vote the compromised member holds a lock for: no client
#: update is in flight here (the trust-relayed-voters chaos test sends it); it may still be
#: sent for the locks the attack's own votes leave (commit-version-2^63-1's), so not required
EVERY_KIND = set(INTENT) - {"vote-response-relayed-voters"}


def test_hostile_traffic_reaches_a_real_mesh_and_is_cleaned_up(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public"})
    creds = Creds.load("n1", m.extra["n1"]["tls"], m.extra["n1"]["jwt"], m.admin("n1"))
    targets = [DripTarget(n, "127.0.0.1", m.ports[n]["peer"], m.ports[n]["client"])
               for n in ("n2", "n3")]

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            status, body = await m.update(s, "n1", "k", 1, "applied-before")  # revote-applied
            assert status == 200, body
            before = _open_sockets()
            # from the harness's attacker address: one burst stays within the nodes'
            # conn_burst, so every kind reaches their protocol checks
            h = HostileDrip({"n2": creds, "n3": creds}, targets, random.Random(1), rate=60.0,
                            interval_s=0.5, flood=5, source=SOURCE)
            h.start()
            # until every kind reached both nodes (a fixed 4 s missed a slow kind under load;
            # 30 s once missed one late in a full suite run, session 50)
            deadline = time.monotonic() + 60.0
            await asyncio.sleep(4.0)
            while time.monotonic() < deadline and any(
                    not EVERY_KIND <= set(h.counts()[n]["by_kind"]) for n in ("n2", "n3")):
                await asyncio.sleep(0.5)
            await h.stop()
            assert not h._inflight and not h._held
            assert _open_sockets() <= before
            counts = h.counts()
            print(json.dumps(counts, indent=1))
            for n in ("n2", "n3"):
                assert EVERY_KIND <= set(counts[n]["by_kind"]), n
                assert m.procs[n].poll() is None, m.log(n)
                async with s.get(m.admin(n) + "/admin/health") as r:
                    assert r.status == 200
                print(n, "refused:", (await m.state(s, n)).get("refused"))

    try:
        asyncio.run(go())
    finally:
        m.close()
