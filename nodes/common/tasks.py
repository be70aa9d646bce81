"""A node's background tasks (peer requests, calls, flush loops): tracked, so that stopping the
node ends every one of them, and guarded, so that whatever one peer or one message makes a task
raise (RecursionError included) is logged and journaled and the node goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from nodes.common.loop import JournalingHost


class Background:
    def __init__(self, host: JournalingHost) -> None:
        self.host = host
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        t = asyncio.ensure_future(self._guarded(coro))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)
        return t

    async def _guarded(self, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any peer's doing
            self.host.journal.node_error(
                f"background task {getattr(coro, '__name__', coro)}", e, evidence=False,
                logger=self.host.logger)
            return None

    async def close(self) -> None:
        """Cancel every task still running and wait until each has ended."""
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
