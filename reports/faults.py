"""Fault windows from the nemesis ops in a history, and the phase each client op ran in.

Why here and not in SQL: a window needs the history in order (a start op, then its end op),
which is one cheap pass per run at ingest time. Once every op row carries its phase, fault
kind and time since the last heal, every cross-run aggregate is a plain columnar group-by.

Phases: ``fault`` while any fault is active at the op's invocation, ``recovering`` within
``recovery_window_ns`` after the last fault ended (and none active), else ``healthy``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vocabulary.faults import HEAL_ALL, KIND_OF_END, KIND_OF_START, NEMESIS

DEFAULT_RECOVERY_WINDOW_NS = 5_000_000_000


@dataclass
class FaultWindow:
    """One fault, from the start op's completion to the end op's completion (ns)."""

    id: int
    kind: str
    start: int
    end: int | None  # None: never healed before the history ended
    start_f: str
    value: Any = None
    end_f: str | None = None


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    """Pair fault start and end ops; nemesis completions (``info``) carry the effective time."""
    windows: list[FaultWindow] = []
    open_: dict[str, list[FaultWindow]] = {}
    for op in ops:
        if op.get("process") != NEMESIS or op.get("type") == "invoke":
            continue
        f = str(op.get("f"))
        t = int(op.get("time") or 0)
        if f in KIND_OF_START:
            w = FaultWindow(len(windows), KIND_OF_START[f], t, None, f, op.get("value"))
            windows.append(w)
            open_.setdefault(w.kind, []).append(w)
        elif f in KIND_OF_END:
            for w in open_.pop(KIND_OF_END[f], []):
                w.end, w.end_f = t, f
        elif f in HEAL_ALL:
            for ws in open_.values():
                for w in ws:
                    w.end, w.end_f = t, f
            open_.clear()
    return windows


@dataclass(frozen=True)
class PhaseInfo:
    phase: str  # healthy | fault | recovering
    fault: str | None  # the fault kind(s) active, or just healed while recovering
    fault_id: int | None  # the window active (fault) or last ended (recovering/healthy after)
    heal_time: int | None  # end of the last ended fault before this time


class PhaseIndex:
    """Answers "which phase was the system in at time t" for one run's fault windows."""

    def __init__(self, windows: list[FaultWindow],
                 recovery_window_ns: int = DEFAULT_RECOVERY_WINDOW_NS) -> None:
        self.windows = windows
        self.recovery = recovery_window_ns
        self.ended = sorted((w for w in windows if w.end is not None), key=lambda w: w.end or 0)
        bounds = {w.start for w in windows}
        for w in self.ended:
            bounds.update((w.end or 0, (w.end or 0) + recovery_window_ns))
        self._bounds = sorted(bounds)
        self._cache: dict[int, PhaseInfo] = {}

    def at(self, t: int) -> PhaseInfo:
        """The phase at time ``t``; segments between boundaries are computed once (bisect)."""
        i = bisect.bisect_right(self._bounds, t)
        info = self._cache.get(i)
        if info is None:
            info = self._cache[i] = self._compute(t)
        return info

    def _compute(self, t: int) -> PhaseInfo:
        active = [w for w in self.windows if w.start <= t and (w.end is None or t < w.end)]
        last = None
        for w in self.ended:
            if (w.end or 0) <= t:
                last = w
            else:
                break
        heal = last.end if last else None
        if active:
            kinds = ",".join(sorted({w.kind for w in active}))
            return PhaseInfo("fault", kinds, active[-1].id, heal)
        if last is not None and t - (last.end or 0) < self.recovery:
            return PhaseInfo("recovering", last.kind, last.id, heal)
        return PhaseInfo("healthy", None, last.id if last else None, heal)
