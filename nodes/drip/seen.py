"""Which (initiator, counter) pairs a node has received (spec 4.4), so each propagation is
handled once.

Beyond the spec's single saved counter per initiator we remember a window of recent
counters, so a message overtaken by a later one of the same initiator (concurrent updates,
several paths) is still handled once instead of dropped. A reset (the counter wrapped past
``2**64-1``) starts a new epoch; the same reset seen again on another path is a duplicate
(else "always propagate on reset" would loop around a cycle). Pure state, no I/O: what is
saved is the ``row`` of an initiator, persisted by the core with the change it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: how many recent counters per initiator are remembered beyond the saved one
SEEN_WINDOW = 4096


@dataclass
class Window:
    """Which counters of one initiator were seen: all ``<= floor`` plus ``recent``."""

    saved: int | None
    reset_at: int | None
    floor: int | None
    recent: set[int] = field(default_factory=set)


class Seen:
    """Every initiator's window; built from the saved counters ``{node: (counter, reset_at)}``."""

    def __init__(self, saved: dict[str, tuple[int, int | None]]) -> None:
        self.windows: dict[str, Window] = {n: Window(c, r, c) for n, (c, r) in saved.items()}

    def before(self, node: str, counter: int, reset: bool) -> bool:
        """Was this (initiator, counter) received before? Records it if not."""
        w = self.windows.get(node)
        if w is None:
            self.windows[node] = Window(counter, counter if reset else None, None, {counter})
            return False
        if reset:
            if w.reset_at == counter and counter in w.recent:
                return True
            self.windows[node] = Window(counter, counter, None, {counter})
            return False
        if counter in w.recent or (w.floor is not None and counter <= w.floor):
            return True
        w.recent.add(counter)
        if w.saved is None or counter > w.saved:
            w.saved = counter
        if len(w.recent) > 2 * SEEN_WINDOW:
            w.floor = w.saved - SEEN_WINDOW
            w.recent = {c for c in w.recent if c > w.floor}
        return False

    def row(self, node: str) -> tuple[str, int, int | None]:
        """The counters row that saves ``node``'s window (``(node, counter, reset_at)``)."""
        w = self.windows[node]
        assert w.saved is not None
        return (node, w.saved, w.reset_at)
