"""The ANTACID search target: correct servers survive a short search, a bug mode is found from
a random start and shrunk, and its replay file reproduces the run byte for byte.

The tests bound the search by simulated runs (`runs`, `shrink_runs`), not wall seconds: a
slow machine would make "finds nothing in 6 s" cover fewer schedules and a "found" test miss.
The wall budget gets so much slack that it never decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.sim import replayfile
from harness.sim.antacid_search import QUIET_LOOK_S, SETTLE_S, TARGET, _Run, run, target
from harness.sim.cli import targets
from harness.sim.search import search

pytestmark = pytest.mark.sim
SLACK_S = 600.0  # wall budget that never decides: the schedule count does


def test_it_is_registered_with_every_core_bug_mode() -> None:
    assert targets()["antacid"] is TARGET
    assert set(TARGET.bugs) == {"csn-reused", "skip-csn", "partial-group",
                                "duplicates-undetected"}


def test_a_schedule_runs_the_same_byte_for_byte_and_the_seed_matters() -> None:
    sched = [["loss", 0, 2, 0], ["delay", 0, 0, 2], ["write", 0, 1, 2], ["partition", 50, 1, 0], ["write", 10, 2, 1],
             ["crash", 30, 0, 0], ["heal", 200, 0, 0], ["restart", 5, 0, 0]]
    a, b, c = run(sched, 4, ()), run(sched, 4, ()), run(sched, 5, ())
    assert a.trace == b.trace and a.trace != c.trace
    assert a.ok, a.witness  # loss and jitter draw from the seed: another seed, another run
    assert sum(op["f"] == "submit" and op["type"] == "ok" for op in a.ops) >= 2


def test_a_search_of_correct_antacid_over_40_schedules_finds_nothing() -> None:
    assert search(TARGET, 5, (), budget_s=SLACK_S, runs=40) is None


@pytest.mark.parametrize(("b", "server"), [(0, "r2"), (1, "r3")])
def test_slow_links_start_a_write_at_a_server_with_two_upstreams_that_plays_out_to_its_retry(
        b: int, server: str) -> None:
    # links slower than a call's timeout with no write open: the delay step itself submits one
    # at r2 or r3 (by b); the last heal waits until its propagate has timed out and gone on by
    # the other upstream, which reaches the primary after the original committed
    sched = [["delay", 0, 3, b]]
    ok = run(sched, 1, ())
    assert ok.ok
    assert [o["node"] for o in ok.ops if o["f"] == "submit"][0] == server
    out = run(sched, 1, ("duplicates-undetected",))
    assert not out.ok
    assert "committed-twice" in {w["kind"] for w in out.witness}


@pytest.mark.parametrize("step", [["delay", 0, 2, 4], ["dup", 0, 0, 0]])
def test_links_neither_slow_nor_duplicating_start_no_write(step: list[int]) -> None:
    out = run([step], 1, ("duplicates-undetected",))
    assert out.ok
    assert [o["node"] for o in out.ops if o["f"] == "submit"] == ["r3"]  # the final one


def test_a_write_already_open_is_not_joined_by_another_on_slow_links() -> None:
    # a write at r1 (one upstream: it retries only after the result) is still open when the
    # links slow down: the delay step adds none, and the schedule passes with the bug
    out = run([["write", 0, 0, 1], ["delay", 0, 3, 0]], 1, ("duplicates-undetected",))
    assert [o["node"] for o in out.ops if o["f"] == "submit"] == ["r1", "r3"]
    assert out.ok


def test_partial_group_is_found_shrunk_and_replayed(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    found = search(TARGET, 0, ("partial-group",), budget_s=SLACK_S, shrink_s=SLACK_S, runs=400,
                   shrink_runs=200)
    assert found is not None, "not found within 400 schedules"
    assert len(found.schedule) <= 3 and any(s[0] == "write" for s in found.schedule)
    assert {w["checker"] for w in found.outcome.witness} >= {"group-atomic"}

    out = tmp_path / "r.json"
    replayfile.write(out, replayfile.record("antacid", 0, ("partial-group",), found.schedule,
                                            found.outcome))
    capsys.readouterr()
    assert main(["sim", "replay", str(out)]) == 1
    screen = capsys.readouterr().out
    assert "reproduced byte for byte" in screen and "partial-group" in screen
    assert len(screen.splitlines()) < 40
    assert json.loads(out.read_text())["protocol"] == "antacid"


def test_the_cli_refuses_a_bug_mode_antacid_has_not() -> None:
    assert main(["sim", "run", "antacid", "--bug", "unsafe-config-change",
                 "--budget", "1s"]) == 254


def test_two_zones_run_byte_for_byte_and_one_zone_is_the_plain_target() -> None:
    assert target(1) is TARGET
    sched = [["write", 0, 0, 2], ["write", 0, 1, 0], ["partition", 50, 1, 0], ["read", 10, 1, 3],
             ["write", 10, 3, 1], ["crash", 30, 0, 1], ["heal", 200, 0, 0], ["restart", 5, 0, 1]]
    a, b = target(2).run(sched, 4, ()), run(sched, 4, (), zones=2)
    assert a.trace == b.trace and a.trace != run(sched, 4, ()).trace
    assert a.ok, a.witness
    zones = {op["value"]["zone"] for op in a.ops if op["f"] == "submit" and op["type"] == "ok"}
    assert zones == {"blocks:z", "blocks:z2"}


def test_csn_reused_over_two_zones_is_found_and_its_replay_file_keeps_the_zones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "z.json"
    assert main(["sim", "run", "antacid", "--zones", "2", "--bug", "csn-reused", "--seed", "1",
                 "--runs", "200", "--shrink-runs", "60", "--budget", "600s",
                 "--out", str(out)]) == 1
    rec = json.loads(out.read_text())
    assert rec["zones"] == 2 and "zone blocks:z" in json.dumps(rec["witness"])
    capsys.readouterr()
    assert main(["sim", "replay", str(out)]) == 1
    screen = capsys.readouterr().out
    assert "2 zones" in screen and "reproduced byte for byte" in screen


def test_zones_are_refused_for_a_target_of_one_zone() -> None:
    assert main(["sim", "run", "swim", "--zones", "2", "--budget", "1s"]) == 254
    assert main(["sim", "run", "antacid", "--zones", "0", "--budget", "1s"]) == 254


def test_a_settle_ends_once_the_servers_are_quiescent_with_the_same_verdict() -> None:
    # an untouched group is quiescent at once; after the final write its result-wait timer
    # (10 s) is still set until it fires: 2 looks + 10 s + 2 looks instead of 2 x 20 s
    assert run([], 1, ()).sim_seconds <= 11 + 4 * QUIET_LOOK_S  # (+ boot and the heal)
    assert run([], 1, (), zones=2).sim_seconds <= 11 + 4 * QUIET_LOOK_S  # (zone, "pull") timers
    sched = [["write", 0, 0, 2], ["partition", 10, 0, 0], ["write", 0, 1, 3]]
    out = run(sched, 1, ())
    assert out.ok, out.witness
    assert out.sim_seconds < 2 * SETTLE_S
    assert [o["type"] for o in out.ops if o["f"] == "submit"] == ["ok", "ok", "ok"]


def test_a_server_with_a_submission_unanswered_is_not_quiescent() -> None:
    r = _Run(1, ())
    r.sim.run_for(2)
    assert r.sim.quiescent()
    op = r.sim.submit("r2", ("blocks:z.k0", "v", "write"))
    assert not r.sim.quiescent()
    r.sim.run_for(2)
    assert op["type"] == "ok" and not r.sim.quiescent()  # a result-wait timer still set
    r.sim.run_for(10)
    assert r.sim.quiescent()
    r.sim.crash("r1")
    assert not r.sim.quiescent()
