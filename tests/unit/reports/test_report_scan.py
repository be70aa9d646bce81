"""The Python checkers' own reads: row-group tasks planned from footers, balanced, and read
back run by run with only the selected runs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from report_builders import hand_run, nonlinearizable_ops

import reports.ingest as ingest
from reports import scan
from reports.checks import KV_LINEARIZABLE
from reports.discover import run_info


def _store(tmp_path: Path, monkeypatch, n: int = 6) -> tuple[list, Path]:
    runs = [run_info(hand_run(tmp_path / "s", "t", f"20261120T00000{i}-00000{i}",
                              nonlinearizable_ops() if i % 2 else nonlinearizable_ops()[:4]))
            for i in range(n)]
    monkeypatch.setattr(ingest, "ROW_GROUP_ROWS", 1)  # one run per row group
    ev = tmp_path / "events"
    ingest.write_slice(runs[: n // 2], str(ev))
    ingest.write_slice(runs[n // 2:], str(ev))
    return runs, ev


def test_deal_balances_by_weight_and_drops_empty_groups():
    groups = scan.deal([1, 3, 5, 2, 4, 3], float, 3)
    assert sorted(sum(g) for g in groups) == [6, 6, 6]
    assert scan.deal([7], float, 4) == [[7]]
    assert scan.deal([], float, 4) == []


def test_plan_reads_only_the_selected_runs_in_order(tmp_path, monkeypatch):
    runs, ev = _store(tmp_path, monkeypatch)
    pick = [runs[1], runs[4]]
    tasks = scan.plan(ev, pick, 8)
    pieces = [p for t in tasks for p in json.loads(t)["pieces"]]
    assert len(pieces) == 2, "row groups of unselected runs are pruned by their statistics"
    got = [r for t in tasks for tab in scan.read_task(t, ["rec", "run_id", "index"])
           for r in tab.to_pylist() if r["rec"] == "op"]
    assert {r["run_id"] for r in got} == {runs[1].run_id, runs[4].run_id}
    for rid in (runs[1].run_id, runs[4].run_id):
        idx = [r["index"] for r in got if r["run_id"] == rid]
        assert idx == sorted(idx) and idx, "a run's rows come whole and in order"


def test_plan_of_a_missing_partition_is_empty(tmp_path, monkeypatch):
    runs, ev = _store(tmp_path, monkeypatch, 2)
    assert scan.plan(tmp_path / "nowhere", runs, 4) == []


def test_check_tasks_gives_one_verdict_per_selected_kv_run(tmp_path, monkeypatch):
    runs, ev = _store(tmp_path, monkeypatch)
    tasks = scan.plan(ev, runs, 2)
    assert len(tasks) == 2
    batch = pa.RecordBatch.from_pydict({"task": tasks})
    out = pa.Table.from_batches(list(scan.check_tasks([batch], KV_LINEARIZABLE))).to_pylist()
    verdicts = {r["run_id"]: r["valid"] for r in out}
    assert verdicts == {r.run_id: "false" if i % 2 else "true" for i, r in enumerate(runs)}
