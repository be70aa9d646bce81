"""DRiP under hostile traffic: 10,000 hostile requests (nodes/drip/hostile.py: every attack
kind, from compromised members and unauthenticated clients) against a 5-node figure-1 mesh
while closed-loop clients update, beside a quiet phase of the same clients.

Figures: each node's RSS before and after the hostile phase (issue 26 asks for flat), the
commits per second during it vs the quiet phase (issue 26: within 20%), what the attacker saw
answered for the vote-round kinds, and what each node refused.

Real node processes over TLS on loopback, peers wired directly (no proxy; `drip_mesh.Mesh`),
the hostile sender built as the harness builds it (`nodes.drip.hostile.driver` on the nodes'
own configs). The attacker, the clients and the five nodes share this machine: on a busy
2-core machine the ratio includes the attacker's own CPU.

Run: ``.venv/bin/python bench/bench_drip_hostile.py [--requests 10000] [--rate 100]
[--clients 8] [--quiet-s 20]`` (Linux: RSS is read from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from faults.hostile import Target  # noqa: E402
from nodes.drip.hostile import HostileDrip, driver  # noqa: E402
from nodes.drip.topology import figure1  # noqa: E402

#: the kinds that meet the core's vote-round checks (their answers are printed)
CORE_KINDS = ("commit-without-vote", "commit-other-initiator", "revote-applied",
              "sync-unsolicited")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sample(m: Mesh) -> dict[str, tuple[float, float]]:
    """Per node: (RSS MiB, CPU seconds); ``bench``: this process's CPU (attacker, clients)."""
    out = {n: (rss_mib(m.procs[n].pid), cpu_s(m.procs[n].pid)) for n in m.ids}
    return {**out, "bench": (0.0, time.process_time())}


async def updates(m: Mesh, s: aiohttp.ClientSession, clients: int, tag: str,
                  done: asyncio.Event) -> tuple[int, int, float]:
    """Closed-loop clients on every node until ``done``: (commits, other answers, seconds)."""
    counts = [0, 0]

    async def worker(c: int) -> None:
        i = 0
        while not done.is_set():
            st, _ = await m.update(s, m.ids[c % len(m.ids)], f"c{c}-k{i % 50}", i,
                                   f"{tag}{c}-{i}")
            counts[0 if st == 200 else 1] += 1
            i += 1

    t0 = time.monotonic()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    return counts[0], counts[1], time.monotonic() - t0


async def phase(m: Mesh, s: aiohttp.ClientSession, clients: int, tag: str, seconds: float
                ) -> tuple[int, int, float]:
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, done.set)
    return await updates(m, s, clients, tag, done)


async def hostile_phase(m: Mesh, s: aiohttp.ClientSession, h: HostileDrip, requests: int,
                        clients: int) -> tuple[int, int, float]:
    """The clients while ``h`` sends until ``requests`` were written."""
    done = asyncio.Event()

    async def attack() -> None:
        h.start()
        try:
            while sum(v["sent"] for v in h.counts().values()) < requests:
                await asyncio.sleep(0.2)
        finally:
            await h.stop()
            done.set()

    load = asyncio.create_task(updates(m, s, clients, "h", done))
    await attack()
    return await load


async def run(root: Path, requests: int, rate: float, clients: int, quiet_s: float
              ) -> dict[str, Any]:
    m = Mesh(root, 5, figure1([f"n{i}" for i in range(1, 6)]),
             options={"hostile_rate": rate})
    try:
        await m.start()
        configs = {n: json.loads(m.configs[n].read_text()) for n in m.ids}
        h = driver([Target(n, i + 1, "127.0.0.1", m.ports[n]["peer"])
                    for i, n in enumerate(m.ids)], random.Random(26), configs)
        try:
            async with aiohttp.ClientSession() as s:
                await m.wait_all_active(s)
                await phase(m, s, clients, "w", 5.0)  # warm up: imports, buffers, first keys
                q0 = sample(m)
                quiet = await phase(m, s, clients, "q", quiet_s)
                before = sample(m)
                during = await hostile_phase(m, s, h, requests, clients)
                after = sample(m)
                await m.wait_all_active(s)
                states = {n: await m.state(s, n) for n in m.ids}
        finally:
            h.close()
        alive = {n: m.procs[n].poll() is None for n in m.ids}
    finally:
        m.close()
    counts = h.counts()
    return {"quiet": quiet, "during": during, "q0": q0, "before": before, "after": after,
            "alive": alive, "sent": sum(v["sent"] for v in counts.values()),
            "status": {k: _sum(counts, k) for k in CORE_KINDS},
            "refused": {n: st.get("refused", {}) for n, st in states.items()}}


def _per(mib: float, commits: int) -> str:
    return f"{mib * 1024 / commits:.2f} KiB" if commits else "n/a"


def _sum(counts: dict[str, dict[str, Any]], kind: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts.values():
        for code, k in c["status"].get(kind, {}).items():
            out[code] = out.get(code, 0) + k
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=100.0, help="hostile requests a second")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--quiet-s", type=float, default=20.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        r = asyncio.run(run(Path(d), a.requests, a.rate, a.clients, a.quiet_s))
    (qc, qo, qs), (hc, ho, hs) = r["quiet"], r["during"]
    print(f"drip 5 nodes (figure 1): {r['sent']} hostile requests in {hs:.1f} s "
          f"({r['sent'] / hs:.0f}/s)")
    print(f"commits: quiet {qc / qs:.1f}/s ({qo} not committed), during hostile "
          f"{hc / hs:.1f}/s ({ho} not committed): {hc / hs / (qc / qs):.0%} of quiet")
    q0, b, af = r["q0"], r["before"], r["after"]
    for n in sorted(r["alive"]):
        print(f"{n}: RSS {b[n][0]:.1f} MiB before, {af[n][0]:.1f} MiB after "
              f"({af[n][0] - b[n][0]:+.1f}; quiet phase {b[n][0] - q0[n][0]:+.1f}); RSS grown "
              f"per commit: quiet {_per(b[n][0] - q0[n][0], qc)}, hostile "
              f"{_per(af[n][0] - b[n][0], hc)}; CPU s/s: quiet {(b[n][1] - q0[n][1]) / qs:.2f}, "
              f"hostile {(af[n][1] - b[n][1]) / hs:.2f}; alive {r['alive'][n]}")
    print(f"bench process (clients and attacker) CPU s/s: quiet "
          f"{(b['bench'][1] - q0['bench'][1]) / qs:.2f}, hostile "
          f"{(af['bench'][1] - b['bench'][1]) / hs:.2f}")
    print("answers to the vote-round attacks:", json.dumps(r["status"]))
    total: dict[str, int] = {}
    for ref in r["refused"].values():
        for k, v in ref.items():
            total[k] = total.get(k, 0) + v
    print("refused (all nodes):", json.dumps(dict(sorted(total.items()))))


if __name__ == "__main__":
    main()
