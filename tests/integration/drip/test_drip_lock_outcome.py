"""A voter's lock outlives its TTL with the initiator's decision unknown to it, on real node
processes (mutual TLS, public-key JWTs, loopback), and ends with the right outcome
(docs/drip.md "Locks end on an outcome").

Three nodes on a line n2 - n1 - n3; n1's links to n2 and n2's to n1 go through Toxiproxy. n1 starts u1 on k; once n2
holds k for u1, n1's proxy to n2 is disabled (nothing n1 sends reaches n2; n2's requests to n1
still arrive, delayed by a latency toxic on the way in):

* committed: n2's yes is late but within n1's vote timeout, n1 commits, its commit never
  reaches n2. n2's lock reaches its TTL, n2 asks /outcome and keeps k (its own update of k is
  refused "in progress (u1)"); after the heal u1 lands at version 1 everywhere, and the next
  update is version 2: no version holds two values.
* aborted: n2's yes comes after n1's vote timeout, n1 aborts, its abort never reaches n2. n2
  asks n1 /outcome after the TTL and is answered "aborted" with n1's signed statement: it
  releases k, u1 is applied nowhere, and k commits again.

With the planted ``release-expired-locks`` (the old blind release at the TTL) both cases fail:
n2 never asks (no ``lock-expired``). Each case takes 10-12 s, so the test is ``chaos``
(nightly; ``pytest --chaos tests/integration/drip/test_drip_lock_outcome.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from drip_mesh import Mesh

from faults.links import link_name
from faults.toxiproxy import Toxic, ToxiproxyClient, ToxiproxyServer

#: a request on a new connection through the late proxy pays the latency once per TLS flight
#: (~3 x 1.3 s): peer_timeout_s leaves room for that, so n2 keeps n1 as a peer it asks
OPTS = {"jwt_mode": "public", "vote_timeout_s": 1.0, "lock_ttl_s": 1.5, "heartbeat_s": 0.2,
        "peer_timeout_s": 4.5}
LINE = [("n1", "n2"), ("n1", "n3")]  # n2's only peer is n1: nothing reaches n2 around the cut
CUT = ("n1", "n2")  # n1 -> n2: n1's requests (and only those) go through this proxy
BACK = ("n2", "n1")  # n2 -> n1: n2's requests to n1, delayed


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer.from_env() as server:
        yield server


def events(m: Mesh, nid: str, kind: str, uid: str | None = None) -> list[dict[str, Any]]:
    path = m.root / nid / "data" / "events.jsonl"
    if not path.exists():
        return []
    return [e for e in (json.loads(line) for line in path.read_text().splitlines() if line)
            if e["type"] == kind and (uid is None or e.get("uid") == uid)]


async def until(what: str, cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _wired(m: Mesh, proxies: ToxiproxyClient) -> dict[tuple[str, str], str]:
    ups = {CUT: f"127.0.0.1:{m.ports['n2']['peer']}", BACK: f"127.0.0.1:{m.ports['n1']['peer']}"}
    listen = await proxies.create_proxies({link_name(k): v for k, v in ups.items()})
    for (src, dst) in ups:
        cfg = json.loads(m.configs[src].read_text())
        cfg["peers"][dst]["peer"] = listen[link_name((src, dst))]
        m.configs[src].write_text(json.dumps(cfg))
    return {k: listen[link_name(k)] for k in ups}


async def _values(m: Mesh, s: aiohttp.ClientSession, key: str) -> dict[str, Any]:
    return {n: (await m.read(s, n, key)) for n in m.ids}


@pytest.mark.chaos  # ~10-12 s per case on a loaded machine: nightly, not the smoke set
@pytest.mark.parametrize("outcome", ["committed", "aborted"])
def test_a_lock_past_its_ttl_ends_with_the_initiators_outcome(tmp_path: Path, outcome: str,
                                                              toxiproxy: ToxiproxyServer) -> None:
    m = Mesh(tmp_path, 3, LINE, options=OPTS)
    late_ms = 400 if outcome == "committed" else 1300  # n2's yes: before / after n1's timer

    async def go() -> None:
        proxies = toxiproxy.client(f"lo{id(m) % 10**6}-")
        try:
            await _wired(m, proxies)
            await m.start()
            async with aiohttp.ClientSession() as s:
                await m.wait_all_active(s)
                await proxies.add_toxic(link_name(BACK), Toxic(
                    type="latency", stream="upstream",
                    attributes={"latency": late_ms, "jitter": 0}, name="late"))
                first = asyncio.ensure_future(m.update(s, "n1", "k", "first", "u1"))
                await until("n2's lock", lambda: _true(events(m, "n2", "vote", "u1")))
                await proxies.set_enabled(link_name(CUT), False)
                status, body = await first
                assert (status, body.get("result")) == (
                    (200, "committed") if outcome == "committed" else (409, "aborted")), body
                await until("n2's TTL", lambda: _true(events(m, "n2", "lock-expired", "u1")))
                if outcome == "committed":
                    await _kept_until_the_commit_lands(m, s, proxies)
                else:
                    await _released_by_the_proven_abort(m, s, proxies)
                assert (await m.state(s, "n2"))["refused"].get("unproven-outcome", 0) == 0
        finally:
            try:
                await proxies.delete_proxies()
            finally:
                await proxies.close()

    try:
        asyncio.run(asyncio.wait_for(go(), 60))
    finally:
        m.close()


async def _true(x: Any) -> bool:
    return bool(x)


async def _kept_until_the_commit_lands(m: Mesh, s: aiohttp.ClientSession,
                                       proxies: ToxiproxyClient) -> None:
    status, body = await m.update(s, "n2", "k", "second", "u2")
    assert status == 409 and "in progress (u1)" in body["error"], body
    await asyncio.sleep(1.6)  # another TTL: still held, asked again
    assert len(events(m, "n2", "lock-expired", "u1")) >= 2
    assert (await m.read(s, "n2", "k")).get("uid") is None
    assert not [e for e in events(m, "n2", "release", "u1")]
    await proxies.set_enabled(link_name(CUT), True)

    async def landed() -> bool:
        return all(v.get("uid") == "u1" for v in (await _values(m, s, "k")).values())
    await until("u1 everywhere", landed)
    assert all(v["version"] == 1 for v in (await _values(m, s, "k")).values())
    status, body = await m.update(s, "n2", "k", "third", "u3")
    assert status == 200 and body["result"] == "committed", body

    async def third() -> bool:
        vs = await _values(m, s, "k")
        return all(v.get("uid") == "u3" and v["version"] == 2 for v in vs.values())
    await until("u3 at version 2 everywhere", third)
    assert not any(events(m, n, "apply", "u2") for n in m.ids)


async def _released_by_the_proven_abort(m: Mesh, s: aiohttp.ClientSession,
                                        proxies: ToxiproxyClient) -> None:
    await until("n2's release", lambda: _true(events(m, "n2", "release", "u1")))
    (rel,) = events(m, "n2", "release", "u1")
    assert rel["why"].startswith("aborted (asked n"), rel
    assert all(v.get("uid") is None for v in (await _values(m, s, "k")).values())
    await proxies.set_enabled(link_name(CUT), True)
    await proxies.remove_toxic(link_name(BACK), "late")
    await m.wait_all_active(s)
    status, body = await m.update(s, "n2", "k", "again", "u2")
    assert status == 200 and body["result"] == "committed", body

    async def again() -> bool:
        vs = await _values(m, s, "k")
        return all(v.get("uid") == "u2" and v["version"] == 1 for v in vs.values())
    await until("u2 at version 1 everywhere", again)
