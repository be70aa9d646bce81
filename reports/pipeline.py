"""The pipeline: store -> events dataset (incremental) -> checks -> aggregates.

Two engines implement :class:`Engine`: ``spark`` (the default; local mode embedded, or
``--master`` for a cluster) and ``local`` (one process: pyarrow + pandas, for small stores and
as the bench's baseline). Both call the same ingest and checker code.

Ingest is incremental: ``manifest.json`` remembers (run, history size, mtime) of what the
dataset holds; new runs are appended, and if a run already ingested changed the dataset is
rebuilt (rare: histories are append-only once a run finished).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from checkers.result import Result
from reports import aggregate as agg
from reports.checks import result_rows
from reports.discover import REPORT_DIR, RunInfo
from reports.ingest import LAYOUT
from reports.schema import RESULTS


@dataclass
class Analysis:
    """What an engine hands back: all small, all pandas."""

    status: list[dict[str, Any]]  # one dict per run: RunStatus fields + "info"
    results: pd.DataFrame  # RESULTS rows (pipeline checkers)
    tables: dict[str, pd.DataFrame]  # named aggregates
    #: seconds per analysis step (engine-specific names), for the bench and the report
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class PipelineOutput:
    runs: pd.DataFrame
    results: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    timings: dict[str, float] = field(default_factory=dict)
    ingested: int = 0


class Engine(Protocol):
    name: str

    def ingest(self, runs: list[RunInfo], events_dir: Path, append: bool) -> None: ...

    def analyse(self, runs: list[RunInfo], events_dir: Path) -> Analysis: ...

    def close(self) -> None: ...


def data_dir(store: Path) -> Path:
    return store / REPORT_DIR / "data"


#: the manifest key of the dataset layout (``ingest.LAYOUT``); run ids hold a "/"
LAYOUT_KEY = "layout"


def _read_manifest(d: Path) -> dict[str, Any]:
    """manifest.json as stored: run id -> [history bytes, mtime, path], and the layout key."""
    try:
        m = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return m if isinstance(m, dict) else {}


def _manifest(d: Path) -> dict[str, list[Any]]:
    """run id -> [history bytes, mtime, path] of what the dataset holds (layout key apart)."""
    m = _read_manifest(d)
    m.pop(LAYOUT_KEY, None)
    return m


def plan_ingest(runs: list[RunInfo], d: Path) -> tuple[list[RunInfo], bool]:
    """(runs to ingest, append?) given what the dataset already holds.

    A dataset written with another layout (``ingest.LAYOUT``) is rebuilt: readers rely on
    the layout (row groups of whole runs) for correctness, not only speed.
    """
    have = _read_manifest(d) if (d / "events").exists() else {}
    layout = have.pop(LAYOUT_KEY, None)
    stale = [r for r in runs if r.run_id in have
             and tuple(have[r.run_id][:2]) != (r.history_bytes, r.history_mtime)]
    if stale or (have and layout != LAYOUT):
        return list(runs) + [r for r in _known(have, runs)], False
    return [r for r in runs if r.run_id not in have], True


def _known(have: dict[str, list[Any]], runs: list[RunInfo]) -> list[RunInfo]:
    """Runs in the manifest but not selected now: kept when the dataset is rebuilt."""
    from reports.discover import run_info

    sel = {r.run_id for r in runs}
    out = []
    for rid, v in have.items():
        path = v[2]
        if rid not in sel and Path(path).is_dir():
            out.append(run_info(Path(path)))
    return out


def _save_manifest(d: Path, ingested: list[RunInfo], append: bool) -> None:
    have = _manifest(d) if append else {}
    for r in ingested:
        have[r.run_id] = [r.history_bytes, r.history_mtime, r.path]
    (d / "manifest.json").write_text(json.dumps({LAYOUT_KEY: LAYOUT, **have}, indent=1))


def stored_results(runs: list[RunInfo]) -> pd.DataFrame:
    """The harness's own verdicts per checker (results.json), as RESULTS rows."""
    cols: dict[str, list[Any]] = {f.name: [] for f in RESULTS}
    for r in runs:
        if not r.stored or "result" not in r.stored:
            continue
        try:
            top = Result.from_json(r.stored["result"])
        except (KeyError, TypeError):
            continue
        for c in top.children or [top]:
            for k, v in result_rows(r.run_id, [(c, 0)], source="harness").items():
                cols[k].extend(v)
    return pd.DataFrame(cols)


def run_pipeline(store: Path, runs: list[RunInfo], engine: Engine) -> PipelineOutput:
    """Ingest what is new, check and aggregate the selected runs."""
    d = data_dir(store)
    d.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    todo, append = plan_ingest(runs, d)
    if todo:
        if not append:
            shutil.rmtree(d / "events", ignore_errors=True)
        engine.ingest(todo, d / "events", append)
        _save_manifest(d, todo, append)
    timings["ingest_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    an = engine.analyse(runs, d / "events")
    timings["analyse_s"] = time.perf_counter() - t1
    timings.update({f"analyse.{k}": v for k, v in an.timings.items()})
    t2 = time.perf_counter()
    results = pd.concat([stored_results(runs), an.results], ignore_index=True)
    agreement = agg.agreement(results)
    run_df = agg.run_table(an.status, results, agreement)
    tables = dict(an.tables)
    tables["agreement"] = agreement
    tables["verdicts"] = agg.verdict_matrix(run_df) if len(run_df) else pd.DataFrame()
    tables["anomalies"] = agg.anomaly_counts(results)
    if len(run_df):
        nights = agg.night_starts(store)
        run_df["period"] = [agg.period_of(s, d, nights)
                            for s, d in zip(run_df["started"], run_df["date"], strict=True)]
    if "run_stats" in tables and len(run_df):
        tables["trends"] = agg.trends(run_df, tables["run_stats"])
    timings["driver_s"] = time.perf_counter() - t2
    _write_outputs(d, run_df, results, tables, timings)
    timings["total_s"] = time.perf_counter() - t0
    return PipelineOutput(run_df, results, tables, timings, ingested=len(todo))


def _write_outputs(d: Path, runs: pd.DataFrame, results: pd.DataFrame,
                   tables: dict[str, pd.DataFrame], timings: dict[str, float]) -> None:
    """Results and aggregates as Parquet (for tools) and JSON (for people and CI)."""
    results.to_parquet(d / "results.parquet", index=False)
    runs.to_parquet(d / "runs.parquet", index=False)
    out = {"timings": {k: round(v, 3) for k, v in timings.items()},
           "runs": json.loads(runs.to_json(orient="records")),
           "results": json.loads(results.to_json(orient="records")),
           "tables": {k: json.loads(v.to_json(orient="records")) for k, v in tables.items()}}
    (d / "report.json").write_text(json.dumps(out, indent=1))


def status_rows(events_run_rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Decode the ``rec = "run"`` rows' JSON into status dicts."""
    return [json.loads(v) for v in events_run_rows["value"]]


def finish_analysis(status: list[dict[str, Any]], results: pd.DataFrame,
                    phantoms: pd.DataFrame, kv_ids: list[str],
                    tables: dict[str, pd.DataFrame]) -> Analysis:
    """Shared tail of both engines: SQL-checker rows become results like any checker's."""
    rows = [pd.DataFrame(result_rows(rid, [(r, 0)])) for rid, r in
            agg.phantom_results(phantoms, kv_ids)]
    res = pd.concat([results, *rows], ignore_index=True) if rows else results
    tables = {**tables, "recovery_summary": agg.recovery_summary(tables["recovery"])}
    return Analysis(status, res, tables)
