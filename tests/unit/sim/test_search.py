"""The schedule search: correct Garlic Farm survives a short search, the membership flaw is
found and shrunk, and its replay file reproduces the run byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.sim import replayfile
from harness.sim.cli import budget
from harness.sim.gf_search import TARGET, run
from harness.sim.search import Tally, search

pytestmark = pytest.mark.sim
BUG = ("unsafe-config-change",)
#: a schedule the search shrank to (seed 3): the leader crashes, a removal reaches the next
#: leader before its first entry commits
SEED = 3
#: the search's seed in the CLI test: it finds the flaw after 80 runs (seeds 1-6: 80-637; before
#: a change waited for the next leader, 401-1066)
SEARCH_SEED = 6
FOUND = [["partition", 172, 0, 3], ["restart", 89, 0, 1], ["crash", 0, 0, 0],
         ["loss", 353, 1, 0], ["remove", 3, 0, 0], ["partition", 1, 0, 0]]


def test_a_schedule_runs_the_same_byte_for_byte_and_the_seed_matters() -> None:
    a, b, c = run(FOUND, SEED, ()), run(FOUND, SEED, ()), run(FOUND, SEED + 1, ())
    assert a.trace == b.trace and a.trace != c.trace
    assert a.ok, a.witness  # the correct core refuses the early change
    assert any(op["f"] == "remove" for op in a.ops)


def test_a_trace_is_serialized_when_asked_and_stays_its_own_runs() -> None:
    a = run(FOUND, SEED, ())
    assert not isinstance(a.made, bytes)  # a search judging by `ok` does not pay for it
    b = run(FOUND, SEED + 1, ())
    first = a.trace
    assert a.made is first and a.trace is first and first != b.trace
    assert first.endswith(json.dumps(a.ops, sort_keys=True).encode())


def test_the_known_schedule_fails_with_the_flaw_and_names_the_rule() -> None:
    out = run(FOUND, SEED, BUG)
    assert not out.ok
    assert {w["kind"] for w in out.witness} >= {"config-change-before-term-commit"}


def test_a_short_search_of_correct_garlic_farm_finds_nothing() -> None:
    assert search(TARGET, 5, (), budget_s=600, runs=150) is None


def test_the_tally_counts_the_runs_and_simulated_seconds_of_a_search_that_finds_nothing(
) -> None:
    tally = Tally()
    assert search(TARGET, 5, (), budget_s=600, runs=4, tally=tally) is None
    assert tally.runs == 4 and tally.sim_s > 4  # every run settles for seconds


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, as a user runs it."""
    return subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", *args],
                          capture_output=True, text=True, timeout=600)


def test_the_membership_flaw_is_found_shrunk_and_replayed(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = _harness("sim", "run", "garlicfarm", "--bug", "unsafe-config-change", "--seed",
                 str(SEARCH_SEED), "--budget", "600s", "--shrink", "600s", "--runs", "800",
                 "--shrink-runs", "200", "--out", str(out))  # runs, not wall time: any load
    assert p.returncode == 1, p.stdout + p.stderr
    rec = json.loads(out.read_text())
    assert rec["protocol"] == "garlicfarm" and rec["bug"] == list(BUG)
    assert 1 <= len(rec["schedule"]) <= 12
    assert any(s[0] in ("add", "remove") for s in rec["schedule"])
    p = _harness("sim", "replay", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    screen = p.stdout
    assert "reproduced byte for byte" in screen
    assert "config-change-before-term-commit" in screen
    assert len(screen.splitlines()) < 40


def test_a_replay_that_no_longer_matches_says_so(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rec = replayfile.record("garlicfarm", SEED, BUG, FOUND, run(FOUND, SEED, BUG))
    rec["trace_sha256"] = "0" * 64
    f = tmp_path / "r.json"
    replayfile.write(f, rec)
    assert main(["sim", "replay", str(f)]) == 2
    assert "NOT reproduced" in capsys.readouterr().out


def test_bad_input_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["sim", "run", "garlicfarm", "--bug", "nope", "--budget", "1s"]) == 254
    assert main(["sim", "run", "nosuch", "--budget", "1s"]) == 254
    (tmp_path / "x.json").write_text("{}")
    assert main(["sim", "replay", str(tmp_path / "x.json")]) == 254
    assert budget("2m") == 120 and budget("60s") == 60
    with pytest.raises(Exception, match="not a budget"):
        budget("soon")


#: commit-without-majority leaves a follower whose committed entry the leader's log contradicts:
#: the leader retries at network speed for ever, and duplication multiplies the retries
STORM = [["partition", 197, 0, 0], ["partition", 272, 0, 0], ["partition", 281, 0, 4],
         ["restart", 223, 4, 3], ["delay", 106, 1, 3], ["write", 209, 0, 0],
         ["restart", 399, 3, 1], ["partition", 191, 1, 2], ["dup", 218, 3, 0],
         ["heal", 59, 2, 4], ["partition", 200, 2, 1]]


def test_a_retry_storm_after_the_last_heal_is_a_liveness_failure() -> None:
    assert run(STORM, 1, ()).ok
    out = run(STORM, 1, ("commit-without-majority",))
    assert "message-storm" in {w["kind"] for w in out.witness}


def test_a_runaway_run_stops_at_its_event_cap_and_fails_the_same_way_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sim.play as play

    monkeypatch.setattr(play, "MAX_EVENTS", 20_000)  # the storm passes 100,000 too, slower
    sched = [*STORM[:-1], ["dup", 10, 4, 0], ["delay", 10, 0, 0], ["write", 400, 0, 0]]
    a = run(sched, 1, ("commit-without-majority",))
    assert "event-cap" in {w["kind"] for w in a.witness}
    assert a.sim_seconds < 5  # stopped long before the schedule's end
    assert run(sched, 1, ("commit-without-majority",)).trace == a.trace


def test_the_wall_time_cap_stops_a_run_between_events() -> None:
    from harness.sim.driver import RunCap
    from harness.sim.garlicfarm import GfSim

    sim = GfSim((1, 2, 3), seed=1)
    sim.cap(None, 0.0)
    with pytest.raises(RunCap, match="wall-time cap"):
        sim.run_for(600.0)


def _write_req() -> object:
    from harness.sim.garlicfarm import app_entry
    from nodes.garlicfarm.codec import MsgType, Request

    return Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=(app_entry(1),))


def test_ack_before_fsync_records_are_lost_by_a_crash_before_their_flush() -> None:
    from harness.sim.garlicfarm import GfSim

    sim = GfSim((1, 2, 3), seed=1, bugs=("ack-before-fsync",))
    lead = sim.wait_leader()
    f = next(i for i in (1, 2, 3) if i != lead)
    sim.client_request(lead, _write_req())
    sim.run_for(0.05)
    assert sim.nodes[f].unsynced  # the entry: acknowledged, not fsynced
    sim.crash(f)
    sim.restart(f)
    sim.run_for(0.01)
    assert ("lost-unsynced", f) in {(t[1], t[2]) for t in sim.trace if len(t) > 2}
    sim.run_for(GfSim.DEFERRED_FLUSH_S * 2)
    assert not sim.nodes[f].unsynced and sim.nodes[f].durable  # flushed in time


def test_ack_before_fsync_is_found_where_the_correct_node_survives() -> None:
    s = [["restart", 320, 0, 1], ["partition", 0, 0, 0], ["restart", 0, 0, 2]]
    assert run(s, 2, ()).ok
    assert not run(s, 2, ("ack-before-fsync",)).ok
