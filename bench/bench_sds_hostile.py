"""SDS under hostile traffic: 10,000 hostile datagrams (nodes/sds/hostile.py, sent straight
to each node's peer port by the ``start-hostile`` nemesis) against 3 local nodes while
closed-loop clients send, beside a quiet run of the same length.

Figures: each node's RSS before and after, beside its log length (the honest clients' log
grows during the run; refused messages should leave nothing behind), the clients' acknowledged sends per second during the hostile phase
vs the quiet phase (issue 24 asks for within 20%), and what each node refused.

Memory is "flat apart from log growth" when the RSS grown per new log entry during the
hostile phase is about what it is during the quiet phase (both printed): refused messages
add nothing of their own.

The hostile datagrams go at a fixed ``--rate`` (default 1,000 a second over the 3 nodes, so
10,000 take about as long as the quiet phase); a third of them fill a whole UDP datagram.

Run: ``.venv/bin/python -m bench.bench_sds_hostile [--datagrams 10000] [--rate 1000]
[--clients 4]``
(local backend only: RSS is read from /proc). The hostile datagrams are built and sent by
this process, which also runs the clients: on a busy 2-core machine the throughput ratio
includes that load.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_sds import _clients
from harness.cluster import Cluster, open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.sds import PROTOCOL
from nodes.sds.hostile import refusals


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _rss(c: Cluster) -> dict[str, int]:
    return {n: _rss_kib(c.backend.pid(n)) for n in c.nodes}


async def _phase(c: Cluster, seconds: float, clients: int, tag: str) -> float:
    """Acknowledged sends per second of ``clients`` closed-loop clients for ``seconds``."""
    stop = asyncio.Event()
    task = asyncio.create_task(_clients(c, clients, stop, tag))
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    stop.set()
    sent = await task
    return len(sent) / (time.monotonic() - t0)


#: datagrams one hostile burst sends each node (nodes/sds/hostile.py: every kind once, two replays)
BURST_PER_NODE = 10


async def _hostile(c: Cluster, datagrams: int, rate: float) -> tuple[int, float]:
    """Bursts at ``rate`` datagrams a second until ``datagrams`` were sent; (sent, seconds)."""
    t0 = time.monotonic()
    interval = BURST_PER_NODE * len(c.nodes) / rate
    await c.nemesis_invoke({"f": "start-hostile", "value": {"interval_s": interval}})
    sent = 0
    try:
        while sent < datagrams:
            await asyncio.sleep(0.5)
            sent = sum(v["sent"] for v in c._hostile.counts().values())
    finally:
        await c.nemesis_invoke({"f": "stop-hostile", "value": None})
    return sent, time.monotonic() - t0


async def _logs(c: Cluster) -> dict[str, int]:
    return {n: len((s or {}).get("log", [])) for n, s in (await c.states()).items()}


async def run(store: Path, datagrams: int, rate: float, clients: int, warm_s: float
              ) -> dict[str, Any]:
    spec = TestSpec(name="bench-sds-hostile", protocol=PROTOCOL, nodes=3, seed=13,
                    store=str(store))
    async with open_cluster(spec, new_run(spec.name, store)) as c:
        await _phase(c, warm_s, clients, "w-")  # warm up: imports, buffers, first log
        rss_quiet, log_quiet = _rss(c), await _logs(c)
        quiet = await _phase(c, warm_s, clients, "q-")
        before, log_before = _rss(c), await _logs(c)
        task = asyncio.create_task(_hostile(c, datagrams, rate))
        t0 = time.monotonic()
        stop = asyncio.Event()
        load = asyncio.create_task(_clients(c, clients, stop, "h-"))
        sent, took = await task
        stop.set()
        acked = len(await load)
        during = acked / (time.monotonic() - t0)
        after = _rss(c)
        states = await c.states()
    return {"quiet": quiet, "during": during, "sent": sent, "took": took,
            "rss_quiet": rss_quiet, "log_quiet": log_quiet,
            "before": before, "after": after, "log_before": log_before,
            "log_after": {n: len((s or {}).get("log", [])) for n, s in states.items()},
            "refused": {n: refusals(s or {}) for n, s in states.items()}}


async def main_async(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        r = await run(Path(d), a.datagrams, a.rate, a.clients, a.quiet_s)
    print(f"sds 3 nodes: {r['sent']} hostile datagrams in {r['took']:.1f} s "
          f"({r['sent'] / r['took']:.0f}/s)")
    print(f"throughput: quiet {r['quiet']:.1f} sends/s, during hostile {r['during']:.1f} "
          f"sends/s ({r['during'] / r['quiet']:.0%} of quiet)")
    for n in sorted(r["before"]):
        q = _per_entry(r["rss_quiet"][n], r["before"][n], r["log_quiet"][n], r["log_before"][n])
        h = _per_entry(r["before"][n], r["after"][n], r["log_before"][n], r["log_after"][n])
        print(f"{n}: RSS {r['before'][n] / 1024:.1f} MiB before, {r['after'][n] / 1024:.1f} MiB "
              f"after (log {r['log_before'][n]} -> {r['log_after'][n]} entries); RSS grown "
              f"per new log entry: quiet {q}, hostile {h}; refused {r['refused'][n]}")


def _per_entry(rss0: int, rss1: int, log0: int, log1: int) -> str:
    return f"{(rss1 - rss0) / (log1 - log0):.2f} KiB" if log1 > log0 else "n/a (log unchanged)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datagrams", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=1000.0, help="hostile datagrams a second")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--quiet-s", type=float, default=10.0)
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
