"""The DRiP search target: correct DRiP survives a short search, planted bug modes are found
and shrunk, judged by the same 2PC checker as a real run plus liveness after the heal."""

from __future__ import annotations

import pytest

from harness.sim.drip_search import MEMBER_KINDS, NODES, TARGET, _Run, run
from harness.sim.play import play
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
    # n2 hangs between taking n1's vote request and answering it, for 3 s: n1 aborts on its
    # vote timeout, then n2's yes arrives; the late-vote bugs commit on it
    ([["update", 0, 0, 0], ["stall", 0, 2, 1]], "act-on-late-votes", "late-vote-acted-on"),
    ([["update", 0, 0, 0], ["stall", 0, 2, 1]], "commit-after-abort", "aborted-update-applied"),
    # one isolate of 3 s: n1's link to n2 back 1 s in with an update at n1; n1 goes inactive
    # 2 s in with that vote open, and at 3 s (its request to n4 ends) the bug applies it
    ([["isolate", 0, 2, 0]], "inactive-takes-part", "inactive-participated"),
    # a stall with no vote open: n3 starts one and n2 hangs the moment it takes it
    ([["stall", 0, 2, 1]], "act-on-late-votes", "late-vote-acted-on"),
    ([["stall", 0, 1, 1]], "commit-after-abort", "aborted-update-applied"),
    # n1 hangs with n2's vote: n2 times out and the bug commits on the yes votes it has
    ([["stall", 0, 1, 0]], "commit-partial-vote", "commit-without-all-yes"),
    # n2 decides and its commit is cut off; n2 is decommissioned at once; the voters' locks
    # run out blind and n3's update of the key commits the same version
    ([["sever", 0, 0, 1]], "release-expired-locks", "conflicting-commits"),
])
def test_one_busy_step_shows_a_bug_mode_the_correct_core_survives(
        schedule: list[list[object]], bug: str, kind: str) -> None:
    assert run(schedule, 1, ()).ok
    out = run(schedule, 1, (bug,))
    assert kind in {w["kind"] for w in out.witness}


@pytest.mark.parametrize(("schedule", "seed"), [
    # found by the search of act-on-late-votes (seed 2) but failing the correct core too
    ([["pause", 0, 0, 1], ["rejoin", 0, 0, 0], ["rejoin", 4, 0, 1]], 2),
    ([["isolate", 2, 1, 1]], 3),  # n2 cut off for 2 s; the last heal waits for it to end
])
def test_the_final_update_waits_until_every_node_sees_its_peers_up(
        schedule: list[list[object]], seed: int) -> None:
    """A node still counting a peer down leaves it out of the vote, which aborts ("no vote
    from n2"): the final update used to go out before the next heartbeat round healed the
    views, and these runs failed liveness on a correct mesh."""
    out = run(schedule, seed, ())
    assert out.ok, out.witness
    assert out.ops[-1]["type"] == "ok"


def test_an_initiator_gone_inactive_does_not_apply_its_open_update() -> None:
    """n1 cut off for 3 s, its link to n2 back at 1 s when it starts an update; it goes
    inactive at 2 s (no heartbeat of the round answered). Before the fix, at 3 s, it committed
    and applied it while its journal said inactive (spec 4.7); now going inactive aborts its
    open votes. Found by the search (act-on-late-votes, seed 1) as two overlapping isolates,
    n4's giving back the n1-n4 link at 1 s, which this isolate's first link back now is."""
    out = run([["isolate", 0, 2, 0]], 1, ())
    assert "inactive-participated" not in {w["kind"] for w in out.witness}, out.witness


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


def _played(schedule: list[list[object]]) -> _Run:
    r = _Run(1, ())
    assert play(r.sim, schedule, r.step, ids=NODES, latency=0.001, settle=r.progress,
                finish=r.play_out) is None
    return r


def test_a_crashed_member_is_decommissioned_and_the_rest_commit_without_it() -> None:
    schedule = [["crash", 0, 0, 3], ["decommission", 100, 0, 3]]
    r = _played(schedule)
    assert r.sim.committed("m0") and r.members() == ["n1", "n2", "n3"]
    assert all(r.sim.core(n).members == {"n1", "n2", "n3"} and r.sim.core(n).epoch == 1
               for n in ("n1", "n2", "n3"))
    out = run(schedule, 1, ())
    assert out.ok, out.witness  # the final update committed without n4's vote, judged at epoch 1
    assert r.sim.core("n4").snapshot()["left"]  # restarted by the heal, it learned it left
    assert out.ops[-1]["type"] == "ok"


def test_a_removal_is_asked_at_the_next_running_member_and_moves_the_final_update() -> None:
    r = _played([["pause", 0, 0, 1], ["decommission", 100, 0, 0]])
    assert r.removals == [("n1", "m0")] and r.sim.committed("m0")
    # n2 was paused: n3 asked; the final update goes to the first member left
    assert r.sim.events_of("n3", "members")[-1]["removed"] == ["n1"]
    assert r.updates[-1][0] == "n2" and r.sim.committed(r.updates[-1][3])


def test_no_removal_leaves_the_rest_unlinked_or_alone() -> None:
    # n2 out: n1 n3 n4 stay linked (n1-n4-n3); n4 out as well would leave n1 and n3 apart
    r = _played([["decommission", 100, 0, 1], ["decommission", 100, 0, 3]])
    assert [n for n, _ in r.removals] == ["n2"] and r.members() == ["n1", "n3", "n4"]


def test_membership_steps_are_drawn_only_when_asked() -> None:
    assert not set(MEMBER_KINDS) & set(TARGET.kinds) and set(MEMBER_KINDS) <= set(TARGET.optional)
    assert search(TARGET, 5, (), budget_s=600, runs=6, extra=MEMBER_KINDS) is None


def test_an_added_node_joins_once_the_add_commits_and_votes_from_then_on() -> None:
    schedule = [["add", 100, 0, 0], ["add", 100, 0, 2], ["crash", 100, 0, 1],
                ["decommission", 100, 0, 1]]
    r = _played(schedule)
    assert r.adds == [("n5", "a0"), ("n6", "a1")] and r.sim.committed("a1")
    assert r.members() == ["n1", "n3", "n4", "n5", "n6"]
    for n in r.members():  # epoch 3: two adds and n2's removal, every member agrees
        assert r.sim.core(n).members == set(r.members()) and r.sim.core(n).epoch == 3
    assert r.sim.events_of("n5", "start")[0]["join"]
    final = r.updates[-1][3]
    assert r.sim.committed(final)
    decide = [e for e in r.sim.events_of("n1", "decide") if e.get("uid") == final]
    assert decide and decide[-1]["epoch"] == 3
    out = run(schedule, 1, ())
    assert out.ok, out.witness
    r = _played([["add", 100, 0, 0], ["add", 500, 0, 1], ["add", 500, 0, 2]])
    assert r.ids[4:] == ["n5", "n6"] and len(r.adds) == 2  # at most MAX_ADDED


def test_the_cli_draws_membership_steps_for_drip_only(tmp_path, capsys) -> None:
    from harness.cli import main

    f = tmp_path / "m.json"
    assert main(["sim", "run", "drip", "--members", "--seed", "1", "--runs", "5",
                 "--out", str(f)]) == 0
    assert "with membership changes" in capsys.readouterr().err and not f.exists()
    assert main(["sim", "run", "swim", "--members", "--runs", "1"]) != 0
    assert "drop --members" in " ".join(capsys.readouterr().err.split())


def test_a_node_a_later_change_added_was_no_member_of_epoch_0() -> None:
    """Found by ``harness sim run drip --members --seed 4``: n2 removed (epoch 1), n5 added
    (epoch 2); n2's commit of u0 at epoch 0 was judged against n1..n5, as if n5, which left
    evidence, had been an epoch-0 member (the checker only knew the first change's adds)."""
    out = run([["rejoin", 0, 0, 0], ["decommission", 0, 0, 1], ["add", 14, 0, 0]], 4, ())
    assert out.ok, out.witness


def test_the_final_update_waits_for_a_membership_change_to_settle() -> None:
    """Found by `harness sim run drip --members --skew --budget 600s --seed 12`: the add of n5
    committed while the final update's vote was open, which then aborted ("no vote from
    ['n5']"), rightly; the liveness check now waits for membership requests to decide and an
    added node to boot before it sends the final update."""
    import json
    from pathlib import Path

    rec = json.loads((Path(__file__).parent / "data" / "drip_final_races_add.json").read_text())
    assert rec["bug"] == [] and "no vote from ['n5']" in rec["witness"][0]["message"]
    out = run(rec["schedule"], rec["seed"], ())
    assert out.ok, out.witness


def test_a_crash_loses_the_unfsynced_delivery_marks_and_the_commit_is_delivered_again() -> None:
    # n2 crashed 20 ms after n1's update committed: the marks of the commits it delivered are
    # not fsynced yet (nodes/drip/server.py carries them to the next durable group)
    out = run([["update", 0, 0, 0], ["crash", 20, 0, 1]], 1, ())
    assert out.ok, out.witness
    assert b"lost-unsynced" in out.trace
    assert b"lost-unsynced" not in run([["update", 0, 0, 0], ["crash", 5, 0, 1]], 1, ()).trace
