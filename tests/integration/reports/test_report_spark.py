"""The real pipeline on Spark local mode over a store of real runs and hand-made bad histories.

One Spark session for the module (local[2], small data). The Spark engine's verdicts and
aggregates must match the in-process engine's on the same store: one implementation of the
checkers, two drivers.
"""

from __future__ import annotations

import shutil

import pytest

from reports.local_engine import LocalEngine
from reports.report import ReportOptions, build_report
from reports.spark_engine import SparkEngine, session


@pytest.fixture(scope="module")
def spark():
    s = session("local[2]", {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2"})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def spark_report(spark, store):
    eng = SparkEngine(spark=spark, recovery_window_ns=100_000_000)
    return build_report(ReportOptions(store=store["store"], recovery_window_s=0.1, pages="failed"),
                        engine=eng)


@pytest.fixture(scope="module")
def local_report(store, tmp_path_factory):
    copy = tmp_path_factory.mktemp("copy") / "store"
    shutil.copytree(store["store"], copy, symlinks=True,
                    ignore=shutil.ignore_patterns("_report", "report"))
    return build_report(ReportOptions(store=copy, engine="local", pages="none"),
                        engine=LocalEngine(recovery_window_ns=100_000_000))


def _verdicts(rep) -> dict[str, tuple[str, str]]:
    return {r.run_id: (r.verdict, bool(r.error)) for r in rep.output.runs.itertuples()}


def test_spark_verdicts_match_in_process(spark_report, local_report, store):
    v = _verdicts(spark_report)
    assert v == _verdicts(local_report)
    assert v[f"kv/{store['ok'].name}"] == ("true", False)
    assert v[f"kv-stale/{store['stale'].name}"][0] == "false"
    assert sum(1 for _, e in v.values() if e) == 2  # corrupt middle, not a history
    assert v[f"gf-kv/{store['raft'].name}"] == ("false", False)
    assert v[f"sds/{store['sds-good'].name}"] == ("true", False)


def test_spark_reruns_protocol_checkers_like_in_process(spark_report, local_report):
    """The registry re-run ran in Spark executors (reading run dirs by path) and agrees with
    the in-process engine on every (run, checker), disagreements with results.json included."""
    cols = ["run_id", "checker", "stored", "rerun", "status"]
    a = spark_report.output.tables["agreement"][cols].sort_values(cols).reset_index(drop=True)
    b = local_report.output.tables["agreement"][cols].sort_values(cols).reset_index(drop=True)
    assert a.equals(b)
    assert (a["status"] == "MISMATCH").sum() == 6
    assert "analyse.rerun_s" in spark_report.output.timings


def test_spark_results_and_aggregates_match(spark_report, local_report):
    cols = ["run_id", "checker", "valid"]
    a = spark_report.output.results[cols].sort_values(cols).reset_index(drop=True)
    b = local_report.output.results[cols].sort_values(cols).reset_index(drop=True)
    assert a.equals(b)
    ta, tb = spark_report.output.tables, local_report.output.tables
    k = ["protocol", "phase", "fault"]
    av_a = ta["availability"].sort_values(k).reset_index(drop=True)
    av_b = tb["availability"].sort_values(k).reset_index(drop=True)
    assert av_a[k + ["ok", "count"]].astype(str).equals(av_b[k + ["ok", "count"]].astype(str))
    la = ta["latency"].set_index(k).sort_index()
    lb = tb["latency"].set_index(k).sort_index()
    assert list(la["count"]) == list(lb["count"])
    rs_a = ta["recovery_summary"].set_index("fault")["recovered"].sort_index()
    rs_b = tb["recovery_summary"].set_index("fault")["recovered"].sort_index()
    assert rs_a.equals(rs_b)


def test_spark_report_pages_show_witnesses(spark_report, store):
    page = (store["stale"] / "report" / "index.html").read_text()
    assert "Not linearizable" in page and "engine spark" in page
    index = spark_report.index.read_text()
    assert "corrupt in the middle" in index and "phantom-read" in index
    events = store["store"] / "_report" / "data" / "events"
    assert "protocol=none" in {p.name for p in events.iterdir() if p.is_dir()}
    # whole runs per file and per row group, no directory per run
    assert not list(events.glob("*/*/run_id=*"))
    import pyarrow.parquet as pq

    for f in events.glob("*/*/*.parquet"):
        pf = pq.ParquetFile(f)
        ids = [set(pf.read_row_group(i, columns=["run_id"]).column(0).to_pylist())
               for i in range(pf.num_row_groups)]
        assert all(not (a & b) for i, a in enumerate(ids) for b in ids[i + 1:])


def test_row_group_tasks_never_cut_a_run(spark, store, tmp_path, monkeypatch):
    """Row groups hold whole runs, so the Python checkers' tasks may cut a file between any
    two row groups: with tiny row groups and many tasks per file every run is still checked
    exactly once, with the in-process engine's verdict."""
    import reports.ingest as ingest
    import reports.spark_engine as se
    from reports import scan
    from reports.checks import KV_LINEARIZABLE
    from reports.discover import find_runs

    monkeypatch.setattr(ingest, "ROW_GROUP_ROWS", 40)
    monkeypatch.setattr(se, "TASKS_PER_CORE", 50)
    runs = [r for r in find_runs(store["store"]) if r.test in ("kv", "kv-stale", "gf-kv")]
    events = tmp_path / "events"
    LocalEngine().ingest(runs, events, append=False)
    files = list(events.glob("*/*/*.parquet"))
    import pyarrow.parquet as pq

    assert sum(pq.ParquetFile(f).num_row_groups for f in files) > len(files)
    tasks = scan.plan(events, runs, 50 * spark.sparkContext.defaultParallelism)
    assert len(tasks) > len(files)
    got = SparkEngine(spark=spark).py_check(runs, events, KV_LINEARIZABLE)
    assert sorted(got["run_id"]) == sorted(r.run_id for r in runs)  # once each
    local = LocalEngine().analyse(runs, events).results
    want = local[local["checker"] == "kv-linearizable"].set_index("run_id")["valid"]
    assert got.set_index("run_id")["valid"].sort_index().equals(want.sort_index())
