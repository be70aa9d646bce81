"""History -> event rows: one pass per run, shared by the Spark and the in-process drivers.

Reading uses the harness's own reader (``vocabulary.history.read_history``), so a torn last line
means "incomplete" and a corrupt middle means "error" exactly as the CLI says. The pass also
does everything that needs the history *in order*: pairing completions with invocations
(latency), the phase and fault each op ran under, the time since the last heal. What is left
for the report is columnar group-bys.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from reports.discover import RunInfo
from reports.faults import DEFAULT_RECOVERY_WINDOW_NS, NEMESIS, PhaseIndex, fault_windows
from reports.schema import EVENTS
from vocabulary.history import OP_TYPES, History, HistoryError, pairs, read_history

_dumps = json.JSONEncoder(separators=(",", ":"), default=repr).encode
KV_FS = ("read", "write", "cas")


@dataclass
class RunStatus:
    """How reading one run went: the per-run error the report shows, or its size."""

    complete: bool = True
    error: str = ""
    problems: list[str] = field(default_factory=list)
    ops: int = 0
    t_end: int = 0


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:.@/ ")


def _js(x: Any) -> str:
    """Compact JSON of a value, with fast paths for the kv shapes (ints, plain strings,
    pairs of those); byte-identical to ``json.dumps(x, separators=(",", ":"))``."""
    t = type(x)
    if t is int:
        return str(x)
    if t is str and _PLAIN.issuperset(x):
        return f'"{x}"'
    if x is None:
        return "null"
    if t is list and len(x) == 2:
        return f"[{_js(x[0])},{_js(x[1])}]"
    return _dumps(x)


def _kv(f: str, value: Any, typ: str) -> tuple[str | None, str | None]:
    """(key, data value) as JSON for kv-shaped ops (contracts.md section 1), else (None, None)."""
    if f not in KV_FS or not isinstance(value, list) or len(value) != 2:
        return None, None
    key, v = value
    if isinstance(key, list | dict):
        return None, None
    if f == "cas":
        v = v[1] if isinstance(v, list) and len(v) == 2 else None
    elif f == "read" and typ == "invoke":
        v = None
    return _js(key), (None if v is None else _js(v))


def _validate(h: History) -> str:
    for pos, op in enumerate(h.ops):
        if not isinstance(op.get("time"), int) or "process" not in op:
            return (f"op {pos} (index {op.get('index')}) has no integer time or no process; "
                    "not a harness history (docs/contracts.md section 1)")
    return ""


def _fast_read(path: str) -> History | None:
    """The common case in one C-level parse: a well-formed file ending in a newline.

    Anything else (torn tail, corrupt line, non-op) returns None and is read by the harness's
    own reader, so the verdict on a bad file is exactly ``read_history``'s.
    """
    try:
        raw = open(path, "rb").read()  # noqa: SIM115 - closed by refcount at once
    except OSError:
        return None
    if raw and not raw.endswith(b"\n"):
        return None
    body = b",".join(line for line in raw.split(b"\n") if line.strip())
    try:
        ops = json.loads(b"[" + body + b"]")
    except ValueError:
        return None
    if not all(type(o) is dict and o.get("type") in OP_TYPES for o in ops):
        return None
    return History(ops=ops)


def load_history(path: str) -> History:
    """A history file as the harness reads it (fast path first); raises ``HistoryError``
    (an unreadable file included) exactly where ``vocabulary.history.read_history`` would."""
    h = _fast_read(path)
    if h is not None:
        return h
    try:
        return read_history(path)
    except HistoryError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(f"{path} unreadable: {e}") from e


def read_run(run: RunInfo) -> tuple[History | None, RunStatus]:
    """Read a run's history; never raises: a bad history becomes ``RunStatus.error``."""
    st = RunStatus(problems=list(run.problems))
    path = f"{run.path}/history.jsonl"
    try:
        h = load_history(path)
    except HistoryError as e:
        st.complete, st.error = False, str(e)
        return None, st
    st.error = _validate(h)
    if st.error:
        st.complete = False
        return None, st
    st.complete = h.complete and run.status not in ("running", "interrupted", "failed")
    st.problems += h.problems
    if run.status in ("running", "interrupted", "failed"):
        st.problems.append(f"test.json status is {run.status!r}: the run did not finish")
    st.ops = len(h.ops)
    st.t_end = max((int(o["time"]) for o in h.ops), default=0)
    return h, st


def event_rows(run: RunInfo, recovery_window_ns: int = DEFAULT_RECOVERY_WINDOW_NS
               ) -> tuple[dict[str, list[Any]], RunStatus]:
    """The run's rows as columns (EVENTS order): op rows, fault rows, one run row.

    Written column by column (no dict per row): this loop is the ingest's whole cost.
    """
    cols: dict[str, list[Any]] = {f.name: [] for f in EVENTS}
    h, st = read_run(run)
    base = {"run_id": run.run_id, "test": run.test, "nemesis": run.nemesis,
            "protocol": run.protocol, "date": run.date}
    windows = fault_windows(h.ops) if h is not None else []
    ops = h.ops if h is not None else []
    n = len(ops)
    c_index = [o.get("index") for o in ops]
    c_time = [int(o["time"]) for o in ops]
    c_proc = [o["process"] for o in ops]
    c_type = [o["type"] for o in ops]
    c_f = [str(o.get("f")) for o in ops]
    values = [o.get("value") for o in ops]
    c_key: list[Any] = [None] * n
    c_val: list[Any] = [None] * n
    c_outcome: list[Any] = [None] * n
    c_inv_i: list[Any] = [None] * n
    c_inv_t: list[Any] = [None] * n
    c_lat: list[Any] = [None] * n
    c_phase: list[Any] = [None] * n
    c_fault: list[Any] = [None] * n
    c_fid: list[Any] = [None] * n
    c_heal: list[Any] = [None] * n
    phases = PhaseIndex(windows, recovery_window_ns)
    for i in range(n):
        if c_f[i] in KV_FS:
            c_key[i], c_val[i] = _kv(c_f[i], values[i], c_type[i])
    for p in pairs(ops):  # the invocation row and its completion's row share the phase
        j = p.at
        if c_proc[j] == NEMESIS:
            continue
        ph = phases.at(c_time[j])
        c_phase[j], c_fault[j], c_fid[j] = ph.phase, ph.fault, ph.fault_id
        i = p.done_at
        if i is None:
            continue
        c_outcome[j] = c_type[i]
        c_inv_i[i], c_inv_t[i], c_lat[i] = c_index[j], c_time[j], c_time[i] - c_time[j]
        c_phase[i], c_fault[i], c_fid[i] = ph.phase, ph.fault, ph.fault_id
        if ph.heal_time is not None:
            c_heal[i] = c_time[i] - ph.heal_time
    cols.update(
        rec=["op"] * n, index=c_index, time=c_time, process=[str(p) for p in c_proc],
        type=c_type, f=c_f, value=[_js(v) for v in values],
        node=[o.get("node") for o in ops], error=[o.get("error") for o in ops],
        key=c_key, val=c_val, outcome=c_outcome, invoke_index=c_inv_i, invoke_time=c_inv_t,
        latency_ns=c_lat, phase=c_phase, fault=c_fault, fault_id=c_fid, since_heal_ns=c_heal)
    for k, v in base.items():
        cols[k] = [v] * n

    def row(**kw: Any) -> None:
        for name, lst in cols.items():
            lst.append(kw.get(name))

    for w in windows:
        row(**base, rec="fault", fault_id=w.id, fault=w.kind, time=w.start,
            value=_dumps(asdict(w)))
    row(**base, rec="run", value=_dumps({**asdict(st), "info": asdict(run)}))
    return cols, st


#: columns that hold one value per run: built with pa.repeat, not element by element
_CONST = ("run_id", "test", "nemesis", "protocol", "date")


def run_table(run: RunInfo, recovery_window_ns: int = DEFAULT_RECOVERY_WINDOW_NS) -> pa.Table:
    cols, _ = event_rows(run, recovery_window_ns)
    n = len(cols["rec"])
    arrays = []
    for f in EVENTS:
        v = cols[f.name]
        if f.name in _CONST and v and v[0] is not None:
            arrays.append(pa.repeat(pa.scalar(v[0], f.type), n))
        else:
            arrays.append(pa.array(v, f.type))
    return pa.Table.from_arrays(arrays, schema=EVENTS)


def runs_batches(runs: Iterable[RunInfo], recovery_window_ns: int = DEFAULT_RECOVERY_WINDOW_NS
                 ) -> Iterator[pa.RecordBatch]:
    """Batches for many runs, in order."""
    for run in runs:
        yield from run_table(run, recovery_window_ns).to_batches()


PARTITION_COLUMNS = ("protocol", "date")
#: a row group closes after the run that takes it past this many rows: row groups hold
#: whole runs, so the Python checkers' tasks may cut files between any two (reports.scan)
ROW_GROUP_ROWS = 1 << 16
#: the dataset layout; a dataset written with another is rebuilt (pipeline.plan_ingest)
LAYOUT = 2
_SAFE_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def partition_dir(events_dir: str, protocol: str, date: str) -> str:
    """The Hive-style directory Spark and pyarrow both read partition values from."""
    for v in (protocol, date):
        if not _SAFE_PART.issuperset(v):
            raise ValueError(f"partition value {v!r} has characters a path cannot hold as is")
    return f"{events_dir}/protocol={protocol}/date={date}"


def write_slice(runs: list[RunInfo], events_dir: str,
                recovery_window_ns: int = DEFAULT_RECOVERY_WINDOW_NS) -> dict[str, Any]:
    """Ingest a slice of runs sharing one (protocol, date) into ONE Parquet file.

    The file holds whole runs in (run, index) order, written by pyarrow from the Arrow
    tables directly: both engines call this, and Spark's row-based writer (the slow part of
    an ingest through ``DataFrame.write``) is never involved. Each row group holds whole
    runs (about ``ROW_GROUP_ROWS`` rows), which lets readers split the file between runs.
    """
    if len({(r.protocol, r.date) for r in runs}) > 1:
        raise ValueError("a slice must share one (protocol, date)")
    d = partition_dir(events_dir, runs[0].protocol, runs[0].date)
    os.makedirs(d, exist_ok=True)
    path = f"{d}/part-{uuid.uuid4().hex}.parquet"
    tmp = f"{d}/.{os.path.basename(path)}.tmp"
    schema = pa.schema([f for f in EVENTS if f.name not in PARTITION_COLUMNS])
    rows = 0
    group: list[pa.Table] = []
    with pq.ParquetWriter(tmp, schema, compression="snappy") as w:

        def flush() -> None:
            if group:
                t = pa.concat_tables(group)
                # one row group, whatever its size: row groups never cut a run
                w.write_table(t, row_group_size=max(1, t.num_rows))
                group.clear()

        pending = 0
        for r in runs:
            t = run_table(r, recovery_window_ns).drop_columns(list(PARTITION_COLUMNS))
            group.append(t)
            pending += t.num_rows
            rows += t.num_rows
            if pending >= ROW_GROUP_ROWS:
                flush()
                pending = 0
        flush()
    os.replace(tmp, path)  # readers never see half a file
    return {"file": path, "rows": rows, "runs": len(runs)}


def run_info_from_dict(d: dict[str, Any]) -> RunInfo:
    return RunInfo(**{k: v for k, v in d.items() if k in RunInfo.__dataclass_fields__})


def ingest_slices(runs: list[RunInfo], parallelism: int, slice_bytes: int = 64 << 20
                  ) -> list[list[RunInfo]]:
    """Runs grouped by (protocol, date), cut into slices of about ``slice_bytes`` of history
    (smaller when the store is small, so that every core gets work). One slice, one file."""
    total = sum(r.history_bytes for r in runs)
    target = max(1, min(slice_bytes, total // max(parallelism, 1)))
    groups: dict[tuple[str, str], list[RunInfo]] = {}
    for r in runs:
        groups.setdefault((r.protocol, r.date), []).append(r)
    slices: list[list[RunInfo]] = []
    for _, rs in sorted(groups.items()):
        cur: list[RunInfo] = []
        size = 0
        for r in rs:
            if cur and size + r.history_bytes > target:
                slices.append(cur)
                cur, size = [], 0
            cur.append(r)
            size += r.history_bytes
        if cur:
            slices.append(cur)
    return slices
