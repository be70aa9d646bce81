"""The one runtime loop: feeds a core its inputs and performs its effects, for every protocol.

A protocol's server owns its sockets and files and hands them to the loop as a `Host`; the
loop owns the timers and the order of effects (the promises in `nodes.common.effects`):
effects run in order, a `Persist` is written at once and fsynced (``Host.sync``) before the
next `Send` or `Reply` leaves, so a burst of inputs performed together costs one fsync
(group commit). A core that raises on some input is reported through ``Host.failed`` (the
node journals it as lost evidence) and the node goes on: nothing a peer sends may kill it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from nodes.common.core import Core
from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer

if TYPE_CHECKING:
    from nodes.common.journal import Journal

log = logging.getLogger("loop")

#: what a core may return (nodes.common.effects), by exact type (~90 effects per DRiP
#: update: a set lookup each instead of isinstance ladders); and those that a failed
#: Persist or fsync stops (they could promise what is not durable)
_EFFECTS = frozenset((Persist, Send, Reply, Emit, SetTimer))
_DURABLE = frozenset((Persist, Send, Reply))

#: a timer firing this close before its time counts as due (clock granularity)
_EARLY_S = 0.0005

#: which input a core call is for, put into words only when the core fails (a peer's repr
#: built for every message is wasted work while nothing fails)
Where = Callable[[], str]


class Host(Protocol):
    """What the loop needs of a server: its I/O, one method per effect kind."""

    def send(self, to: Any, msg: Any) -> None: ...
    def persist(self, what: str, record: Any) -> None: ...
    def sync(self) -> None: ...
    def reply(self, token: Any, value: Any) -> None: ...
    def emit(self, type_: str, fields: dict[str, Any]) -> None: ...
    def failed(self, where: str, error: BaseException) -> None: ...


class JournalingHost:
    """The two `Host` methods every server performs alike: a core's events go to the node's
    journal, and so does a core's failure, as lost evidence (the checkers then say unknown
    instead of judging a history with a hole in it)."""

    journal: Journal
    logger: ClassVar[logging.Logger] = log

    def emit(self, type_: str, fields: dict[str, Any]) -> None:
        self.journal.emit(type_, **fields)

    def failed(self, where: str, error: BaseException) -> None:
        self.journal.node_error(where, error, evidence=True, logger=self.logger)


class CoreLoop:
    """Drive ``core`` on the running asyncio loop; ``now`` is the node's monotonic clock."""

    def __init__(self, core: Core, host: Host, now: Callable[[], float]) -> None:
        self.core = core
        self.host = host
        self.now = now
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._due: dict[Hashable, float] = {}  # name -> when the core wants it
        self._closed = False
        self._dirty = False  # a Persist performed and not yet fsynced

    # ---- inputs
    def start(self) -> None:
        self._run(lambda: "start", lambda t: self.core.start(t))

    def message(self, peer: Any, msg: Any) -> None:
        self._run(lambda: f"message from {peer}", lambda t: self.core.on_message(peer, msg, t))

    def messages(self, batch: Iterable[tuple[Any, Any]]) -> None:
        """Several messages read at once: their effects are performed together, so the
        ``Persist``s they cause share one fsync."""
        self.inputs((None, peer, msg) for peer, msg in batch)

    def inputs(self, batch: Iterable[tuple[Any, Any, Any]]) -> None:
        """Messages ``(None, peer, msg)`` and commands ``(token, cmd, None)`` that arrived
        together, in order, their effects performed together (one fsync for all)."""
        t = self.now()
        fx: list[Effect] = []
        for token, a, b in batch:
            if token is None:
                fx.extend(self._call(lambda p=a: f"message from {p}",
                                     lambda t, p=a, m=b: self.core.on_message(p, m, t), t))
            else:
                fx.extend(self._call(lambda c=a: f"command {type(c).__name__}",
                                     lambda t, c=a, k=token: self.core.on_command(c, k, t), t))
        self.perform(fx)

    def command(self, cmd: Any, token: Any) -> None:
        self._run(lambda: f"command {type(cmd).__name__}",
                  lambda t: self.core.on_command(cmd, token, t))

    def _fire(self, name: Hashable) -> None:
        self._timers.pop(name, None)
        at = self._due.get(name)
        if at is None:
            return
        t = self.now()
        if t < at - _EARLY_S:  # pushed back since it was armed: wait for the rest
            self._timers[name] = asyncio.get_running_loop().call_later(at - t, self._fire, name)
            return
        del self._due[name]
        self._run(lambda: f"timer {name!r}", lambda t: self.core.on_timer(name, t))

    def _run(self, where: Where, call: Callable[[float], list[Effect]]) -> None:
        self.perform(self._call(where, call, self.now()))

    def _call(self, where: Where, call: Callable[[float], list[Effect]], t: float) -> list[Effect]:
        if self._closed:
            return []
        try:
            return call(t)
        except Exception as e:  # a core bug must not kill the node: journal it, go on
            said = where()
            log.exception("core failed on %s", said)
            self.host.failed(said, e)
            return []

    # ---- effects
    def perform(self, effects: Iterable[Effect]) -> None:
        """Each effect in order. One that raises (a message the codec cannot encode, a full
        disk) is reported through ``Host.failed`` and the rest still run, so a timer the
        core re-armed after it is armed and the node goes on; after a failed ``Persist`` or
        fsync nothing more is sent or replied in this batch, since it could promise what
        is not durable."""
        self._dirty = False
        unsafe = False
        for e in effects:
            kind = type(e)  # exact types, no subclasses: one lookup, not an isinstance ladder
            if kind not in _EFFECTS:  # a bug of the core's author, not a peer's doing
                raise TypeError(f"not an effect of nodes.common.effects: {e!r}")
            if unsafe and kind in _DURABLE:
                continue
            try:
                self._perform_one(e, kind)
            except Exception as err:
                said = f"performing {kind.__name__}"
                log.exception("%s failed", said)
                self.host.failed(said, err)
                # durability failed: the Persist itself, or the fsync a Send/Reply waits on
                unsafe |= kind is Persist or (kind in _DURABLE and self._dirty)
        if self._dirty and not unsafe:
            self._sync()

    def _sync(self) -> None:
        self.host.sync()
        self._dirty = False

    def _perform_one(self, e: Any, kind: type) -> None:
        if kind is Persist:
            self._dirty = True
            self.host.persist(e.what, e.record)
        elif kind is Send or kind is Reply:
            if self._dirty:
                self._sync()
            if kind is Send:
                self.host.send(e.to, e.msg)
            else:
                self.host.reply(e.token, e.value)
        elif kind is Emit:
            self.host.emit(e.type, e.fields)
        else:
            self._arm(e.name, e.at)

    def _arm(self, name: Hashable, at: float) -> None:
        """A timer pushed back (an election timer reset by every heartbeat) keeps its armed
        handle, which re-arms itself for the rest when it fires early: one handle per
        timeout, not one per message."""
        if self._closed:
            return
        armed = self._due.get(name)
        self._due[name] = at
        if armed is not None and armed <= at and name in self._timers:
            return
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, at - self.now())
        self._timers[name] = asyncio.get_running_loop().call_later(delay, self._fire, name)

    def close(self) -> None:
        """Cancel every timer; later inputs are ignored (the node is stopping)."""
        self._closed = True
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        self._due.clear()


class Answers:
    """The futures a server's handlers await, each answered by one of the core's effects
    (a ``Reply`` to a command's token, a ``Send`` to the connection a request came on)."""

    def __init__(self) -> None:
        self._futures: dict[Hashable, asyncio.Future[Any] | Callable[[Any], None]] = {}

    def __len__(self) -> int:
        """Waiters not yet answered (``sizes`` in DRiP's ``/admin/state``)."""
        return len(self._futures)

    def wait(self, key: Hashable) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[key] = fut
        return fut

    def then(self, key: Hashable, call: Callable[[Any], None]) -> None:
        """``call(answer)`` once the answer comes, instead of a future to await: a batch of
        requests gathers its items' answers into one future of its own (a future and a
        task wake-up per item cost more than the item's handling in the core)."""
        self._futures[key] = call

    def give(self, key: Hashable, value: Any) -> None:
        fut = self._futures.pop(key, None)
        if fut is None:
            return
        if isinstance(fut, asyncio.Future):
            if not fut.done():
                fut.set_result(value)
        else:
            fut(value)

    def drop(self, key: Hashable) -> None:
        """The handler stopped waiting (it timed out, or the core answered at once)."""
        self._futures.pop(key, None)
