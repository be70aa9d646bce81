"""A tiny discrete-event network for driving `SwimCore`s with simulated time in unit tests.

Datagrams go through the real codec (encode, then decode) so the tests exercise the wire too;
links may be cut one-way, lossy (seeded) or slow; nodes may be killed, paused, restarted.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodes.swim import codec as c
from nodes.swim.core import Announce, Emit, Options, Send, SwimCore


@dataclass
class Ev:
    node: int
    t: float
    type: str
    fields: dict[str, Any]


@dataclass
class Sim:
    n: int
    opts: Options
    seed: int = 0
    bugs: tuple[str, ...] = ()
    latency: float = 0.002
    seeds_of: Callable[[int], list[int]] = lambda i: [] if i == 1 else [1]
    opts_of: Callable[[int], Options | None] = lambda i: None
    now: float = 0.0
    loss: float = 0.0
    cut: set[tuple[int, int]] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    events: list[Ev] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ids = list(range(1, self.n + 1))
        self.gens = dict.fromkeys(self.ids, 0)
        self.cores: dict[int, SwimCore] = {}
        self._q: list[tuple[float, int, int, int, bytes]] = []
        self._k = 0
        self._start_at: dict[int, float] = {}
        for i in self.ids:
            self._make(i, self.rng.uniform(0, self.opts.period_s))

    def _make(self, i: int, at: float) -> None:
        addrs = {j: ("127.0.0.1", 10000 + j) for j in self.ids if j != i}
        self.cores[i] = SwimCore(i, self.gens[i], addrs, self.seeds_of(i),
                                 self.opts_of(i) or self.opts,
                                 random.Random(f"{self.seed}:{i}:{self.gens[i]}"), self.bugs)
        self._start_at[i] = at

    # ---- faults
    def kill(self, i: int) -> None:
        self.down.add(i)
        self._start_at.pop(i, None)

    def restart(self, i: int) -> None:
        self.down.discard(i)
        self.gens[i] += 1
        self._make(i, self.now)

    def pause(self, i: int) -> None:
        self.down.add(i)

    def resume(self, i: int) -> None:
        self.down.discard(i)

    def partition(self, a: list[int], b: list[int]) -> None:
        self.cut |= {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}

    # ---- running
    def _effects(self, i: int, effects: list[Any]) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.sent += 1
                if (i, e.to) in self.cut or (self.loss and self.rng.random() < self.loss):
                    continue
                self._k += 1
                heapq.heappush(self._q, (self.now + self.latency, self._k, e.to, i,
                                         c.encode(e.msg)))
            elif isinstance(e, Announce):
                for j in self.ids:
                    if j != i:
                        self._k += 1
                        heapq.heappush(self._q, (self.now + self.latency, self._k, j, i,
                                                 c.encode(e.msg)))
            elif isinstance(e, Emit):
                self.events.append(Ev(i, self.now, e.type, e.fields))

    def run_until(self, t: float) -> None:
        while True:
            cands = [self._q[0][0]] if self._q else []
            cands += [at for i, at in self._start_at.items() if i not in self.down]
            cands += [self.cores[i].next_wakeup() for i in self.ids
                      if i not in self.down and i not in self._start_at]
            nxt = min(cands, default=t + 1)
            if nxt > t:
                self.now = t
                return
            self.now = max(self.now, nxt)
            if self._q and self._q[0][0] <= self.now:
                _, _, to, frm, raw = heapq.heappop(self._q)
                if to not in self.down and to not in self._start_at:
                    self._effects(to, self.cores[to].on_message(c.decode(raw), self.now, frm))
                continue
            for i, at in list(self._start_at.items()):
                if at <= self.now and i not in self.down:
                    del self._start_at[i]
                    self._effects(i, self.cores[i].start(self.now))
            for i in self.ids:
                if i not in self.down and i not in self._start_at:
                    core = self.cores[i]
                    if core.next_wakeup() <= self.now:
                        self._effects(i, core.poll(self.now))

    def run_for(self, dt: float) -> None:
        self.run_until(self.now + dt)

    # ---- observing
    def states(self, i: int) -> dict[int, str]:
        return {m["id"]: m["state"] for m in self.cores[i].view()}

    def alive_view(self, i: int) -> set[int]:
        return {m for m, s in self.states(i).items() if s == "alive"}

    def converged(self, live: set[int] | None = None) -> bool:
        live = live if live is not None else set(self.ids) - self.down
        return all(self.alive_view(i) == live - {i} for i in live)

    def of(self, type_: str, **match: Any) -> list[Ev]:
        return [e for e in self.events if e.type == type_
                and all(e.fields.get(k) == v for k, v in match.items())]
