"""Bench: how fast link faults go on and come off on a 5-node cluster.

Proxies for 20 node-node links + 5 client links (25) on a real toxiproxy-server (ours, or
``TOXIPROXY_URL``'s). Times ``apply`` and ``heal`` of a halves partition (12 cut flows = 24
toxics on 12 proxies; the heal bounces those 12 proxies to drop half-cut connections), and of a
cut of every link (50 flows), median over ``--reps``. Target: under 50 ms each.

    .venv/bin/python bench/bench_faults.py [--reps 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faults import partitions as P  # noqa: E402
from faults.links import Kind, TcpLinks, flow_targets, node_pairs  # noqa: E402
from faults.toxiproxy import ToxiproxyServer  # noqa: E402
from faults.udp_relay import UdpLinks, UdpRelay  # noqa: E402

NODES = ["n1", "n2", "n3", "n4", "n5"]
TARGET_MS = 50.0


async def time_apply_heal(links: TcpLinks | UdpLinks, flows: frozenset[P.Flow],
                          reps: int) -> tuple[float, float]:
    apply_ms, heal_ms = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        await links.apply(Kind.CUT, flows)
        t1 = time.perf_counter()
        await links.heal()
        t2 = time.perf_counter()
        apply_ms.append((t1 - t0) * 1000)
        heal_ms.append((t2 - t1) * 1000)
    return statistics.median(apply_ms), statistics.median(heal_ms)


def line(name: str, apply_ms: float, heal_ms: float) -> str:
    ok = "ok" if max(apply_ms, heal_ms) < TARGET_MS else f"OVER {TARGET_MS:.0f} ms"
    return f"{name:<44} apply {apply_ms:6.2f} ms   heal {heal_ms:6.2f} ms   {ok}"


async def bench(url: str, reps: int) -> None:
    pairs = node_pairs(NODES, include_client=True)
    links = await TcpLinks.create(ToxiproxyServer(url).client(f"bench{os.getpid()}-"),
                                  {pair: "127.0.0.1:9" for pair in pairs})
    try:
        halves = P.halves(NODES)
        everything = P.all_flows(NODES, include_client=True)
        print(f"toxiproxy {url}: {len(links.listen)} proxies, median of {reps}")
        def toxics(flows: frozenset[P.Flow]) -> int:
            return sum(len(flow_targets(f, links.links)) for f in flows)
        print(line(f"halves ({len(halves)} flows, {toxics(halves)} toxics)",
                   *await time_apply_heal(links, halves, reps)))
        print(line(f"cut all ({len(everything)} flows, {toxics(everything)} toxics)",
                   *await time_apply_heal(links, everything, reps)))
        links.reset_connections_on_heal = False
        print(line("halves, heal without connection reset",
                   *await time_apply_heal(links, halves, reps)))
    finally:
        await links.close()

    relay = UdpRelay(seed=0)
    udp = await UdpLinks.create(relay, {pair: "127.0.0.1:9" for pair in pairs})
    try:
        print(line("udp relay (in-process), halves",
                   *await time_apply_heal(udp, P.halves(NODES), reps)))
    finally:
        await udp.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    with ToxiproxyServer.from_env() as server:
        asyncio.run(bench(server.url, args.reps))


if __name__ == "__main__":
    main()
