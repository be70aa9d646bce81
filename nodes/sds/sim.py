"""A deterministic in-memory network for `SdsCore`s: simulated time, seeded loss and delay.

Unit tests (and, later, the hypothesis-driven simulator of DESIGN.md) drive many cores with
no sockets and no wall clock: every broadcast becomes one datagram per peer, each dropped with
probability ``loss``, duplicated with probability ``dup`` and delayed by ``latency_ms +
U(0, jitter_ms)`` (jitter reorders). Links can be cut. Everything random comes from one seed.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from nodes.sds.core import Broadcast, Delivered, Effect, Emit, SdsCore, SdsOptions

EPOCH_MS = 1_700_000_000_000


@dataclass
class SimNet:
    nodes: list[str]
    options: SdsOptions = field(default_factory=SdsOptions)
    seed: int = 0
    loss: float = 0.0
    dup: float = 0.0
    latency_ms: int = 1
    jitter_ms: int = 0
    bugs: dict[str, Iterable[str]] = field(default_factory=dict)
    tick_ms: int = 50

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = 0
        self.cores = {n: SdsCore(n, self.nodes, self.options, self.bugs.get(n, ()),
                                 random.Random(f"{self.seed}:{n}"), EPOCH_MS)
                      for n in self.nodes}
        self.cut: set[tuple[str, str]] = set()
        self.down: set[str] = set()
        self._q: list[tuple[int, int, str, str, bytes]] = []
        self._seq = 0
        self.delivered: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.notes: list[tuple[str, Emit]] = []
        self.datagrams = 0

    def wall(self) -> int:
        return EPOCH_MS + self.now

    def _effects(self, src: str, fx: list[Effect]) -> None:
        for e in fx:
            if isinstance(e, Broadcast):
                for dst in (e.to if e.to is not None else self.nodes):
                    if dst != src:
                        self._send(src, dst, e.data)
            elif isinstance(e, Delivered):
                self.delivered[src].append(e.msg.message_id)
            elif isinstance(e, Emit):
                self.notes.append((src, e))

    def _send(self, src: str, dst: str, data: bytes) -> None:
        self.datagrams += 1
        if (src, dst) in self.cut or self.rng.random() < self.loss:
            return
        copies = 2 if self.rng.random() < self.dup else 1
        for _ in range(copies):
            at = self.now + self.latency_ms + self.rng.randint(0, self.jitter_ms)
            self._seq += 1
            heapq.heappush(self._q, (at, self._seq, src, dst, data))

    def send(self, node: str, content: str | bytes) -> str:
        data = content.encode() if isinstance(content, str) else content
        msg, fx = self.cores[node].send(data, self.now, self.wall())
        self._effects(node, fx)
        return msg.message_id

    def run(self, ms: int) -> None:
        """Advance simulated time by ``ms``, delivering datagrams and ticking every core."""
        end = self.now + ms
        next_tick = self.now + self.tick_ms
        while self.now < end:
            t = min(end, next_tick, self._q[0][0] if self._q else end)
            self.now = t
            while self._q and self._q[0][0] <= self.now:
                _, _, src, dst, data = heapq.heappop(self._q)
                if dst not in self.down:
                    self._effects(dst, self.cores[dst].receive(data, self.now))
            if self.now >= next_tick:
                next_tick += self.tick_ms
                for n in self.nodes:
                    if n not in self.down:
                        self._effects(n, self.cores[n].tick(self.now, self.wall()))

    def partition(self, a: Iterable[str], b: Iterable[str]) -> None:
        for x in a:
            for y in b:
                self.cut |= {(x, y), (y, x)}

    def heal(self) -> None:
        self.cut.clear()

    def logs(self) -> dict[str, list[str]]:
        return {n: [m.message_id for m in c.ordered_log()] for n, c in self.cores.items()}
