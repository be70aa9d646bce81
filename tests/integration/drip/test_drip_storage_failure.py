"""Issue 26 "locks and waiters always end": a commit whose records cannot be made durable (a
full disk: SQLite's own ``database or disk is full``, from a page cap on the node's store)
answers its client at once with an error, leaves no lock and no undurable value behind, and
the node's later commits still reach its peers (no delivery left waiting forever).

n1 runs in this process (so the test can cap its store's size: a real SQLite error on a real
store); n2 and n3 are node processes; all talk over real TLS sockets."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
from drip_mesh import Mesh

BIG = "x" * 200_000  # needs new pages: cannot fit a capped store


def test_a_commit_whose_persist_fails_answers_its_client_and_rolls_back(tmp_path: Path
                                                                        ) -> None:
    m = Mesh(tmp_path, 3)

    async def eventually(what: str, check: object, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not await check():  # type: ignore[operator]
            assert time.monotonic() < deadline, f"not in {timeout} s: {what}"
            await asyncio.sleep(0.2)

    async def go() -> None:
        async with m.in_process("n1") as node, aiohttp.ClientSession() as s:
            assert (await m.update(s, "n1", "k", "small", "u1"))[0] == 200
            pages = node.store.db.execute("PRAGMA page_count").fetchone()[0]
            node.store.db.execute(f"PRAGMA max_page_count={pages}")  # the disk is full
            t0 = time.monotonic()
            status, body = await m.update(s, "n1", "k", BIG, "u2")
            took = time.monotonic() - t0
            assert status == 409 and "storage failure" in body["error"], (status, body)
            assert took < 6.0, f"client waited {took:.1f} s (504 comes at 7 s)"
            assert (await m.read(s, "n1", "k"))["value"] == "small"  # nothing undurable
            st = await m.state(s, "n1")
            assert st["locks"] == {} and st["in_flight"] == [], st
            events = [json.loads(x) for x in (tmp_path / "n1" / "data" / "events.jsonl")
                      .read_text().splitlines()]
            failed = [e for e in events if e["type"] == "storage-failed"]
            assert failed and "u2" in failed[0]["rolled_back"], failed
            node.store.db.execute("PRAGMA max_page_count=1073741823")  # space again

            async def commits() -> bool:  # voters hold u2's lock until lock_ttl_s
                st, _ = await m.update(s, "n1", "k", "after", f"u3-{time.monotonic()}")
                return st == 200

            await eventually("n1 commits again", commits)

            async def everywhere() -> bool:
                return [(await m.read(s, n, "k"))["value"] for n in ("n2", "n3")] \
                    == ["after", "after"]

            await eventually("the next commit reaches n2 and n3", everywhere)

    try:
        asyncio.run(go())
    finally:
        m.close()
