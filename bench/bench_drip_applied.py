"""What the applied update ids cost a DRiP node (issue 26, session 45): the memory of the ids
kept (`records.AppliedIds`, the last `APPLIED_RECENT`) against the old set of every id, and
the CPU of a miss answered by the store (a primary-key read of ``applied``).

    .venv/bin/python bench/bench_drip_applied.py [--ids 200000] [--misses 20000]

Prints memory in bytes (tracemalloc: load-independent) and CPU per lookup (process time,
so a loaded machine lengthens it less than wall time would). Not a unit test: figures only.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from nodes.drip.records import APPLIED_RECENT, AppliedIds
from nodes.drip.store import Store


def _uid(i: int) -> str:
    return f"w{i % 64}-{i:09d}"  # as the harness's op ids: ~12-14 characters


def _traced(make):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    obj = make()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return obj, used


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=200_000, help="applied ids in the store")
    ap.add_argument("--misses", type=int, default=20_000, help="lookups timed per kind")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "drip.sqlite3")
        store.db.execute("BEGIN")
        store.db.executemany("INSERT INTO applied VALUES (?, 'k', 1)",
                             ((_uid(i),) for i in range(a.ids)))
        store.db.execute("COMMIT")

        t0 = time.process_time()
        old, old_bytes = _traced(lambda: {r[0] for r in store.db.execute(
            "SELECT uid FROM applied")})
        old_load = time.process_time() - t0

        def recent() -> AppliedIds:
            ids = AppliedIds(cap=APPLIED_RECENT, lookup=store.has_applied)
            for i in range(a.ids):
                ids.add(_uid(i))
            return ids

        new, new_bytes = _traced(recent)
        t0 = time.process_time()
        d = store.load()
        new_load = time.process_time() - t0
        print(f"ids in the store: {a.ids:,}; kept in memory: {len(new):,} (cap {APPLIED_RECENT:,})")
        print(f"memory, old set of every id: {old_bytes / 2**20:.1f} MiB "
              f"({old_bytes / len(old):.0f} B per id); AppliedIds at its cap: "
              f"{new_bytes / 2**20:.1f} MiB ({new_bytes / len(new):.0f} B per id)")
        print(f"start: old read of the whole table {old_load * 1000:.0f} ms CPU; "
              f"now {new_load * 1000:.1f} ms for the whole load ({len(d.applied)} ids read)")
        rng = random.Random(1)
        forgotten = [_uid(rng.randrange(a.ids - APPLIED_RECENT)) for _ in range(a.misses)]
        unknown = [f"new-{i}" for i in range(a.misses)]
        held = [_uid(a.ids - 1 - rng.randrange(APPLIED_RECENT)) for _ in range(a.misses)]
        for name, uids, want in (("held in memory", held, True),
                                 ("forgotten, read from the store", forgotten, True),
                                 ("never applied (every new update)", unknown, False)):
            t0 = time.process_time()
            got = sum(1 for u in uids if u in new)
            dt = time.process_time() - t0
            assert got == (len(uids) if want else 0)
            print(f"lookup, {name}: {dt / len(uids) * 1e6:.2f} us CPU each")
        victims = list(new.recent())
        t0 = time.process_time()
        lost = [u for u in victims if u not in d.applied]
        dt = time.process_time() - t0
        print(f"a check of every id kept against the store ({len(victims):,} ids, what a "
              f"storage failure's rolled-back list would cost read whole): {dt * 1000:.0f} "
              f"ms CPU ({len(lost)} lost)")
        store.close()


if __name__ == "__main__":
    main()
