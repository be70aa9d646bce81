"""Counting what a node refused from its peers, and journaling it without letting a flood of
refusals grow the journal: every refusal is counted; per reason, the first one of each window
is journaled with its detail, and the next journaled one says how many went unjournaled."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: peer-supplied text is cut to this many characters before it is journaled
MAX_DETAIL = 120


def clip(text: str, limit: int = MAX_DETAIL) -> str:
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit})"


@dataclass
class Refusals:
    """``note`` returns the event fields to journal now, or None (counted only)."""

    window_s: float = 10.0
    counts: Counter[str] = field(default_factory=Counter)
    _last: dict[str, float] = field(default_factory=dict)
    _quiet: Counter[str] = field(default_factory=Counter)

    def note(self, reason: str, now: float, **detail: Any) -> dict[str, Any] | None:
        self.counts[reason] += 1
        last = self._last.get(reason)
        if last is not None and now - last < self.window_s:
            self._quiet[reason] += 1
            return None
        self._last[reason] = now
        fields = {"reason": reason, **{k: clip(v) if isinstance(v, str) else v
                                       for k, v in detail.items()}}
        if self._quiet[reason]:
            fields["unjournaled_before"] = self._quiet.pop(reason)
        return fields

    def snapshot(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))
