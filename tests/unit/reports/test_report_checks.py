"""The checker driver: per-key parts, worst-wins merge, crash -> unknown, engine fallback."""

from __future__ import annotations

import sys

import pyarrow as pa
from report_builders import hand_run, nonlinearizable_ops

from checkers.result import Anomaly, Result
from reports.checks import (
    KV_LINEARIZABLE,
    PipelineChecker,
    check_batches,
    kv_linearizable,
    run_checker,
)
from reports.discover import run_info
from reports.ingest import run_table


def test_partition_by_callable_runs_per_key_and_merges_worst_wins():
    seen = []

    def chk(test, ops, obs):
        seen.append(len(ops))
        if ops[0]["value"][0] == "y":
            return Result("c", False, anomalies=[Anomaly("bad", "y is bad")])
        return Result("c", True)

    pc = PipelineChecker("c", chk, partition=lambda op: op["value"][0])
    r = run_checker(pc, {}, nonlinearizable_ops())
    assert sorted(seen) == [2, 6] and r.valid is False
    assert r.anomalies[0].witness["key"] == "y" and r.stats["parts"] == 2


def test_a_crashing_part_is_unknown_not_a_pass():
    def boom(test, ops, obs):
        raise RuntimeError("boom")

    r = run_checker(PipelineChecker("b", boom), {}, nonlinearizable_ops())
    assert r.valid == "unknown" and "boom" in r.note


def test_linearizability_engine_missing_is_a_labelled_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "checkers.linearizable.engine", None)
    r = kv_linearizable({}, nonlinearizable_ops(), {})
    assert r.valid == "unknown" and "not available" in r.note


def test_driver_over_arrow_batches_splits_runs_and_finds_the_stale_read(tmp_path):
    a = hand_run(tmp_path, "t", "20261120T000000-000001", nonlinearizable_ops())
    b = hand_run(tmp_path, "t", "20261120T000000-000002", nonlinearizable_ops()[:4])
    t = pa.concat_tables([run_table(run_info(a)), run_table(run_info(b))])
    t = t.filter(KV_LINEARIZABLE.arrow_filter(t))
    # tiny batches: runs span batches, and the driver must carry them over
    out = pa.Table.from_batches(list(check_batches(t.to_batches(max_chunksize=3),
                                                   KV_LINEARIZABLE))).to_pylist()
    assert [(r["run_id"].rsplit("-", 1)[1], r["valid"], r["parts"]) for r in out] == [
        ("000001", "false", 2), ("000002", "true", 1)]
    assert "Not linearizable" in out[0]["anomalies"]


def test_vacuous_parts_do_not_make_a_judged_run_unknown() -> None:
    from checkers.result import verdict
    from reports.checks import merge_parts

    judged = verdict("p", [], {}, examined={"ops": 4}, needs=("ops",))
    empty = verdict("p", [], {}, examined={"ops": 0}, needs=("ops",))
    torn = verdict("p", [], {}, ["n1: no journal"], examined={"ops": 2}, needs=("ops",))
    m = merge_parts("lin", [judged, empty])
    assert m.valid is True and m.examined == {"ops": 4} and m.stats["vacuous_parts"] == 1
    assert merge_parts("lin", [empty, empty]).valid == "unknown"  # nothing judged anywhere
    assert merge_parts("lin", [judged, torn]).valid == "unknown"  # a gap is not vacuity


def test_examined_counts_travel_per_leaf_into_the_results_rows() -> None:
    import json

    from checkers.result import Result, compose
    from reports.checks import examined_line, result_rows
    from reports.rerun import flatten

    raft = compose("raft", [Result("vote-safety", True, examined={"votes": 4}),
                            Result("log-matching", True, examined={"logs": 3, "entries": 0})])
    stats = Result("stats", True, examined={"invocations": 9})
    rows = result_rows("r1", [(raft, 0), (stats, 0), (flatten(raft), 0)])
    cells = [json.loads(c) for c in rows["examined"]]
    assert cells[0] == {"vote-safety": {"votes": 4}, "log-matching": {"logs": 3, "entries": 0}}
    assert cells[1] == {"": {"invocations": 9}} and cells[2] == cells[0]
    assert examined_line(rows["examined"][0]) == "vote-safety: votes=4 · log-matching: logs=3 entries=0"
    assert examined_line(rows["examined"][1]) == "invocations=9"
    assert examined_line(None) == "-" and examined_line("{torn") == ""
