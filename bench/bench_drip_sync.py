"""DRiP sync bench: a node added to a running mesh that holds N keys (spec 4.6).

Real node processes over TLS on loopback, a full mesh of ``--nodes`` (5), peers wired directly
(no proxy). All but the last start holding N keys; the last (the joiner) is decommissioned (it
never came up), added back through ``POST /admin/members``, then started on a fresh data directory with ``join``. Prints the time
from its process start to ``active``, the sync's own time and keys/s, and the joiner's peak
RSS and each source's (``VmHWM`` of each process, read once the joiner is active), as JSON.
``--value-bytes`` makes every value a string of that many bytes of JSON (default: a small
object), to measure a sync of large values (nodes/drip/sync.py bounds each batch).
Run: ``.venv/bin/python bench/bench_drip_sync.py [--keys 10000] [--value-bytes 1048576]
[--jwt-mode public|shared] [--nodes 4]``. Node states are read through a client read, never
``/admin/state`` (which lists every value), and the joiner's keys from its store once stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from nodes.drip.codec import MAX_VALUE_BYTES, Item  # noqa: E402


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status: is this Linux?")


async def change_members(m: Mesh, s: aiohttp.ClientSession, at: str, uid: str,
                         **change: list[str]) -> None:
    for attempt in range(10):  # a loaded machine can miss a vote: a new id, again
        async with s.post(m.admin(at) + "/admin/members", json={"id": f"{uid}-{attempt}",
                                                                **change},
                          timeout=aiohttp.ClientTimeout(total=20)) as r:
            if r.status == 200:
                return
            why = f"{r.status} {await r.text()}"
        await asyncio.sleep(1)
    raise RuntimeError(f"membership change {change} at {at}: {why}")


async def wait_epoch(m: Mesh, s: aiohttp.ClientSession, nodes: list[str], epoch: int) -> None:
    deadline = time.monotonic() + 20
    while not all(v >= epoch for v in [await members_version(m, s, n) for n in nodes]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{nodes} did not all reach membership epoch {epoch} in 20 s")
        await asyncio.sleep(0.05)


def seed_items(keys: int, value_bytes: int | None, start: int, n: int) -> list[Item]:
    """Keys ``start..start+n``: a small object each, or a string of ``value_bytes`` JSON."""
    big = None if value_bytes is None else "v" * (value_bytes - 2)  # 2: the JSON quotes
    return [Item(f"key{i:06d}", {"route": i} if big is None else big, 1, f"seed-{i}", None)
            for i in range(start, min(keys, start + n))]


async def members_read(m: Mesh, s: aiohttp.ClientSession, nid: str) -> dict[str, Any]:
    """A client read of the membership key (its version is the membership epoch, and the
    answer says the node's state): ``/admin/state`` lists every value, gigabytes for a store
    of large values, so the bench never asks for it."""
    async with s.get(m.client(nid) + "/client/read", params={"key": "drip:members"}) as r:
        return dict(await r.json())


async def client_state(m: Mesh, s: aiohttp.ClientSession, nid: str) -> str:
    return str((await members_read(m, s, nid))["state"])


async def members_version(m: Mesh, s: aiohttp.ClientSession, nid: str) -> int:
    return int((await members_read(m, s, nid))["version"])


async def wait_active(m: Mesh, s: aiohttp.ClientSession, nodes: list[str], timeout: float
                      ) -> None:
    deadline = time.monotonic() + timeout
    while [await client_state(m, s, n) for n in nodes] != ["active"] * len(nodes):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{nodes} not all active in {timeout} s")
        await asyncio.sleep(0.5)


def stored(db: Path) -> tuple[int, int]:
    """Keys and value bytes in a node's store (read once it stopped)."""
    con = sqlite3.connect(db)
    try:
        n, size = con.execute("SELECT count(*), coalesce(sum(length(value)), 0) FROM kv "
                              "WHERE key LIKE 'key%'").fetchone()
    finally:
        con.close()
    return int(n), int(size)


async def bench(root: Path, keys: int, jwt_mode: str, value_bytes: int | None = None,
                nodes: int = 5) -> dict[str, Any]:
    m = Mesh(root, nodes, options={"jwt_mode": jwt_mode})
    joiner = m.ids[-1]
    old = [n for n in m.ids if n != joiner]
    # the mesh already holds the keys (written in slices of 100: bounded memory here), the
    # first store written, the others copies of it
    m.preload(old[:1], lambda: (it for start in range(0, keys, 100)
                                for it in seed_items(keys, value_bytes, start, 100)))
    for n in old[1:]:
        (root / n / "data").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / old[0] / "data" / "drip.sqlite3", root / n / "data" / "drip.sqlite3")
    m.set_options(joiner, join=True)
    try:
        for n in old:
            m.start_node(n)
        await asyncio.gather(*(m.wait_healthy(n, timeout=600) for n in old))  # large stores load slowly
        async with aiohttp.ClientSession() as s:
            await wait_active(m, s, old, timeout=600)
            await asyncio.sleep(2)  # a few heartbeat rounds: every peer up
            await change_members(m, s, old[0], "m-remove", remove=[joiner])
            await wait_epoch(m, s, old, 1)  # the commit reaches the others after the answer
            await change_members(m, s, old[1], "m-add", add=[joiner])
            await wait_epoch(m, s, old, 2)
            t0 = time.monotonic()
            m.start_node(joiner)
            await m.wait_healthy(joiner, timeout=120)
            await wait_active(m, s, [joiner], timeout=3600)
            wall = time.monotonic() - t0
            rss = peak_rss_mib(m.procs[joiner].pid)
            sources_rss = {n: peak_rss_mib(m.procs[n].pid) for n in old}
    finally:
        m.close()
    held, held_bytes = stored(root / joiner / "data" / "drip.sqlite3")
    if held < keys:
        raise RuntimeError(f"{joiner} went active holding {held} of {keys} keys")
    done = last_sync_done(root / joiner / "data" / "events.jsonl")
    sync_s = float(done["elapsed_s"])
    return {"jwt_mode": jwt_mode, "nodes": nodes, "keys": keys, "value_bytes": value_bytes,
            "joiner_store_mib": round(held_bytes / 2**20, 1),
            "start_to_active_s": round(wall, 2),
            "sync_elapsed_s": sync_s, "batches": done.get("batches"),
            "keys_per_s": round(keys / sync_s) if sync_s > 0 else None,
            "joiner_peak_rss_mib": rss, "sources_peak_rss_mib": sources_rss}


def last_sync_done(journal: Path) -> dict[str, Any]:
    """The joiner's last ``sync-done`` event, reading its journal a line at a time (its
    ``apply`` events hold every value it learned)."""
    done = None
    with journal.open(encoding="utf-8") as f:
        for line in f:
            if '"sync-done"' in line:
                done = json.loads(line)
    if done is None:
        raise RuntimeError(f"no sync-done in {journal}")
    return done


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000, help="keys the mesh holds (10000)")
    ap.add_argument("--jwt-mode", choices=("public", "shared"), default="public")
    ap.add_argument("--value-bytes", type=int, default=None,
                    help=f"each value a string of this many bytes of JSON (3..{MAX_VALUE_BYTES})")
    ap.add_argument("--nodes", type=int, default=5,
                    help="mesh size, the joiner included (5; 4 = a 3-node mesh and a joiner)")
    a = ap.parse_args()
    if a.nodes < 3:
        ap.error("--nodes must be at least 3 (two sources to change membership, a joiner)")
    if a.keys < 1:
        ap.error("--keys must be at least 1")
    if a.value_bytes is not None and not 3 <= a.value_bytes <= MAX_VALUE_BYTES:
        ap.error(f"--value-bytes must be 3..{MAX_VALUE_BYTES} (the nodes' max_value_bytes)")
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(await bench(Path(d) / "mesh", a.keys, a.jwt_mode, a.value_bytes, a.nodes)))


if __name__ == "__main__":
    asyncio.run(main())
