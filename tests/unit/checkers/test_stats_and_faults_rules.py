"""The stats and fault-coverage leaves count every op, wherever nemesis ops sit in the
history, and say how many faults were applied."""

from __future__ import annotations

from typing import Any

from checkers import faults, stats


def op(process: Any, type_: str, f: str, value: Any = None, **kw: Any) -> dict[str, Any]:
    return {"process": process, "type": type_, "f": f, "value": value, **kw}


def test_client_ops_after_a_nemesis_op_are_counted() -> None:
    h = [op("nemesis", "invoke", "kill"), op("nemesis", "info", "kill", {"nodes": ["n1"]}),
         op(0, "invoke", "write", 1), op(0, "ok", "write", 1)]
    r = stats.check({}, h, {})
    assert r.valid is True and r.examined == {"invocations": 1, "ok_write": 1}


def test_every_successful_application_is_counted() -> None:
    h = []
    for _ in range(2):
        h += [op("nemesis", "invoke", "kill"), op("nemesis", "info", "kill", {"nodes": ["n1"]}),
              op("nemesis", "invoke", "restart"), op("nemesis", "info", "restart")]
    r = faults.check({"nemesis": "kill"}, h, {})
    assert r.valid is True and r.examined["faults_applied"] == 2
    assert r.stats["applied"] == {"kill": 2}
