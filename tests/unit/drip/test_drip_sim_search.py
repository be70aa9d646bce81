"""Hypothesis searches fault schedules on the simulated mesh: whatever it finds, a correct
core must leave the 2PC checker satisfied once the faults heal."""

from __future__ import annotations

from typing import Any

from drip_sim import Sim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.twopc import check
from nodes.drip.core import Unavailable

EDGES = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4")]
NODES = ["n1", "n2", "n3", "n4"]

actions = st.lists(st.one_of(
    st.tuples(st.just("update"), st.sampled_from(NODES), st.sampled_from(["a", "b"])),
    st.tuples(st.just("cut"), st.sampled_from(EDGES)),
    st.tuples(st.just("heal")),
    st.tuples(st.just("crash"), st.sampled_from(NODES)),
    st.tuples(st.just("deliver"), st.integers(1, 12)),
    st.tuples(st.just("tick"), st.floats(0.1, 3.0)),
), min_size=1, max_size=40)


def play(bugs: frozenset[str], acts: list[tuple[Any, ...]]) -> tuple[Sim, list[dict[str, Any]]]:
    sim = Sim(EDGES, bugs=bugs)
    history: list[dict[str, Any]] = []
    invoked: list[tuple[int, str, str, int]] = []
    for i, a in enumerate(acts):
        if a[0] == "update":
            uid = f"u{i}"
            history.append({"index": len(history), "process": i, "type": "invoke", "f": "update",
                            "value": [a[2], i, uid], "node": a[1]})
            invoked.append((i, uid, a[2], i))
            try:
                sim.update(a[1], a[2], i, uid)
            except Unavailable as e:
                sim.done[uid] = type("Refused", (), {"committed": False,
                                                     "detail": {"error": str(e)}})()
        elif a[0] == "cut":
            x, y = a[1]
            sim.cut |= {(x, y), (y, x)}
        elif a[0] == "heal":
            sim.cut.clear()
        elif a[0] == "crash":
            sim.restart(a[1])
        elif a[0] == "deliver":
            for _ in range(a[1]):
                sim.deliver_one()
        else:
            sim.heartbeat_round()
            sim.run(until=sim.now + a[1])
    sim.cut.clear()
    for _ in range(6):
        sim.heartbeat_round()
        sim.run(until=sim.now + 5)
    for p, uid, key, value in invoked:
        d = sim.done.get(uid)
        t = "info" if d is None else ("ok" if d.committed else "fail")
        history.append({"index": len(history), "process": p, "type": t, "f": "update",
                        "value": [key, value, uid]})
    return sim, history


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_correct_core_survives_any_schedule(acts: list[tuple[Any, ...]]) -> None:
    sim, history = play(frozenset(), acts)
    r = check({}, history, sim.observations())
    # a schedule in which nothing committed is "unknown" (nothing to judge), never a pass
    idle = r.valid == "unknown" and r.stats["committed"] == 0
    assert r.valid is True or idle, r.explain()


def test_the_search_finds_the_forget_in_progress_bug() -> None:
    from hypothesis import find

    def broken(acts: list[tuple[Any, ...]]) -> bool:
        sim, history = play(frozenset({"forget-in-progress"}), acts)
        return check({}, history, sim.observations()).valid is False

    found = find(actions, broken, settings=settings(max_examples=500, deadline=None,
                                                    database=None))
    sim, history = play(frozenset({"forget-in-progress"}), found)
    kinds = {a.kind for a in check({}, history, sim.observations()).anomalies}
    assert "conflicting-commits" in kinds, (found, kinds)
