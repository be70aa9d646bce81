"""The stats leaf: a client function that never succeeded leaves the run unproven."""

from __future__ import annotations

from typing import Any

from checkers.stats import check as stats_checker
from tests.unit.golden import Golden


def ops(f: str, *types: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, t in enumerate(types):
        out += [{"process": i, "type": "invoke", "f": f, "value": None},
                {"process": i, "type": t, "f": f, "value": None}]
    return out


NEMESIS = [{"process": "nemesis", "type": "invoke", "f": "kill", "value": None},
           {"process": "nemesis", "type": "info", "f": "kill", "value": None}]


def test_every_function_with_an_ok_is_valid_and_counted(golden: Golden) -> None:
    r = stats_checker({}, ops("read", "ok", "info") + ops("write", "fail", "ok") + NEMESIS, {})
    golden(r)
    assert r.valid is True
    assert r.examined == {"invocations": 4, "ok_read": 1, "ok_write": 1}
    assert r.stats["by_f"]["write"] == {"invoke": 2, "ok": 1, "fail": 1, "info": 0}


def test_a_function_that_never_succeeded_is_unknown_and_named(golden: Golden) -> None:
    r = stats_checker({}, ops("read", "ok") + ops("write", "fail", "info"), {})
    golden(r)
    assert r.valid == "unknown" and "ok_write=0" in r.note and "ok_read" not in r.note


def test_an_empty_history_is_unknown(golden: Golden) -> None:
    for h in ([], NEMESIS):
        r = golden(stats_checker({}, h, {}))
        assert r.valid == "unknown" and "invocations=0" in r.note


def test_all_fail_and_all_info_histories_are_unknown(golden: Golden) -> None:
    assert golden(stats_checker({}, ops("cas", "fail", "fail"), {})).valid == "unknown"
    assert golden(stats_checker({}, ops("cas", "info", "info"), {})).valid == "unknown"
