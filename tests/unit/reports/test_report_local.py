"""The whole report on the in-process engine: verdicts, witnesses, HTML, JUnit, CLI, serve."""

from __future__ import annotations

import argparse
import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_builders import bad_store, real_run

from reports import aggregate as agg
from reports.cli import add_subcommands, cmd_report
from reports.html import select_pages
from reports.report import ReportOptions, build_report
from reports.serve import make_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    s = tmp_path_factory.mktemp("store")
    runs = {"ok": real_run(s, "kv", 1), "stale": real_run(s, "kv-stale", 2, stale=True)}
    runs.update(bad_store(s))
    runs["store"] = s
    return runs


@pytest.fixture(scope="module")
def report(store: dict[str, Path]):
    return build_report(ReportOptions(store=store["store"], engine="local", recovery_window_s=0.1))


def verdicts(report) -> dict[str, tuple[str, str]]:
    return {Path(r.path).name: (r.verdict, r.error) for r in report.output.runs.itertuples()}


def test_verdicts_per_run_and_bad_runs_reported_not_fatal(report, store):
    v = verdicts(report)
    assert v[store["ok"].name] == ("true", "")
    assert v[store["stale"].name][0] == "false"
    assert v[store["stale"].name][0] == "false"
    assert v[store["corrupt"].name][0] == "unknown" and "corrupt" in v[store["corrupt"].name][1]
    assert "no integer time" in v[store["notops"].name][1]
    runs = report.output.runs.set_index("run_id")
    torn = runs.loc[f"handmade/{store['torn'].name}"]
    assert not torn["complete"] and "torn final line" in torn["problems"]


def test_aggregates_see_the_faults(report):
    t = report.output.tables
    av = t["availability"].set_index(["phase", "fault"])["availability"]
    assert av[("healthy", "none")] >= 0.99  # an op stalled past a window's start may fail
    assert av[("fault", "partition")] < 0.7 and av[("fault", "kill")] < 0.7
    lat = t["latency"].set_index(["phase", "fault"])
    assert lat.loc[("fault", "partition"), "p50_ms"] > 5 * lat.loc[("healthy", "none"), "p50_ms"]
    rec = t["recovery_summary"].set_index("fault")
    assert rec.loc["partition", "faults"] == 2 and rec.loc["partition", "recovered"] == 2
    m = t["verdicts"].set_index(["protocol", "nemesis"])
    assert int(m.loc[("none", "none"), "error"]) == 2


def test_run_page_shows_anomaly_and_witness(report, store):
    page = (store["stale"] / "report" / "index.html").read_text()
    assert "nonlinearizable" in page and "Not linearizable" in page and "Cannot linearize" in page
    for img in ("latency.png", "throughput.png", "timeline.png", "faults.png", "nodes.png"):
        assert f'src="{img}"' in page and (store["stale"] / "report" / img).stat().st_size > 1000
    hand = (store["stale"].parent.parent / "handmade" / store["corrupt"].name / "report"
            / "index.html").read_text()
    assert "could not be read" in hand and "corrupt in the middle" in hand
    phantom = (store["torn"].parent / "20261120T010000-aaaaaa" / "report" / "index.html").read_text()
    assert "phantom-read" in phantom and "no write or cas of 42 to key &#34;y&#34;" in phantom
    index = report.index.read_text()
    assert index.count("<a href=") >= 6 and "Verdicts by protocol" in index


def test_junit_failures_and_errors(report, store):
    root = ET.parse(report.index.parent / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root}
    stale = suites[f"kv-stale/{store['stale'].name}"]
    case = next(c for c in stale if c.get("name") == "kv-linearizable")
    assert case.find("failure") is not None and "Not linearizable" in case.find("failure").text
    corrupt = suites[f"handmade/{store['corrupt'].name}"]
    assert corrupt.find("testcase/error").get("type") == "history"
    assert int(root.get("failures")) >= 3 and int(root.get("errors")) >= 2
    one = ET.parse(store["ok"] / "report" / "junit.xml").getroot()
    assert one.get("failures") == "0" and one.get("errors") == "0"


def test_report_json_and_parquet_outputs(report, store):
    d = store["store"] / "_report" / "data"
    data = json.loads((d / "report.json").read_text())
    assert {"runs", "results", "tables"} <= set(data)
    assert (d / "results.parquet").exists() and list((d / "events").glob("protocol=*/date=*/*.parquet"))


def test_select_pages(report):
    runs = report.output.runs
    assert select_pages(runs, "none") == set()
    assert len(select_pages(runs, "failed")) == 5
    assert len(select_pages(runs, "auto")) == len(runs)


def test_incremental_ingest_and_cli_exit_code(store, tmp_path):
    s = store["store"]
    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["report", "--store", str(s), "--engine", "local", "--pages", "none",
                       str(s / "kv")])
    assert a.fn is cmd_report and cmd_report(a) == 0
    real_run(s, "kv", 3)
    out = build_report(ReportOptions(store=s, engine="local", selectors=[str(s / "kv")],
                                     pages="none"))
    assert out.output.ingested == 1 and len(out.output.runs) == 2
    a = ap.parse_args(["report", "--store", str(s), "--engine", "local", "--pages", "none"])
    assert cmd_report(a) == 1  # the stale run is invalid


def test_phantom_reads_pandas():
    import pandas as pd

    ev = pd.DataFrame([
        {"rec": "op", "run_id": "r", "type": "invoke", "f": "write", "key": '"x"', "val": "1",
         "outcome": "fail", "index": 0, "time": 0, "process": "0", "node": None},
        {"rec": "op", "run_id": "r", "type": "ok", "f": "read", "key": '"x"', "val": "1",
         "outcome": None, "index": 3, "time": 5, "process": "1", "node": "n1"},
    ])
    ph = agg.phantom_reads(ev)  # the only write of 1 failed: the read is a phantom
    assert list(ph["index"]) == [3]
    [(rid, r)] = agg.phantom_results(ph, ["r"])
    assert r.valid is False and "was ever invoked" in r.anomalies[0].message


def test_serve_redirects_and_serves_pages(report, store):
    from aiohttp.test_utils import TestClient, TestServer

    async def go() -> None:
        async with TestClient(TestServer(make_app(store["store"]))) as c:
            r = await c.get("/")
            assert r.status == 200 and "Consistency report" in await r.text()
            r = await c.get(f"/kv/{store['ok'].name}/report/latency.png")
            assert r.status == 200 and r.content_type == "image/png"
            r = await c.get("/../../etc/passwd")
            assert r.status in (403, 404)

    asyncio.run(go())
