"""Which (initiator, counter) pairs a node has received (spec 4.4), so each propagation is
handled once.

Beyond the spec's single saved counter per initiator we remember a window of recent
counters, so a message overtaken by a later one of the same initiator (concurrent updates,
several paths) is still handled once instead of dropped. A reset (the counter wrapped past
``2**64-1``) starts a new epoch; the same reset seen again on another path is a duplicate
(else "always propagate on reset" would loop around a cycle). Pure state, no I/O: what is
saved is the ``row`` of an initiator, persisted by the core with the change it belongs to.

A counter more than ``window`` ahead of an initiator's highest accepted one, and a reset while
that counter is still more than ``window`` short of the wrap-around, are refused
(`CounterOutOfWindow`) and recorded nowhere: one such message (a counter of ``2**64-2``) would
otherwise be saved and make every later counter of that initiator a duplicate (issue 26 item 5).
A receiver that fell further behind than the window catches up from the initiator's own signed
heartbeat counter (`Seen.rebase`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: how many recent counters per initiator are remembered beyond the saved one
SEEN_WINDOW = 4096
#: how far ahead of an initiator's highest accepted counter a new one may be: about an hour of
#: an initiator's messages at a few hundred per second, so a receiver that missed that many
#: (a long partition) still takes the next one, while one poisoned counter can skip at most
#: this many of the real ones (reaching ``2**64`` takes ``2**44`` accepted poisoned messages)
COUNTER_WINDOW = 2**20
#: the largest counter (spec 4.4: 64 bits, then a reset at 0)
MAX_COUNTER = 2**64 - 1


class CounterOutOfWindow(ValueError):
    """A counter too far ahead of what this node accepted from its initiator (answered 400)."""

    def __init__(self, node: str, counter: int, reset: bool, last: int, window: int) -> None:
        what = "a reset" if reset else f"counter {counter}"
        super().__init__(
            f"{what} from initiator {node!r} is more than {window} ahead of the last accepted "
            f"counter {last} (the counter window, spec 4.4; a reset only after {MAX_COUNTER})"
            "; refused and not recorded")
        self.node, self.counter, self.last = node, counter, last


@dataclass
class Window:
    """Which counters of one initiator were seen: all ``<= floor`` plus ``recent``. The floor
    rises to the highest counter forgotten when ``recent`` is pruned to its ``SEEN_WINDOW``
    highest."""

    saved: int | None
    reset_at: int | None
    floor: int | None
    recent: set[int] = field(default_factory=set)


class Seen:
    """Every initiator's window; built from the saved counters ``{node: (counter, reset_at)}``."""

    def __init__(self, saved: dict[str, tuple[int, int | None]],
                 window: int = COUNTER_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"counter window {window} must be at least 1")
        self.windows: dict[str, Window] = {n: Window(c, r, c) for n, (c, r) in saved.items()}
        self.window = window

    def before(self, node: str, counter: int, reset: bool) -> bool:
        """Was this (initiator, counter) received before? Records it if not; raises
        `CounterOutOfWindow` (recording nothing) for a counter beyond the window."""
        w = self.windows.get(node)
        if w is not None and w.saved is not None:
            ahead = counter + MAX_COUNTER + 1 - w.saved if reset else counter - w.saved
            if ahead > self.window:
                if reset and w.reset_at == counter:
                    return True  # the reset that started this epoch, again on a late path
                raise CounterOutOfWindow(node, counter, reset, w.saved, self.window)
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
            # forget the lowest counters, not all those a window below the highest: one
            # accepted far-ahead counter (a compromised member's, within the window) would
            # otherwise lift the floor over every real counter still to come (issue 26)
            kept = sorted(w.recent)
            w.floor = kept[-SEEN_WINDOW - 1]
            w.recent = set(kept[-SEEN_WINDOW:])
        return False

    def rebase(self, node: str, counter: int) -> bool:
        """``node``'s own authenticated word (its signed heartbeat, from its TLS identity)
        that its counter is ``counter``. A receiver that missed more than the window of its
        messages (a long partition) would refuse all the rest for good: its window moves up
        to ``counter``, so the next message is taken. Nothing moves within the window (a
        wrap-around comes as a reset). True when it moved.

        It moves back only past a floor more than `SEEN_WINDOW` above ``counter``: everything
        up to the floor counts as seen, and the node's own counters above its word are still
        to come, so what lifted the floor there was not the node (a compromised member's
        far-ahead counter, taken within the window and saved as the highest: after a restart
        it would make every real message of that node a repeat until its counter passed it;
        found by ``harness sim run drip --hostile``). Counters remembered above it stay seen.
        Only the floor moves, in memory (False: nothing to save): the saved counter, the
        window's mark, never goes back, and a restart redoes this at the next heartbeat.
        """
        w = self.windows.get(node)
        if w is None or w.saved is None:
            return False
        if w.floor is not None and w.floor - counter > SEEN_WINDOW:
            w.floor = counter
            return False
        if counter - w.saved <= self.window:
            return False
        w.saved = counter
        return True

    def row(self, node: str) -> tuple[str, int, int | None]:
        """The counters row that saves ``node``'s window (``(node, counter, reset_at)``)."""
        w = self.windows[node]
        assert w.saved is not None
        return (node, w.saved, w.reset_at)
