"""Bench: what each backend costs. For a 5-node echo cluster through the real cluster
(Toxiproxy, 25 proxies), per backend:

- cluster start: ``Cluster.start`` until every node answers ``/admin/health`` (first
  cluster of a process separately: it pays the backend's one-time set-up, e.g. the ssh
  connection and code upload; the docker image is assumed built, see ``--build``);
- kill: ``kill`` returning (the node is dead); restart: ``restart`` until healthy again;
- pause, resume: the call returning (the node is frozen / runs again);
- close: tearing the cluster down (docker: stop, copy volumes home, remove).

Median over ``--reps`` (clusters for start/close, node cycles for the rest).

    .venv/bin/python bench/bench_backends.py [--backends local,docker,ssh] [--reps 5] [--build]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cluster import Cluster  # noqa: E402
from harness.spec import TestSpec  # noqa: E402
from harness.store import new_run  # noqa: E402
from tests.integration.harness.test_cluster import ECHO  # noqa: E402

NODES = 5


async def timed(aw: Awaitable[object]) -> float:
    t0 = time.perf_counter()
    await aw
    return (time.perf_counter() - t0) * 1000


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):8.1f} ms" if xs else "       -   "


async def bench_backend(backend: str, reps: int, store: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in
                                   ("first start", "start", "kill", "restart", "pause", "resume", "close")}
    for rep in range(reps):
        spec = TestSpec(name=f"bench-{backend}", protocol=ECHO, nodes=NODES, seed=rep,
                        backend=backend, store=str(store))
        t0 = time.perf_counter()
        c = Cluster(spec, new_run(spec.name, store))  # makes the backend (ssh: its sshd)
        try:
            await c.start()
            out["first start" if rep == 0 else "start"].append((time.perf_counter() - t0) * 1000)
            n = c.nodes[rep % NODES]
            out["kill"].append(await timed(c.kill(n)))
            out["restart"].append(await timed(c.restart(n)))
            out["pause"].append(await timed(c.pause(n)))
            out["resume"].append(await timed(c.resume(n)))
        finally:
            out["close"].append(await timed(c.close()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="local,docker,ssh")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build", action="store_true",
                    help="time building the node image first (removes it: a cold build)")
    a = ap.parse_args()
    if a.build:
        import docker

        from harness.backends.images.build import ensure_image, image_tag

        client = docker.from_env()
        try:
            client.images.remove(image_tag(), force=True)
        except docker.errors.ImageNotFound:
            pass
        t0 = time.perf_counter()
        ensure_image(client)
        print(f"node image cold build: {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        ensure_image(client)
        print(f"node image cached:     {(time.perf_counter() - t0) * 1000:.1f} ms")
    print(f"{NODES}-node echo cluster, median of {a.reps}")
    print(f"{'backend':<14}" + "".join(f"{k:>12}" for k in
                                       ("first start", "start", "kill", "restart", "pause", "resume", "close")))
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as d:
        for b in a.backends.split(","):
            r = asyncio.run(bench_backend(b, a.reps, Path(d)))
            print(f"{b:<14}" + "".join(f"{med(v):>12}" for v in r.values()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
