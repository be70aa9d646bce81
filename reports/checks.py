"""Checkers that run inside the pipeline, and the one driver both engines call.

A :class:`PipelineChecker` wraps a plain checker function ``(test, ops, observations) ->
Result`` (the same functions the in-process harness runs) with ``partition``: an op -> key
function for P-compositional checkers. The driver runs the checker once per key and merges
the parts worst-wins. ``check_batches`` is the whole driver: Spark calls it from
``mapInArrow`` on event rows already laid out run by run; the local engine calls it on an
Arrow table. One implementation, two drivers.
"""

from __future__ import annotations

import gc
import json
import time
import traceback
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers.result import Anomaly, Checker, Result, examined_text, worst
from reports.schema import RESULTS, validity_str

Op = dict[str, Any]

#: ops shown per anomaly kept in a result (witnesses can be long)
MAX_ANOMALIES = 20
#: columns the Python checkers read
CHECK_COLUMNS = ["run_id", "index", "time", "process", "type", "f", "value", "node", "error", "key"]


@dataclass(frozen=True)
class PipelineChecker:
    """A checker the pipeline runs per run, or per key when ``partition`` is given."""

    name: str
    check: Checker
    #: op -> part key, or the name of an event column holding it (fast: no Python per op);
    #: ops with the same key are checked together, apart from the rest
    partition: Callable[[Op], Hashable] | str | None = None
    #: reads only kv-shaped ops (rows with a key): filtered before Python sees them
    kv_only: bool = False
    #: names of protocol-registry checkers (``Workload.checkers`` keys) this one re-checks;
    #: the registry re-run (:mod:`reports.rerun`) skips them and compares their stored
    #: verdict with this checker's instead
    covers: tuple[str, ...] = ()
    #: the verdict rule over the whole run's summed counts, applied to a merged pass: a part
    #: judges only itself, so a rule such as "every invoked function has an ok op somewhere"
    #: must see the sum (the harness checks the whole history and must agree)
    whole: Callable[[Result], Result] | None = None

    def arrow_filter(self, t: pa.Table) -> pa.Array:
        """The rows this checker reads (both engines filter with it before Python sees ops)."""
        m = pc.and_(pc.equal(t["rec"], "op"), pc.not_equal(t["process"], "nemesis"))
        return pc.and_(m, pc.is_valid(t["key"])) if self.kv_only else m


def run_checker(chk: PipelineChecker, test: dict[str, Any], ops: list[Op],
                keys: list[Hashable] | None = None) -> Result:
    """One checker over one run's ops, per key if partitioned; a crash is ``unknown``.

    ``keys`` (one per op) are the part keys when ``partition`` names a column.
    """
    t0 = time.perf_counter()
    parts: dict[Hashable, list[Op]] = {}
    if chk.partition is None:
        parts[None] = ops
    else:
        ks = keys if keys is not None else [chk.partition(op) for op in ops]  # type: ignore[operator]
        for k, op in zip(ks, ops, strict=True):
            parts.setdefault(k, []).append(op)
    results: list[Result] = []
    for key, part in parts.items():
        try:
            r = chk.check(test, part, {})
        except Exception as e:
            r = Result(chk.name, "unknown", note=f"checker crashed on part {key!r}: "
                       f"{type(e).__name__}: {e}", stats={"traceback": traceback.format_exc(limit=6)})
        if key is not None:
            for a in r.anomalies:
                a.witness.setdefault("key", key)
        results.append(r)
    merged = merge_parts(chk.name, results, time.perf_counter() - t0)
    return chk.whole(merged) if chk.whole is not None and merged.valid is True else merged


def merge_parts(name: str, results: list[Result], elapsed_s: float = 0.0) -> Result:
    """Per-key results as one, worst-wins, with their examined counts summed. A part that
    examined nothing (every op on that key failed) proves nothing but does not make the run
    unknown when other parts were judged: the run as a whole examined something."""
    judged = [r for r in results if not (r.valid == "unknown" and r.stats.get("vacuous"))]
    out = Result(name, worst(r.valid for r in (judged or results)))
    for r in results:
        out.anomalies.extend(r.anomalies)
        for k, v in r.examined.items():
            out.examined[k] = out.examined.get(k, 0) + v
    out.anomalies = out.anomalies[:MAX_ANOMALIES]
    notes = sorted({r.note for r in (judged or results) if r.note and r.valid is not True})
    out.note = "; ".join(notes)[:500]
    unknown = sum(r.valid == "unknown" for r in judged)
    out.stats = {"parts": len(results), "unknown_parts": unknown,
                 "vacuous_parts": len(results) - len(judged),
                 "failed_parts": sum(r.valid is False for r in results),
                 "elapsed_s": round(elapsed_s, 4)}
    return out


def ops_of(t: pa.Table) -> list[Op]:
    """Event rows back to history ops, column by column (values parsed in one call)."""
    c = {name: t.column(name).to_pylist() for name in
         ("index", "time", "process", "type", "f", "node", "error")}
    values = json.loads("[" + ",".join(t.column("value").to_pylist()) + "]")
    ops: list[Op] = []
    for i, p in enumerate(c["process"]):
        op: Op = {"index": c["index"][i], "time": c["time"][i],
                  "process": int(p) if p.lstrip("-").isdigit() else p,
                  "type": c["type"][i], "f": c["f"][i], "value": values[i]}
        if c["node"][i] is not None:
            op["node"] = c["node"][i]
        if c["error"][i] is not None:
            op["error"] = c["error"][i]
        ops.append(op)
    return ops


def _runs_of(t: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """Slices of contiguous rows per run (the layout keeps each run contiguous)."""
    ids = t.column("run_id").to_pylist()
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start]:
            yield ids[start], t.slice(start, i - start)
            start = i


def result_rows(run_id: str, results: Iterable[tuple[Result, int]], source: str = "pipeline"
                ) -> dict[str, list[Any]]:
    """RESULTS columns; ``source`` is "pipeline" (checked now) or "harness" (results.json)."""
    cols: dict[str, list[Any]] = {f.name: [] for f in RESULTS}
    for r, n in results:
        cols["run_id"].append(run_id)
        cols["checker"].append(r.checker)
        cols["source"].append(source)
        cols["valid"].append(validity_str(r.valid))
        cols["note"].append(r.note)
        cols["anomalies"].append(json.dumps([a.to_json() for a in r.anomalies], default=repr))
        cols["stats"].append(json.dumps(r.stats, default=repr))
        cols["parts"].append(int(r.stats.get("parts", 1)))
        cols["ops"].append(n)
        cols["elapsed_s"].append(float(r.stats.get("elapsed_s", 0.0)))
        cols["examined"].append(json.dumps(examined_by_leaf(r)))
    return cols


def examined_by_leaf(r: Result) -> dict[str, dict[str, int]]:
    """What each leaf under ``r`` examined, by path below it ("" for ``r`` itself); a
    flattened row (:func:`reports.rerun.flatten`) keeps its leaves' counts in its stats."""
    if r.children:
        return {p: x.examined for p, x in r.leaves()}
    parts = r.stats.get("examined_parts")
    return dict(parts) if isinstance(parts, dict) else {"": r.examined}


def examined_line(cell: str | None) -> str:
    """The examined column as a person reads it: "vote-safety: votes=4 · log-matching: ..."."""
    try:
        parts = json.loads(cell or "{}")
    except ValueError:
        return ""
    return " · ".join(f"{p}: {examined_text(c)}" if p else examined_text(c)
                      for p, c in parts.items() if c) or "-"


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Objects alive on entry are out of the cyclic GC's sight until exit (``gc.freeze``).

    The checkers allocate millions of short-lived containers, so full collections run
    often, and each one walks every tracked object in the process: in a PySpark worker that
    is pyspark, pandas and pyarrow's own. Measured on the bench's 10M-op store, the
    linearizability checks in one Spark worker took 79 s without the freeze, 58 s with it. Frozen
    objects are still freed by reference counting; only cycles among them are never
    collected (until exit), which for modules and the task's inputs is what we want.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def check_batches(batches: Iterable[pa.RecordBatch], chk: PipelineChecker
                  ) -> Iterator[pa.RecordBatch]:
    """The driver: batches of one checker's rows, whole runs in (run, index) order -> results.

    A run may span batches (never tasks: the dataset keeps runs whole per file), so rows are
    carried over until the run id changes.
    """
    with frozen_heap():
        yield from _check_runs(batches, chk)


def _check_runs(batches: Iterable[pa.RecordBatch], chk: PipelineChecker
                ) -> Iterator[pa.RecordBatch]:
    carry: pa.Table | None = None
    for b in batches:
        t = pa.Table.from_batches([b])
        if carry is not None:
            t = pa.concat_tables([carry, t])
        if t.num_rows == 0:
            continue
        last = t.column("run_id")[t.num_rows - 1].as_py()
        done = t.filter(pc.not_equal(t.column("run_id"), last))
        carry = t.filter(pc.equal(t.column("run_id"), last))
        yield from _check_table(done, chk)
    if carry is not None:
        yield from _check_table(carry, chk)


def _check_table(t: pa.Table, chk: PipelineChecker) -> Iterator[pa.RecordBatch]:
    for run_id, rows in _runs_of(t):
        ops = ops_of(rows)
        keys = rows.column(chk.partition).to_pylist() if isinstance(chk.partition, str) else None
        r = run_checker(chk, {"run_id": run_id}, ops, keys)
        yield pa.RecordBatch.from_pydict(result_rows(run_id, [(r, len(ops))]), schema=RESULTS)


# --- the built-in Python checkers -------------------------------------------------------

def kv_key(op: Op) -> Hashable:
    v = op.get("value")
    return json.dumps(v[0]) if isinstance(v, list) and v else None


def kv_linearizable(test: dict[str, Any], ops: list[Op], observations: dict[str, Any]) -> Result:
    """Linearizability of one key's register ops, by the project's WGL engine.

    Imported lazily: until ``checkers.linearizable`` exists the verdict is a clearly labelled
    ``unknown``, never a pass.
    """
    try:
        from checkers.linearizable.engine import Budget, check
        from checkers.linearizable.history import from_ops
    except ImportError as e:
        return Result("kv-linearizable", "unknown",
                      note=f"linearizability engine not available ({e}); install/finish "
                           "checkers.linearizable to get a verdict")
    from checkers.linearizable.wrapper import examined, judged

    budget = Budget(time_s=float(test.get("lin_budget_s", 10.0)), memory_mb=256.0)
    h = from_ops(ops)
    res = check(h, "kv", budget)
    out = Result("kv-linearizable", res.valid, note=res.note,
                 stats={"explored": res.explored, "ops": res.ops})
    w = res.witness
    if res.valid is False and w is not None:
        slim = {k: v for k, v in w.items() if k not in ("prefix", "concurrent")}
        slim["prefix"] = w.get("prefix", [])[-8:]
        slim["concurrent"] = w.get("concurrent", [])[:12]
        out.anomalies.append(Anomaly("nonlinearizable", w.get("text", "not linearizable"),
                                     json.loads(json.dumps(slim, default=repr))))
    return judged(out, examined(h, res))


def _kv_whole(merged: Result) -> Result:
    from checkers.linearizable.wrapper import judged

    return judged(merged, merged.examined)


KV_LINEARIZABLE = PipelineChecker("kv-linearizable", kv_linearizable, partition="key",
                                  kv_only=True, covers=("linearizable",), whole=_kv_whole)

#: the Python checkers the pipeline runs over event rows (the join-shaped ``phantom-read`` is
#: SQL: ``aggregate.phantom_reads`` / ``SparkEngine.phantom_reads``; the protocols' own
#: node-evidence checkers are re-run from the registry by ``reports.rerun``)
PY_CHECKERS: tuple[PipelineChecker, ...] = (KV_LINEARIZABLE,)


def covered() -> dict[str, str]:
    """Registry checker name -> the pipeline checker that re-checks it (per key)."""
    return {name: chk.name for chk in PY_CHECKERS for name in chk.covers}
