"""Batches (POST /batch, ours) between real DRiP processes: updates in flight together share a
request per peer, yet each is judged, locked, counted and answered on its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from drip_mesh import IDS5, batch_counters, figure1_meshes

from tests.waiting import eventually


@pytest.fixture
def mesh(tmp_path: Path):
    yield from figure1_meshes(tmp_path)


@pytest.mark.parametrize("jwt_mode", ["public", "shared"])
def test_a_batch_with_one_refused_update_commits_the_others(mesh, jwt_mode: str) -> None:
    m = mesh(options={"jwt_mode": jwt_mode, "batch": True, "lane": False, "max_initiating": 16})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            # a lock on "x" held by n5's update, so n1's update of "x" is refused by a voter
            # while n1's other updates, in flight with it, commit
            others = [m.update(s, "n1", f"k{i}", i, f"u{i}") for i in range(12)]
            res = await asyncio.gather(m.update(s, "n5", "x", "five", "x5"),
                                       m.update(s, "n1", "x", "one", "x1"), *others)
            (st5, _), (st1, b1), *rest = res
            assert all(st == 200 for st, _ in rest), rest
            assert not (st5 == 200 and st1 == 200), res[:2]
            sent = await batch_counters(m, s)
            assert sent["n1"]["sent"] > 0 and sent["n1"]["sent_items"] > sent["n1"]["sent"], sent
            assert sum(b["taken"] for b in sent.values()) >= sent["n1"]["sent"], sent
            # keep-alive: the TLS connections to a peer are reused, not one per request
            conns = (await m.state(s, "n1"))["peer_connections"]
            assert conns["requests"] > 4 * conns["opened"] > 0, conns

            async def everywhere() -> bool:
                for n in IDS5:
                    for i in range(12):
                        if (await m.read(s, n, f"k{i}"))["value"] != i:
                            return False
                return True

            assert await eventually(everywhere, 10)
            xs = {(await m.read(s, n, "x"))["value"] for n in IDS5}
            assert len(xs) == 1 and xs <= {"five", "one", None}, xs  # never both, never split
    asyncio.run(go())


def test_a_batch_over_a_partition_aborts_every_update_in_it_then_commits(mesh) -> None:
    lock_ttl = 3.0  # the node's default, named here because the wait below is bounded by it
    m = mesh(options={"batch": True, "lane": False, "max_initiating": 16, "vote_timeout_s": 1.0,
                      "peer_timeout_s": 0.8, "lock_ttl_s": lock_ttl})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            m.pause("n3")  # a member that cannot answer: the all-yes rule fails for all
            try:
                res = await asyncio.gather(*(m.update(s, "n1", f"p{i}", i, f"p{i}")
                                             for i in range(8)))
                assert all(st == 409 for st, _ in res), res
                assert (await m.state(s, "n1"))["batches"]["sent_items"] > 0
                for n in ("n1", "n2", "n4", "n5"):
                    for i in range(8):
                        assert (await m.read(s, n, f"p{i}"))["value"] is None
            finally:
                m.resume("n3")
            await m.wait_all_active(s)
            # n3 reads the votes queued while it was stopped and locks their keys; the aborts
            # were flooded while it was down, so they are lost and the locks last lock_ttl_s
            # (docs/drip.md "Aborts": "a lost abort costs only the TTL"). Wait that out.
            async def unlocked() -> bool:
                locks = [(await m.state(s, n))["locks"] for n in IDS5]
                return not any(locks)

            assert await eventually(unlocked, lock_ttl + 3.0), \
                {n: (await m.state(s, n))["locks"] for n in IDS5}
            res = await asyncio.gather(*(m.update(s, "n1", f"p{i}", i, f"q{i}")
                                         for i in range(8)))
            assert all(st == 200 for st, _ in res), res
    asyncio.run(go())
