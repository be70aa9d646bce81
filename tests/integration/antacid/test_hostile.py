"""ANTACID nodes as real processes (a chain n1 <- n2 <- n3) under the hostile provider: every
attack of a burst, sent straight to each node's peer port, gets an ERR (an ARSError) or the
session closed, or, for a request posing as the node's real neighbour, an answer; the hostile
sender's bursts run for a few seconds; the nodes stay up, count what they refused, and a normal
submission still commits everywhere afterwards."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.antacid import PROTOCOL
from nodes.antacid import hostile
from nodes.antacid.client import AntacidClient
from tests.waiting import eventually

ZONE = "zone.test"
UPSTREAM = {"n2": "n1", "n3": "n2"}  # the chain: a push posing as these is legitimate
DOWNSTREAM = {"n1": "n2", "n2": "n3"}  # a pull posing as these is legitimate


async def outcome(port: int, data: bytes, wait: float = 3.0) -> str:
    """What the node did: "close" (it ended the session), "err" (an ERR frame on a channel),
    "rpy" (an answer and no error), or "silent"."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    got = b""
    try:
        w.write(data)
        # bounded: a node that stops reading leaves our send buffer full for good
        await asyncio.wait_for(w.drain(), wait)
        loop = asyncio.get_running_loop()
        end = loop.time() + wait
        while loop.time() < end:
            try:
                chunk = await asyncio.wait_for(r.read(65536), end - loop.time())
            except (TimeoutError, ConnectionError):
                break
            if not chunk:
                return "close"
            got += chunk
            if b"\r\nERR " in got or got.startswith(b"ERR "):
                return "err"
    except ConnectionError:
        return "close"
    except TimeoutError:  # it took none of what we sent
        return "silent"
    finally:
        # aborted, not closed: close() waits to flush what the node never read (a CI run
        # hung here for 15 minutes, session 47)
        w.transport.abort()
    return "rpy" if b"RPY 1 " in got else "silent"


def test_chain_under_hostile_traffic(tmp_path) -> None:
    spec = TestSpec(name="antacid-hostile", protocol=PROTOCOL, nodes=3, seed=3,
                    store=str(tmp_path), options={"topology": "chain"})

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-hostile", tmp_path)) as c:
            targets = [hostile_target(n, c.ports[n]["peer"]) for n in c.nodes]
            seen: dict[str, Counter[str]] = {}
            for node, kind, data in hostile.messages(random.Random(7), targets):
                res = await outcome(c.ports[node]["peer"], data)
                seen.setdefault(kind, Counter())[res] += 1
                if kind == "garbage" and res == "silent":  # random bytes short of a header end
                    assert b"\r\n" not in data and b"\n" not in data[:82]
                elif res in ("rpy", "silent"):
                    poser = data.split(b"<profile uri=", 1)[1].split(b">", 1)[1].split(b"<", 1)[0]
                    legit = {"forged-push": UPSTREAM.get(node),
                             "pull-far-ahead": DOWNSTREAM.get(node)}.get(kind)
                    assert res == "rpy" and legit == poser.decode(), (node, kind, res, poser)
            print({k: dict(v) for k, v in sorted(seen.items())})
            assert set(seen) == set(hostile.INTENT)

            # the harness's own sender: bursts for a few seconds, counted per kind
            await c.nemesis_invoke({"f": "start-hostile", "value": {"interval_s": 0.5}})
            await asyncio.sleep(4.0)
            await c.nemesis_invoke({"f": "stop-hostile", "value": {}})
            for n in c.nodes:
                st = await c.admin(n, "GET", "/admin/state")
                refused = hostile.refusals(st)
                assert refused.get("refused:beep-session-failed", 0) > 0, (n, refused)
                assert refused.get("malformed_in", 0) > 0, (n, refused)

            leaf = c.client_addr(2)
            cl = AntacidClient(leaf.host, leaf.port, admin_url=leaf.admin_url)
            await cl.start()
            try:
                gsid = await cl.submit({f"{ZONE}.after": "still-works"})
                note = await cl.result(gsid, 20.0)
                assert note.error is None

                async def everywhere() -> bool:
                    zs = [await c.admin(n, "GET", "/antacid/zone") for n in c.nodes]
                    return all(z["docs"].get(f"{ZONE}.after", {}).get("content") == "still-works"
                               for z in zs)

                assert await eventually(everywhere, 20.0)
            finally:
                await cl.close()

    asyncio.run(asyncio.wait_for(body(), 240))  # a hang fails here, it never stalls the run


def hostile_target(node: str, port: int) -> object:
    from faults.hostile import Target
    return Target(node, int(node[1:]), "127.0.0.1", port)
