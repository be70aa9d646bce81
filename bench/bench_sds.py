"""SDS on 5 nodes through the UDP relay: delivered messages/s and delivery latency at 0% and
10% loss, and the time to converge after a 30 s partition heals.

Closed-loop clients (each waits for ``ok`` before its next send) saturate the group for
``--seconds``; then loss stops and we wait for every log to be identical. Figures:

* delivered/s: messages sent in the window that reached all five logs, per second;
* latency: the sender's ``send`` event to each receiver's ``deliver`` event (node clocks,
  all on one machine), p50 / p99 in ms;
* converge: after ``stop-partition`` of a 30 s ``halves`` partition (clients keep sending to
  both sides during it), the time until all logs are identical and hold every sent message.

Run: ``.venv/bin/python -m bench.bench_sds [--seconds 15] [--partition-s 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.cluster import Cluster, open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.sds import PROTOCOL
from nodes.sds.client import SdsClient


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def _clients(c: Cluster, n: int, stop: asyncio.Event, tag: str) -> list[str]:
    sent: list[str] = []

    async def one(i: int) -> None:
        cl = SdsClient(c.client_addr(i).host, c.client_addr(i).port, i)
        k = 0
        try:
            while not stop.is_set():
                k += 1
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(3):
                        r = await cl.send(f"{tag}{i}:{k}:b")
                        sent.append(r["id"])
        finally:
            await cl.close()

    await asyncio.gather(*(one(i) for i in range(n)))
    return sent


async def _converged(c: Cluster, want: set[str]) -> bool:
    logs = []
    for n in c.nodes:
        st = await c.admin(n, "GET", "/admin/state", timeout=10)
        logs.append([e["id"] for e in st["log"]])
    return all(x == logs[0] for x in logs) and want <= set(logs[0])


async def _wait_converged(c: Cluster, want: set[str], limit_s: float = 120) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if await _converged(c, want):
            return time.monotonic() - t0
        await asyncio.sleep(0.1)
    return float("inf")


async def _events(c: Cluster) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for n in c.nodes:
        evs: list[dict[str, Any]] = []
        nxt = 0
        while True:
            got = await c.admin(n, "GET", f"/admin/events?since={nxt}", timeout=10)
            if not got["events"]:
                break
            evs += got["events"]
            nxt = got["next"]
        out[n] = evs
    return out


async def throughput(store: Path, loss: float, seconds: float, clients: int) -> dict[str, Any]:
    spec = TestSpec(name=f"bench-sds-loss{loss}", protocol=PROTOCOL, nodes=5, seed=11,
                    store=str(store))
    async with open_cluster(spec, new_run(spec.name, store)) as c:
        if loss:
            await c.nemesis_invoke({"f": "start-loss", "value": {"p": loss}})
        stop = asyncio.Event()
        task = asyncio.create_task(_clients(c, clients, stop, f"l{loss}-"))
        await asyncio.sleep(seconds)
        stop.set()
        sent = await task
        await c.heal_all()
        conv = await _wait_converged(c, set(sent))
        evs = await _events(c)
    send_t = {e["id"]: e["t"] for es in evs.values() for e in es if e["type"] == "send"}
    lat = [(e["t"] - send_t[e["id"]]) * 1000 for es in evs.values() for e in es
           if e["type"] == "deliver" and e["id"] in send_t]
    return {"loss": loss, "sent": len(sent), "delivered_per_s": len(sent) / seconds,
            "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99), "drain_s": conv}


async def partition(store: Path, hold_s: float, clients: int) -> dict[str, Any]:
    spec = TestSpec(name="bench-sds-partition", protocol=PROTOCOL, nodes=5, seed=12,
                    store=str(store))
    async with open_cluster(spec, new_run(spec.name, store)) as c:
        await c.nemesis_invoke({"f": "start-partition", "value": {"shape": "halves"}})
        stop = asyncio.Event()
        task = asyncio.create_task(_clients(c, clients, stop, "p-"))
        await asyncio.sleep(hold_s)
        stop.set()
        sent = await task
        await c.nemesis_invoke({"f": "stop-partition", "value": None})
        conv = await _wait_converged(c, set(sent))
    return {"partition_s": hold_s, "sent": len(sent), "converge_s": conv}


async def main_async(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        for loss in (0.0, 0.1):
            r = await throughput(Path(d), loss, a.seconds, a.clients)
            print(f"sds 5 nodes, loss {loss:.0%}: {r['sent']} messages in {a.seconds:g} s = "
                  f"{r['delivered_per_s']:.1f} delivered/s; latency p50 {r['p50_ms']:.1f} ms, "
                  f"p99 {r['p99_ms']:.1f} ms; all logs identical {r['drain_s']:.2f} s after "
                  "the load stopped", flush=True)
        p = await partition(Path(d), a.partition_s, a.partition_clients)
        print(f"sds 5 nodes, {p['partition_s']:g} s halves partition ({p['sent']} messages "
              f"sent during it): converged {p['converge_s']:.2f} s after heal", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--partition-s", type=float, default=30.0)
    ap.add_argument("--partition-clients", type=int, default=2)
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
