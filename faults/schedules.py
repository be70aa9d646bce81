"""Nemesis schedules: plain iterables of ``(delay_before_s, op)``.

An op is ``{"f": ..., "value": ...}`` in the nemesis shape of docs/contracts.md; the harness adds
``process``/``type``/``time`` when it records it. A schedule is data, so a run's fault plan can be
printed, stored, replayed, and (later) searched and shrunk by hypothesis. Randomness only ever
comes from a ``random.Random`` the caller seeds: the same seed gives the same schedule.

Every start op is followed (eventually) by its matching end op, so a schedule never leaves a fault
behind; the nemesis's ``heal_all`` is the safety net for runs cut short.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocabulary.faults import STOP_FOR

Op = dict[str, Any]
Step = tuple[float, Op]

def op(f: str, value: Any = None) -> Op:
    """A nemesis op in the contracts shape."""
    return {"f": f, "value": value}


def stop_op(start: Op) -> Op:
    """The end op undoing ``start``; node faults name the same node so the history pairs them."""
    f = start["f"]
    if f not in STOP_FOR:
        raise ValueError(f"{f!r} is not a start op; known: {sorted(STOP_FOR)}")
    value = start.get("value")
    if f in ("kill", "pause", "clock-skew", "clock-rate") and isinstance(value, dict) \
            and "node" in value:
        node = value["node"]
        # "random"/"leader" are resolved by the nemesis: the end op undoes whatever was chosen.
        return op(STOP_FOR[f], None if node in ("random", "leader") else {"node": node})
    return op(STOP_FOR[f], None)


def explicit(steps: Iterable[tuple[float, Op]]) -> list[Step]:
    """A fixed list of steps, checked: non-negative delays and ops with an ``f``."""
    out: list[Step] = []
    for i, (delay, o) in enumerate(steps):
        if delay < 0:
            raise ValueError(f"step {i}: negative delay {delay}")
        if not isinstance(o, dict) or "f" not in o:
            raise ValueError(f"step {i}: op must be a dict with an 'f', got {o!r}")
        out.append((float(delay), {"f": o["f"], "value": o.get("value")}))
    return out


def periodic(start: Op, period_s: float, cycles: int | None = None,
             stop: Op | None = None) -> Iterator[Step]:
    """Wait ``period_s``, start the fault, wait ``period_s``, stop it; repeat.

    ``cycles=None`` repeats forever (bound it with the harness's time limit).
    """
    if period_s <= 0:
        raise ValueError("period_s must be positive")
    end = stop if stop is not None else stop_op(start)
    n = 0
    while cycles is None or n < cycles:
        yield period_s, dict(start)
        yield period_s, dict(end)
        n += 1


@dataclass(frozen=True)
class FaultKind:
    """One entry of a random schedule's menu: how to build a start op from the rng."""

    name: str
    make: Callable[[random.Random], Op]


def _pick_partition(shapes: Sequence[str]) -> Callable[[random.Random], Op]:
    return lambda rng: op("start-partition", {"shape": rng.choice(list(shapes))})


def default_kinds(
    nodes: Sequence[str],
    partition_shapes: Sequence[str] = ("halves", "random-halves", "isolate", "majorities-ring",
                                       "bridge"),
    udp: bool = False,
) -> list[FaultKind]:
    """A sensible fault menu; node choices are left as "random" for the nemesis to resolve.

    ``udp=True`` adds packet loss (only the UDP relay can drop datagrams).
    """
    kinds = [
        FaultKind("partition", _pick_partition(partition_shapes)),
        FaultKind("latency", lambda rng: op("start-latency", {"ms": rng.choice([20, 50, 100]),
                                                              "jitter_ms": 10})),
        FaultKind("kill", lambda rng: op("kill", {"node": "random"})),
        FaultKind("pause", lambda rng: op("pause", {"node": "random"})),
        FaultKind("clock-skew", lambda rng: op("clock-skew", {
            "node": rng.choice(list(nodes)),
            "offset_s": rng.choice([-1, 1]) * round(rng.uniform(0.1, 5.0), 3)})),
    ]
    if udp:
        kinds.append(FaultKind("loss", lambda rng: op("start-loss", {
            "p": rng.choice([0.1, 0.3, 0.5])})))
    return kinds


def named_kinds(nodes: Sequence[str]) -> dict[str, FaultKind]:
    """The fault menu by the names a user types (``--nemesis partition,kill-leader,pause``)."""
    shapes = ("halves", "random-halves", "isolate", "majorities-ring", "bridge")
    fixed: dict[str, Op] = {
        "partition-one-way": op("start-partition", {"shape": "random-halves", "one_way": True}),
        "latency": op("start-latency", {"ms": 50, "jitter_ms": 10}),
        "loss": op("start-loss", {"p": 0.2}),
        "duplicate": op("start-duplicate", {"p": 0.2}),
        "bandwidth": op("start-bandwidth", {"kbps": 64}),
        "slicer": op("start-slicer", {"average_size": 16, "size_variation": 8, "delay_us": 500}),
        "reset-peer": op("reset-peer", {"timeout_ms": 0}),
        "kill": op("kill", {"node": "random"}),
        "kill-leader": op("kill", {"node": "leader"}),
        "pause": op("pause", {"node": "random"}),
        "pause-leader": op("pause", {"node": "leader"}),
        "hostile": op("start-hostile", {"interval_s": 0.5}),
    }
    kinds = {k.name: k for k in default_kinds(nodes, shapes, udp=True)}
    out: dict[str, FaultKind] = {"partition": kinds["partition"],
                                 "clock-skew": kinds["clock-skew"]}
    # a node's clocks at half or double speed (libfaketime: local backend only)
    out["clock-rate"] = FaultKind("clock-rate", lambda rng: op("clock-rate", {
        "node": rng.choice(list(nodes)), "rate": rng.choice([0.5, 2.0])}))
    for shape in shapes:
        out[f"partition-{shape}"] = FaultKind(
            f"partition-{shape}", lambda rng, shape=shape: op("start-partition", {"shape": shape}))
    for shape in ("min-edge-cut", "articulation"):  # drawn from the topology's graph
        out[f"partition-{shape}"] = FaultKind(
            f"partition-{shape}", lambda rng, shape=shape: op("start-partition", {"shape": shape}))
    out["partition-isolate-leader"] = FaultKind(  # resolved by the nemesis, like kill-leader
        "partition-isolate-leader",
        lambda rng: op("start-partition", {"shape": "isolate", "node": "leader"}))
    for name, o in fixed.items():
        out[name] = FaultKind(name, lambda rng, o=o: {"f": o["f"], "value": dict(o["value"])})
    return out


def kinds_for(names: Iterable[str], nodes: Sequence[str]) -> list[FaultKind]:
    """`FaultKind`s for user-given names; unknown names are an error listing the known ones."""
    menu = named_kinds(nodes)
    unknown = [n for n in names if n not in menu]
    if unknown:
        raise ValueError(f"unknown nemesis fault(s) {unknown}; known: {sorted(menu)}")
    return [menu[n] for n in names]


@dataclass
class RandomSchedule:
    """Seeded random faults: pick a kind, wait a gap, start it, hold it, stop it.

    One fault at a time, so every start is immediately paired with its stop; iterate it as
    often as you like: each iteration restarts from ``seed`` and yields the same steps.
    Without ``weights`` the kinds come in shuffled rounds (each kind once per round, in a
    seeded order), so every requested kind occurs once the run lasts one round; with
    ``weights`` each pick is an independent weighted draw.
    """

    kinds: Sequence[FaultKind]
    seed: int
    count: int | None = 10
    gap_s: tuple[float, float] = (1.0, 5.0)
    duration_s: tuple[float, float] = (2.0, 10.0)
    weights: Sequence[float] | None = field(default=None)

    def __iter__(self) -> Iterator[Step]:
        if not self.kinds:
            raise ValueError("RandomSchedule needs at least one fault kind")
        rng = random.Random(self.seed)
        n = 0
        round_: list[FaultKind] = []
        while self.count is None or n < self.count:
            if self.weights is not None:
                kind = rng.choices(list(self.kinds), weights=self.weights)[0]
            else:
                if not round_:
                    round_ = list(self.kinds)
                    rng.shuffle(round_)
                kind = round_.pop()
            start = kind.make(rng)
            yield round(rng.uniform(*self.gap_s), 3), start
            yield round(rng.uniform(*self.duration_s), 3), stop_op(start)
            n += 1
