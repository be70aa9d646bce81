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


@dataclass(frozen=True)
class Faults:
    """Named fault packages ("partition,kill") whose random schedule is drawn from the run's
    seed when the run starts, not when the test is written: a spec reseeded afterwards
    (``--chaos-seed``, ``harness run --seed``) gets that seed's schedule."""

    kinds: str
    interval_s: float = 2.0

    @property
    def names(self) -> list[str]:
        """The fault kinds named, ``clock`` spelled ``clock-skew``; [] for none."""
        names = [n.strip() for n in self.kinds.split(",") if n.strip()]
        if names == ["none"]:
            return []
        return ["clock-skew" if n == "clock" else n for n in names]

    @property
    def desc(self) -> str:
        return ",".join(self.names) or "none"

    def build(self, nodes: Sequence[str], seed: int) -> g.Generator | None:
        """The random schedule of ``seed``: faults one at a time, a gap, then a fault held
        for about ``interval_s``, healed."""
        if not self.names:
            return None
        i = self.interval_s
        return from_schedule(sch.RandomSchedule(sch.kinds_for(self.names, nodes), seed=seed,
                                                count=None, gap_s=(0.5 * i, 1.5 * i),
                                                duration_s=(0.5 * i, 1.5 * i)))
