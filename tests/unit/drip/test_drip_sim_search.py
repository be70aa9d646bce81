"""Hypothesis searches fault schedules on the simulated mesh: whatever it finds, a correct
core must leave the 2PC checker satisfied once the faults heal."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.twopc import check
from harness.sim.drip import DripSim

EDGES = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4")]
NODES = ["n1", "n2", "n3", "n4"]

actions = st.lists(st.one_of(
    st.tuples(st.just("update"), st.sampled_from(NODES), st.sampled_from(["a", "b"])),
    st.tuples(st.just("cut"), st.sampled_from(EDGES)),
    st.tuples(st.just("heal")),
    st.tuples(st.just("crash"), st.sampled_from(NODES)),
    st.tuples(st.just("pause"), st.sampled_from(NODES)),
    st.tuples(st.just("run"), st.floats(0.0005, 3.0)),
), min_size=1, max_size=40)


def play(bugs: frozenset[str], acts: list[tuple[Any, ...]], seed: int = 1
         ) -> tuple[DripSim, list[dict[str, Any]]]:
    """Play ``acts`` on a mesh, then heal everything and let it settle; the history has
    one update per "update" action (info when its answer never came)."""
    sim = DripSim(EDGES, seed=seed, bugs=bugs, jitter=0.002)
    history: list[dict[str, Any]] = []
    invoked: list[tuple[int, str, str, int, str]] = []
    for i, a in enumerate(acts):
        if a[0] == "update":
            uid = f"u{i}"
            history.append({"index": len(history), "process": i, "type": "invoke",
                            "f": "update", "value": [a[2], i, uid], "node": a[1]})
            invoked.append((i, uid, a[2], i, a[1]))
            if sim.nodes[a[1]].up and not sim.nodes[a[1]].paused:
                sim.update(a[1], a[2], i, uid)
        elif a[0] == "cut":
            sim.cut(*a[1])
        elif a[0] == "heal":
            sim.heal()
        elif a[0] == "crash":
            sim.restart(a[1])
        elif a[0] == "pause":
            sim.pause(a[1])
            sim.run_for(1.0)
            sim.resume(a[1])
        else:
            sim.run_for(a[1])
    sim.heal()
    sim.run_for(30)
    for p, uid, key, value, node in invoked:
        d = sim.outcome(uid)
        t = "info" if d is None else ("ok" if d.status == 200 else "fail")
        history.append({"index": len(history), "process": p, "type": t, "f": "update",
                        "value": [key, value, uid], "node": node})
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
