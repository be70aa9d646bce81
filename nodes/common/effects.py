"""The one effect vocabulary every protocol core returns: send, set a timer, persist, reply, emit.

Cores are sans-IO (h11's model): they return these and a runtime performs them, the node's
(`nodes.common.loop.CoreLoop`) or the simulator's (`harness.sim`). The promises a runtime
keeps, which the cores rely on (docs/contracts.md, section 0a):

* effects are performed in the order given;
* a `Persist` is written before anything after it is performed, and is durable (fsynced)
  before the next `Send` or `Reply` leaves the node: a peer or a client never learns of state
  that a crash could lose;
* a `SetTimer` replaces that name's pending firing; a firing the core no longer wants is
  ignored by the core (there is no cancel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from nodes.common.fastinit import fast_frozen_init

P = TypeVar("P")  # how the protocol names a peer (node id string, numeric id, ...)
M = TypeVar("M")  # the protocol's message type
N = TypeVar("N")  # the protocol's timer name

#: ``Send.to`` for "every peer the network reaches" (a broadcast)
EVERYONE: Final = "*"


@fast_frozen_init
@dataclass(frozen=True)
class Send(Generic[P, M]):
    """Deliver ``msg`` to peer ``to`` (or to every peer: ``EVERYONE``); delivery may fail
    silently, as a datagram may."""

    to: P
    msg: M


@fast_frozen_init
@dataclass(frozen=True)
class SetTimer(Generic[N]):
    """Call the core's ``on_timer(name, now)`` at time ``at`` (seconds, the core's clock)."""

    name: N
    at: float


@fast_frozen_init
@dataclass(frozen=True)
class Persist:
    """Make ``record`` durable in the store named ``what``; the protocol's runtime knows
    each store's file and format (docs/<protocol>.md)."""

    what: str
    record: Any


@fast_frozen_init
@dataclass(frozen=True)
class Reply:
    """The answer to the client command that carried ``token``."""

    token: Any
    value: Any


@fast_frozen_init
@dataclass(frozen=True)
class Emit:
    """One journal event: its type and fields (each protocol's docs list its types)."""

    type: str
    fields: dict[str, Any]


Effect = Send[Any, Any] | SetTimer[Any] | Persist | Reply | Emit


def node_error(where: str, error: BaseException | str, *, evidence: bool) -> Emit:
    """The ``node-error`` event of an error a core survived (the journal's
    ``Journal.node_error`` fields): ``evidence`` says the node's own record may now lack
    something a checker relies on, so checkers reading this node say unknown."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    return Emit("node-error", {"where": where, "error": text[:500], "evidence": evidence})
