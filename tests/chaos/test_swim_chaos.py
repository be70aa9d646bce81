"""SWIM chaos tests: real node processes on loopback, every datagram through the UDP relay.

Two are also ``smoke`` (bounded, run on every submission): a correct 5-node group under a
kill and 10% loss, and the ``no-refutation`` bug caught by the convergence check. The rest
are nightly (``pytest -m chaos``): 10- and 30-node groups, pauses, 30% loss, partitions and
heals, a member leaving, a member joining during a partition, capacity, each bug mode.

Correct runs must apply every fault they request and show evidence in every leaf (SWIM's
only client ops are the clock-sync and planned leaves/joins, so ``min_ok`` counts those).
Each bug mode names the ``membership`` leaf that catches it; the plugin reruns the same seed
and schedule with correct nodes (the thresholds unchanged), where that leaf must be valid.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from faults import schedules as sch
from harness.nemesis_generator import from_schedule
from harness.spec import TestSpec
from harness.suites.swim import PROTOCOL

FAST = {"period_s": 0.2, "probe_timeout_s": 0.1, "suspicion_mult": 4}
#: ok client ops of a run without planned leaves/joins: the clock-sync (SWIM has no others)
CLOCK_SYNC = 1


def swim_spec(name: str, nodes: int, steps: list[tuple[float, dict[str, Any]]], *,
              time_limit: float, options: dict[str, Any] | None = None,
              bugs: list[str] | None = None, quiesce_s: float = 3.0, seed: int = 3) -> TestSpec:
    return TestSpec(name=name, protocol=PROTOCOL, nodes=nodes, concurrency=nodes,
                    nemesis=from_schedule(sch.explicit(steps)) if steps else None,
                    nemesis_desc=",".join(o["f"] for _, o in steps) or "none",
                    time_limit=time_limit, quiesce_s=quiesce_s, bugs=list(bugs or []),
                    options={**FAST, **(options or {})}, seed=seed)


def op(f: str, value: Any = None) -> dict[str, Any]:
    return sch.op(f, value)


def figures(res: Any) -> dict[str, Any]:
    m = next(c for c in res.result.children if c.checker == "membership")
    return {c.checker: c.stats for c in m.children}


# ----------------------------------------------------------------------------- smoke


@pytest.mark.chaos
@pytest.mark.smoke
def test_swim_smoke_kill_and_loss(chaos_run: Any) -> None:
    spec = swim_spec("swim-smoke", 5, [
        (2.0, op("kill", {"node": "n3"})), (4.0, op("restart", {"node": "n3"})),
        (1.0, op("start-loss", {"p": 0.1})), (4.0, op("stop-loss")),
    ], time_limit=12, options={"swim_max_first_detection_periods": 4.0,
                               "swim_max_all_dead_s": 3.0})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    f = figures(res)
    assert f["completeness"]["judged"] == 1
    assert f["accuracy"]["false_positives"] == 0


@pytest.mark.chaos
@pytest.mark.smoke
def test_swim_smoke_bug_no_refutation(chaos_run: Any) -> None:
    """n4's 0.7 s pause gets it suspected; resumed, it cannot refute, so the suspicion ripens
    into a death and its peers' final views leave out a live member."""
    build = partial(swim_spec, "swim-smoke-bug", 5, [
        (2.0, op("pause", {"node": "n4"})), (0.7, op("resume", {"node": "n4"})),
    ], time_limit=7, bugs=["no-refutation"])
    chaos_run(build, expect="membership.convergence")


# ----------------------------------------------------------------------------- nightly


@pytest.mark.chaos
def test_swim_10_nodes_kills_pauses_partitions(chaos_run: Any) -> None:
    spec = swim_spec("swim-10", 10, [
        (2.0, op("kill", {"node": "n4"})), (5.0, op("restart", {"node": "n4"})),
        (2.0, op("pause", {"node": "n7"})), (0.6, op("resume", {"node": "n7"})),
        (2.0, op("start-partition", {"shape": "halves"})), (5.0, op("stop-partition")),
        (2.0, op("pause", {"node": "n2"})), (5.0, op("resume", {"node": "n2"})),
    ], time_limit=30, quiesce_s=5, options={"swim_max_first_detection_periods": 4.0})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_partition_heals_with_a_join_token(chaos_run: Any) -> None:
    """Every JoinReq proves the token, reconnects across the healed cut included: they once
    went without it, were refused, and the halves never merged again. (The kill after the
    heal gives the dissemination leaf a death to measure: deaths across a cut are excused.)"""
    spec = swim_spec("swim-token", 6, [
        (2.0, op("start-partition", {"shape": "halves"})), (6.0, op("stop-partition")),
        (4.0, op("kill", {"node": "n3"})), (3.0, op("restart", {"node": "n3"})),
    ], time_limit=24, quiesce_s=5, options={"join_token": "s3cret-of-this-run"})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert len(figures(res)["convergence"]["live"]) == 6


@pytest.mark.chaos
def test_swim_30_nodes_kill_and_loss(chaos_run: Any) -> None:
    spec = swim_spec("swim-30", 30, [
        (3.0, op("kill", {"node": ["n5", "n17"]})), (8.0, op("restart")),
        (2.0, op("start-loss", {"p": 0.1})), (8.0, op("stop-loss")),
    ], time_limit=30, quiesce_s=6, options={"period_s": 0.5, "probe_timeout_s": 0.25,
                                            "swim_max_first_detection_periods": 4.0})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_heavy_loss_stays_accurate(chaos_run: Any) -> None:
    # 30% loss on every link: a round trip fails half the time. Indirect probes, the
    # accuser's nudges and direct refutation keep false deaths rare; the figure is reported.
    spec = swim_spec("swim-loss30", 5, [(2.0, op("start-loss", {"p": 0.3})),
                                        (20.0, op("stop-loss"))],
                     time_limit=24, options={"swim_max_fp_per_member_hour": 400})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert figures(res)["accuracy"]["false_suspicions"] > 0  # the fault really bit


@pytest.mark.chaos
def test_swim_leave_and_join_during_partition(chaos_run: Any) -> None:
    spec = swim_spec("swim-leave-join", 6, [
        (4.0, op("start-partition", {"shape": "explicit",
                                     "groups": [["n1", "n2", "n3"], ["n4", "n5", "n6"]]})),
        (6.0, op("stop-partition")),
    ], time_limit=18, quiesce_s=5,
        options={"swim_plan": [[2.0, "leave", "n6"], [3.0, "leave", "n5"],
                               [7.0, "join", "n5"]]})
    res = chaos_run(spec, min_ok=4)  # the clock-sync and the three planned leaves/joins
    assert figures(res)["convergence"]["live"] == ["n1", "n2", "n3", "n4", "n5"]


@pytest.mark.chaos
def test_swim_capacity_respected(chaos_run: Any) -> None:
    spec = swim_spec("swim-capacity", 6, [(3.0, op("kill", {"node": "n6"})),
                                          (4.0, op("restart", {"node": "n6"}))],
                     time_limit=12, quiesce_s=4, options={"capacity": 3})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_bug_no_indirect_probes_caught(chaos_run: Any) -> None:
    """Without indirect probes a lost ping or ack is a suspicion: under 10% loss more false
    suspicions than the threshold, which correct nodes (the control) stay under."""
    build = partial(swim_spec, "swim-bug-indirect", 5, [(2.0, op("start-loss", {"p": 0.1})),
                                                       (15.0, op("stop-loss"))],
                    time_limit=18, bugs=["no-indirect-probes"],
                    options={"swim_max_false_suspicions_per_member_hour": 1000})
    chaos_run(build, expect="membership.accuracy")


@pytest.mark.chaos
def test_swim_bug_no_gossip_retransmit_caught(chaos_run: Any) -> None:
    # members still learn a joiner when it probes them (every message names its sender), so
    # the group converges; what the bug breaks is speed: a join takes ~n periods, not ~log n
    # (the control, correct nodes on the same start-up, spreads every join within 5 periods)
    build = partial(swim_spec, "swim-bug-gossip", 10, [], time_limit=12,
                    bugs=["no-gossip-retransmit"],
                    options={"period_s": 0.5, "probe_timeout_s": 0.25,
                             "swim_max_dissemination_periods": 5.0})
    chaos_run(build, expect="membership.dissemination")


@pytest.mark.chaos
def test_swim_bug_ignore_capacity_caught(chaos_run: Any) -> None:
    build = partial(swim_spec, "swim-bug-capacity", 6, [], time_limit=8, bugs=["ignore-capacity"],
                    options={"capacity": 2})
    chaos_run(build, expect="membership.convergence", anomaly="over-capacity")


@pytest.mark.chaos
def test_swim_bug_no_refutation_caught_under_loss(chaos_run: Any) -> None:
    """A member falsely suspected under 20% loss cannot refute: it is declared dead while
    alive, and the final views leave it out (convergence). Accuracy fires too, but a false
    death under heavy loss is something correct members may also do (the 30% loss test
    raises ``swim_max_fp_per_member_hour``); refuting, and so converging, is what the bug
    takes away."""
    build = partial(swim_spec, "swim-bug-refute-loss", 5, [(2.0, op("start-loss", {"p": 0.2})),
                                                          (10.0, op("stop-loss"))],
                    time_limit=14, bugs=["no-refutation"])
    chaos_run(build, expect="membership.convergence")


@pytest.mark.chaos
def test_swim_fault_free_ten_minutes_no_false_positive(chaos_run: Any) -> None:
    # the accuracy target: 10 members, memberlist's settings, 10 minutes, no faults
    spec = swim_spec("swim-quiet-10min", 10, [], time_limit=600, quiesce_s=5,
                     options={"period_s": 1.0, "probe_timeout_s": 0.5,
                              "swim_max_fp_per_member_hour": 0,
                              "swim_max_false_suspicions_per_member_hour": 0})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert figures(res)["accuracy"]["member_hours"] > 1.6


@pytest.mark.chaos
def test_swim_bug_ignore_leave_caught(chaos_run: Any) -> None:
    """Members that drop Leave (and LEFT gossip) keep probing the leaver, suspect it and
    declare it dead: the leave leaf wants it recorded ``left``."""
    build = partial(swim_spec, "swim-bug-ignore-leave", 5, [], time_limit=8,
                    bugs=["ignore-leave"], options={"swim_plan": [[2.0, "leave", "n5"]]})
    chaos_run(build, expect="membership.leave", anomaly="dead-not-left", min_ok=2)


@pytest.mark.chaos
def test_swim_bug_never_suspect_paused_caught(chaos_run: Any) -> None:
    """A 3 s pause (several suspicion timeouts at 0.2 s periods) nobody suspects."""
    build = partial(swim_spec, "swim-bug-never-suspect", 5, [
        (2.0, op("pause", {"node": "n3"})), (3.0, op("resume", {"node": "n3"})),
    ], time_limit=8, bugs=["never-suspect-paused"])
    chaos_run(build, expect="membership.detection", anomaly="undetected-pause")


@pytest.mark.chaos
def test_swim_bug_unbounded_gossip_caught(chaos_run: Any) -> None:
    """Every update on every message: a member of 10 sends several times the bytes per
    period that correct members send (about 73 vs 280 bytes on the simulator)."""
    build = partial(swim_spec, "swim-bug-unbounded-gossip", 10, [], time_limit=10,
                    bugs=["unbounded-gossip"],
                    options={"swim_max_bytes_per_member_period": 150})
    chaos_run(build, expect="membership.cost", anomaly="dissemination-cost")
