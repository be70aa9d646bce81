"""One simulator for every protocol: N cores on a virtual clock and a seeded virtual network.

It performs the effects of `nodes.common.effects` as the node's runtime loop does, but in
virtual time: a `Send` becomes datagrams on the `Network` (delayed, jittered, lost,
duplicated, cut), a `SetTimer` an event on the clock, a `Persist` a record in the node's
durable store, an `Emit` a line of the trace. Faults: partition and one-way cuts, loss and
duplication, crash and restart (the core is rebuilt from its durable records; what it held
in memory is gone, as is everything in flight to it), pause and resume (messages wait,
timers fire late). Every hop goes through the protocol's codec when one is given, so the
wire is exercised too and no object is shared between nodes.

Nothing here reads a real clock or an unseeded random source: the same seed gives the same
trace, byte for byte (`Simulation.trace_bytes`).
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.sim.network import Network
from nodes.common.core import Core
from nodes.common.effects import EVERYONE, Effect, Emit, Persist, Reply, Send, SetTimer

#: builds node ``i``'s core: (id, its durable records so far, boot count from 0, rng)
MakeCore = Callable[[Any, list[Persist], int, random.Random], Core]

_NO_TIMER = (None, None)


@dataclass(frozen=True)
class Wire:
    """The protocol's codec; each hop encodes and decodes (None: the message is bytes).

    ``immutable``: decoded messages are immutable values (frozen, of tuples and bytes), so
    the same bytes may be handed over as the one message decoded from them before (a
    heartbeat repeats its bytes for ever): every hop is still encoded, and every distinct
    frame decoded, but a repeat costs a dict look-up instead of a decode."""

    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]
    immutable: bool = False


@dataclass(frozen=True)
class Ev:
    """One emitted journal event."""

    node: Any
    t: float
    type: str
    fields: dict[str, Any]


@dataclass
class SimNode:
    id: Any
    core: Core | None = None
    boot: int = -1  # incarnation; timers and deliveries of an older one are stale
    up: bool = False
    crashed: bool = False  # killed and not restarted (a node not booted yet is neither)
    paused: bool = False
    timers: dict[Hashable, tuple[float, int]] = field(default_factory=dict)
    durable: list[Persist] = field(default_factory=list)
    backlog: list[tuple[Any, Any]] = field(default_factory=list)
    #: records written but not yet fsynced (only a node whose `Simulation.buffers` says so:
    #: a bug mode that acknowledges before its fsync); a crash loses them
    unsynced: list[Persist] = field(default_factory=list)
    #: the node's own clocks (`Simulation.skew`): its monotonic clock reads
    #: ``base_local + rate * (now - base_t)`` (None: true time, the fast path); its calendar
    #: clock is that plus ``wall_offset`` seconds (a stepped wall clock, e.g. by NTP)
    clock: tuple[float, float, float] | None = None  # (base_t, base_local, rate)
    wall_offset: float = 0.0

    def local(self, t: float) -> float:
        """Virtual time ``t`` on this node's monotonic clock."""
        c = self.clock
        return t if c is None else c[1] + c[2] * (t - c[0])

    def global_(self, local: float) -> float:
        """The first virtual time this node's monotonic clock reads ``local`` (a timer's due
        time): rounded up, so a timer never fires a hair before its core's own due time (a
        core that re-arms a timer not yet due would loop at one instant)."""
        c = self.clock
        if c is None:
            return local
        t = c[0] + (local - c[1]) / c[2]
        while self.local(t) < local:
            t = math.nextafter(t, math.inf)
        return t


class RunCap(Exception):
    """A run went past its cap: more simulated events than ``max_events`` (deterministic: the
    same schedule and seed hit it at the same event) or past its wall deadline (a backstop
    for a run whose events are few but slow). Either way the run stops here instead of eating
    the machine: one message storm once took 2 GB and 3 minutes of a single run."""

    def __init__(self, what: str, limit: float, now: float, events: int) -> None:
        self.what, self.limit, self.now, self.events = what, limit, now, events
        super().__init__(f"{what} cap {limit:g} reached at simulated t={now:.3f} s after "
                         f"{events} events")


class Simulation:
    """Drive the cores made by ``make_core`` for ``ids``; call ``boot`` (or ``boot_all``).

    `cap` bounds one run (simulated events, wall seconds): past either, `run_until` raises
    `RunCap`. Uncapped by default."""

    def __init__(self, ids: Iterable[Any], make_core: MakeCore, *, seed: int = 0,
                 wire: Wire | None = None, latency: float = 0.001, jitter: float = 0.0,
                 loss: float = 0.0, dup: float = 0.0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.net = Network(random.Random(f"{seed}:net"), latency, jitter, loss, dup)
        self.make_core = make_core
        self.wire = wire
        self.ids = list(ids)
        self.nodes = {i: SimNode(i) for i in self.ids}
        self.now = 0.0
        self.events: list[Ev] = []
        self.replies: dict[int, Any] = {}
        self.sent = 0
        self.trace: list[tuple[Any, ...]] = []
        #: nodes killed for good (`kill_for_good`): down to the end of the run
        self.gone: set[Any] = set()
        self._q: list[tuple[float, int, str, Any, Any]] = []
        self._seq = itertools.count()
        self._tokens = itertools.count()
        self.processed = 0
        self.max_events: int | None = None
        self.wall_deadline: float | None = None
        self.wall_cap_s = 0.0
        self.event_cap = 0
        #: effect type -> how to perform it (exact type; a subclass takes `_perform_other`)
        self._effect_handlers: dict[type, Callable[[SimNode, Any], None]] = {
            Send: self._send, SetTimer: self._timer_effect, Persist: self._persist,
            Reply: self._reply, Emit: self._emit}
        #: ``arrive`` not overridden: a delivery goes to the core as is (saves a call each)
        self._plain_arrive = type(self).arrive is Simulation.arrive
        #: frame -> its decoded message, for a wire whose messages are immutable (see `Wire`)
        self._decoded: dict[bytes, Any] | None = {} if wire is not None and wire.immutable else None
        #: some node's clock is skewed (`skew`): inputs then go through `SimNode.local`
        self._skewed = False

    # ---- the clock
    def _push(self, at: float, kind: str, node: Any, data: Any) -> int:
        seq = next(self._seq)
        heapq.heappush(self._q, (at, seq, kind, node, data))
        return seq

    def run_until(self, t: float) -> None:
        """Process every event due by ``t``, in time order (ties: the order they were made)."""
        q, nodes, pop = self._q, self.nodes, heapq.heappop
        # hot loop: locals instead of attribute look-ups; the caps are read again after an
        # action, the only event that may call ``cap``
        max_events = self.max_events
        wall_deadline = self.wall_deadline
        # frames decoded before, handed over here when ``arrive`` is not overridden (`_deliver`)
        memo = self._decoded if self._plain_arrive and not self._skewed else None
        skewed = self._skewed
        while q and q[0][0] <= t:
            at, seq, kind, node, data = pop(q)
            if at > self.now:
                self.now = at
            self.processed += 1
            if max_events is not None and self.processed > max_events:
                raise RunCap("event", self.event_cap, self.now, self.processed)
            if (wall_deadline is not None and not self.processed & 1023
                    and time.monotonic() > wall_deadline):
                raise RunCap("wall-time", self.wall_cap_s, self.now, self.processed)
            n = nodes[node]
            if kind == "deliver":
                src, raw = data
                if not n.up:
                    self.trace.append((self.now, "lost-down", src, node))
                    self.lost(node, src, raw)
                elif n.paused:
                    n.backlog.append((src, raw))
                elif memo is not None and raw in memo:  # `_deliver` inline, for a repeat
                    self._perform(n, n.core.on_message(src, memo[raw], self.now))
                else:
                    self._deliver(n, src, raw)
            elif kind == "timer":
                boot, name = data
                if n.boot == boot and n.up and n.timers.get(name, _NO_TIMER)[1] == seq:
                    if n.paused:
                        continue  # fired again by resume
                    del n.timers[name]
                    assert n.core is not None
                    self._perform(n, n.core.on_timer(name, n.local(self.now) if skewed
                                                     else self.now))
            elif kind == "boot":
                if n.boot == data and not n.up:
                    self._start(n)
            elif kind == "call":
                data()
                max_events, wall_deadline = self.max_events, self.wall_deadline
                if self._skewed and not skewed:
                    skewed, memo = True, None
        self.now = max(self.now, t)

    def cap(self, max_events: int | None, wall_s: float | None) -> None:
        """From now on, stop with `RunCap` after ``max_events`` more events or ``wall_s``
        wall seconds (checked every 1024 events), whichever comes first."""
        self.max_events = None if max_events is None else self.processed + max_events
        self.event_cap = max_events or 0
        self.wall_cap_s = wall_s or 0.0
        self.wall_deadline = None if wall_s is None else time.monotonic() + wall_s

    def run_for(self, dt: float) -> None:
        self.run_until(self.now + dt)

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Run ``action`` (a fault, a command) at virtual time ``t``."""
        self._push(t, "call", self.ids[0], action)

    # ---- life cycle and faults
    def boot(self, i: Any, at: float | None = None) -> None:
        """Start node ``i`` (again, after a crash) at ``at`` (default now)."""
        n = self.nodes[i]
        n.boot += 1
        n.up = False
        self._push(self.now if at is None else at, "boot", i, n.boot)

    def add_node(self, i: Any) -> None:
        """A node that was not there at the start (a joiner); ``boot`` starts it."""
        if i not in self.nodes:
            self.ids.append(i)
            self.nodes[i] = SimNode(i)

    def boot_all(self, stagger: float = 0.0) -> None:
        """Start every node, each at a seeded random time within ``stagger`` seconds."""
        for i in self.ids:
            self.boot(i, self.now + (self.rng.uniform(0, stagger) if stagger else 0.0))

    def _start(self, n: SimNode) -> None:
        n.up, n.crashed, n.paused, n.timers, n.backlog = True, False, False, {}, []
        rng = random.Random(f"{self.seed}:{n.id}:{n.boot}")
        n.core = self.make_core(n.id, list(n.durable), n.boot, rng)
        self.trace.append((self.now, "start", n.id, n.boot))
        self._input(n, lambda c, now: c.start(now))

    def crash(self, i: Any) -> None:
        """Kill node ``i``: memory, timers, what is in flight to it and its un-fsynced records
        (`buffers`) are lost; its durable records stay for ``restart``."""
        n = self.nodes[i]
        if n.unsynced:
            self.trace.append((self.now, "lost-unsynced", i, len(n.unsynced)))
        n.up, n.crashed, n.core, n.timers, n.backlog = False, True, None, {}, []
        n.unsynced = []
        n.boot += 1
        self.trace.append((self.now, "crash", i))

    def kill_for_good(self, i: Any) -> None:
        """Kill node ``i`` and never start it again (a machine lost, as the real nemesis's
        kill-for-good): no restart, not even the last heal's, brings it back; `gone` names it,
        so a checker judges it as a real run judges a node with a ``gone.json``."""
        if self.nodes[i].up:
            self.crash(i)
        self.gone.add(i)
        self.trace.append((self.now, "gone", i))

    def restart(self, i: Any) -> None:
        if i in self.gone:
            return
        if self.nodes[i].up:
            self.crash(i)
        self.boot(i)

    def pause(self, i: Any) -> None:
        """Stop node ``i`` (SIGSTOP): messages wait for it, its timers fire on ``resume``."""
        self.nodes[i].paused = True
        self.trace.append((self.now, "pause", i))

    def resume(self, i: Any) -> None:
        n = self.nodes[i]
        if not n.paused:
            return
        n.paused = False
        self.trace.append((self.now, "resume", i))
        for name, (at, _) in sorted(n.timers.items(), key=lambda kv: kv[1]):
            if at <= self.now:
                self._set_timer(n, name, self.now)
        backlog, n.backlog = n.backlog, []
        for src, raw in backlog:
            if n.up and not n.paused:
                self._deliver(n, src, raw)

    #: a ``skew`` step's knob ``a``: (clock rate, calendar step in seconds). A node's monotonic
    #: clock never goes back (Python's, that every runtime reads, cannot): it runs slow or
    #: fast; its calendar clock (a core's ``wall(now)``) may be stepped either way.
    SKEWS: tuple[tuple[float, float], ...] = ((1.0, 0.0), (0.5, 0.0), (2.0, 0.0),
                                              (1.0, -60.0), (1.0, 60.0))

    def skew(self, i: Any, rate: float, wall_step: float = 0.0) -> None:
        """From now on node ``i``'s monotonic clock runs at ``rate`` times true time
        (continuing from what it reads now, so it never jumps), and its calendar clock is
        stepped by ``wall_step`` seconds. Its pending timers fire when its own clock reaches
        them. Kept across restarts: the clock is the machine's, not the process's."""
        if rate <= 0:
            raise ValueError(f"clock rate must be positive, got {rate}")
        n = self.nodes[i]
        due = {name: n.local(at) for name, (at, _) in n.timers.items()}
        n.clock = None if rate == 1.0 and n.clock is None else (self.now, n.local(self.now), rate)
        n.wall_offset += wall_step
        if n.clock is not None:
            self._skewed = True
        for name, local_at in sorted(due.items(), key=lambda kv: n.timers[kv[0]][1]):
            if n.up:
                self._set_timer(n, name, max(self.now, n.global_(local_at)))
        self.trace.append((self.now, "skew", i, rate, n.wall_offset))

    def wall(self, i: Any, now: float) -> float:
        """Node ``i``'s calendar clock offset (seconds) at its monotonic time ``now``: a
        core's ``wall(now)`` adds it, so a ``skew`` step can step a node's calendar."""
        return now + self.nodes[i].wall_offset

    def partition(self, *groups: Iterable[Any]) -> None:
        self.net.partition(*groups)
        self.trace.append((self.now, "partition", [sorted(map(str, g)) for g in groups]))

    def heal(self) -> None:
        self.net.heal()
        self.trace.append((self.now, "heal"))

    def running(self, i: Any) -> bool:
        """Node ``i`` is up and not paused: it can take a client's request or a pause."""
        n = self.nodes[i]
        return n.up and not n.paused

    def fault_step(self, kind: str, i: Any, a: int, b: int,
                   delay: tuple[float, float, float]) -> None:
        """A search schedule's step of a kind every target shares, aimed at node ``i`` with
        knobs ``a``/``b``: heal, crash, restart, pause, resume, loss and dup (``a``/10), delay
        (latency ``delay[0] + delay[1] * a``, jitter ``delay[2] * b``), skew (node ``i``'s
        clocks by ``SKEWS[a]``), gone (`kill_for_good`); any other kind (a
        target's own, when it did not apply) does nothing."""
        if kind == "heal":
            self.heal()
        elif kind == "crash":
            if self.nodes[i].up:
                self.crash(i)
        elif kind == "restart":
            self.restart(i)
        elif kind == "gone":
            self.kill_for_good(i)
        elif kind == "pause":
            if self.running(i):
                self.pause(i)
        elif kind == "resume":
            self.resume(i)
        elif kind == "loss":
            self.net.loss = a / 10
            self.trace.append((self.now, "loss", self.net.loss))
        elif kind == "dup":
            self.net.dup = a / 10
            self.trace.append((self.now, "dup", self.net.dup))
        elif kind == "delay":
            self.net.latency, self.net.jitter = delay[0] + delay[1] * a, delay[2] * b
            self.trace.append((self.now, "delay", self.net.latency, self.net.jitter))
        elif kind == "skew":
            self.skew(i, *self.SKEWS[a % len(self.SKEWS)])

    def heal_everything(self, ids: Iterable[Any], latency: float) -> None:
        """A search run's last heal: every fault undone (a skewed clock runs at true rate
        again) and every node of ``ids`` running, so
        what follows judges recovery (liveness), not the faults. A node killed for good
        (`kill_for_good`) stays down."""
        self.heal()
        self.net.loss, self.net.dup, self.net.latency, self.net.jitter = 0.0, 0.0, latency, 0.0
        for i in ids:
            if i in self.gone:
                continue
            if self.nodes[i].paused:
                self.resume(i)
            if not self.nodes[i].up:
                self.restart(i)
            c = self.nodes[i].clock
            if c is not None and c[2] != 1.0:
                self.skew(i, 1.0)  # runs true again (from what it reads: no jump)
        self.trace.append((self.now, "final-heal"))

    @property
    def down(self) -> set[Any]:
        """Nodes crashed (and not restarted) or paused; a node yet to boot is not down."""
        return {i for i, n in self.nodes.items() if n.crashed or n.paused}

    # ---- inputs
    def command(self, i: Any, cmd: Any) -> int:
        """Hand node ``i`` a client command now; its answer lands in ``replies[token]``."""
        token = next(self._tokens)
        n = self.nodes[i]
        if not n.up or n.paused:
            raise RuntimeError(f"node {i} is not running")
        self._input(n, lambda c, now: c.on_command(cmd, token, now))
        return token

    #: frames remembered by `_decode` before it starts again (bounds its memory)
    DECODED_MAX = 4096

    def _decode(self, raw: Any) -> Any:
        memo = self._decoded
        if memo is None:
            return self.wire.decode(raw) if self.wire is not None else raw
        msg = memo.get(raw)
        if msg is None:
            assert self.wire is not None
            msg = self.wire.decode(raw)  # a frame that does not decode is never remembered
            if len(memo) >= self.DECODED_MAX:
                memo.clear()
            memo[raw] = msg
        return msg

    def _deliver(self, n: SimNode, src: Any, raw: Any) -> None:
        memo = self._decoded
        msg = memo.get(raw) if memo is not None else None  # `_decode`, its hit inline
        if msg is None:
            msg = self._decode(raw)
        now = n.local(self.now) if self._skewed else self.now
        if self._plain_arrive:
            assert n.core is not None
            self._perform(n, n.core.on_message(src, msg, now))
            return
        handed = self.arrive(n.id, src, msg)
        if handed is not None:
            assert n.core is not None
            self._perform(n, n.core.on_message(handed[0], handed[1], now))

    def _input(self, n: SimNode, call: Callable[[Core, float], list[Effect]]) -> None:
        assert n.core is not None
        self._perform(n, call(n.core, n.local(self.now) if self._skewed else self.now))

    def _answer_later(self, caller: Any, boot: int, after: float,
                      give: Callable[[Core, float], list[Effect]], *,
                      open_: Callable[[], bool], close: Callable[[], None]) -> None:
        """End a call of ``caller``'s (made in incarnation ``boot``) by handing ``give`` to its
        core ``after`` seconds from now: a call still ``open_`` then is ``close``d first. A
        caller that restarted or went down meanwhile lost its call with it; a paused one gets
        the outcome once it resumes, as a real socket's timeout fires after the pause."""
        def fire() -> None:
            if not open_():
                return
            n = self.nodes[caller]
            if n.boot != boot or not n.up:
                close()
                return
            if n.paused:
                self._push(self.now + 0.01, "call", caller, fire)
                return
            close()
            self._input(n, give)

        self._push(self.now + after, "call", caller, fire)

    # ---- effects
    def _perform(self, n: SimNode, effects: list[Effect]) -> None:
        handlers = self._effect_handlers
        for e in effects:
            handler = handlers.get(type(e))
            if handler is None:
                self._perform_other(n, e)
            else:
                handler(n, e)

    def _perform_other(self, n: SimNode, e: Any) -> None:
        """An effect whose exact type is not in the table: a subclass of one that is goes
        the same way; anything else is a core bug."""
        for kind, handler in self._effect_handlers.items():
            if isinstance(e, kind):
                handler(n, e)
                return
        raise TypeError(f"not an effect of nodes.common.effects: {e!r}")

    def _send(self, n: SimNode, e: Send) -> None:
        src = n.id
        targets = self.route(src, e.to, e.msg)
        if targets:
            raw = self.wire.encode(e.msg) if self.wire is not None else e.msg
            net = self.net
            if net.cut or net.loss or net.dup or net.jitter or net.slow:
                for dst, seen_as in targets:
                    self._transmit(src, dst, seen_as, raw)
                return
            # `_transmit` on a clean net, inline: one copy each after `latency`
            now = self.now
            at = now + net.latency
            size = len(raw) if isinstance(raw, bytes) else None
            trace, q, seq = self.trace, self._q, self._seq
            for dst, seen_as in targets:
                self.sent += 1
                trace.append((now, "send", src, dst, size, 1))
                heapq.heappush(q, (at, next(seq), "deliver", dst, (seen_as, raw)))

    def _timer_effect(self, n: SimNode, e: SetTimer) -> None:
        self._set_timer(n, e.name, e.at if n.clock is None else n.global_(e.at))

    def _persist(self, n: SimNode, e: Persist) -> None:
        flush_s = self.buffers(n, e)
        if flush_s is None:
            n.durable.append(e)
        else:
            if not n.unsynced:
                self._push(self.now + flush_s, "call", n.id,
                           lambda n=n, boot=n.boot: self._fsync(n, boot))
            n.unsynced.append(e)

    def _reply(self, n: SimNode, e: Reply) -> None:
        self.replies[e.token] = e.value
        self.trace.append((self.now, "reply", n.id, e.token, e.value))

    def _emit(self, n: SimNode, e: Emit) -> None:
        self.events.append(Ev(n.id, self.now, e.type, e.fields))
        self.trace.append((self.now, "emit", n.id, e.type, e.fields))

    def buffers(self, n: SimNode, p: Persist) -> float | None:
        """None: ``p`` is durable before anything after it (the effects contract). A number:
        node ``n`` keeps ``p`` in a buffer fsynced that many seconds later (a bug mode that
        acknowledges before its fsync), so a crash meanwhile loses it."""
        return None

    def _fsync(self, n: SimNode, boot: int) -> None:
        if n.boot == boot and n.unsynced:
            n.durable.extend(n.unsynced)
            n.unsynced = []

    def route(self, src: Any, to: Any, msg: Any) -> list[tuple[Any, Any]]:
        """Where ``Send(to, msg)`` from ``src`` goes: (destination node, the ``peer`` its
        core is handed). A protocol whose peers are more than node ids overrides it."""
        return [(d, src) for d in (self.ids if to == EVERYONE else [to])
                if d != src and d in self.nodes]

    def arrive(self, dst: Any, seen_as: Any, msg: Any) -> tuple[Any, Any] | None:
        """What ``dst``'s core is handed for a decoded arrival: (peer, message), or None to
        drop it. A protocol whose answers travel as their own messages overrides it."""
        return seen_as, msg

    def lost(self, dst: Any, seen_as: Any, raw: Any) -> None:
        """A message reached ``dst`` while it was down (a protocol may tell the sender)."""

    def _transmit(self, src: Any, dst: Any, seen_as: Any, raw: Any) -> None:
        self.sent += 1
        net, now = self.net, self.now
        size = len(raw) if isinstance(raw, bytes) else None
        if net.cut or net.loss or net.dup or net.jitter or net.slow:
            delays = net.plan(src, dst)
            self.trace.append((now, "send", src, dst, size, len(delays)))
            for d in delays:
                self._push(now + d, "deliver", dst, (seen_as, raw))
        else:
            # a clean net: `plan` would draw nothing and give one copy after `latency`
            self.trace.append((now, "send", src, dst, size, 1))
            heapq.heappush(self._q, (now + net.latency, next(self._seq), "deliver", dst,
                                     (seen_as, raw)))

    def inject(self, src: Any, dst: Any, seen_as: Any, raw: Any) -> bool:
        """A message no simulated node sent (a hostile peer's, from ``src``, which need not
        be a node) onto the network to ``dst``, handed to its core as from ``seen_as``. Bytes
        the codec refuses are dropped here, as a node's runtime drops a datagram it cannot
        decode; False then."""
        if self.wire is not None:
            try:
                self.wire.decode(raw)
            except Exception as e:  # noqa: BLE001 - any refusal of the codec is a drop
                self.trace.append((self.now, "undecodable", src, dst, len(raw), type(e).__name__))
                return False
        self._transmit(src, dst, seen_as, raw)
        return True

    def _set_timer(self, n: SimNode, name: Hashable, at: float) -> None:
        seq = next(self._seq)  # `_push`, inline
        now = self.now
        heapq.heappush(self._q, (at if at > now else now, seq, "timer", n.id, (n.boot, name)))
        n.timers[name] = (at, seq)

    # ---- observing
    def of(self, type_: str, **match: Any) -> list[Ev]:
        return [e for e in self.events if e.type == type_
                and all(e.fields.get(k) == v for k, v in match.items())]

    def trace_bytes(self) -> bytes:
        """The whole run as JSON lines: what a same-seed rerun must reproduce exactly."""
        return b"".join(json.dumps(r, sort_keys=True, default=repr).encode() + b"\n"
                        for r in self.trace)
