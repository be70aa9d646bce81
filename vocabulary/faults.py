"""The fault vocabulary, once: every nemesis start op, the end op that undoes it, its kind.

The schedules build ops from it, the checkers judge whether each requested kind was applied,
and the reports shade fault windows by kind; all three read these tables, so a new fault is
added here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vocabulary.history import NEMESIS, pairs

#: start op -> (fault kind, end op). ``kill`` is undone by ``restart``, ``pause`` by ``resume``.
FAULTS: dict[str, tuple[str, str]] = {
    "start-partition": ("partition", "stop-partition"),
    "start-latency": ("latency", "stop-latency"),
    "start-loss": ("loss", "stop-loss"),
    "start-duplicate": ("duplicate", "stop-duplicate"),
    "start-bandwidth": ("bandwidth", "stop-bandwidth"),
    "start-slicer": ("slicer", "stop-slicer"),
    "reset-peer": ("reset-peer", "stop-reset-peer"),
    "kill": ("kill", "restart"),
    "pause": ("pause", "resume"),
    "clock-skew": ("clock", "clock-reset"),
    "clock-rate": ("clock", "clock-reset"),
    "start-hostile": ("hostile", "stop-hostile"),
}
STOP_FOR: dict[str, str] = {start: stop for start, (_, stop) in FAULTS.items()}
KIND_OF_START: dict[str, str] = {start: kind for start, (kind, _) in FAULTS.items()}
KIND_OF_END: dict[str, str] = {stop: kind for _, (kind, stop) in FAULTS.items()}
#: ops that end every open fault
HEAL_ALL = ("heal-all", "heal")

#: the names a user types (``--nemesis``) whose kind is not their first word
_NAMED_KIND = {"clock": "clock", "clock-skew": "clock", "reset-peer": "reset-peer"}


def kind_of_name(name: str) -> str | None:
    """The fault kind a ``--nemesis`` name asks for: ``partition-isolate`` -> ``partition``,
    ``kill-leader`` -> ``kill``, ``clock-skew`` -> ``clock``; None for ``none`` or a name that
    is no fault (a custom schedule's label)."""
    name = name.strip()
    if name in _NAMED_KIND:
        return _NAMED_KIND[name]
    head = name.split("-", 1)[0]
    kinds = set(KIND_OF_START.values())
    return head if head in kinds else None


def requested_kinds(nemesis_desc: str) -> list[str]:
    """The fault kinds a nemesis description (``"partition,kill-leader,pause"``) requests,
    in order, each once; names that are no fault kind are left out."""
    out: list[str] = []
    for name in nemesis_desc.split(","):
        k = kind_of_name(name)
        if k is not None and k not in out:
            out.append(k)
    return out


def is_nemesis(op: dict[str, Any]) -> bool:
    return op.get("process") == NEMESIS


def nemesis_pairs(ops: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each nemesis invocation with its completion (None when the history ends first). The
    nemesis runs one op at a time, so a completion belongs to the last open invocation."""
    return [(p.invoke, p.complete if p.complete is None
             or p.complete.get("f") == p.invoke.get("f") else None)
            for p in pairs(op for op in ops if is_nemesis(op))]
