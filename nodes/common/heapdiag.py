"""Heap diagnosis for a node process, off unless asked for: ``NODE_HEAPDIAG=DIR`` in a node's
environment starts `tracemalloc` at import and makes ``SIGUSR2`` write a snapshot.

Why: issue 26's long attack grew node RSS by 40-58 MiB and the question is *what* grows. RSS
alone cannot tell Python objects kept alive (a structure without a bound: its tracemalloc
total grows with it) from allocator memory not given back (fragmentation: RSS grows, the
traced total does not). Each ``SIGUSR2`` writes ``DIR/<node>-<n>.snap`` (a tracemalloc
snapshot, compared with ``Snapshot.compare_to``) and ``DIR/<node>-<n>.json``: RSS, the traced
total and peak, and RSS again after ``malloc_trim(0)`` (what glibc can hand back at once).
Tracemalloc costs CPU several times over: never use a diagnosed run's CPU figures.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import json
import os
import signal
import tracemalloc
from pathlib import Path
from typing import Any

ENV = "NODE_HEAPDIAG"


def rss_kib() -> int:
    """This process's resident set, KiB (Linux; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def install(node_id: str, frames: int = 12) -> bool:
    """Start tracing and the ``SIGUSR2`` handler if ``NODE_HEAPDIAG`` names a directory."""
    where = os.environ.get(ENV)
    if not where:
        return False
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(frames)
    seq = itertools.count()

    def dump(*_: Any) -> None:
        n = next(seq)
        gc.collect()
        rss = rss_kib()
        snap = tracemalloc.take_snapshot()
        snap.dump(str(out / f"{node_id}-{n}.snap"))
        cur, peak = tracemalloc.get_traced_memory()
        trimmed = _trim()
        (out / f"{node_id}-{n}.json").write_text(json.dumps({
            "rss_kib": rss, "traced_kib": cur // 1024, "peak_kib": peak // 1024,
            "rss_after_trim_kib": rss_kib(), "trimmed": trimmed}))

    signal.signal(signal.SIGUSR2, dump)
    return True
