"""Bench: the linearizability checker on Porcupine's test data.

Prints the total time for all 102 etcd histories (one process), then, for each of
c01/c10/c50 ok/bad, the check time and the peak memory, each file in a fresh subprocess so
that its peak RSS is its own (interpreter and imports included; the baseline is printed).
Targets (issue 5, 2-core machine): all etcd files under 1 s together; every kv file under
5 s and under 1 GiB peak.

    .venv/bin/python bench/bench_linearizable.py [--data DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from checkers.linearizable import Budget, check, read_file
from checkers.linearizable.models import KV

#: beside the project: <root>/../shared/data/porcupine-test-data (override with --data)
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "porcupine-test-data"
KV_FILES = ["c01-ok", "c01-bad", "c10-ok", "c10-bad", "c50-ok", "c50-bad"]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def one_kv(path: Path) -> dict:
    """Check one kv file in this process; report time and this process's peak RSS."""
    base = peak_mb()
    h = read_file(path, "porcupine-kv")
    t0, c0 = time.perf_counter(), time.process_time()
    r = check(h, KV(initial=""), Budget(time_s=60, memory_mb=1024))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"file": path.stem, "valid": r.valid, "ops": r.ops, "check_s": round(dt, 4),
            "cpu_s": round(cpu, 4),
            "peak_rss_mb": round(peak_mb(), 1), "baseline_rss_mb": round(base, 1),
            "explored": r.explored, "parts": len(r.parts)}


def etcd_total(data: Path) -> tuple[float, float, int, int]:
    """Wall and CPU seconds to parse and check every etcd file, and the (valid, invalid) counts.

    The empty etcd_095.log is checked too but not counted (it has no expected verdict).
    """
    files = sorted((data / "jepsen").glob("etcd_*.log"))
    t0, c0 = time.perf_counter(), time.process_time()
    ok = bad = 0
    for f in files:
        r = check(read_file(f, "porcupine-etcd"), "cas-register", Budget(time_s=60))
        ok += r.valid is True and r.ops > 0
        bad += r.valid is False
    return time.perf_counter() - t0, time.process_time() - c0, ok, bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeat", type=int, default=3, help="etcd runs; the best is printed")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # worker mode: one kv file
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one_kv(Path(a.one))))
        return
    if not (a.data / "jepsen").is_dir():
        sys.exit(f"no Porcupine test data at {a.data}: check out ../shared/data/porcupine-test-data "
                 f"beside the project, or point --data at a copy")
    runs = [etcd_total(a.data) for _ in range(a.repeat)]
    best = min(runs)
    print(f"etcd: {best[2] + best[3]} non-empty files ({best[2]} linearizable, {best[3]} not), "
          f"total {best[0]:.3f} s wall, {best[1]:.3f} s CPU (best of {a.repeat}; target < 1 s)")
    print(f"{'file':8} {'valid':>6} {'ops':>5} {'check_s':>8} {'cpu_s':>7} {'peak_rss_mb':>12} (baseline)")
    for name in KV_FILES:
        p = subprocess.run([sys.executable, __file__, "--one", str(a.data / "kv" / f"{name}.txt")],
                           capture_output=True, text=True, check=True)
        d = json.loads(p.stdout)
        print(f"{name:8} {d['valid']!s:>6} {d['ops']:>5} {d['check_s']:>8.3f} {d['cpu_s']:>7.3f} "
              f"{d['peak_rss_mb']:>12.1f} ({d['baseline_rss_mb']:.1f})")
    print("targets: each kv file < 5 s and < 1024 MiB peak")


if __name__ == "__main__":
    main()
