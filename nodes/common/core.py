"""The one interface every protocol core follows (docs/contracts.md, section 0a).

A core is a sans-IO state machine: it is handed inputs with the current time and returns
effects (`nodes.common.effects`). Inputs are of three kinds only (peer messages, timer
firings, client commands), all timed in seconds on the node's monotonic clock. A core owns
no socket, file or clock; every random choice comes from the ``random.Random`` it was built
with, and a core that stamps calendar dates reads them through a ``wall(now)`` function it
was given. So the node's runtime (`nodes.common.loop`) and the simulator (`harness.sim`)
drive the same code, and a simulation replays byte for byte from its seed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from nodes.common.effects import Effect


class Core(Protocol):
    def start(self, now: float) -> list[Effect]:
        """Begin (a fresh process, or a restart from what was persisted)."""
        ...

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        """A decoded message from ``peer`` (None when the sender is not a known peer)."""
        ...

    def on_timer(self, name: Hashable, now: float) -> list[Effect]:
        """The firing of a timer set with ``SetTimer(name, at)``."""
        ...

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        """A client command; its answer is a ``Reply(token, value)``, now or later."""
        ...
