"""Issue 26 item 1 against real processes: a heartbeat listing ``ghost`` or 5,000 members and
a ``/voting`` from an unknown ``DRiP-Node-ID`` add no member, block no update, leave nothing
a restart brings back, and are counted as refusals or ignored (members come only from the
configuration and agreed membership operations)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

from nodes.drip.hostile import Burst, Creds, DripTarget, HostileDrip

KINDS = ("heartbeat-ghost", "heartbeat-5000-members", "voting-unknown-node")
IDS = ["n1", "n2", "n3"]


def test_fake_members_add_nobody_and_block_nothing_across_a_restart(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public"})
    creds = Creds.load("n1", m.extra["n1"]["tls"], m.extra["n1"]["jwt"])
    target = DripTarget("n2", "127.0.0.1", m.ports["n2"]["peer"], m.ports["n2"]["client"])
    attacks = [a for a in Burst(creds, IDS, random.Random(3), flood=1).build(target)
               if a.kind in KINDS and a.port == "peer"]
    assert {a.kind for a in attacks} == set(KINDS)

    async def members_everywhere(s: aiohttp.ClientSession) -> None:
        for n in IDS:
            assert (await m.state(s, n))["members"] == IDS, n

    async def commits(s: aiohttp.ClientSession, uid: str) -> None:
        status, body = await m.update(s, "n1", "k", uid, uid)
        assert status == 200, body

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            h = HostileDrip({"n2": creds}, [target], random.Random(1))
            for a in attacks:
                await h._send(target, a)
            statuses = h.counts()["n2"]["status"]
            refused = (await m.state(s, "n2"))["refused"]
            print(statuses, refused)
            await asyncio.sleep(1.5)  # several heartbeat rounds: a listed member would spread
            await members_everywhere(s)
            await commits(s, "after-attack")
            for kind in ("heartbeat-5000-members", "voting-unknown-node"):  # refused outright
                assert set(statuses[kind]) <= {"400", "401", "403"}, (kind, statuses)
            assert sum(refused.values()) >= 2, refused
            m.kill("n2")
            m.start_node("n2")
            await m.wait_healthy("n2")
            await m.wait_all_active(s)
            await members_everywhere(s)
            await commits(s, "after-restart")

    try:
        asyncio.run(go())
    finally:
        m.close()


def test_a_poisoned_counter_is_refused_and_the_initiator_still_commits_after_a_restart(
        tmp_path: Path) -> None:
    """Issue 26 item 5: a /voting of n1 with counter 2**64-2 is refused 400 (counter-window)
    and not saved, so after n2 restarts n1's updates still commit."""
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public"})
    creds = Creds.load("n1", m.extra["n1"]["tls"], m.extra["n1"]["jwt"])
    target = DripTarget("n2", "127.0.0.1", m.ports["n2"]["peer"], m.ports["n2"]["client"])
    (poison,) = [a for a in Burst(creds, IDS, random.Random(3), flood=1).build(target)
                 if a.kind == "voting-counter-near-max"]

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            assert (await m.update(s, "n1", "k", 1, "before"))[0] == 200  # n2 knows n1's counter
            h = HostileDrip({"n2": creds}, [target], random.Random(1))
            await h._send(target, poison)
            assert h.counts()["n2"]["status"]["voting-counter-near-max"] == {"400": 1}
            assert (await m.state(s, "n2"))["refused"].get("counter-window") == 1
            m.kill("n2")
            m.start_node("n2")
            await m.wait_healthy("n2")
            await m.wait_all_active(s)
            status, body = await m.update(s, "n1", "k", 2, "after-restart")
            assert status == 200, body

    try:
        asyncio.run(go())
    finally:
        m.close()
