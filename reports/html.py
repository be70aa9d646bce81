"""The static report: an index across runs and a page per run, from the pipeline's output.

Pages are rendered with Jinja2 (autoescaped); plots are PNG files beside each page. Run
pages live in the run's own ``report/`` folder (the store layout in DESIGN.md) and the index
in ``<store>/_report/``; links are relative so the store can be copied, zipped or served.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from reports import junit, plots, runfiles
from reports.checks import examined_line
from reports.discover import REPORT_DIR, RunInfo
from reports.faults import FaultWindow
from reports.ingest import event_rows
from reports.pipeline import PipelineOutput

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]))
#: "auto" renders every run page up to this many runs, beyond it failures + the newest
AUTO_PAGES = 200
AUTO_NEWEST = 50


def _table(df: pd.DataFrame | None) -> str:
    if df is None or not len(df):
        return "<p class='muted'>(none)</p>"
    return df.to_html(index=False, float_format=lambda x: f"{x:.3f}", border=0, na_rep="-")


def select_pages(runs: pd.DataFrame, pages: str) -> set[str]:
    """Which run pages to render: all | none | failed | auto."""
    if pages == "none" or not len(runs):
        return set()
    bad = set(runs.loc[(runs["verdict"] != "true") | (runs["error"] != ""), "run_id"])
    if pages == "failed":
        return bad
    if pages == "all" or len(runs) <= AUTO_PAGES:
        return set(runs["run_id"])
    return bad | set(runs.sort_values("date")["run_id"].tail(AUTO_NEWEST))


def write_report(store: Path, out: PipelineOutput, infos: Iterable[RunInfo], engine: str,
                 pages: str = "auto") -> Path:
    """Write index.html, run pages, plots and JUnit files; returns the index path."""
    idx_dir = store / REPORT_DIR
    idx_dir.mkdir(parents=True, exist_ok=True)
    by_id = {i.run_id: i for i in infos}
    gen = time.strftime("%Y-%m-%d %H:%M:%S")
    want = select_pages(out.runs, pages)
    results = out.results
    by_run = {k: g.to_dict("records") for k, g in results.groupby("run_id")} \
        if len(results) else {}
    agr = out.tables.get("agreement")
    agr_by_run = {k: g.to_dict("records") for k, g in agr.groupby("run_id")} \
        if agr is not None and len(agr) else {}
    rows = []
    suites = []
    for r in out.runs.to_dict("records"):
        checks = by_run.get(r["run_id"], [])
        agreement = agr_by_run.get(r["run_id"], [])
        suite = junit.suite(r, checks, agreement)
        suites.append(suite)
        page = None
        info = by_id.get(r["run_id"])
        if info is not None:
            rdir = Path(info.path) / "report"
            junit.write_suites(rdir / "junit.xml", [suite])
            if r["run_id"] in want:
                p = _run_page(rdir, r, checks, agreement, info, idx_dir, gen, engine)
                page = os.path.relpath(p, idx_dir)
        failing = [c["checker"] for c in checks if c["valid"] != "true"]
        problems = json.loads(r.get("problems") or "[]")
        rows.append({**r, "page": page, "failing": ", ".join(failing),
                     "problems_text": "; ".join(problems)})
    junit.write_suites(idx_dir / "junit.xml", suites)
    tables = {k: _table(v) for k, v in out.tables.items() if k != "agreement"}
    for k in ("verdicts", "anomalies", "latency", "availability", "recovery_summary", "trends"):
        tables.setdefault(k, _table(None))
    agree = _agreement_view(agr)
    trends_img = None
    tr = out.tables.get("trends")
    if tr is not None and len(tr) > 1:
        trends_img = plots.trends_plot(tr, idx_dir / "trends.png")
    html = _env.get_template("index.html.j2").render(
        title="Consistency report", runs=rows, tables=tables, trends_img=trends_img,
        store=str(store), errors=sum(1 for r in rows if r["error"]), generated=gen, engine=engine,
        agree=agree)
    index = idx_dir / "index.html"
    index.write_text(html, encoding="utf-8")
    return index


#: rows of the index's disagreement table shown at most (the JSON/Parquet outputs hold all)
AGREEMENT_ROWS = 200


def _agreement_view(agr: pd.DataFrame | None) -> dict[str, Any]:
    """Counts by status, and the rows a person must look at (mismatches first)."""
    if agr is None or not len(agr):
        return {"counts": {}, "rows": [], "more": 0}
    counts = agr["status"].value_counts().to_dict()
    bad = agr[agr["status"] == "MISMATCH"]
    rows = bad.head(AGREEMENT_ROWS).to_dict("records")
    return {"counts": counts, "rows": rows, "more": max(0, len(bad) - len(rows))}


def _source(c: dict[str, Any]) -> str:
    src = c.get("source")
    if isinstance(src, str) and src:
        return "stored (results.json)" if src == "harness" else "report"
    return "report"


def _run_page(rdir: Path, run: dict[str, Any], checks: list[dict[str, Any]],
              agreement: list[dict[str, Any]], info: RunInfo, idx_dir: Path, gen: str,
              engine: str) -> Path:
    rdir.mkdir(parents=True, exist_ok=True)
    run_path = Path(info.path)
    record = runfiles.read_test(run_path)
    checks_v = [{**c, "anomalies": json.loads(c["anomalies"]), "source": _source(c),
                 "examined": examined_line(c.get("examined"))} for c in checks]
    anomalies = [{**a, "checker": c["checker"],
                  "witness": json.dumps(a.get("witness"), indent=1, default=repr)
                  if a.get("witness") else "",
                  "explainer": runfiles.explainer(a.get("witness") or {}, run_path, rdir)}
                 for c in checks_v for a in c["anomalies"]]
    plot_list: list[tuple[str, str]] = []
    faults: list[dict[str, Any]] = []
    if not run["error"]:
        cols, st = event_rows(info)
        ev = pd.DataFrame(cols)
        comp = ev[(ev["rec"] == "op") & ev["latency_ns"].notna()]
        windows = [FaultWindow(**json.loads(v)) for v in ev.loc[ev["rec"] == "fault", "value"]]
        faults = [asdict(w) for w in windows]
        t_end = st.t_end / 1e9
        concurrency = (record or {}).get("concurrency")
        plot_list += [
            ("Latency over time", plots.latency_plot(comp, windows, t_end, rdir / "latency.png")),
            ("Throughput over time",
             plots.throughput_plot(comp, windows, t_end, rdir / "throughput.png")),
            ("Operation timeline per worker" if isinstance(concurrency, int) and concurrency > 0
             else "Operation timeline per process",
             plots.timeline_plot(comp, windows, t_end, rdir / "timeline.png", concurrency)),
            ("Fault schedule", plots.fault_plot(windows, t_end, rdir / "faults.png")),
        ]
        ne = _node_events(run_path)
        if ne:
            plot_list.append(("Node event timelines", plots.node_events_plot(ne, rdir / "nodes.png")))
    files, n_files = runfiles.run_files(run_path, rdir)
    html = _env.get_template("run.html.j2").render(
        title=f"run {run['run_id']}", run=run, checks=checks_v, anomalies=anomalies,
        agreement=agreement,
        plots=plot_list, faults=faults, problems=json.loads(run.get("problems") or "[]"),
        index_href=os.path.relpath(idx_dir / "index.html", rdir), generated=gen, engine=engine,
        reproduce=runfiles.reproduce(run_path, record), files=files,
        more_files=n_files - len(files),
        links={f.path: f.href for f in files if f.path in runfiles.FIRST})
    page = rdir / "index.html"
    page.write_text(html, encoding="utf-8")
    return page


def _node_events(run_path: Path) -> dict[str, pd.DataFrame]:
    """Each node's journal (nodes/<node>/events.jsonl); torn or bad lines are skipped."""
    out: dict[str, pd.DataFrame] = {}
    for f in sorted(run_path.glob("nodes/*/events.jsonl")):
        rows = []
        for line in f.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and isinstance(e.get("t"), int | float):
                rows.append({"t": float(e["t"]), "type": str(e.get("type"))})
        if rows:
            out[f.parent.name] = pd.DataFrame(rows)
    return out
