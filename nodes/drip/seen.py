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

What a node saves of an initiator is the set it remembers (`Window.encode`), not only the
highest counter: a message is a repeat iff its (initiator, counter) was seen, and the spec's
"everything up to the saved counter" would, after a restart, make a far-ahead counter a
compromised member sent in the initiator's name (taken within the window) hide every real
counter below it, at every node it flooded to, for good (``harness sim run drip --hostile``).
The set stays small: counters that follow the run ``low..floor`` extend it, so in-order
traffic costs two numbers; only gaps and far-ahead counters are listed (at most
``2 * SEEN_WINDOW``, then the lowest are forgotten under a base). Known limit, not closed: more
than ``2 * SEEN_WINDOW`` distinct far-ahead counters signed with an initiator's own key lift
the base over its real counters (only its direct peers mend it, `Seen.rebase`): a real run
after a long gap has the same shape, and the base is what forgets such gaps (docs/drip.md,
"A far-ahead counter inside the window", says why a separate set does not do).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from nodes.drip.runs import Runs

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
    """Which counters of one initiator were seen: every one up to ``base`` (None: none), the
    run ``low..floor``, and those listed in ``recent``. In-order counters extend the run
    instead of growing ``recent``; when ``recent`` passes ``2 * SEEN_WINDOW`` the base rises
    to the highest counter forgotten (and takes in the run when they meet)."""

    saved: int | None
    reset_at: int | None
    low: int
    floor: int
    #: kept as ready runs (nodes/drip/runs.py): saving the window with every message costs
    #: the same whether 0 or 8,192 counters are listed (issue 26, session 44)
    recent: Runs = field(default_factory=Runs)
    base: int | None = None

    def has(self, c: int) -> bool:
        return (self.low <= c <= self.floor or c in self.recent
                or (self.base is not None and c <= self.base))

    def add(self, c: int) -> None:
        """Record ``c`` (not yet seen): it extends the run at either end, or is listed."""
        if c == self.floor + 1:
            self.floor = c
            self._extend()
        elif c == self.low - 1:
            self.low = c
            first = self.recent.take_down(self.low - 1)  # a listed run just below joins
            if first is not None:
                self.low = first
        else:
            self.recent.add(c)
        if len(self.recent) > 2 * SEEN_WINDOW:
            # forget the lowest counters, not all those a window below the highest: one
            # accepted far-ahead counter (a compromised member's, within the window) would
            # otherwise lift the floor over every real counter still to come (issue 26)
            base = self.recent.keep_top(SEEN_WINDOW)
            assert base is not None
            self.base = base if self.base is None else max(self.base, base)
            self.recent.drop_upto(self.base)
            if self.low <= self.base + 1:  # the run meets the base: one
                self.base = self.low = self.floor = max(self.base, self.floor)
                self._extend()

    def _extend(self) -> None:
        """Move listed counters that follow the run into it (a listed run joins whole)."""
        last = self.recent.take_up(self.floor + 1)
        if last is not None:
            self.floor = last

    def encode(self) -> str:
        """What is saved: ``[base, low, floor, [[first, last], ...]]`` (the listed counters
        as runs; JSON, as u64 counters must not become SQLite REALs)."""
        base = "null" if self.base is None else str(self.base)
        return f"[{base},{self.low},{self.floor},{self.recent.text()}]"

    @classmethod
    def decode(cls, saved: int, reset_at: int | None, text: str | None) -> Window:
        """The window saved as ``text`` (None, as saved before it was: every counter up to
        ``saved`` counts as seen, the spec's single counter)."""
        if text is None:
            return cls(saved, reset_at, saved, saved, base=saved)
        damaged = "the store is damaged; remove the node's data dir to resync it"
        try:
            base, low, floor, runs = json.loads(text)
            recent = Runs.of(runs)
            n = len(recent)
        except (ValueError, TypeError) as e:
            raise ValueError(f"saved counter window {text[:80]!r} is not [base, low, floor, "
                             f"runs]: {damaged}") from e
        if n > 2 * SEEN_WINDOW:
            raise ValueError(f"saved counter window lists {n} counters, more than "
                             f"{2 * SEEN_WINDOW}: {damaged}")
        return cls(saved, reset_at, low, floor, recent, base)


class Seen:
    """Every initiator's window; built from the saved rows ``{node: (counter, reset_at,
    window)}`` (`Window.decode`)."""

    def __init__(self, saved: dict[str, tuple[int, int | None, str | None]],
                 window: int = COUNTER_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"counter window {window} must be at least 1")
        self.windows: dict[str, Window] = {
            n: Window.decode(c, r, x) for n, (c, r, x) in saved.items()}
        self.window = window

    def before(self, node: str, counter: int, reset: bool) -> bool:
        """Was this (initiator, counter) received before? Records it if not; raises
        `CounterOutOfWindow` (recording nothing) for a counter beyond the window."""
        w = self.windows.get(node)
        if w is not None and w.saved is not None and self._ahead(w, counter, reset):
            if reset and w.reset_at == counter:
                return True  # the reset that started this epoch, again on a late path
            raise CounterOutOfWindow(node, counter, reset, w.saved, self.window)
        if w is None:
            self.windows[node] = Window(counter, counter if reset else None, counter, counter)
            return False
        if reset:
            if w.reset_at == counter and w.has(counter):
                return True
            self.windows[node] = Window(counter, counter, counter, counter)
            return False
        if w.has(counter):
            return True
        w.add(counter)
        if w.saved is None or counter > w.saved:
            w.saved = counter
        return False

    def _ahead(self, w: Window, counter: int, reset: bool) -> bool:
        assert w.saved is not None
        ahead = counter + MAX_COUNTER + 1 - w.saved if reset else counter - w.saved
        return ahead > self.window

    def out_of_window(self, node: str, counter: int, reset: bool) -> CounterOutOfWindow | None:
        """What `before` would raise for this counter, read-only: the gate refuses such a
        request before its token is checked (nodes/drip/admit.py, cheapest checks first)."""
        w = self.windows.get(node)
        if (w is None or w.saved is None or not self._ahead(w, counter, reset)
                or (reset and w.reset_at == counter)):
            return None
        return CounterOutOfWindow(node, counter, reset, w.saved, self.window)

    def rebase(self, node: str, counter: int) -> bool:
        """``node``'s own authenticated word (its signed heartbeat, from its TLS identity)
        that its counter is ``counter``. A receiver that missed more than the window of its
        messages (a long partition) would refuse all the rest for good: its window moves up
        to ``counter``, so the next message is taken. Nothing moves within the window (a
        wrap-around comes as a reset). True when it moved.

        It moves back only past a base more than `SEEN_WINDOW` above ``counter``: everything
        up to the base counts as seen, and the node's own counters above its word are still
        to come, so what lifted the base there was not the node (a flood of more than
        ``2 * SEEN_WINDOW`` far-ahead counters a compromised member sent in its name, or a
        store saved before windows were, whose base is its highest counter). The run and the
        counters listed stay seen. Only the base moves, in memory (False: nothing to save):
        the saved counter, the window's mark, never goes back, and a restart redoes this at
        the next heartbeat.
        """
        w = self.windows.get(node)
        if w is None or w.saved is None:
            return False
        if w.base is not None and w.base - counter > SEEN_WINDOW:
            w.base = counter
            return False
        if counter - w.saved <= self.window:
            return False
        w.saved = counter
        return True

    def row(self, node: str) -> tuple[str, int, int | None, str | None]:
        """The counters row that saves ``node``'s window (``(node, counter, reset_at,
        window)``)."""
        w = self.windows[node]
        assert w.saved is not None
        return (node, w.saved, w.reset_at, w.encode())
