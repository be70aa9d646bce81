"""The effects every protocol core returns alike: send to a peer, arm a timer, journal an event.

Cores are sans-IO (h11's model): they return these and their runtime performs them. Each
protocol adds its own effects beside these (a Raft core persists, a DRiP core wakes an outbox);
what they share is defined once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

P = TypeVar("P")  # how the protocol names a peer (node id string, numeric id, ...)
M = TypeVar("M")  # the protocol's message type
N = TypeVar("N")  # the protocol's timer name


@dataclass(frozen=True)
class Send(Generic[P, M]):
    """Deliver ``msg`` to peer ``to``; failures come back to the core as the runtime sees fit."""

    to: P
    msg: M


@dataclass(frozen=True)
class SetTimer(Generic[N]):
    """Call the core's timer handler with ``name`` at monotonic time ``at``."""

    name: N
    at: float


@dataclass(frozen=True)
class Emit:
    """One journal event: its type and fields (each protocol's docs list its types)."""

    type: str
    fields: dict[str, Any]
