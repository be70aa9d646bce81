"""The simulator's network: seeded delay, jitter (reordering), loss, duplication and cuts.

Every random draw comes from the one ``random.Random`` it is given, in the order the sends
happen, so a simulation with the same seed makes the same choices.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Network:
    """Link behaviour; ``plan`` turns one send into the delays of the copies that arrive."""

    rng: random.Random
    latency: float = 0.001
    jitter: float = 0.0
    loss: float = 0.0
    dup: float = 0.0
    cut: set[tuple[Any, Any]] = field(default_factory=set)
    #: extra delay (seconds) of every send on one directed link: a slow hop, so one path
    #: of a mesh can be overtaken by another
    slow: dict[tuple[Any, Any], float] = field(default_factory=dict)

    def plan(self, src: Any, dst: Any) -> list[float]:
        """Delays (seconds) of the copies of one datagram src -> dst; [] when it is lost."""
        if (src, dst) in self.cut:
            return []
        if self.loss and self.rng.random() < self.loss:
            return []
        copies = 2 if self.dup and self.rng.random() < self.dup else 1
        return [self.latency + self.slow.get((src, dst), 0.0)
                + (self.rng.uniform(0, self.jitter) if self.jitter else 0.0)
                for _ in range(copies)]

    def partition(self, *groups: Iterable[Any]) -> None:
        """Cut every link between different groups, both ways (links within a group stay)."""
        gs = [list(g) for g in groups]
        for i, g in enumerate(gs):
            for h in gs[i + 1:]:
                self.cut |= {(a, b) for a in g for b in h} | {(b, a) for a in g for b in h}

    def cut_one_way(self, src: Any, dst: Any) -> None:
        self.cut.add((src, dst))

    def heal(self) -> None:
        self.cut.clear()
