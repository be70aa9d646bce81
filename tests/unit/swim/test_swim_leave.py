"""Leave and rejoin (issue 25, item 2): a left node is silent but for its Leave, retried
until each member acknowledges it; every node can rejoin, the founder included; the others
record `left`, never `dead`."""

from __future__ import annotations

import pytest

from harness.sim.swim import SwimSim as Sim
from nodes.swim.core import Options

FAST = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)


def sends_by(s: Sim, node: int, since: float) -> list[tuple]:
    return [r for r in s.trace if r[1] == "send" and r[2] == node and r[0] >= since]


@pytest.mark.parametrize("leaver", [1, 3])  # 1 founded the group (no seeds of its own)
def test_a_left_node_is_silent_and_rejoins(leaver: int) -> None:
    s = Sim(4, FAST, seed=5)
    s.run_for(8)
    assert s.converged()
    s.command(leaver, "leave")
    t0 = s.now
    s.run_for(30)
    others = set(s.ids) - {leaver}
    assert len(sends_by(s, leaver, t0 + 0.01)) == 0  # acknowledged at once: no retries
    assert all(s.states(i)[leaver] == "left" for i in others)
    assert not s.of("dead", member=leaver)
    assert not [e for e in s.of("refute") if e.t > t0]  # nobody had to refute a death
    assert s.converged(others)
    s.command(leaver, "rejoin")
    s.run_for(10)
    assert s.converged(), {i: s.states(i) for i in s.ids}


def test_a_leave_lost_on_the_way_is_retried_until_acknowledged() -> None:
    s = Sim(4, FAST, seed=6)
    s.run_for(8)
    s.partition({3}, {1, 2, 4})  # 3 leaves while cut off: its first Leaves are lost
    s.command(3, "leave")
    t0 = s.now
    s.run_for(0.3)  # healed before the next period's round
    s.heal()
    s.run_for(10)
    assert all(s.states(i)[3] == "left" for i in (1, 2, 4))
    assert not s.of("dead", member=3)
    assert 3 < len(sends_by(s, 3, t0)) <= 3 * Options().leave_retries  # retried, then done


def test_retries_stop_after_the_leave_timeout_with_nobody_listening() -> None:
    s = Sim(3, FAST, seed=7)
    s.run_for(8)
    s.partition({2}, {1, 3})
    s.command(2, "leave")
    t0 = s.now
    s.run_for(30)
    assert len(sends_by(s, 2, t0)) == 2 * Options().leave_retries
    assert sends_by(s, 2, t0 + Options().leave_retries * FAST.period_s + 0.5) == []
