"""The timeline's rows are workers (process mod concurrency), and availability tells a
failed precondition (a cas refused on its merits) from the system being unavailable."""

from __future__ import annotations

import json

import pandas as pd
from report_builders import hand_run

from reports import aggregate as agg
from reports.discover import run_info
from reports.ingest import event_rows
from reports.plots import timeline_plot, timeline_rows
from reports.report import ReportOptions, build_report

MS = 1_000_000


def op(p, typ, f, value, t, **kw):
    return {"process": p, "type": typ, "f": f, "value": value, "time": t * MS, **kw}


def retiring_history() -> list[dict]:
    """Concurrency 2: worker 0's process 0 ends info (retired) and it goes on as 2, then 4;
    worker 1 stays process 1. A cas refused (cas-mismatch), one refused for no leader."""
    return [
        op(0, "invoke", "write", ["x", 1], 1), op(1, "invoke", "read", ["x", None], 1),
        op(0, "info", "write", ["x", 1], 5, error="timeout"),
        op(1, "ok", "read", ["x", 1], 6),
        op(2, "invoke", "cas", ["x", [5, 6]], 7), op(1, "invoke", "cas", ["x", [1, 2]], 7),
        op(2, "fail", "cas", ["x", [5, 6]], 8, error="cas-mismatch"),
        op(1, "fail", "cas", ["x", [1, 2]], 9, error="no-leader"),
        op(2, "invoke", "write", ["x", 3], 10),
        op(2, "info", "write", ["x", 3], 12, error="ConnectionError: lost"),
        op(4, "invoke", "read", ["x", None], 13), op(4, "ok", "read", ["x", 3], 14),
    ]


def completions_of(tmp_path) -> pd.DataFrame:
    run = hand_run(tmp_path / "store", "t", "20261120T010000-aaaaaa", retiring_history())
    cols, _ = event_rows(run_info(run))
    ev = pd.DataFrame(cols)
    return ev[(ev["rec"] == "op") & ev["latency_ns"].notna()]


def test_one_timeline_row_per_worker(tmp_path):
    comp = completions_of(tmp_path)
    assert sorted(comp["process"].unique()) == ["0", "1", "2", "4"]
    rows = timeline_rows(comp, 2)
    assert dict(zip(comp["process"], rows, strict=True)) == {"0": "w0", "2": "w0", "4": "w0",
                                                             "1": "w1"}
    # a worker's processes follow one another: its bars never overlap
    for _, g in comp.assign(row=rows).groupby("row"):
        g = g.sort_values("invoke_time")
        assert (g["invoke_time"].iloc[1:].values >= g["time"].iloc[:-1].values).all()
    # unknown concurrency, or processes that are not numbers: one row per process
    assert list(timeline_rows(comp, None).unique()) == ["p0", "p1", "p2", "p4"]
    odd = pd.DataFrame({"process": ["a", "1"]})
    assert list(timeline_rows(odd, 2)) == ["pa", "p1"]
    assert timeline_plot(comp, [], 0.02, tmp_path / "timeline.png", 2) == "timeline.png"
    assert (tmp_path / "timeline.png").stat().st_size > 1000


def test_the_run_page_plots_workers_when_test_json_names_the_concurrency(tmp_path):
    store = tmp_path / "store"
    run = hand_run(store, "t", "20261120T010000-aaaaaa", retiring_history())
    rec = json.loads((run / "test.json").read_text())
    (run / "test.json").write_text(json.dumps({**rec, "concurrency": 2}))
    other = hand_run(store, "t", "20261120T020000-bbbbbb", retiring_history())
    build_report(ReportOptions(store=store, engine="local"))
    assert "Operation timeline per worker" in (run / "report" / "index.html").read_text()
    assert "Operation timeline per process" in (other / "report" / "index.html").read_text()


def test_a_failed_precondition_is_not_unavailability(tmp_path):
    comp = completions_of(tmp_path)
    ev = comp.assign(protocol="p")
    (row,) = agg.availability(ev).to_dict("records")
    # 6 completions: 2 ok reads, 1 cas-mismatch, 1 no-leader, 2 info
    assert (row["ok"], row["precondition"], row["unavailable"], row["count"]) == (2, 1, 3, 6)
    assert row["availability"] == 3 / 6
    assert tuple(agg.availability(ev).columns) == (
        "protocol", "phase", "fault", "ok", "precondition", "unavailable", "count",
        "availability")


def test_the_report_availability_table_has_the_precondition_column(tmp_path):
    store = tmp_path / "store"
    hand_run(store, "t", "20261120T010000-aaaaaa", retiring_history())
    out = build_report(ReportOptions(store=store, engine="local"))
    (row,) = out.output.tables["availability"].to_dict("records")
    assert (row["ok"], row["precondition"], row["unavailable"]) == (2, 1, 3)
    index = out.index.read_text()
    assert "<th>precondition</th>" in index and "<th>unavailable</th>" in index
