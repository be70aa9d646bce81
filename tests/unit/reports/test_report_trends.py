"""Trends group runs by the night ``scripts/nightly`` ran them in (two nights of one day stay
apart), and by date in a store no night wrote."""

from __future__ import annotations

import pandas as pd

from reports import aggregate as agg


def test_nights_come_from_the_nightly_dirs_and_ignore_anything_else(tmp_path) -> None:
    for name in ("20261125T132514Z", "20261125T132020Z", "notes", "20261125"):
        (tmp_path / "_nightly" / name).mkdir(parents=True)
    (tmp_path / "_nightly" / "nights.jsonl").write_text("")
    assert [n for _, n in agg.night_starts(tmp_path)] == ["20261125T132020Z", "20261125T132514Z"]
    assert agg.night_starts(tmp_path / "nowhere") == []


def test_a_run_belongs_to_the_latest_night_that_had_started() -> None:
    nights = [(pd.Timestamp("2026-11-25T13:20:20Z").to_pydatetime(), "20261125T132020Z"),
              (pd.Timestamp("2026-11-25T13:25:14Z").to_pydatetime(), "20261125T132514Z")]
    of = lambda started: agg.period_of(started, "2026-11-25", nights)  # noqa: E731
    assert of("2026-11-25T13:19:00+0000") == "2026-11-25"  # before any night: its date
    assert of("2026-11-25T13:21:00+0000") == "night 20261125T132020Z"
    assert of("2026-11-25T14:26:00+0100") == "night 20261125T132514Z"  # offsets compared right
    assert of("garbage") == "2026-11-25"
    assert agg.period_of("2026-11-25T13:21:00+0000", "2026-11-25", []) == "2026-11-25"


def test_trends_count_verdicts_per_period() -> None:
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "date": ["d"] * 3,
                         "period": ["night 1", "night 1", "night 2"],
                         "verdict": ["true", "false", "unknown"]})
    stats = pd.DataFrame({"run_id": ["a", "b", "c"], "p99_ms": [1.0, 3.0, 5.0]})
    t = agg.trends(runs, stats)
    assert t.to_dict("records") == [
        {"period": "night 1", "runs": 2, "valid": 1, "invalid": 1, "unknown": 0, "p99_ms": 2.0},
        {"period": "night 2", "runs": 1, "valid": 0, "invalid": 0, "unknown": 1, "p99_ms": 5.0}]
    by_date = agg.trends(runs.drop(columns="period"), stats)
    assert list(by_date["period"]) == ["d"] and by_date["runs"].iloc[0] == 3
