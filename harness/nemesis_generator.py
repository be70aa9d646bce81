"""The nemesis stream's generator: named nemesis packages ("partition,kill") or a schedule -> steps.

The fault menu and its names live in faults/schedules.py (``named_kinds``); a schedule is
data, ``(delay_before_s, op)`` steps. ``from_schedule`` turns one into the nemesis stream's
generator: sleep, op, sleep, op, ...
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from faults import schedules as sch
from harness import generators as g


def from_schedule(steps: Iterable[sch.Step]) -> g.Generator:
    def items() -> Iterable[g.GenLike]:
        for delay, op in steps:
            if delay > 0:
                yield g.sleep(delay)
            yield g.Once(op)

    return g.Seq(items())


def build_nemesis(spec: str, interval_s: float, nodes: Sequence[str], seed: int
                  ) -> tuple[g.Generator | None, str]:
    """Parse "partition,kill" into a random schedule seeded by the test's seed.

    Faults come one at a time: a gap, then a fault held for about ``interval_s``, healed.
    """
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names or names == ["none"]:
        return None, "none"
    names = ["clock-skew" if n == "clock" else n for n in names]
    schedule = sch.RandomSchedule(sch.kinds_for(names, nodes), seed=seed, count=None,
                                  gap_s=(0.5 * interval_s, 1.5 * interval_s),
                                  duration_s=(0.5 * interval_s, 1.5 * interval_s))
    return from_schedule(schedule), ",".join(names)


@dataclass(frozen=True)
class Faults:
    """Named fault packages ("partition,kill") whose random schedule is drawn from the run's
    seed when the run starts, not when the test is written: a spec reseeded afterwards
    (``--chaos-seed``, ``harness run --seed``) gets that seed's schedule."""

    kinds: str
    interval_s: float = 2.0

    @property
    def desc(self) -> str:
        names = [n.strip() for n in self.kinds.split(",") if n.strip()]
        if not names or names == ["none"]:
            return "none"
        return ",".join("clock-skew" if n == "clock" else n for n in names)

    def build(self, nodes: Sequence[str], seed: int) -> g.Generator | None:
        return build_nemesis(self.kinds, self.interval_s, nodes, seed)[0]
