"""Fault windows, phases and the ingest rows: pure Python, no Spark."""

from __future__ import annotations

import json
from pathlib import Path

from report_builders import bad_store, hand_run, nonlinearizable_ops

from reports.discover import find_runs, run_info
from reports.faults import PhaseIndex, fault_windows
from reports.ingest import event_rows

S = 1_000_000_000


def nem(f: str, t: int) -> dict:
    return {"process": "nemesis", "type": "info", "f": f, "value": None, "time": t}


def test_windows_pair_start_and_end_and_heal_all_closes_the_rest():
    ops = [nem("start-partition", 1 * S), nem("kill", 2 * S), nem("stop-partition", 3 * S),
           nem("pause", 4 * S), nem("heal-all", 6 * S), nem("clock-skew", 7 * S)]
    ws = fault_windows(ops)
    assert [(w.kind, w.start, w.end) for w in ws] == [
        ("partition", 1 * S, 3 * S), ("kill", 2 * S, 6 * S), ("pause", 4 * S, 6 * S),
        ("clock", 7 * S, None)]
    ph = PhaseIndex(ws, recovery_window_ns=S // 2)
    assert ph.at(0).phase == "healthy" and ph.at(0).heal_time is None
    assert ph.at(2 * S + 1).fault == "kill,partition"
    assert ph.at(6 * S + 5).phase == "recovering" and ph.at(6 * S + 5).heal_time == 6 * S
    assert ph.at(int(7.5 * S)).phase == "fault"  # the unhealed clock skew
    assert ph.at(int(6.99 * S)).phase == "healthy"  # recovery window over, skew not begun


def test_event_rows_pair_ops_and_carry_phase_latency_and_kv_columns(tmp_path: Path):
    ops = nonlinearizable_ops()
    ops.insert(2, nem("start-partition", 2_500_000))
    ops.insert(5, nem("stop-partition", 4_500_000))
    d = hand_run(tmp_path, "t", "20261120T000000-000001", ops)
    cols, st = event_rows(run_info(d), recovery_window_ns=1_000_000)
    assert st.error == "" and st.complete and st.ops == len(ops)
    rows = [dict(zip(cols, r, strict=True)) for r in zip(*cols.values(), strict=True)]
    comp = [r for r in rows if r["rec"] == "op" and r["latency_ns"] is not None]
    assert [r["latency_ns"] for r in comp] == [1_000_000] * 4
    assert [r["phase"] for r in comp] == ["healthy", "fault", "recovering", "healthy"]
    first_write = next(r for r in rows if r["rec"] == "op" and r["type"] == "invoke")
    assert first_write["outcome"] == "ok" and first_write["key"] == '"x"' and first_write["val"] == "1"
    read_y = comp[-1]
    assert (read_y["key"], read_y["val"], read_y["since_heal_ns"]) == ('"y"', "42", 8_000_000 - 4_500_000)
    faults = [json.loads(r["value"]) for r in rows if r["rec"] == "fault"]
    assert faults[0]["kind"] == "partition" and faults[0]["end"] == 4_500_000
    assert [r["rec"] for r in rows].count("run") == 1


def test_bad_histories_become_per_run_errors_or_incomplete(tmp_path: Path):
    runs = bad_store(tmp_path)
    st = {k: event_rows(run_info(p))[1] for k, p in runs.items()}
    assert st["nonlin"].error == "" and st["nonlin"].complete
    assert st["torn"].error == "" and not st["torn"].complete
    assert any("torn final line" in p for p in st["torn"].problems)
    assert "corrupt in the middle" in st["corrupt"].error
    assert "no integer time" in st["notops"].error


def test_find_runs_by_dir_glob_and_date(tmp_path: Path):
    bad_store(tmp_path)
    hand_run(tmp_path, "other", "20261125T000000-eeeeee", nonlinearizable_ops())
    assert len(find_runs(tmp_path)) == 5
    assert len(find_runs(tmp_path, [str(tmp_path / "handmade")])) == 4
    assert len(find_runs(tmp_path, ["other/*"])) == 1
    assert [r.test for r in find_runs(tmp_path, since="2026-11-21")] == ["other"]
    assert len(find_runs(tmp_path, until="2026-11-20")) == 4


def test_row_groups_hold_whole_runs_and_an_old_layout_is_rebuilt(tmp_path: Path, monkeypatch):
    import pyarrow.parquet as pq

    import reports.ingest as ingest
    from reports.pipeline import LAYOUT_KEY, plan_ingest

    runs = [run_info(hand_run(tmp_path / "s", "t", f"20261120T00000{i}-00000{i}",
                              nonlinearizable_ops())) for i in range(5)]
    monkeypatch.setattr(ingest, "ROW_GROUP_ROWS", 12)  # 9 rows a run: a group closes at 2 runs
    w = ingest.write_slice(runs, str(tmp_path / "events"))
    pf = pq.ParquetFile(w["file"])
    groups = [pf.read_row_group(i, columns=["run_id"]).column(0).to_pylist()
              for i in range(pf.num_row_groups)]
    assert [len(set(g)) for g in groups] == [2, 2, 1]
    seen = [r for g in groups for r in dict.fromkeys(g)]
    assert len(seen) == len(set(seen)) == 5  # no run in two row groups
    # a dataset from before the layout (no layout key) is rebuilt, not appended to
    d = tmp_path / "data"
    (d / "events").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps(
        {r.run_id: [r.history_bytes, r.history_mtime, r.path] for r in runs}))
    todo, append = plan_ingest(runs, d)
    assert not append and len(todo) == 5
    (d / "manifest.json").write_text(json.dumps(
        {LAYOUT_KEY: ingest.LAYOUT, **{r.run_id: [r.history_bytes, r.history_mtime, r.path]
                                       for r in runs}}))
    assert plan_ingest(runs, d) == ([], True)
