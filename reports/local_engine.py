"""The in-process engine: pyarrow + pandas in one Python process.

It is the baseline the bench compares Spark with, and a fine engine for a handful of runs
(no JVM to start). Same ingest rows, same checker driver, same aggregates' definitions.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from reports import aggregate as agg
from reports.checks import PY_CHECKERS, check_batches
from reports.discover import RunInfo
from reports.ingest import ingest_slices, write_slice
from reports.pipeline import Analysis, finish_analysis, status_rows
from reports.rerun import RUN_COLUMN, rerun_batches, rerun_slices
from reports.schema import EVENTS, RESULTS

PARTITIONING = ds.partitioning(pa.schema([("protocol", pa.string()), ("date", pa.string())]),
                               flavor="hive")


#: what the pandas aggregates read (not the JSON values: the widest columns)
AGG_COLUMNS = ["rec", "run_id", "protocol", "index", "time", "process", "type", "f", "node",
               "error", "key", "val", "outcome", "latency_ns", "phase", "fault", "fault_id",
               "since_heal_ns"]


#: the run and fault rows: what the report needs besides the ops
SMALL_COLUMNS = ["rec", "run_id", "protocol", "fault_id", "fault", "value"]


class LocalEngine:
    name = "local"

    def __init__(self, recovery_window_ns: int | None = None) -> None:
        self.recovery_window_ns = recovery_window_ns

    def ingest(self, runs: list[RunInfo], events_dir: Path, append: bool) -> None:
        kw = {} if self.recovery_window_ns is None else {"recovery_window_ns": self.recovery_window_ns}
        for sl in ingest_slices(runs, 1):
            write_slice(sl, str(events_dir), **kw)

    def read(self, runs: list[RunInfo], events_dir: Path, columns: list[str] | None = None
             ) -> pa.Table:
        d = ds.dataset(events_dir, format="parquet", partitioning=PARTITIONING, schema=EVENTS)
        ids = pa.array([r.run_id for r in runs], pa.string())
        return d.to_table(columns=columns, filter=pc.field("run_id").isin(ids))

    def analyse(self, runs: list[RunInfo], events_dir: Path) -> Analysis:
        t0 = time.perf_counter()
        t = self.read(runs, events_dir)
        # each file holds whole runs in (run, index) order (ingest.write_slice); sort only if
        # the scan interleaved files (a cheap check of contiguity first)
        if not _runs_contiguous(t):
            t = t.sort_by([("run_id", "ascending"), ("index", "ascending")])
        small = t.filter(pc.not_equal(t["rec"], "op")).select(SMALL_COLUMNS).to_pandas()
        status = status_rows(small[small["rec"] == "run"])
        parts = []
        for chk in PY_CHECKERS:
            sub = t.filter(chk.arrow_filter(t))
            parts += [b for b in check_batches(sub.to_batches(max_chunksize=1 << 16), chk)]
        t1 = time.perf_counter()
        parts += list(rerun_batches([pa.RecordBatch.from_pydict(
            {RUN_COLUMN: rerun_slices(runs, 1)}, schema=pa.schema([(RUN_COLUMN, pa.string())]))]))
        t2 = time.perf_counter()
        results = pa.Table.from_batches(parts, schema=RESULTS).to_pandas()
        ev = t.select(AGG_COLUMNS).to_pandas()
        tables = {
            "latency": agg.latency_by_phase(ev),
            "availability": agg.availability(ev),
            "recovery": agg.recovery(small[small["rec"] == "fault"], agg.first_ok_after_heal(ev)),
            "run_stats": agg.run_stats(ev),
        }
        an = finish_analysis(status, results, agg.phantom_reads(ev), agg.kv_runs(ev), tables)
        an.timings = {"checks_s": round(t1 - t0, 3), "rerun_s": round(t2 - t1, 3),
                      "aggregates_s": round(time.perf_counter() - t2, 3)}
        return an

    def close(self) -> None:
        pass


def _runs_contiguous(t: pa.Table) -> bool:
    ids = t.column("run_id").combine_chunks()
    if len(ids) < 2:
        return True
    changes = pc.sum(pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))).as_py() or 0
    return changes + 1 == pc.count_distinct(ids).as_py()
