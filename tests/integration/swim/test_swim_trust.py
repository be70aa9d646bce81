"""Trust boundaries against real node processes (issue 25, item 4): the hostile datagrams
of the issue, sent from a raw UDP socket outside every node's address book, change nothing
but the refusal counters."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from nodes.swim import codec as c
from tests.swim_group import converged_group
from tests.waiting import eventually


def test_hostile_datagrams_from_outside_change_nothing(tmp_path: Path) -> None:
    async def body() -> None:
        async with converged_group("swim-trust", 6, tmp_path) as g:
            cl, ids, state, converged = g.cl, g.ids, g.state, g.converged
            n1, n2, n3 = ids["n1"], ids["n2"], ids["n3"]
            g3 = next(m["gen"] for m in (await state("n1"))["members"] if m["id"] == n3)
            dead3 = c.Update(c.UpdateKind.DEAD, c.NodeInfo(n3, g3 + 1), n2)
            hostile = {
                "n1": [c.PingRequest(n2, n1, 0, c.Payload(seq=0, updates=(dead3,))),
                       c.Leave(c.NodeInfo(n3, g3 + 1)),
                       # two JoinReqs in n3's name: the second used to evict at capacity
                       c.JoinReq(c.NodeInfo(n3, g3 + 1)), c.JoinReq(c.NodeInfo(n3, g3 + 1))],
                "n2": [c.PingRequest(n1, n2, 0, c.Payload(seq=0, updates=(dead3,))),
                       c.Leave(c.NodeInfo(n3, g3 + 1))],
            }
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for n, msgs in hostile.items():
                    for m in msgs:
                        s.sendto(c.encode(m), ("127.0.0.1", cl.ports[n]["peer"]))

            async def counted() -> bool:
                got = {n: (await state(n))["stats"]["refused"] for n in hostile}
                return all(got[n].get("unknown-address", 0) >= len(hostile[n]) for n in hostile)

            assert await eventually(counted, 5)
            await asyncio.sleep(1.0)  # five periods: a forged verdict would have spread
            assert await converged()
            for n in cl.nodes:
                bad = [m for m in (await state(n))["members"]
                       if m["state"] in ("dead", "left")]
                assert bad == [], (n, bad)

            # a dead member kept alive by acks with guessed sequence numbers: n3 stops, and
            # a forger answers n1's probes of it with every small seq as fast as it can
            await cl.kill("n3")
            stop = asyncio.Event()

            async def forge() -> None:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    while not stop.is_set():
                        for seq in range(1, 200):
                            s.sendto(c.encode(c.PingResponse(n1, n3, 0, c.Payload(seq=seq))),
                                     ("127.0.0.1", cl.ports["n1"]["peer"]))
                        await asyncio.sleep(0.02)

            task = asyncio.create_task(forge())
            try:
                async def n3_dead() -> bool:
                    return any(m["id"] == n3 and m["state"] == "dead"
                               for m in (await state("n1"))["members"])

                assert await eventually(n3_dead, 6)
            finally:
                stop.set()
                await task
            refused = (await state("n1"))["stats"]["refused"]
            assert refused.get("unknown-address", 0) >= 199, refused

    asyncio.run(body())
