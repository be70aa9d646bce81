"""Polling instead of sleeping: a test waits for a condition, never for a fixed time, so it
neither flakes on a loaded machine nor idles on a fast one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def eventually(pred: Callable[[], Awaitable[bool]], timeout: float = 10.0,
                     interval: float = 0.1) -> bool:
    """True once ``pred()`` is; a raising ``pred`` (a node still starting) counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await pred():
                return True
        except Exception:
            pass
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


def until(pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    """The blocking ``eventually`` for tests without an event loop."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True
