"""The budgets a user sets reach the search, through the harness checker and the CLI: a
search that runs out of its time or memory budget says unknown (exit 2), never a verdict it
did not finish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.linearizable import checker
from checkers.linearizable.__main__ import main
from tests.unit.linearizable.test_lin_engine import hard


@pytest.mark.parametrize(("budget", "why"), [
    ({"time_s": 0.0, "memory_mb": None}, "time budget"),
    ({"time_s": None, "memory_mb": 1}, "memory budget"),
])
def test_the_harness_checker_honours_its_budget(budget: dict[str, float | None], why: str
                                                ) -> None:
    r = checker("register", **budget)({}, hard(), {})
    assert r.valid == "unknown" and why in r.note, r.note


@pytest.mark.parametrize(("args", "why"), [
    (["--time-s", "0"], "time budget"),
    (["--memory-mb", "1"], "memory budget"),
])
def test_the_cli_honours_its_budget(args: list[str], why: str, tmp_path: Path, capsys) -> None:
    f = tmp_path / "history.jsonl"
    f.write_text("".join(json.dumps(o) + "\n" for o in hard()))
    assert main(["--model", "register", *args, str(f)]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] == "unknown" and why in out["note"], out["note"]
