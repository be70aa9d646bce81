"""The node clock: wall time with a settable offset (clock-skew faults).

Promise: ``wall()`` is the skewable clock stamped on journal events (``t``) and used by
applications that publish dates; ``monotonic()`` drives protocol timers and is NOT shifted
by the offset. A skewed Raft node therefore still measures durations correctly, as a real
process with a wrong wall clock would (timers use CLOCK_MONOTONIC in practice).
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Wall clock plus an offset in seconds; monotonic time for timers."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self._offset = float(offset_s)
        self._lock = threading.Lock()

    @property
    def offset_s(self) -> float:
        return self._offset

    def set_offset(self, offset_s: float) -> None:
        with self._lock:
            self._offset = float(offset_s)

    def wall(self) -> float:
        """Seconds since the epoch as this node believes (real time + offset)."""
        return time.time() + self._offset

    def wall_ms(self) -> int:
        return int(self.wall() * 1000)

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never skewed: use for timers and timeouts."""
        return time.monotonic()
