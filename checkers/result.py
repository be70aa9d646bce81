"""The one result shape every checker returns, and worst-wins composition.

Validity is three-valued: ``True``, ``False`` or ``"unknown"`` (a budget ran out or the
evidence was missing). ``unknown`` is never a silent pass: ``compose`` ranks it between
``False`` and ``True``, as Jepsen's checkers do.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Validity = bool | Literal["unknown"]

_RANK: dict[Any, int] = {False: 0, "unknown": 1, True: 2}


def worst(validities: Iterable[Validity]) -> Validity:
    """Merge validities worst-wins: False over "unknown" over True (empty -> True)."""
    out: Validity = True
    for v in validities:
        if _RANK[v] < _RANK[out]:
            out = v
    return out


@dataclass
class Anomaly:
    """One violation a person can act on: what kind, what it means, the evidence."""

    kind: str
    message: str
    witness: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Result:
    checker: str
    valid: Validity
    anomalies: list[Anomaly] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    children: list[Result] = field(default_factory=list)
    #: a human explanation for ``unknown`` or a summary line for ``False``
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "checker": self.checker,
            "valid": self.valid,
            "note": self.note,
            "anomalies": [a.to_json() for a in self.anomalies],
            "stats": self.stats,
            "children": [c.to_json() for c in self.children],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        return cls(
            checker=d["checker"],
            valid=d["valid"],
            note=d.get("note", ""),
            anomalies=[Anomaly(**a) for a in d.get("anomalies", [])],
            stats=d.get("stats", {}),
            children=[cls.from_json(c) for c in d.get("children", [])],
        )

    def explain(self, limit: int = 5) -> str:
        """A terminal-readable account of what failed, for test messages and the CLI."""
        lines: list[str] = []
        self._explain(lines, 0, limit)
        return "\n".join(lines)

    def _explain(self, lines: list[str], depth: int, limit: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{self.checker}: valid={self.valid}" + (f" ({self.note})" if self.note else ""))
        for a in self.anomalies[:limit]:
            lines.append(f"{pad}  - [{a.kind}] {a.message}")
        if len(self.anomalies) > limit:
            lines.append(f"{pad}  ... {len(self.anomalies) - limit} more anomalies")
        for c in self.children:
            if c.valid is not True:
                c._explain(lines, depth + 1, limit)


def compose(name: str, results: Iterable[Result]) -> Result:
    rs = list(results)
    return Result(checker=name, valid=worst(r.valid for r in rs), children=rs)


#: A checker is a pure function of (test description, history ops, observations).
Checker = Callable[[dict[str, Any], list[dict[str, Any]], dict[str, Any]], Result]


def run_checker(name: str, chk: Checker, test: dict[str, Any], ops: list[dict[str, Any]],
                observations: dict[str, Any]) -> Result:
    """One checker on one history, timed; a crash is ``unknown`` with its traceback, never a
    pass. The runner and the report's re-run both go through here, so they cannot disagree."""
    t0 = time.perf_counter()
    try:
        r = chk(test, ops, observations)
        r.checker = name
    except Exception as e:
        r = Result(checker=name, valid="unknown", note=f"checker crashed: {type(e).__name__}: {e}",
                   stats={"traceback": traceback.format_exc(limit=8)})
    r.stats.setdefault("elapsed_s", round(time.perf_counter() - t0, 4))
    return r
