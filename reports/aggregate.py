"""Cross-run aggregates and the SQL-shaped checkers, over pandas (the in-process engine).

Each function has a Spark twin in :mod:`reports.spark_engine` (same inputs, same output
columns); the integration tests run both on one store and compare. The inputs are the
``events`` rows (see :mod:`reports.schema`), the outputs small tables for the report.
Run-level tables (one row per run) are always pandas: they are small by construction.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from checkers.result import Anomaly, Result
from reports.schema import validity_of, validity_str

PCTS = (0.5, 0.95, 0.99)
#: at most this many phantom reads are reported per run
MAX_WITNESSES = 20


def completions(ev: pd.DataFrame) -> pd.DataFrame:
    """Client completions paired with their invocation (the rows with a latency)."""
    return ev[(ev["rec"] == "op") & ev["latency_ns"].notna()]


def latency_by_phase(ev: pd.DataFrame) -> pd.DataFrame:
    """Latency percentiles by phase and the fault involved ("none" when healthy)."""
    c = completions(ev).assign(fault=lambda d: d["fault"].fillna("none"))
    g = c.groupby(["protocol", "phase", "fault"])["latency_ns"]
    out = g.quantile(list(PCTS)).unstack()
    out.columns = [f"p{int(q * 100)}_ms" for q in PCTS]
    out = out / 1e6
    out["count"] = g.size()
    return out.reset_index()


#: the errors of a ``fail`` that is the system's correct answer to an op whose precondition
#: did not hold (docs/contracts.md: a cas whose expected value was not the current one is
#: ``fail`` ``cas-mismatch``): the system was available, the op was refused on its merits
PRECONDITION_ERRORS = ("cas-mismatch",)


def availability(ev: pd.DataFrame) -> pd.DataFrame:
    """Per phase and the fault involved: client completions that were ``ok``, that failed a
    precondition (``precondition``: a definite ``fail`` with a PRECONDITION_ERRORS error, the
    system answering correctly), and that were ``unavailable`` (every other ``fail`` and every
    ``info``: timeouts, no leader, lost connections). ``availability`` is the share answered,
    (ok + precondition) / count."""
    c = completions(ev).assign(
        fault=lambda d: d["fault"].fillna("none"),
        ok=lambda d: (d["type"] == "ok").astype("int64"),
        precondition=lambda d: ((d["type"] == "fail")
                                & d["error"].isin(PRECONDITION_ERRORS)).astype("int64"))
    g = c.groupby(["protocol", "phase", "fault"])
    out = pd.DataFrame({"ok": g["ok"].sum(), "precondition": g["precondition"].sum(),
                        "count": g.size()}).reset_index()
    return availability_columns(out)


def availability_columns(out: pd.DataFrame) -> pd.DataFrame:
    """``unavailable`` and ``availability`` from the ok, precondition and count columns (both
    engines)."""
    out = out.assign(unavailable=out["count"] - out["ok"] - out["precondition"])
    out["availability"] = (out["ok"] + out["precondition"]) / out["count"]
    return out[["protocol", "phase", "fault", "ok", "precondition", "unavailable", "count",
                "availability"]]


def first_ok_after_heal(ev: pd.DataFrame) -> pd.DataFrame:
    """Per (run, fault window): ns from its end to the first ok completion invoked after it."""
    c = completions(ev)
    c = c[(c["phase"] != "fault") & (c["type"] == "ok") & c["since_heal_ns"].notna()]
    return c.groupby(["run_id", "fault_id"])["since_heal_ns"].min().rename("recovery_ns") \
        .reset_index()


def recovery(faults: pd.DataFrame, first: pd.DataFrame) -> pd.DataFrame:
    """Per fault window: its recovery time (null: no op succeeded after it)."""
    f = faults[["protocol", "run_id", "fault_id", "fault"]].astype({"fault_id": "int64"})
    return f.merge(first.astype({"fault_id": "int64"}), on=["run_id", "fault_id"], how="left")


def recovery_summary(rec: pd.DataFrame) -> pd.DataFrame:
    g = rec.assign(s=rec["recovery_ns"] / 1e9).groupby(["protocol", "fault"])
    return pd.DataFrame({"faults": g.size(), "recovered": g["s"].count(),
                         "mean_s": g["s"].mean(), "max_s": g["s"].max()}).reset_index()


def run_stats(ev: pd.DataFrame) -> pd.DataFrame:
    c = completions(ev)
    g = c.groupby("run_id")
    out = pd.DataFrame({
        "completions": g.size(),
        "ok": g["type"].agg(lambda s: int((s == "ok").sum())),
        "p50_ms": g["latency_ns"].quantile(0.5) / 1e6,
        "p99_ms": g["latency_ns"].quantile(0.99) / 1e6,
    }).reset_index()
    return out


def phantom_reads(ev: pd.DataFrame) -> pd.DataFrame:
    """ok reads of a value no write or cas to that key was ever invoked with (and not failed);
    the first such read per (run, key, value)."""
    ops = ev[ev["rec"] == "op"]
    reads = ops[(ops["type"] == "ok") & (ops["f"] == "read") & ops["val"].notna()]
    w = ops[(ops["type"] == "invoke") & ops["f"].isin(["write", "cas"]) & ops["val"].notna()
            & (ops["outcome"].isna() | (ops["outcome"] != "fail"))]
    writes = w[["run_id", "key", "val"]].drop_duplicates().assign(_w=1)
    m = reads.merge(writes, on=["run_id", "key", "val"], how="left")
    return first_phantoms(m[m["_w"].isna()])


def first_phantoms(ph: pd.DataFrame) -> pd.DataFrame:
    """One witness per (run, key, value): its first read."""
    cols = ["run_id", "key", "val", "index", "time", "process", "node"]
    if not len(ph):
        return pd.DataFrame(columns=cols)
    return ph.sort_values(["run_id", "index"]).drop_duplicates(["run_id", "key", "val"])[cols]


def kv_runs(ev: pd.DataFrame) -> list[str]:
    """The runs phantom-read applies to: those that read kv keys."""
    return sorted(ev.loc[(ev["rec"] == "op") & ev["key"].notna() & (ev["f"] == "read"),
                         "run_id"].unique())


def phantom_results(phantoms: pd.DataFrame, kv_run_ids: list[str]) -> list[tuple[str, Result]]:
    """The ``phantom-read`` verdict per kv run, with each phantom read as a witness."""
    by_run = {r: g for r, g in phantoms.groupby("run_id")} if len(phantoms) else {}
    out = []
    for run_id in kv_run_ids:
        g = by_run.get(run_id)
        r = Result("phantom-read", True, stats={"phantom_values": 0 if g is None else len(g)})
        if g is not None:
            r.valid = False
            r.note = f"{len(g)} value(s) read that were never written"
            for row in g.sort_values("index").head(MAX_WITNESSES).itertuples():
                r.anomalies.append(Anomaly(
                    "phantom-read",
                    f"process {row.process} read key {row.key} = {row.val} at "
                    f"{row.time / 1e9:.3f} s (op {row.index}, node {row.node}), but no write "
                    f"or cas of {row.val} to key {row.key} was ever invoked",
                    {"key": row.key, "value": row.val, "index": int(row.index),
                     "time": int(row.time), "process": row.process, "node": row.node}))
        out.append((run_id, r))
    return out


#: agreement statuses; MISMATCH and NOT_RERUN are shown as problems, never folded away
AGREE, MISMATCH, NOT_RERUN, NO_STORED = "agree", "MISMATCH", "not re-run", "no stored verdict"
AGREEMENT_COLUMNS = ["run_id", "checker", "stored", "rerun_checker", "rerun", "status", "note"]


def agreement(results: pd.DataFrame) -> pd.DataFrame:
    """Stored verdicts (results.json, ``source == "harness"``) against the pipeline's re-run.

    A stored checker pairs with the pipeline result of the same name (the registry re-run,
    ``reports.rerun``) or with the pipeline checker that covers it (``PipelineChecker.covers``:
    ``linearizable`` -> ``kv-linearizable``). Status: ``agree``; ``MISMATCH`` (the verdicts
    differ, "unknown" included); ``not re-run`` (a stored checker the registry does not
    have, e.g. a test's own); ``no stored verdict`` (a re-run with nothing stored to compare).
    """
    from reports.checks import covered

    cov = covered()
    if not len(results):
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    stored = results[results["source"] == "harness"]
    mine = results[results["source"] != "harness"]
    by_key = {(r.run_id, r.checker): r for r in mine.itertuples()}
    rows: list[dict[str, Any]] = []
    paired: set[tuple[str, str]] = set()
    for s in stored.itertuples():
        name = s.checker if (s.run_id, s.checker) in by_key else cov.get(s.checker, s.checker)
        m = by_key.get((s.run_id, name))
        if m is None:
            rows.append({"run_id": s.run_id, "checker": s.checker, "stored": s.valid,
                         "rerun_checker": "", "rerun": "", "status": NOT_RERUN,
                         "note": "no re-run of this checker (not in the protocol registry)"})
            continue
        paired.add((s.run_id, name))
        ok = m.valid == s.valid
        rows.append({"run_id": s.run_id, "checker": s.checker, "stored": s.valid,
                     "rerun_checker": m.checker, "rerun": m.valid,
                     "status": AGREE if ok else MISMATCH,
                     "note": "" if ok else (m.note or s.note or "")[:300]})
    for m in mine.itertuples():
        if (m.run_id, m.checker) in paired or not _is_rerun(m.stats):
            continue
        rows.append({"run_id": m.run_id, "checker": m.checker, "stored": "",
                     "rerun_checker": m.checker, "rerun": m.valid, "status": NO_STORED,
                     "note": (m.note or "")[:300]})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _is_rerun(stats: str | None) -> bool:
    try:
        return bool(json.loads(stats or "{}").get("rerun"))
    except (ValueError, AttributeError):
        return False


def run_table(info_rows: list[dict[str, Any]], results: pd.DataFrame,
              agreement_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: identity, read status, stored verdict, pipeline verdicts, overall,
    and the checkers whose stored and re-run verdicts disagree (``mismatch``)."""
    rows = []
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in results.to_dict("records"):
        by_run.setdefault(r["run_id"], []).append(r)
    mismatch: dict[str, list[str]] = {}
    if agreement_df is not None and len(agreement_df):
        for a in agreement_df[agreement_df["status"] == MISMATCH].itertuples():
            mismatch.setdefault(a.run_id, []).append(
                f"{a.checker} (stored {a.stored}, re-run {a.rerun})")
    for st in info_rows:
        info = st["info"]
        stored = (info.get("stored") or {}).get("valid", None)
        checks = by_run.get(info["run_id"], [])
        vals = [validity_of(c["valid"]) for c in checks]
        if stored is not None:
            vals.append(stored if stored in (True, False) else "unknown")
        if st["error"]:
            vals.append("unknown")
        if not vals:
            vals.append("unknown")
        rank = {False: 0, "unknown": 1, True: 2}
        verdict = min(vals, key=lambda v: rank[v])
        rows.append({
            "run_id": info["run_id"], "test": info["test"], "protocol": info["protocol"],
            "nemesis": info["nemesis"], "date": info["date"], "seed": info["seed"],
            "started": info.get("started", ""),
            "status": info["status"], "path": info["path"], "ops": st["ops"],
            "complete": st["complete"], "error": st["error"],
            "problems": json.dumps(st["problems"]),
            "stored_valid": "" if stored is None else validity_str(stored),
            "mismatch": "; ".join(mismatch.get(info["run_id"], [])),
            "verdict": validity_str(verdict),
        })
    return pd.DataFrame(rows)


def verdict_matrix(runs: pd.DataFrame) -> pd.DataFrame:
    """protocol x nemesis -> counts of runs by verdict (and by read error)."""
    r = runs.assign(outcome=runs["verdict"].where(runs["error"] == "", "error"))
    m = r.groupby(["protocol", "nemesis", "outcome"]).size().unstack(fill_value=0)
    m.columns.name = None
    for c in ("true", "false", "unknown", "error"):
        if c not in m.columns:
            m[c] = 0
    return m[["true", "false", "unknown", "error"]].reset_index()


def anomaly_counts(results: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in results.itertuples():
        for a in json.loads(r.anomalies):
            rows.append({"checker": r.checker, "kind": a["kind"]})
    if not rows:
        return pd.DataFrame(columns=["checker", "kind", "count"])
    return pd.DataFrame(rows).groupby(["checker", "kind"]).size().rename("count").reset_index()


#: a night's directory under <store>/_nightly (scripts/nightly names it by its UTC start)
NIGHT_ID = re.compile(r"^\d{8}T\d{6}Z$")


def night_starts(store: Path) -> list[tuple[dt.datetime, str]]:
    """The nights ``scripts/nightly`` ran over this store (start, id), oldest first."""
    d = store / "_nightly"
    if not d.is_dir():
        return []
    return sorted((dt.datetime.strptime(p.name, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC), p.name)
                  for p in d.iterdir() if p.is_dir() and NIGHT_ID.match(p.name))


def period_of(started: str, date: str, nights: list[tuple[dt.datetime, str]]) -> str:
    """What a trend groups a run under: the latest night that had started when the run did
    (two nights on one day stay apart), else the run's date (a store no night wrote)."""
    try:
        at = dt.datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return date
    night = None
    for start, name in nights:
        if start <= at:
            night = name
    return f"night {night}" if night else date


def trends(runs: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    """Per period (a night of ``scripts/nightly``, else a date): runs by verdict and the
    median run p99 latency."""
    r = runs.merge(stats, on="run_id", how="left")
    g = r.groupby("period" if "period" in r.columns else "date")
    return pd.DataFrame({
        "runs": g.size(),
        "valid": g["verdict"].agg(lambda s: int((s == "true").sum())),
        "invalid": g["verdict"].agg(lambda s: int((s == "false").sum())),
        "unknown": g["verdict"].agg(lambda s: int((s == "unknown").sum())),
        "p99_ms": g["p99_ms"].median(),
    }).reset_index().rename(columns={"date": "period"})
