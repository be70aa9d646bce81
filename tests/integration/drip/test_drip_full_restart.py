"""A mesh all of whose nodes restarted (a power cut: kill -9 of every node) becomes active
again and commits. Before the fix (docs/drip.md "Sync"), a node owed a sync kept asking a
syncing peer for it on every heartbeat, so no node ever picked the first active one and every
update was refused 503 "node n1 is sync" for good."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

#: from the restart to the first commit, at most (heartbeats every 0.3 s, syncs of a few keys)
BOUND_S = 20.0


async def _commit(m: Mesh, s: aiohttp.ClientSession, nid: str, key: str, value: int, uid: str,
                  bound: float) -> float:
    """Retry one update (a new id each try: an aborted id stays aborted) until it commits; the
    seconds it took."""
    t0 = time.monotonic()
    last: tuple[int, object] = (0, None)
    for i in itertools.count():
        if time.monotonic() - t0 > bound:
            break
        try:
            last = await m.update(s, nid, key, value, f"{uid}-{i}", timeout=5.0)
            if last[0] == 200:
                return time.monotonic() - t0
        except (TimeoutError, aiohttp.ClientError) as e:
            last = (0, repr(e))
        await asyncio.sleep(0.2)
    raise AssertionError(f"update {uid} at {nid} not committed in {bound} s: {last}")


def test_a_mesh_whose_every_node_was_killed_commits_again_after_restart(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3)

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            await _commit(m, s, "n1", "a", 1, "u1", BOUND_S)
            await _commit(m, s, "n2", "b", 2, "u2", BOUND_S)
            # n1 (the lowest id) dies first: once n2 and n3 see it down they owe it a sync
            # (durably); then the power cut takes them too
            m.kill("n1")
            await asyncio.sleep(1.5)  # five heartbeat rounds
            for nid in ("n2", "n3"):
                m.kill(nid)
            for nid in m.ids:
                m.start_node(nid)
            await asyncio.gather(*(m.wait_healthy(n) for n in m.ids))
            took = await _commit(m, s, "n1", "c", 3, "u3", BOUND_S)
            assert took < BOUND_S
            await m.wait_all_active(s, timeout=BOUND_S)
            deadline = time.monotonic() + BOUND_S
            want = {"a": 1, "b": 2, "c": 3}
            while True:  # no committed update lost: every node ends holding all three
                got = {n: {k: (await m.read(s, n, k)).get("value") for k in want}
                       for n in m.ids}
                if all(g == want for g in got.values()) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert all(g == want for g in got.values()), got

    try:
        asyncio.run(go())
    finally:
        m.close()
