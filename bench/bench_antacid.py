"""ANTACID (ARS over BEEP) on 4 real node processes through Toxiproxy: committed update groups
per second through the zone primary, and propagation latency to the deepest replica, for a
chain (n1 <- n2 <- n3 <- n4) and a diamond (n1 <- {n2, n3} <- n4).

Phase 1, throughput: ``--clients`` closed-loop clients at the primary, each submitting a
one-document group and waiting for its SubmittedUpdateResultNotification (the commit) before the
next, for ``--seconds``. Figures: commits/s, commit latency (submit -> notification) p50/p99.
Phase 2, propagation: ``--probes`` sequential submissions at the primary, each timed from the
submit until n4's zone (its admin ``/antacid/zone``, polled every 5 ms) holds the document.

Run: ``.venv/bin/python -m bench.bench_antacid [--seconds 10] [--clients 4] [--probes 20]``.
Prints one JSON object per topology, then a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.cluster import Cluster, open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.antacid import PROTOCOL, ZONE
from nodes.antacid.client import AntacidClient


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1) if s else float("nan")


def _primary_client(c: Cluster) -> AntacidClient:
    addr = c.client_addr(0)  # n1 through its client link (Toxiproxy)
    assert addr.node == "n1"
    return AntacidClient(addr.host, addr.port)


async def _throughput(c: Cluster, clients: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    end = time.monotonic() + seconds

    async def one(i: int) -> None:
        nonlocal errors
        cl = _primary_client(c)
        await cl.start()
        try:
            k = 0
            while time.monotonic() < end:
                k += 1
                t0 = time.monotonic()
                try:
                    gsid = await cl.submit({f"{ZONE}.c{i}.{k % 16}": f"{i}:{k}"})
                    note = await cl.result(gsid, 20.0)
                except Exception:  # noqa: BLE001 - counted: a bench reports, it does not stop
                    errors += 1
                    continue
                if note.error is None:
                    lat.append((time.monotonic() - t0) * 1000)
                else:
                    errors += 1
        finally:
            await cl.close()

    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(clients)))
    took = time.monotonic() - t0
    return {"commits": len(lat), "errors": errors, "seconds": round(took, 2),
            "commits_per_s": round(len(lat) / took, 1),
            "commit_ms_p50": _pct(lat, 0.5), "commit_ms_p99": _pct(lat, 0.99)}


async def _propagation(c: Cluster, probes: int, deepest: str) -> dict[str, Any]:
    cl = _primary_client(c)
    await cl.start()
    lat: list[float] = []
    try:
        for k in range(probes):
            name, want = f"{ZONE}.probe{k}", f"p{k}"
            t0 = time.monotonic()
            await cl.submit({name: want})
            while time.monotonic() - t0 < 30.0:
                z = await c.admin(deepest, "GET", "/antacid/zone")
                if z["docs"].get(name, {}).get("content") == want:
                    lat.append((time.monotonic() - t0) * 1000)
                    break
                await asyncio.sleep(0.005)
    finally:
        await cl.close()
    return {"probes": probes, "reached": len(lat), "propagate_ms_p50": _pct(lat, 0.5),
            "propagate_ms_p99": _pct(lat, 0.99), "propagate_ms_max": _pct(lat, 1.0)}


async def run(shape: str, clients: int, seconds: float, probes: int, store: Path) -> dict[str, Any]:
    spec = TestSpec(name=f"bench-antacid-{shape}", protocol=PROTOCOL, nodes=4, seed=1,
                    store=str(store), options={"topology": shape})
    async with open_cluster(spec, new_run(spec.name, store)) as c:
        out: dict[str, Any] = {"topology": shape, "nodes": 4, "clients": clients}
        out |= await _throughput(c, clients, seconds)
        out |= await _propagation(c, probes, "n4")
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--topologies", default="chain,diamond")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-antacid-") as d:
        for shape in a.topologies.split(","):
            r = asyncio.run(run(shape, a.clients, a.seconds, a.probes, Path(d)))
            print(json.dumps(r), flush=True)
            rows.append(r)
    cols = ["topology", "clients", "commits_per_s", "commit_ms_p50", "commit_ms_p99",
            "propagate_ms_p50", "propagate_ms_p99", "errors"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[k]) for k in cols))


if __name__ == "__main__":
    main()
