"""The one simulator: same seed, same trace byte for byte; crash, pause and the network's faults."""

from __future__ import annotations

from harness.sim.swim import SwimSim
from nodes.swim.core import Options

FAST = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=3)


def chaotic(seed: int) -> SwimSim:
    s = SwimSim(6, FAST, seed=seed)
    s.net.loss, s.net.dup, s.net.jitter = 0.05, 0.05, 0.01
    s.run_for(6)
    s.partition([1, 2, 3], [4, 5, 6])
    s.run_for(4)
    s.heal()
    s.crash(2)
    s.pause(4)
    s.run_for(3)
    s.resume(4)
    s.restart(2)
    s.run_for(8)
    return s


def test_the_same_seed_gives_the_same_trace_byte_for_byte_and_another_seed_does_not() -> None:
    a, b, c = chaotic(11).trace_bytes(), chaotic(11).trace_bytes(), chaotic(12).trace_bytes()
    assert a == b
    assert a != c
    assert len(a.splitlines()) > 500  # a run with traffic, not an empty trace


def test_a_crash_keeps_what_was_persisted_and_loses_the_rest() -> None:
    s = SwimSim(3, FAST, seed=1)
    s.run_for(5)
    before = s.nodes[2].core
    s.crash(2)
    assert s.nodes[2].core is None and 2 in s.down
    s.run_for(1)
    s.restart(2)
    s.run_for(0.01)
    after = s.nodes[2].core
    assert after is not before and after.gen == 1  # rebuilt from the durable generation
    assert [p.record for p in s.nodes[2].durable] == [0, 1]


def test_messages_to_a_crashed_node_are_lost_and_to_a_paused_one_wait() -> None:
    s = SwimSim(3, FAST, seed=1)
    s.run_for(5)
    s.crash(3)
    s.run_for(2)
    assert any(r[1] == "lost-down" and r[3] == 3 for r in s.trace)
    s.pause(2)
    s.run_for(2)
    waiting = len(s.nodes[2].backlog)
    assert waiting > 0
    s.resume(2)
    assert s.nodes[2].backlog == []


def test_a_partition_cuts_both_ways_and_loss_drops_a_seeded_share() -> None:
    s = SwimSim(4, FAST, seed=2)
    s.partition([1, 2], [3, 4])
    assert (1, 3) in s.net.cut and (3, 1) in s.net.cut and (1, 2) not in s.net.cut
    s.heal()
    s.net.loss = 0.5
    delivered = sum(len(s.net.plan(1, 2)) for _ in range(2000))
    assert 800 < delivered < 1200


def test_a_node_yet_to_boot_is_not_down_so_nothing_converges_vacuously() -> None:
    s = SwimSim(3, FAST, seed=1)
    assert s.down == set() and not s.converged()
    s.run_for(6)
    assert s.converged()
    s.crash(3)
    assert s.down == {3}
