"""Garlic Farm soak: does a node's resident memory stay flat under load with faults?

Runs a real 5-node Garlic Farm cluster through the harness's own runner (harness.runner,
the ``kv`` workload's client and generator, Toxiproxy links, the partition/kill/pause
nemesis) for ``--minutes``, and samples every node process's resident set size
(``/proc/<pid>/status`` VmRSS) every ``--every`` seconds. A killed and restarted node is a
new process: each incarnation is its own series. Printed per incarnation: RSS at the end of
its warm-up, RSS at its end, and the least-squares slope in MB/min over the samples after
the warm-up (incarnations shorter than the warm-up have no slope).

The run's checkers are only ``stats`` and ``faults`` (a linearizability check of a
15-minute, 30-client history is not what this bench measures). Exits 1 when the cluster
made no progress (no ok op after the warm-up). Ctrl-C stops the run; the runner tears the
nodes and proxies down on the way out.

Run: ``.venv/bin/python bench/bench_soak.py [--minutes 15] [--warmup 3] [--clients 30]
[--every 5] [--nemesis partition,kill,pause] [--interval 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.nemesis_generator import Faults
from harness.runner import run_test
from harness.spec import TestSpec, Workload
from harness.suites.garlicfarm import PROTOCOL, KVWorkloadClient, kv_generator
from vocabulary.history import read_history

MB = 1024 * 1024


@dataclass
class Series:
    """One node process's RSS samples: (seconds since the run started, bytes)."""

    node: str
    pid: int
    samples: list[tuple[float, int]] = field(default_factory=list)

    @property
    def start(self) -> float:
        return self.samples[0][0]

    @property
    def end(self) -> float:
        return self.samples[-1][0]

    def after(self, warmup_s: float) -> list[tuple[float, int]]:
        return [s for s in self.samples if s[0] >= self.start + warmup_s]


def slope_mb_per_min(samples: list[tuple[float, int]]) -> float | None:
    """Least-squares slope of RSS over time, in MB per minute (None under 3 samples)."""
    if len(samples) < 3:
        return None
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    if var == 0:
        return None
    cov = sum((t - mt) * (r - mr) for t, r in samples)
    return cov / var * 60 / MB


def node_pids(root: Path) -> dict[int, str]:
    """pid -> node id of every Garlic Farm node whose config lies under ``root``."""
    out: dict[int, str] = {}
    prefix = str(root)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if "nodes.garlicfarm" not in words or "--config" not in words:
            continue
        i = words.index("--config")
        if i + 1 < len(words) and words[i + 1].startswith(prefix):
            out[int(d)] = Path(words[i + 1]).parent.name
    return out


def rss_bytes(pid: int) -> int | None:
    """VmRSS of ``pid`` (None once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


async def sample(root: Path, every: float, t0: float, series: dict[int, Series]) -> None:
    """Every ``every`` s, add an RSS sample to each live node process's series."""
    while True:
        now = time.monotonic() - t0
        for pid, node in node_pids(root).items():
            rss = rss_bytes(pid)
            if rss is not None:
                series.setdefault(pid, Series(node, pid)).samples.append((now, rss))
        await asyncio.sleep(every)


def table(series: dict[int, Series], warmup_s: float) -> list[str]:
    """One row per incarnation, by node then start time."""
    rows = ["| node | pid | alive s | RSS at warm-up end MB | RSS at end MB | slope MB/min |",
            "|---|---|---|---|---|---|"]
    for s in sorted(series.values(), key=lambda s: (s.node, s.start)):
        post = s.after(warmup_s)
        slope = slope_mb_per_min(post) if s.end - s.start > warmup_s else None
        warm = f"{post[0][1] / MB:.1f}" if post else "-"
        sl = f"{slope:+.3f}" if slope is not None else "- (shorter than warm-up)"
        rows.append(f"| {s.node} | {s.pid} | {s.end - s.start:.0f} | {warm} | "
                    f"{s.samples[-1][1] / MB:.1f} | {sl} |")
    return rows


def soak_spec(a: argparse.Namespace, store: str) -> TestSpec:
    used: list[str] = []
    wl = Workload(client=KVWorkloadClient, generator=lambda spec: kv_generator(spec, used),
                  checkers={})
    return TestSpec(name="gf-soak", protocol=PROTOCOL, workload=wl, nodes=a.nodes,
                    faults=Faults(a.nemesis, a.interval), time_limit=a.minutes * 60,
                    seed=a.seed, concurrency=a.clients, store=store, options={})


async def soak(a: argparse.Namespace, store: Path) -> tuple[dict[int, Series], int, int]:
    """Run the cluster and the sampler side by side; returns the series and the ok ops
    before / after the warm-up."""
    series: dict[int, Series] = {}
    t0 = time.monotonic()
    sampler = asyncio.create_task(sample(store, a.every, t0, series))
    try:
        res = await run_test(soak_spec(a, str(store)))
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    hist = read_history(res.run_dir.history)
    oks = [op for op in hist.client_ops() if op.get("type") == "ok"]
    warm_ns = a.warmup * 60 * 1e9
    late = sum(1 for op in oks if op.get("time", 0) >= warm_ns)
    print(f"run dir: {res.run_dir.path}; {len(oks)} ok client ops, {late} after the warm-up; "
          f"checkers valid={res.valid}")
    return series, len(oks), late


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0, help="load duration (default 15)")
    ap.add_argument("--warmup", type=float, default=3.0, help="minutes ignored by the slope (default 3)")
    ap.add_argument("--clients", type=int, default=30)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--every", type=float, default=5.0, help="RSS sample period, s (default 5)")
    ap.add_argument("--nemesis", default="partition,kill,pause")
    ap.add_argument("--interval", type=float, default=5.0, help="s between faults (default 5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    a = ap.parse_args()
    if a.minutes <= a.warmup:
        ap.error(f"--minutes ({a.minutes}) must exceed --warmup ({a.warmup}) to give a slope")
    store = Path(tempfile.mkdtemp(prefix="gf-soak-"))
    try:
        series, ok, late = asyncio.run(soak(a, store))
    except KeyboardInterrupt:
        print("interrupted: nodes and proxies torn down", file=sys.stderr)
        return 130
    finally:
        if not a.keep:
            import shutil
            shutil.rmtree(store, ignore_errors=True)
    print(f"\nRSS per node process, {a.nodes} nodes, {a.clients} clients, nemesis {a.nemesis} "
          f"every {a.interval:g} s, {a.minutes:g} min, warm-up {a.warmup:g} min")
    print("\n".join(table(series, a.warmup * 60)))
    if late == 0:
        print(f"error: the cluster made no progress after the warm-up ({ok} ok ops in all); "
              "see the nodes' logs (rerun with --keep)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
