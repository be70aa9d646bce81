"""Issue 26, session 45: votings forged in n1's name (its key stolen) far ahead of n1's counter
no longer hold their locks for good, so they no longer fill n1's ``initiator_rounds`` at a
voter and get n1's real votings refused there (429 ``initiator-rounds``).

Before: n1 answered "unknown" to a round ahead of its counter, every lock stayed, and once n2
held ``initiator_rounds`` of them every real /voting of n1's was refused at n2: n1's updates
aborted ("no vote from n2") for good. Now n1, asked about a round it saw forged, moves its
counter past it (fsynced before the answer leaves) and answers "aborted", signed."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

from nodes.drip import codec, hostile
from nodes.drip.codec import Update

ROUNDS = 4  # options.initiator_rounds at every node
FORGED = 8  # more than ROUNDS: the later ones are refused 429 at n2


async def _send(port: int, ctx: ssl.SSLContext, raw: bytes) -> int:
    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        w.write(raw)
        await w.drain()
        return int((await asyncio.wait_for(r.readline(), 10.0)).split()[1])
    finally:
        w.close()


def test_forged_votings_no_longer_get_the_members_real_votings_refused(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3, options={"jwt_mode": "public", "initiator_rounds": ROUNDS})
    cfg = json.loads(m.configs["n1"].read_text())
    creds = hostile.Creds.load("n1", cfg["tls"], cfg["jwt"])

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            status, body = await m.update(s, "n1", "k", 0, "before")
            assert status == 200, body
            base = (await m.state(s, "n1"))["counter"]
            got = []
            for i in range(FORGED):  # each on a key of its own, 2^19 ahead of n1's counter
                v = codec.Voting("n1", base + 2**19 + i, False, Update(f"forged-{i}", f"f{i}", i))
                got.append(await _send(m.ports["n2"]["peer"], creds.with_cert,
                                       hostile.signed(v, creds.signer)))
            # 429 once n2 holds ROUNDS of n1's rounds (all of them unless a lock's 3 s TTL
            # ran out while these were sent: a very slow machine)
            assert got[:ROUNDS] == [200] * ROUNDS and 429 in got, got
            # held now: n1's real voting is refused at n2 (the bound works, on old code too)
            status, body = await m.update(s, "n1", "k", 1, "during")
            assert status == 409 and "n2" in body["error"], body
            # the voters ask n1 once their TTL (3 s) runs out; n1 answers "aborted"
            for _ in range(40):
                await asyncio.sleep(0.25)
                if not [n for n in ("n2", "n3") if (await m.state(s, n))["locks"]]:
                    break
            for i in range(3):  # was 409: "no vote from ['n2']" (its 429), for good
                status, body = await m.update(s, "n1", "k", 2 + i, f"after-{i}")
                assert status == 200, body
            locks = await m.locks_once_released(s)
            assert locks == {n: {} for n in m.ids}, locks
            assert (await m.state(s, "n1"))["counter"] >= base + 2**19 + ROUNDS - 1
            assert (await m.state(s, "n2"))["refused"].get("initiator-rounds") == \
                got.count(429) + 1  # the forged ones and n1's real one while they were held
            for n in m.ids:
                assert (await m.read(s, n, "k"))["value"] == 4

    try:
        asyncio.run(go())
    finally:
        m.close()
