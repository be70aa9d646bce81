"""DRiP sync bench: a node added to a running mesh that holds N keys (spec 4.6).

Real node processes over TLS on loopback, full mesh of 5, peers wired directly (no proxy).
n1..n4 start holding N keys; n5 is decommissioned (it never came up), added back through
``POST /admin/members``, then started on a fresh data directory with ``join``. Prints the time
from its process start to ``active``, the sync's own time and keys/s, and the joiner's peak
RSS and each source's (``VmHWM`` of each process, read once the joiner is active), as JSON.
``--value-bytes`` makes every value a string of that many bytes of JSON (default: a small
object), to measure a sync of large values (nodes/drip/sync.py bounds each batch).
Run: ``.venv/bin/python bench/bench_drip_sync.py [--keys 10000] [--value-bytes 1048576]
[--jwt-mode public|shared]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

JOINER = "n5"


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status: is this Linux?")


async def change_members(m: Mesh, s: aiohttp.ClientSession, at: str, uid: str,
                         **change: list[str]) -> None:
    async with s.post(m.admin(at) + "/admin/members", json={"id": uid, **change},
                      timeout=aiohttp.ClientTimeout(total=20)) as r:
        if r.status != 200:
            raise RuntimeError(f"membership change {change} at {at}: {r.status} {await r.text()}")


async def wait_epoch(m: Mesh, s: aiohttp.ClientSession, nodes: list[str], epoch: int) -> None:
    deadline = time.monotonic() + 20
    while not all(st["epoch"] >= epoch for st in [await m.state(s, n) for n in nodes]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{nodes} did not all reach membership epoch {epoch} in 20 s")
        await asyncio.sleep(0.05)


def seed_items(keys: int, value_bytes: int | None, start: int, n: int) -> list[Item]:
    """Keys ``start..start+n``: a small object each, or a string of ``value_bytes`` JSON."""
    big = None if value_bytes is None else "v" * (value_bytes - 2)  # 2: the JSON quotes
    return [Item(f"key{i:06d}", {"route": i} if big is None else big, 1, f"seed-{i}", None)
            for i in range(start, min(keys, start + n))]


async def bench(root: Path, keys: int, jwt_mode: str, value_bytes: int | None = None
                ) -> dict[str, Any]:
    m = Mesh(root, 5, options={"jwt_mode": jwt_mode})
    old = [n for n in m.ids if n != JOINER]
    # the mesh already holds the keys (written in slices of 100: bounded memory here)
    m.preload(old, lambda: (it for start in range(0, keys, 100)
                            for it in seed_items(keys, value_bytes, start, 100)))
    m.set_options(JOINER, join=True)
    try:
        for n in old:
            m.start_node(n)
        await asyncio.gather(*(m.wait_healthy(n, timeout=600) for n in old))  # large stores load slowly
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s, nodes=old, timeout=600)
            await change_members(m, s, old[0], "m-remove", remove=[JOINER])
            await wait_epoch(m, s, old, 1)  # the commit reaches the others after the answer
            await change_members(m, s, old[1], "m-add", add=[JOINER])
            await wait_epoch(m, s, old, 2)
            t0 = time.monotonic()
            m.start_node(JOINER)
            await m.wait_healthy(JOINER, timeout=120)
            await m.wait_all_active(s, nodes=[JOINER], timeout=600)
            wall = time.monotonic() - t0
            rss = peak_rss_mib(m.procs[JOINER].pid)
            sources_rss = {n: peak_rss_mib(m.procs[n].pid) for n in old}
            st = await m.state(s, JOINER)
            if len(st["kv"]) < keys:
                raise RuntimeError(f"{JOINER} went active holding {len(st['kv'])} of {keys} keys")
    finally:
        m.close()
    evs = [json.loads(line) for line in  # the journal, whole: the admin API pages it
           (root / JOINER / "data" / "events.jsonl").read_text().splitlines()]
    done = [e for e in evs if e["type"] == "sync-done"][-1]
    sync_s = float(done["elapsed_s"])
    return {"jwt_mode": jwt_mode, "keys": keys, "value_bytes": value_bytes,
            "start_to_active_s": round(wall, 2),
            "sync_elapsed_s": sync_s, "batches": done.get("batches"),
            "keys_per_s": round(keys / sync_s) if sync_s > 0 else None,
            "joiner_peak_rss_mib": rss, "sources_peak_rss_mib": sources_rss}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000, help="keys the mesh holds (10000)")
    ap.add_argument("--jwt-mode", choices=("public", "shared"), default="public")
    ap.add_argument("--value-bytes", type=int, default=None,
                    help=f"each value a string of this many bytes of JSON (3..{MAX_VALUE_BYTES})")
    a = ap.parse_args()
    if a.keys < 1:
        ap.error("--keys must be at least 1")
    if a.value_bytes is not None and not 3 <= a.value_bytes <= MAX_VALUE_BYTES:
        ap.error(f"--value-bytes must be 3..{MAX_VALUE_BYTES} (the nodes' max_value_bytes)")
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(await bench(Path(d) / "mesh", a.keys, a.jwt_mode, a.value_bytes)))


if __name__ == "__main__":
    asyncio.run(main())
