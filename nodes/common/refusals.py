"""Counting what a node refused from its peers, and journaling it without letting a flood of
refusals grow the journal: every refusal is counted; per reason, the first ``per_window`` of
each window are journaled with their detail (peer-supplied text cut short), and the next
journaled one says how many went unjournaled. DRiP's server and SWIM's core both use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: peer-supplied text is cut to this many characters before it is journaled
MAX_DETAIL = 120


def clip(text: str, limit: int = MAX_DETAIL) -> str:
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit})"


@dataclass
class Refusals:
    """``note`` returns the event fields to journal now, or None (counted only).

    ``now`` is any clock that grows: seconds (DRiP), protocol periods (SWIM, with
    ``window=1``). ``counts`` may be a dict the node already reports as its stats."""

    window: float = 10.0
    per_window: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    _win: dict[str, tuple[float, int]] = field(default_factory=dict)
    _quiet: dict[str, int] = field(default_factory=dict)

    def note(self, reason: str, now: float, **detail: Any) -> dict[str, Any] | None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        start, n = self._win.get(reason, (now, 0))
        if now - start >= self.window:
            start, n = now, 0
        self._win[reason] = (start, n + 1)
        if n >= self.per_window:
            self._quiet[reason] = self._quiet.get(reason, 0) + 1
            return None
        fields = {"reason": reason, **{k: clip(v) if isinstance(v, str) else v
                                       for k, v in detail.items()},
                  "total": self.counts[reason]}
        if self._quiet.get(reason):
            fields["unjournaled_before"] = self._quiet.pop(reason)
        return fields

    def snapshot(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))
