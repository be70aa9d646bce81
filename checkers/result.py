"""The one result shape every checker returns, and worst-wins composition.

Validity is three-valued: ``True``, ``False`` or ``"unknown"`` (a budget ran out or the
evidence was missing). ``unknown`` is never a silent pass: ``compose`` ranks it between
``False`` and ``True``, as Jepsen's checkers do.

Every leaf says what it examined (``examined``: counts such as ops, keys, commits,
deliveries, journal events). A leaf that examined nothing of what it judges has proved
nothing, so :func:`verdict` makes it ``unknown`` with the reason (Jepsen's ``stats`` checker:
a ``:f`` with no ``ok`` op is not a pass).

A leaf whose run simply had nothing of its kind (no node left, no long crash) is
:func:`not_exercised`: ``unknown`` with the reason, not a pass. :func:`compose` judges a
composite by its exercised children and lists the others (``stats["unexercised"]``); a
composite none of whose children was exercised is itself not exercised (``unknown``).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
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


@dataclass(frozen=True)
class Artifact:
    """A file that explains an anomaly (the linearizability SVG page), described by the check
    and written by the runner after it: a checker stays a pure function of its inputs."""

    #: where, relative to the run directory
    path: str
    render: Callable[[], str]
    #: the anomaly (index into ``Result.anomalies``) whose witness gets the written path
    anomaly: int = 0
    #: the witness key that holds the path
    key: str = "html"


@dataclass
class Result:
    checker: str
    valid: Validity
    anomalies: list[Anomaly] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    children: list[Result] = field(default_factory=list)
    #: a human explanation for ``unknown`` or a summary line for ``False``
    note: str = ""
    #: what the checker looked at, as counts ("ops", "keys", "commits", ...); a leaf with
    #: nothing examined is never ``True``
    examined: dict[str, int] = field(default_factory=dict)
    #: files to write after the check (never serialized: what they explain is in the witness)
    artifacts: list[Artifact] = field(default_factory=list, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "checker": self.checker,
            "valid": self.valid,
            "note": self.note,
            "examined": self.examined,
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
            examined=dict(d.get("examined") or {}),
        )

    def find(self, path: str) -> Result | None:
        """The sub-result at a dotted checker path below this one ("raft.vote-safety")."""
        node: Result | None = self
        for part in path.split("."):
            node = next((c for c in (node.children if node else []) if c.checker == part), None)
        return node

    def leaves(self, prefix: str = "") -> Iterator[tuple[str, Result]]:
        """Every leaf below this result with its dotted path ("raft.vote-safety")."""
        for c in self.children:
            path = f"{prefix}{c.checker}"
            if c.children:
                yield from c.leaves(path + ".")
            else:
                yield path, c

    def explain(self, limit: int = 5) -> str:
        """A terminal-readable account of what failed, for test messages and the CLI."""
        lines: list[str] = []
        self._explain(lines, 0, limit)
        return "\n".join(lines)

    def _explain(self, lines: list[str], depth: int, limit: int) -> None:
        pad = "  " * depth
        seen = f" [{examined_text(self.examined)}]" if self.examined else ""
        lines.append(f"{pad}{self.checker}: valid={self.valid}{seen}"
                     + (f" ({self.note})" if self.note else ""))
        for a in self.anomalies[:limit]:
            lines.append(f"{pad}  - [{a.kind}] {a.message}")
        if len(self.anomalies) > limit:
            lines.append(f"{pad}  ... {len(self.anomalies) - limit} more anomalies")
        for c in self.children:
            if c.valid is not True:
                c._explain(lines, depth + 1, limit)


def write_artifacts(result: Result, root: str | Path) -> list[Path]:
    """Write every artifact in ``result``'s tree under ``root`` and put each path in its
    anomaly's witness. Called by the runner (and ``harness check``) once the checks are done."""
    written = []
    for r in _walk(result):
        for a in r.artifacts:
            p = Path(root) / a.path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(a.render(), encoding="utf-8")
            if a.anomaly < len(r.anomalies):
                r.anomalies[a.anomaly].witness[a.key] = str(p)
            written.append(p)
    return written


def _walk(result: Result) -> Iterator[Result]:
    yield result
    for c in result.children:
        yield from _walk(c)


#: the stats flag of a result whose run had nothing of its kind to judge
NOT_EXERCISED = "not_exercised"


def not_exercised(name: str, reason: str, stats: dict[str, Any] | None = None,
                  examined: Mapping[str, int] | None = None) -> Result:
    """A leaf that had nothing of its kind to judge: ``unknown`` with ``reason``, never True.
    Beside exercised siblings, :func:`compose` leaves it out of the verdict and lists it."""
    return Result(name, "unknown", [], {**(stats or {}), NOT_EXERCISED: True},
                  note=f"not exercised: {reason}", examined=dict(examined or {}))


def is_not_exercised(r: Result) -> bool:
    return r.valid == "unknown" and r.stats.get(NOT_EXERCISED) is True


def compose(name: str, results: Iterable[Result]) -> Result:
    """Worst-wins over the exercised children; not-exercised ones are listed (as dotted paths
    below ``name``) in ``stats["unexercised"]``. If none was exercised: not exercised."""
    rs = list(results)
    idle = [r for r in rs if is_not_exercised(r)]
    judged = [r for r in rs if not is_not_exercised(r)]
    paths: list[str] = []
    for r in idle:
        below = r.stats.get("unexercised")
        paths += [f"{r.checker}.{p}" for p in below] if below else [r.checker]
    for r in judged:
        paths += [f"{r.checker}.{p}" for p in r.stats.get("unexercised", [])]
    if idle and not judged:
        return Result(checker=name, valid="unknown", children=rs,
                      stats={NOT_EXERCISED: True, "unexercised": paths},
                      note="not exercised: nothing of its kind in this run: " + ", ".join(paths))
    out = Result(checker=name, valid=worst(r.valid for r in judged), children=rs)
    if paths:
        out.stats["unexercised"] = paths
        out.note = "not exercised: " + ", ".join(paths)
    return out


def examined_text(examined: Mapping[str, int]) -> str:
    """``ops=120 keys=4``: the counts as the CLI and the test messages print them."""
    return " ".join(f"{k}={v}" for k, v in examined.items())


#: anomalies kept per kind in one Result; the stats still count them all
ANOMALY_LIMIT = 20


def cap(anomalies: list[Anomaly], limit: int = ANOMALY_LIMIT) -> list[Anomaly]:
    """Keep the first ``limit`` anomalies of each kind: a witness, not a dump."""
    seen: dict[str, int] = {}
    out = []
    for a in anomalies:
        seen[a.kind] = seen.get(a.kind, 0) + 1
        if seen[a.kind] <= limit:
            out.append(a)
    return out


def unexamined(examined: Mapping[str, int], needs: Iterable[str]) -> list[str]:
    """The needed counts that are zero or absent, as reasons ("nothing examined: commits=0")."""
    return [f"nothing to judge: {k}=0" for k in needs if not examined.get(k)]


def verdict(name: str, anomalies: list[Anomaly], stats: dict[str, Any], gaps: Iterable[str] = (),
            unknown_note: str = "", *, examined: Mapping[str, int] | None = None,
            needs: Iterable[str] = ()) -> Result:
    """The one rule for a leaf: any anomaly is False; no anomaly but missing evidence, or a
    needed count (``needs``, keys of ``examined``) that is zero, is "unknown" with the reasons;
    else True. ``examined`` goes into the Result so that people see what was looked at; an
    unknown whose only reason is an empty count is marked ``stats["vacuous"]``."""
    seen = dict(examined or {})
    gaps = list(gaps)
    kinds: dict[str, int] = {}
    for a in anomalies:
        kinds[a.kind] = kinds.get(a.kind, 0) + 1
    stats = {**stats, "anomalies": kinds, "missing_evidence": gaps}
    if anomalies:
        return Result(name, False, cap(anomalies), stats,
                      note=f"{len(anomalies)} anomalies; first: {anomalies[0].message}",
                      examined=seen)
    empty = unexamined(seen, needs)
    reasons = ([unknown_note] if unknown_note else []) + empty + gaps
    if empty and len(empty) == len(reasons):
        # nothing examined and nothing else wrong: a per-key driver may drop this part
        stats["vacuous"] = True
    if reasons:
        more = f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
        lead = "no violation found, but " + ("evidence is missing: " if gaps or unknown_note
                                             else "")
        return Result(name, "unknown", [], stats, note=lead + "; ".join(reasons[:3]) + more,
                      examined=seen)
    return Result(name, True, [], stats, examined=seen)


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
