"""The DRiP search target: correct DRiP survives a short search, planted bug modes are found
and shrunk, judged by the same 2PC checker as a real run plus liveness after the heal."""

from __future__ import annotations

import pytest

from harness.sim.drip_search import TARGET, run
from harness.sim.search import search

pytestmark = pytest.mark.sim


def test_the_final_update_commits_on_a_correct_mesh() -> None:
    out = run([["update", 0, 0, 1], ["cut", 10, 0, 0], ["update", 5, 1, 3]], 1, ())
    assert out.ok, out.witness
    assert [op["type"] for op in out.ops[-3:]] == ["ok", "ok", "ok"]


def test_a_crash_schedule_fails_only_with_skip_sync() -> None:
    assert run([["crash", 0, 0, 0]], 1, ()).ok
    out = run([["crash", 0, 0, 0]], 1, ("skip-sync",))
    assert "sync-skipped" in {w["kind"] for w in out.witness}


def test_a_short_search_of_correct_drip_finds_nothing() -> None:
    assert search(TARGET, 5, (), budget_s=600, runs=10) is None


def test_a_short_search_finds_and_shrinks_retake_duplicate_votes() -> None:
    found = search(TARGET, 1, ("retake-duplicate-votes",), budget_s=600, runs=10,
                   shrink_runs=5)
    assert found is not None and found.schedule == []  # the final update alone shows it
    assert "propagated-twice" in {w["kind"] for w in found.outcome.witness}


@pytest.mark.parametrize(("schedule", "bug", "kind"), [
    ([["race", 0, 0, 0]], "forget-in-progress", "conflicting-commits"),
    ([["rejoin", 0, 0, 1]], "syncing-votes-no", "syncing-voted-no"),
])
def test_one_busy_step_shows_a_bug_mode_the_correct_core_survives(
        schedule: list[list[object]], bug: str, kind: str) -> None:
    assert run(schedule, 1, ()).ok
    out = run(schedule, 1, (bug,))
    assert kind in {w["kind"] for w in out.witness}


def test_a_quiet_mesh_ends_the_settle_early() -> None:
    """The settle stops once every node is active and the final update is decided (plus the
    tail), far below the 30 s + 30 s it may take."""
    out = run([["update", 0, 0, 1]], 1, ())
    assert out.ok and out.sim_seconds < 10


def test_a_mesh_whose_nodes_all_restarted_becomes_active_again() -> None:
    """Seed 2's schedule (docs/sim.md): n3, n1 and n2 crash, n4 is left alone and goes
    inactive. Before the fix each node kept asking a syncing peer for the sync it was owed, so
    none picked the first active node and the final update was refused 503 for good."""
    out = run([["crash", 153, 0, 2], ["crash", 278, 0, 0], ["crash", 269, 1, 1],
               ["crash", 269, 1, 1]], 2, ())
    assert out.ok, out.witness
    assert out.ops[-1]["type"] == "ok"
