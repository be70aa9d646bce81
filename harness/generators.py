"""Operation generators that compose, in the spirit of Jepsen's.

A generator is any object with ``op(ctx) -> Op | Pending | None``: an operation to perform
now, ``Pending`` (nothing yet: ask again at ``ctx.time >= pending.until``, or after any op
completes), or ``None`` (exhausted for this thread). Each worker thread pulls from the one
generator it is given; the runner asks with the thread's context, so combinators can keep
per-thread state (``phases``, ``per_key``). All randomness comes from ``ctx.rng``, which the
runner seeds from the test's seed.

Client and nemesis streams are separate generators (``TestSpec.generator`` and
``TestSpec.nemesis``); the same combinators serve both.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

Op = dict[str, Any]


@dataclass(frozen=True)
class Pending:
    """Nothing to do yet; ask again at ``until`` (seconds since start) or after a completion."""

    until: float | None = None


PENDING = Pending()


@dataclass
class Context:
    time: float  # seconds since the run started
    thread: int | str  # stable worker id: 0..concurrency-1, or "nemesis"
    process: int | str  # Jepsen process id: changes when an op ends in info
    threads: tuple[int | str, ...]  # every thread that pulls from this generator
    rng: random.Random


class Generator(Protocol):
    def op(self, ctx: Context) -> Op | Pending | None: ...


GenLike = Generator | Op | Callable[[Context], Op | None] | Iterable[Any]


def lift(x: GenLike) -> Generator:
    """Turn an op dict, a function of the context, or an iterable of those into a generator."""
    if hasattr(x, "op") and callable(x.op):
        return x  # type: ignore[return-value]
    if isinstance(x, dict):
        return Once(x)
    if callable(x):
        return Fn(x)
    return Seq(x)


@dataclass
class Fn:
    """Calls ``f(ctx)`` for every op, forever (or until it returns None)."""

    f: Callable[[Context], Op | None]
    _done: bool = False

    def op(self, ctx: Context) -> Op | Pending | None:
        if self._done:
            return None
        o = self.f(ctx)
        if o is None:
            self._done = True
        return dict(o) if o is not None else None


@dataclass
class Once:
    """One op, to whichever thread asks first."""

    value: Op
    _given: bool = False

    def op(self, ctx: Context) -> Op | Pending | None:
        if self._given:
            return None
        self._given = True
        return dict(self.value)


class Seq:
    """Each element in order (op dicts, generators, functions); the next starts when one ends."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items: Iterator[Any] = iter(items)
        self._cur: Generator | None = None

    def op(self, ctx: Context) -> Op | Pending | None:
        while True:
            if self._cur is None:
                nxt = next(self._items, None)
                if nxt is None:
                    return None
                self._cur = lift(nxt)
            o = self._cur.op(ctx)
            if o is None:
                self._cur = None
                continue
            return o


def seq(*items: GenLike) -> Seq:
    return Seq(items)


def repeat(x: Op | Callable[[], Generator], times: int | None = None) -> Generator:
    """An op forever (or ``times`` times); or a fresh generator from a factory, again and again."""
    it = itertools.repeat(None) if times is None else itertools.repeat(None, times)
    if isinstance(x, dict):
        return Seq(dict(x) for _ in it)
    return Seq(x() for _ in it)


@dataclass
class Limit:
    n: int
    gen: Generator

    def op(self, ctx: Context) -> Op | Pending | None:
        if self.n <= 0:
            return None
        o = self.gen.op(ctx)
        if isinstance(o, dict):
            self.n -= 1
        return o


def limit(n: int, gen: GenLike) -> Limit:
    return Limit(n, lift(gen))


@dataclass
class TimeLimit:
    """Ends ``dt`` seconds after the first op is asked for."""

    dt: float
    gen: Generator
    _deadline: float | None = None

    def op(self, ctx: Context) -> Op | Pending | None:
        if self._deadline is None:
            self._deadline = ctx.time + self.dt
        if ctx.time >= self._deadline:
            return None
        o = self.gen.op(ctx)
        if isinstance(o, Pending) and (o.until is None or o.until > self._deadline):
            return Pending(self._deadline)
        return o


def time_limit(dt: float, gen: GenLike) -> TimeLimit:
    return TimeLimit(dt, lift(gen))


@dataclass
class Stagger:
    """Ops at random intervals, uniform in [0, 2*dt): a mean rate of 1/dt across all threads."""

    dt: float
    gen: Generator
    exact: bool = False
    _next: float | None = None

    def op(self, ctx: Context) -> Op | Pending | None:
        if self._next is None:
            self._next = ctx.time
        if ctx.time < self._next:
            return Pending(self._next)
        o = self.gen.op(ctx)
        if isinstance(o, dict):
            step = self.dt if self.exact else ctx.rng.uniform(0, 2 * self.dt)
            self._next = max(self._next + step, ctx.time - self.dt)  # no burst after a stall
        return o


def stagger(dt: float, gen: GenLike) -> Stagger:
    return Stagger(dt, lift(gen))


def rate(hz: float, gen: GenLike) -> Stagger:
    """Ops at a fixed rate (``hz`` per second across all threads)."""
    return Stagger(1.0 / hz, lift(gen), exact=True)


@dataclass
class Sleep:
    """Nothing for ``dt`` seconds (measured from the first ask), then exhausted."""

    dt: float
    _until: float | None = None

    def op(self, ctx: Context) -> Op | Pending | None:
        if self._until is None:
            self._until = ctx.time + self.dt
        if ctx.time >= self._until:
            return None
        return Pending(self._until)


def sleep(dt: float) -> Sleep:
    return Sleep(dt)


class Mix:
    """A uniformly random choice among the generators not yet exhausted, per op."""

    def __init__(self, gens: Iterable[GenLike]) -> None:
        self.gens = [lift(g) for g in gens]

    def op(self, ctx: Context) -> Op | Pending | None:
        live = list(self.gens)
        soonest: float | None = None
        pending = False
        while live:
            g = live.pop(ctx.rng.randrange(len(live)))
            o = g.op(ctx)
            if isinstance(o, dict):
                return o
            if o is None:
                self.gens.remove(g)
            else:
                pending = True
                if o.until is not None:
                    soonest = o.until if soonest is None else min(soonest, o.until)
        return Pending(soonest) if pending else None


def mix(*gens: GenLike) -> Mix:
    return Mix(gens)


class Phases:
    """Each generator in turn, with a barrier: phase k+1 starts for nobody until every
    thread has exhausted phase k (and so has no op of phase k in flight)."""

    def __init__(self, gens: Iterable[GenLike]) -> None:
        self.gens = [lift(g) for g in gens]
        self.k = 0
        self._done: set[int | str] = set()

    def op(self, ctx: Context) -> Op | Pending | None:
        while self.k < len(self.gens):
            if ctx.thread in self._done:
                if len(self._done) < len(ctx.threads):
                    return PENDING
                self.k += 1
                self._done = set()
                continue
            o = self.gens[self.k].op(ctx)
            if o is None:
                self._done.add(ctx.thread)
                continue
            return o
        return None


def phases(*gens: GenLike) -> Phases:
    return Phases(gens)


class OnThreads:
    """Only threads for which ``pred(thread)`` holds get ops; the others see it exhausted."""

    def __init__(self, pred: Callable[[int | str], bool], gen: GenLike) -> None:
        self.pred = pred
        self.gen = lift(gen)

    def op(self, ctx: Context) -> Op | Pending | None:
        return self.gen.op(ctx) if self.pred(ctx.thread) else None


def on_threads(pred: Callable[[int | str], bool], gen: GenLike) -> OnThreads:
    return OnThreads(pred, gen)


@dataclass
class PerKey:
    """Jepsen's independent generator: threads work in groups of ``group_size``; each group
    runs a fresh generator for one key at a time and moves to the next key when it is
    exhausted. Op values become ``[key, value]``, so checkers can split histories per key."""

    keys: Iterator[Hashable]
    make: Callable[[Hashable], Generator]
    group_size: int
    _groups: dict[int, tuple[Hashable, Generator]] = field(default_factory=dict)
    _out_of_keys: bool = False

    def op(self, ctx: Context) -> Op | Pending | None:
        if not isinstance(ctx.thread, int):
            return None
        g = ctx.thread // self.group_size
        while True:
            cur = self._groups.get(g)
            if cur is None:
                if self._out_of_keys:
                    return None
                k = next(self.keys, None)
                if k is None:
                    self._out_of_keys = True
                    return None
                cur = (k, self.make(k))
                self._groups[g] = cur
            key, gen = cur
            o = gen.op(ctx)
            if o is None:
                del self._groups[g]
                continue
            if isinstance(o, dict):
                o["value"] = [key, o.get("value")]
            return o


def per_key(keys: Iterable[Hashable], make: Callable[[Hashable], GenLike], group_size: int = 1) -> PerKey:
    return PerKey(iter(keys), lambda k: lift(make(k)), group_size)


def drain(gen: GenLike, *, threads: tuple[int | str, ...] = (0,), seed: int = 0,
          dt: float = 0.0, max_ops: int = 100_000) -> list[tuple[float, int | str, Op]]:
    """Run a generator without a cluster, threads in turn, time advancing ``dt`` per ask or
    jumping to a Pending's ``until``: (time, thread, op) triples. For tests and ``--dry-run``."""
    g = lift(gen)
    rng = random.Random(seed)
    t = 0.0
    out: list[tuple[float, int | str, Op]] = []
    live = list(threads)
    stalls = 0
    while live and len(out) < max_ops:
        progressed = False
        wake: list[float] = []
        for th in list(live):
            o = g.op(Context(t, th, th, threads, rng))
            if o is None:
                live.remove(th)
            elif isinstance(o, Pending):
                if o.until is not None:
                    wake.append(o.until)
            else:
                out.append((t, th, o))
                progressed = True
        if progressed:
            stalls = 0
            t += dt
        elif wake:
            t = max(t + dt, min(wake))
        else:
            stalls += 1
            if stalls > len(threads) + 1:
                break
    return out
