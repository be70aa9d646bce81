"""Opt-in allocation tracing for memory soaks (bench/bench_soak.py): off unless the
environment names a file.

``GF_TRACEMALLOC=<path>`` starts ``tracemalloc`` when the node starts and, every
``GF_TRACEMALLOC_S`` seconds (default 60), rewrites ``<path>.<pid>`` with the 25 source
lines whose live allocations grew most since the first dump. A node id is not known here,
so the pid keeps a restarted node's file apart from its predecessor's.
"""

from __future__ import annotations

import asyncio
import os
import tracemalloc
from pathlib import Path

TOP = 25


def enabled() -> bool:
    return bool(os.environ.get("GF_TRACEMALLOC"))


async def dump_loop() -> None:
    """Run until cancelled (the node's stop cancels its tasks)."""
    out = Path(f"{os.environ['GF_TRACEMALLOC']}.{os.getpid()}")
    every = float(os.environ.get("GF_TRACEMALLOC_S", "60"))
    tracemalloc.start(1)
    try:
        base = tracemalloc.take_snapshot()
        n = 0
        while True:
            await asyncio.sleep(every)
            n += 1
            snap = tracemalloc.take_snapshot()
            cur, _peak = tracemalloc.get_traced_memory()
            lines = [f"dump {n} after {n * every:.0f} s: traced {cur / 1e6:.1f} MB"]
            lines += [str(s) for s in snap.compare_to(base, "lineno")[:TOP]]
            out.write_text("\n".join(lines) + "\n")
    finally:
        tracemalloc.stop()
