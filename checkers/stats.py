"""Jepsen's ``stats`` checker: a run in which some client function never succeeded proved
nothing about that function, so it is not a pass.

Counts every client completion by function and type. ``unknown`` when no client op was
invoked at all, or when a function the workload invoked has no ``ok`` completion (every
write failed, every read timed out): the other checkers then judged a history in which that
kind of operation never took effect.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.result import Result, verdict
from vocabulary.faults import is_nemesis

NAME = "stats"


def check(test: dict[str, Any], history: list[dict[str, Any]],
                  observations: dict[str, Any]) -> Result:
    """``True`` when every invoked client function has at least one ``ok`` op."""
    by_f: dict[str, Counter[str]] = {}
    for op in history:
        if is_nemesis(op):
            continue
        by_f.setdefault(str(op.get("f")), Counter())[str(op.get("type"))] += 1
    examined = {"invocations": sum(c["invoke"] for c in by_f.values()),
                **{f"ok_{f}": c["ok"] for f, c in sorted(by_f.items())}}
    table = {f: {t: c[t] for t in ("invoke", "ok", "fail", "info")} for f, c in sorted(by_f.items())}
    return verdict(NAME, [], {"by_f": table}, examined=examined,
                   needs=("invocations", *(f"ok_{f}" for f in sorted(by_f))))
