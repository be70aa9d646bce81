"""DRiP sync bench: a node added to a running mesh that holds N keys (spec 4.6).

Real node processes over TLS on loopback, a full mesh of ``--nodes`` (5), peers wired directly
(no proxy). All but the last start holding N keys; the last (the joiner) is decommissioned (it
never came up), added back through ``POST /admin/members``, then started on a fresh data
directory with ``join``. Prints, as JSON: the time to load the stores (``load_s``); the
sources' start to healthy and to active (each restarted on its data, so all but the lowest id
take a whole sync first: ``sources_resync_s``); the joiner's process start to ``active``, its
sync's own time, keys/s, value MB moved and MB/s; every node's peak RSS (``VmHWM``) and the
RSS sampled every 0.25 s per phase (the sources' while the joiner syncs).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from nodes.drip.codec import MAX_VALUE_BYTES, Item  # noqa: E402


def status_mib(pid: int, field: str = "VmHWM") -> float:
    """A memory line of the process's ``/proc`` status (``VmHWM``: its peak resident set;
    ``VmRSS``: now), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no {field} in /proc/{pid}/status: is this Linux?")


def peak_rss_mib(pid: int) -> float:
    return status_mib(pid, "VmHWM")


@dataclass
class RssSampler:
    """Samples every node's resident set every ``every_s`` and keeps the largest per phase
    (``VmHWM`` alone cannot tell a source's start-up peak from its peak while serving)."""

    m: Mesh
    every_s: float = 0.25
    phase: str = "start"
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            for nid, proc in list(self.m.procs.items()):
                if proc.poll() is None:
                    try:
                        rss = status_mib(proc.pid, "VmRSS")
                    except (OSError, RuntimeError):
                        continue  # exited between the poll and the read
                    row = self.peaks.setdefault(self.phase, {})
                    row[nid] = max(row.get(nid, 0.0), rss)
            await asyncio.sleep(self.every_s)


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
    t_load = time.monotonic()
    # the mesh already holds the keys (written in slices of 100: bounded memory here), the
    # first store written, the others copies of it
    m.preload(old[:1], lambda: (it for start in range(0, keys, 100)
                                for it in seed_items(keys, value_bytes, start, 100)))
    for n in old[1:]:
        (root / n / "data").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / old[0] / "data" / "drip.sqlite3", root / n / "data" / "drip.sqlite3")
    load_s = time.monotonic() - t_load
    m.set_options(joiner, join=True)
    rss = RssSampler(m)
    sampler = asyncio.ensure_future(rss.run())
    try:
        t_start = time.monotonic()
        for n in old:
            m.start_node(n)
        # a start reads only metadata (nodes/drip/store.py kv_meta): seconds, not minutes
        await asyncio.gather(*(m.wait_healthy(n, timeout=120) for n in old))
        healthy_s = time.monotonic() - t_start
        sources_active_s: float | None = None
        async with aiohttp.ClientSession() as s:
            if len(old) > 1:
                # each source restarted on its data, so it syncs (spec 4.6): the lowest id
                # goes active on its own data, the others take a whole sync from an active one
                await wait_active(m, s, old, timeout=3600)
                sources_active_s = time.monotonic() - t_start
                rss.phase = "membership"
                await asyncio.sleep(2)  # a few heartbeat rounds: every peer up
                await change_members(m, s, old[0], "m-remove", remove=[joiner])
                await wait_epoch(m, s, old, 1)  # the commit reaches the others after the answer
                await change_members(m, s, old[1], "m-add", add=[joiner])
                await wait_epoch(m, s, old, 2)
            # else one source and a configured joiner: the source cannot go active with no peer
            # up, so it does once the syncing joiner answers (the lowest id goes first) and the
            # joiner then syncs from it; no membership change
            rss.phase = "joiner-sync"
            t0 = time.monotonic()
            m.start_node(joiner)
            await m.wait_healthy(joiner, timeout=120)
            await wait_active(m, s, [joiner, *old[:1]], timeout=3600)
            wall = time.monotonic() - t0
            await asyncio.sleep(3)  # a few heartbeat rounds: the syncs the joiner owes back
            hwm = {n: peak_rss_mib(m.procs[n].pid) for n in m.ids}
    finally:
        sampler.cancel()
        m.close()
    disk = {n: dir_mib(root / n / "data") for n in m.ids}
    journals = {n: round((root / n / "data" / "events.jsonl").stat().st_size / 2**20, 1)
                for n in m.ids}
    held, held_bytes = stored(root / joiner / "data" / "drip.sqlite3")
    if held < keys:
        raise RuntimeError(f"{joiner} went active holding {held} of {keys} keys")
    jev = sync_events(root / joiner / "data" / "events.jsonl")
    first = next((i for i, e in enumerate(jev) if e["type"] == "sync-done"), None)
    if first is None:
        raise RuntimeError(f"no sync-done in {joiner}'s journal")
    done, parts = jev[first], jev[:first + 1]  # every part of the joining sync
    sync_s = float(done["elapsed_s"])
    sev = {n: sync_events(root / n / "data" / "events.jsonl") for n in old}
    resyncs = {n: next((e for e in ev if e["type"] == "sync-done"), {}) for n, ev in sev.items()}

    def moved_mb(items: int | None) -> float | None:
        return None if value_bytes is None or items is None else round(
            items * value_bytes / 1e6, 1)

    def items_of(evs: list[dict[str, Any]]) -> int | None:
        """Items over these sync events (None: a node older than their ``items`` field)."""
        return None if any("items" not in e for e in evs) else sum(e["items"] for e in evs)
    # what each source took in its own resync (from another source), and what the sources
    # took back from the joiner (owed to them because it learned by sync): items over all parts
    resync_items = {n: items_of([e for e in ev if e["source"] != joiner])
                    for n, ev in sev.items()}
    back_items = {n: items_of([e for e in ev if e["source"] == joiner]) for n, ev in sev.items()}
    joiner_items = items_of(parts)
    during = rss.peaks.get("joiner-sync", {})
    return {"jwt_mode": jwt_mode, "nodes": nodes, "keys": keys, "value_bytes": value_bytes,
            "load_s": round(load_s, 1),
            "sources_healthy_s": round(healthy_s, 1),
            "sources_active_s": None if sources_active_s is None else round(sources_active_s, 1),
            "sources_resync_s": {n: d.get("elapsed_s") for n, d in resyncs.items()},
            "sources_resync_batches": {n: sum(e.get("batches", 0) for e in ev
                                              if e["source"] not in (None, joiner))
                                       for n, ev in sev.items()},
            "sources_resync_items": resync_items,
            "sources_resync_mb_moved": {n: moved_mb(i) for n, i in resync_items.items()},
            "sources_took_back_from_joiner_items": back_items,
            "sources_syncs_from_joiner": {n: sum(e["source"] == joiner for e in ev)
                                          for n, ev in sev.items()},
            "joiner_store_mib": round(held_bytes / 2**20, 1),
            "start_to_active_s": round(wall, 2),
            "sync_elapsed_s": sync_s, "sync_parts": len(parts),
            "batches": sum(e.get("batches", 0) for e in parts),
            "joiner_items_moved": joiner_items, "joiner_mb_moved": moved_mb(joiner_items),
            "keys_per_s": round(keys / sync_s) if sync_s > 0 else None,
            # values moved (their bytes as stored: JSON), over the sync's own time
            "value_mb_moved": round(held_bytes / 1e6, 1),
            "mb_per_s": round(held_bytes / 1e6 / sync_s, 1) if sync_s > 0 else None,
            # each node's data directory (store, journal, records) and journal, once stopped
            "disk_mib": disk, "journal_mib": journals,
            "joiner_peak_rss_mib": hwm[joiner],
            "sources_peak_rss_mib": {n: hwm[n] for n in old},
            # sampled every 0.25 s while the joiner synced (the sources' VmHWM includes
            # their own start-up and resync)
            "sampled_rss_during_join_mib": during,
            "sampled_rss_by_phase_mib": rss.peaks}


def dir_mib(d: Path) -> float:
    """The bytes the files under ``d`` hold, in MiB."""
    return round(sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20, 1)


def sync_events(journal: Path) -> list[dict[str, Any]]:
    """A node's ``sync-done`` and ``sync-abandoned`` events (each with the items it moved),
    reading its journal a line at a time (a long file: an ``apply`` per key learned)."""
    out = []
    with journal.open(encoding="utf-8") as f:
        for line in f:
            if '"sync-done"' in line or '"sync-abandoned"' in line:
                e = json.loads(line)
                if e.get("type") in ("sync-done", "sync-abandoned"):
                    out.append(e)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000, help="keys the mesh holds (10000)")
    ap.add_argument("--jwt-mode", choices=("public", "shared"), default="public")
    ap.add_argument("--value-bytes", type=int, default=None,
                    help=f"each value a string of this many bytes of JSON (3..{MAX_VALUE_BYTES})")
    ap.add_argument("--nodes", type=int, default=5,
                    help="mesh size, the joiner included (5; 4 = a 3-node mesh and a joiner; "
                         "2 = one source and a joiner: the least disk for large stores)")
    a = ap.parse_args()
    if a.nodes < 2:
        ap.error("--nodes must be at least 2 (a source and a joiner)")
    if a.keys < 1:
        ap.error("--keys must be at least 1")
    if a.value_bytes is not None and not 3 <= a.value_bytes <= MAX_VALUE_BYTES:
        ap.error(f"--value-bytes must be 3..{MAX_VALUE_BYTES} (the nodes' max_value_bytes)")
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(await bench(Path(d) / "mesh", a.keys, a.jwt_mode, a.value_bytes, a.nodes)))


if __name__ == "__main__":
    asyncio.run(main())
