"""The Python checkers' reads of the events dataset: planned on the driver, read by pyarrow
in the executor that checks them.

Why not ``spark.read.parquet(...).mapInArrow(...)``: then the JVM decodes the Parquet, turns
it into Arrow and streams it to the Python worker, and the checker (pure Python) competes
with that JVM work. Measured on 2 cores (docs/reports.md): local[1] kept 1.16 cores busy and
local[2] was 1.19x faster (first report) to 1.62x (warm); reading here, 1.85x and 1.92x.
Here the JVM only hands each task a few lines of JSON (which row groups of which files,
which runs); the worker reads its row groups itself (only the columns and rows the checker
needs), so a task is one busy core and ``local[n]`` scales with ``n``. Row groups hold whole
runs in (run, index) order (``ingest.write_slice``), so a task's rows arrive run by run, as
``check_batches`` needs.

Like the ingest and the registry re-run, this needs the store on a filesystem every
executor sees under the same path.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reports.checks import CHECK_COLUMNS, PipelineChecker, check_batches
from reports.discover import RunInfo
from reports.ingest import partition_dir

T = TypeVar("T")

#: what the checkers' row filters read besides ``CHECK_COLUMNS``
_FILTER_COLUMNS = ["rec"]


def deal(items: Iterable[T], weight: Callable[[T], float], parts: int) -> list[list[T]]:
    """Items into at most ``parts`` groups of near-equal total weight (heaviest first, each
    to the lightest group): balanced tasks from sizes alone. Empty groups are dropped."""
    todo = sorted(items, key=weight, reverse=True)
    n = max(1, min(parts, len(todo)))
    heap = [(0.0, i) for i in range(n)]
    groups: list[list[T]] = [[] for _ in range(n)]
    for it in todo:
        w, i = heapq.heappop(heap)
        groups[i].append(it)
        heapq.heappush(heap, (w + weight(it), i))
    return [g for g in groups if g]


def _row_groups(path: str, wanted: Sequence[str]) -> list[tuple[int, int]]:
    """(row group, rows) of a file that may hold one of the sorted ``wanted`` run ids,
    by the run_id min/max statistics (no statistics: kept; the worker filters rows)."""
    md = pq.read_metadata(path)
    col = md.schema.names.index("run_id")
    out = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        st = rg.column(col).statistics
        if st is not None and st.has_min_max:
            j = bisect.bisect_left(wanted, st.min)
            if j == len(wanted) or wanted[j] > st.max:
                continue
        out.append((i, rg.num_rows))
    return out


def plan(events_dir: Path, runs: list[RunInfo], parts: int) -> list[str]:
    """Tasks (JSON) reading the selected runs' row groups, balanced by rows.

    A task is ``{"ids": [...], "pieces": [[file, row group], ...]}`` with its pieces in file
    and row-group order, so each run's rows stay contiguous and in order.
    """
    by_part: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        by_part.setdefault((r.protocol, r.date), []).append(r.run_id)
    pieces: list[tuple[str, int, int, tuple[str, str]]] = []
    for (proto, date), ids in sorted(by_part.items()):
        ids.sort()
        d = Path(partition_dir(str(events_dir), proto, date))
        for f in sorted(d.glob("*.parquet")) if d.is_dir() else []:
            pieces += [(str(f), i, n, (proto, date)) for i, n in _row_groups(str(f), ids)]
    tasks = []
    for group in deal(pieces, lambda p: p[2], parts):
        group.sort(key=lambda p: (p[0], p[1]))
        ids = sorted({i for key in {p[3] for p in group} for i in by_part[key]})
        tasks.append(json.dumps({"ids": ids, "pieces": [[p[0], p[1]] for p in group]}))
    return tasks


def read_task(task: str, columns: list[str]) -> Iterator[pa.Table]:
    """A task's rows, one row group at a time, only the selected runs."""
    t = json.loads(task)
    ids = pa.array(t["ids"], pa.string())
    for path, pieces in itertools.groupby(t["pieces"], key=lambda p: p[0]):
        with pq.ParquetFile(path) as pf:
            for _, rg in pieces:
                tab = pf.read_row_group(rg, columns=columns)
                yield tab.filter(pc.is_in(tab["run_id"], value_set=ids))


def check_tasks(batches: Iterable[pa.RecordBatch], chk: PipelineChecker
                ) -> Iterator[pa.RecordBatch]:
    """The Spark driver of a Python checker: rows of task JSON -> RESULTS batches."""
    cols = CHECK_COLUMNS + [c for c in _FILTER_COLUMNS if c not in CHECK_COLUMNS]

    def rows() -> Iterator[pa.RecordBatch]:
        for b in batches:
            for task in b.column(0).to_pylist():
                for tab in read_task(task, cols):
                    yield from tab.filter(chk.arrow_filter(tab)).select(CHECK_COLUMNS) \
                        .to_batches()

    yield from check_batches(rows(), chk)

