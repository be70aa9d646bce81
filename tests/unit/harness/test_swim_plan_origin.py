"""``swim_plan`` times: from the cluster's start (the history's zero) by default, or from the
workload's first op with ``swim_plan_origin: "workload"`` (a sim replay's plan must share the
nemesis's axis, and the workload starts seconds after the cluster)."""

from __future__ import annotations

import random

import pytest

from harness.generators import Context, Pending
from harness.protocols import get_protocol
from harness.spec import TestSpec
from harness.suites.swim import membership_generator


def gen(origin: str | None) -> object:
    opts = {"swim_plan": [[2.0, "leave", "n1"]], **({"swim_plan_origin": origin} if origin else {})}
    return membership_generator(TestSpec(name="t", protocol=get_protocol("swim"), nodes=1,
                                         options=opts))


def ask(g: object, t: float) -> object:
    return g.op(Context(t, 0, 0, (0,), random.Random(0)))  # type: ignore[attr-defined]


def test_the_plan_counts_from_the_cluster_start_by_default() -> None:
    g = gen(None)
    assert ask(g, 5.0)["f"] == "clock-sync"  # the workload starts 5 s into the run
    assert ask(g, 5.0)["f"] == "leave"  # 2.0 is long past


def test_a_workload_origin_counts_from_the_first_op() -> None:
    g = gen("workload")
    assert ask(g, 5.0)["f"] == "clock-sync"
    p = ask(g, 5.0)
    assert isinstance(p, Pending) and p.until == 7.0
    assert ask(g, 7.0)["f"] == "leave"


def test_an_unknown_origin_is_refused() -> None:
    with pytest.raises(ValueError, match="swim_plan_origin must be 'cluster' or 'workload'"):
        gen("history")
