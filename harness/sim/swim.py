"""SWIM on the simulator: how a `SwimCore` is built from its durable records, and the views
the SWIM tests and benchmarks read (who each member believes alive)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from harness.sim.driver import Simulation, Wire
from nodes.common.effects import Persist
from nodes.swim import codec
from nodes.swim.core import Options, SwimCore, default_seeds

WIRE = Wire(codec.encode, codec.decode)


def generation(durable: Iterable[Persist]) -> int:
    """The generation a restarted member takes: one above the last it made durable."""
    gens = [int(p.record) for p in durable if p.what == "generation"]
    return gens[-1] + 1 if gens else 0


def address(i: int) -> tuple[str, int]:
    """Member ``i``'s address in every simulated address book."""
    return ("127.0.0.1", 10000 + i)


class SwimSim(Simulation):
    """Members 1..n; member 1 founds the group and the others join through it (by default:
    the real server's `default_seeds`, so a restarted member rejoins through any peer),
    each starting at a random time within the first protocol period."""

    def __init__(self, n: int, opts: Options, seed: int = 0, bugs: Iterable[str] = (),
                 latency: float = 0.002,
                 seeds_of: Callable[[int], list[int]] | None = None,
                 opts_of: Callable[[int], Options | None] = lambda i: None,
                 late: Iterable[int] = ()) -> None:
        ids = list(range(1, n + 1))
        bugs = tuple(bugs)
        self.late = tuple(late)  # not started, and not in the others' address books
        everyone = ids + list(self.late)

        def make(i: int, durable: list[Persist], _boot: int, rng: random.Random) -> SwimCore:
            book = everyone if i in self.late else ids
            addrs = {j: address(j) for j in book if j != i}
            gen = generation(durable)
            seeds = seeds_of(i) if seeds_of is not None else default_seeds(i, book, gen)
            return SwimCore(i, gen, addrs, seeds, opts_of(i) or opts, rng, bugs)

        super().__init__(ids, make, seed=seed, wire=WIRE, latency=latency)
        self.boot_all(stagger=opts.period_s)
        for i in self.late:
            self.add_node(i)  # started by the test: ``boot(i, at)``

    def arrive(self, dst: int, seen_as: int, msg: codec.Message) -> tuple[int | None, Any]:
        """As the runtime does: a sender outside ``dst``'s address book is handed as None
        (unknown address) unless the core books it (``SwimCore.introduce``)."""
        core = self.cores.get(dst)
        if core is None or seen_as in core.addresses:
            return seen_as, msg
        return core.introduce(msg, address(seen_as)), msg

    @property
    def cores(self) -> dict[int, SwimCore]:
        return {i: n.core for i, n in self.nodes.items() if isinstance(n.core, SwimCore)}

    def states(self, i: int) -> dict[int, str]:
        """Member -> state as ``i`` sees it (nothing before ``i`` has started)."""
        core = self.cores.get(i)
        return {m["id"]: m["state"] for m in core.view()} if core is not None else {}

    def alive_view(self, i: int) -> set[int]:
        return {m for m, s in self.states(i).items() if s == "alive"}

    def converged(self, live: set[int] | None = None) -> bool:
        """Every live member sees exactly the other live members alive."""
        live = live if live is not None else set(self.ids) - self.down
        return all(self.alive_view(i) == live - {i} for i in live)


__all__ = ["WIRE", "SwimSim", "generation"]
