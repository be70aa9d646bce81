"""The one background task of a hostile sender (faults/hostile.py's generic one and each
protocol's own driver): started once, stopped with whatever it raised, cancelled at teardown.
In nodes/common because the protocols' drivers live beside their codecs and never import the
harness's faults package."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BurstTask:
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def _launch(self, loop: Coroutine[Any, Any, None], name: str) -> None:
        self._task = asyncio.get_running_loop().create_task(loop, name=name)

    async def stop(self) -> None:
        """Stop the bursts (no-op when none run); a failure of the task is raised here."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def close(self) -> None:
        """Teardown without a loop to await on: cancel the task."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
