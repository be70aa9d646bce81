"""Nemesis schedules: shapes of the steps, pairing of start/stop ops, seeded determinism."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faults import schedules as S

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_periodic_alternates_start_and_stop() -> None:
    start = S.op("start-partition", {"shape": "halves"})
    steps = list(S.periodic(start, 2.5, cycles=3))
    assert [d for d, _ in steps] == [2.5] * 6
    assert [o["f"] for _, o in steps] == ["start-partition", "stop-partition"] * 3


def test_periodic_forever_is_lazy() -> None:
    steps = list(itertools.islice(S.periodic(S.op("pause", {"node": "n1"}), 1.0), 5))
    assert [o["f"] for _, o in steps] == ["pause", "resume", "pause", "resume", "pause"]
    assert steps[1][1] == {"f": "resume", "value": {"node": "n1"}}


def test_periodic_rejects_nonpositive_period() -> None:
    with pytest.raises(ValueError):
        next(iter(S.periodic(S.op("kill"), 0)))


def test_stop_op_pairs_every_start() -> None:
    for start, stop in S.STOP_FOR.items():
        assert S.stop_op(S.op(start, {}))["f"] == stop
    # a "random" choice is resolved by the nemesis, so the end op undoes whatever it chose
    assert S.stop_op(S.op("kill", {"node": "random"})) == {"f": "restart", "value": None}
    with pytest.raises(ValueError, match="not a start op"):
        S.stop_op(S.op("stop-partition"))


def test_explicit_validates_and_normalises() -> None:
    steps = S.explicit([(0, {"f": "kill", "value": {"node": "n1"}}), (1.5, {"f": "restart"})])
    assert steps == [(0.0, {"f": "kill", "value": {"node": "n1"}}),
                     (1.5, {"f": "restart", "value": None})]
    with pytest.raises(ValueError, match="negative"):
        S.explicit([(-1, {"f": "kill"})])
    with pytest.raises(ValueError, match="'f'"):
        S.explicit([(1, {"value": 3})])


@given(st.integers(min_value=0, max_value=2**63), st.booleans())
def test_random_schedule_is_deterministic_under_a_seed(seed: int, udp: bool) -> None:
    kinds = S.default_kinds(NODES, udp=udp)
    a = list(S.RandomSchedule(kinds, seed=seed, count=8))
    b = list(S.RandomSchedule(kinds, seed=seed, count=8))
    assert json.dumps(a) == json.dumps(b)
    sched = S.RandomSchedule(kinds, seed=seed, count=8)
    assert list(sched) == list(sched)  # re-iterable, same steps each time


@given(st.integers(min_value=0, max_value=2**63))
def test_random_schedule_pairs_starts_with_stops_within_bounds(seed: int) -> None:
    sched = S.RandomSchedule(S.default_kinds(NODES, udp=True), seed=seed, count=6,
                             gap_s=(0.5, 1.0), duration_s=(2.0, 3.0))
    steps = list(sched)
    assert len(steps) == 12
    for (gap, start), (dur, stop) in zip(steps[::2], steps[1::2], strict=True):
        assert 0.5 <= gap <= 1.0 and 2.0 <= dur <= 3.0
        assert stop == S.stop_op(start)
        assert set(start) == {"f", "value"}


def test_different_seeds_differ() -> None:
    kinds = S.default_kinds(NODES)
    runs = {json.dumps(list(S.RandomSchedule(kinds, seed=s, count=5))) for s in range(10)}
    assert len(runs) > 1


def test_weights_restrict_the_menu() -> None:
    kinds = S.default_kinds(NODES)
    weights = [1 if k.name == "kill" else 0 for k in kinds]
    steps = list(S.RandomSchedule(kinds, seed=3, count=5, weights=weights))
    assert {o["f"] for _, o in steps} == {"kill", "restart"}


def test_named_kinds_cover_the_cli_names_and_reject_unknown() -> None:
    kinds = S.kinds_for(["partition", "kill-leader", "pause", "partition-isolate"], NODES)
    rng = random.Random(0)
    ops = [k.make(rng) for k in kinds]
    assert ops[1] == {"f": "kill", "value": {"node": "leader"}}
    assert ops[3] == {"f": "start-partition", "value": {"shape": "isolate"}}
    for k in S.named_kinds(NODES).values():  # every menu entry makes a pairable start op
        assert S.stop_op(k.make(rng))["f"] == S.STOP_FOR[k.make(rng)["f"]]
    with pytest.raises(ValueError, match="known:"):
        S.kinds_for(["partition", "meteor"], NODES)


def test_unweighted_schedules_cover_every_kind_in_each_round() -> None:
    kinds = S.kinds_for(["partition", "kill", "pause"], NODES)
    for seed in range(20):
        starts = [o["f"] for _, o in S.RandomSchedule(kinds, seed=seed, count=6)
                  if o["f"] in ("start-partition", "kill", "pause")]
        assert sorted(starts[:3]) == sorted(starts[3:]) == ["kill", "pause", "start-partition"]
    orders = {tuple(o["f"] for _, o in S.RandomSchedule(kinds, seed=s, count=3)) for s in range(20)}
    assert len(orders) > 1  # the rounds are shuffled, not a fixed order
