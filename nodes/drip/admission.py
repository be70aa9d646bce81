"""How many client updates a node has in 2PC at once: a cap that follows the load (AIMD).

Why adaptive: with no cap an overloaded mesh collapses (once a vote round outlasts
``vote_timeout_s`` every update in it aborts, and the retries are more work); with a small
fixed cap (4) an idle mesh cannot fill its batches, so each update pays for its own requests
and fsyncs. So, as TCP does with its window: each update decided faster than ``slow_s`` adds
``1/cap`` (about +1 per round of decisions), and a slow one halves the cap, at most once per
``slow_s`` (one burst of slow decisions is one signal, not many). The cap stays within
``[floor, ceiling]``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Admission:
    """Slots for updates in 2PC; `acquire` waits for one, `release` says how it went."""

    floor: int
    ceiling: int
    #: a decision slower than this (seconds from admission) halves the cap
    slow_s: float
    cap: float = 4.0
    active: int = 0
    #: monotonic time of the last halving
    last_cut: float = float("-inf")
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.ceiling:
            raise ValueError(f"admission needs 1 <= floor ({self.floor}) <= ceiling "
                             f"({self.ceiling}); check options max_initiating/min_initiating")
        self.cap = float(min(max(self.cap, self.floor), self.ceiling))

    async def acquire(self) -> None:
        """Wait for a free slot (wrap in a timeout: a cancelled wait takes none)."""
        while self.active >= int(self.cap):
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._wake()  # we were woken for a slot we no longer take: pass it on
                raise
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        self.active += 1

    def release(self, elapsed_s: float, now: float) -> None:
        """An admitted update was decided (or given up on) after ``elapsed_s``."""
        self.active -= 1
        if elapsed_s > self.slow_s:
            if now - self.last_cut >= self.slow_s:
                self.cap = max(float(self.floor), self.cap / 2)
                self.last_cut = now
        else:
            self.cap = min(float(self.ceiling), self.cap + 1.0 / self.cap)
        self._wake()

    def _wake(self) -> None:
        free = int(self.cap) - self.active
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1
