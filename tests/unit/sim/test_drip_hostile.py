"""The ``hostile`` kind of DRiP's schedules: nodes.drip.hostile's requests (the real fault's
builders) reach a node's real pre-core checks (nodes.drip.admit.Gate) and then its core, as
from a compromised member; issue 26's planted modes are each found by a short schedule that
the correct mesh passes; a hostile run replays byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.sim.drip_search import KINDS, TARGET, _Run, run
from harness.sim.play import play
from nodes.drip.seen import SEEN_WINDOW, Seen

pytestmark = pytest.mark.sim


def _outcomes(trace: list) -> dict[str, object]:
    """kind -> the gate's refusal reason or the core's HTTP status."""
    out: dict[str, object] = {}
    for r in trace:
        if r[1] == "hostile-refused" and r[3]:
            out[r[3]] = r[4]
        elif r[1] == "hostile-answer":
            out[r[3]] = r[4]
    return out


def test_a_burst_meets_the_gate_then_the_core() -> None:
    r = _Run(1, ())
    sim = r.sim
    r.update("n1", "k0")
    sim.run_for(0.5)
    assert sim.hostile_burst("n1", 2) == 20  # one request per kind, floods twice
    sim.run_for(1.0)
    got = _outcomes(sim.trace)
    # refused by the gate (the server's checks), as a real node refuses them
    assert got["tls-no-client-cert"] == "no-client-cert"
    assert got["voting-unknown-node"] == "bad-token"  # no key for a stranger
    for kind in ("deep-json", "lone-surrogate-key", "budget-non-ascii-digits",
                 "heartbeat-5000-members", "commit-version-2^63-1", "commit-version-2^64",
                 "voting-reset"):
        assert got[kind] == "malformed", kind
    # answered by the core
    assert got["commit-without-vote"] == got["commit-other-initiator"] == 409
    assert got["revote-applied"] == 409  # u0, applied everywhere
    assert got["sync-unsolicited"] == 409 and got["commit-other-initiator:setup"] == 200
    # refused from the head and the core's state, before the token (nodes/drip/admit.py)
    assert got["sync-request-flood"] == "sync-not-needed"
    assert got["voting-counter-near-max"] == "counter-window"
    assert sim.hostile_refused["n1"]["unproven-vote"] == 3  # the forged voters, one each
    assert {"commit-without-vote", "sync-unsolicited"} <= set(sim.core("n1").refusals.snapshot())
    skipped = {(x[3], x[4]) for x in sim.trace if x[1] == "hostile-skipped"}
    assert skipped == {("slow-connection", "peer"), ("slow-connection", "client"),
                       ("idle-partial-head", "client"), ("lone-surrogate-key", "client"),
                       ("oversize-value", "client")}
    final = r.update("n1", "k0")
    sim.run_for(1.0)
    assert sim.committed(final)


def test_a_hostile_schedule_runs_the_same_byte_for_byte() -> None:
    s = [["hostile", 10, 1, 0], ["update", 5, 0, 1], ["cut", 100, 0, 3], ["hostile", 3, 0, 2]]
    a, b = run(s, 5, ()), run(s, 5, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and a.trace.count(b'"hostile"') >= 30


@pytest.mark.parametrize(("bug", "schedule", "anomaly"), [
    ("ignore-counter-window", [["hostile", 0, 0, 0]], "counter-out-of-window"),
    ("apply-unvoted-commits", [["hostile", 0, 0, 0]], "commit-without-vote"),
    ("learn-heartbeat-members", [["hostile", 0, 0, 0]], "ghost-member"),
    ("apply-unsolicited-sync", [["hostile", 0, 0, 0]], "sync-unsolicited"),
    # n3 cut off: n2 holds n1's vote open while it waits on n3, and the attacker, with
    # n2's key, answers n1 for it listing every member as a voter
    ("trust-relayed-voters", [["isolate", 0, 2, 2], ["update", 0, 0, 0], ["hostile", 20, 0, 0]],
     "forged-voters"),
    # for the lying mode the burst's own update at n1 is the open vote (n3 cut off)
    ("trust-relayed-voters", [["isolate", 0, 2, 2], ["hostile", 0, 0, 0]], "forged-voters"),
    # the version 2^63-1 commit passes the lifted bound and travels on between the nodes
    ("no-version-bound", [["hostile", 0, 0, 0]], "version-out-of-bounds"),
])
def test_each_hostile_bug_mode_is_found_and_the_correct_mesh_passes(
        bug: str, schedule: list, anomaly: str) -> None:
    bad = run(schedule, 1, (bug,))
    assert not bad.ok and anomaly in {w.get("kind") for w in bad.witness}, bad.witness
    good = run(schedule, 1, ())
    assert good.ok, good.witness


def test_a_far_ahead_counter_of_a_key_holder_does_not_silence_its_member_after_a_restart(
        ) -> None:
    """Found by ``harness sim run drip --hostile --seed 2``: n2 took n1's far-ahead voting
    (signed with n1's key), crashed and restarted with it as n1's saved counter; every real
    update of n1's was then a repeat there ("no vote from n2") for good."""
    s = [["hostile", 0, 0, 1], ["cut", 128, 0, 0], ["crash", 0, 0, 1]]
    o = run(s, 2, ())
    assert o.ok, o.witness


def test_a_far_ahead_counter_does_not_silence_its_member_at_a_node_it_does_not_heartbeat(
        ) -> None:
    """Found by ``harness sim run drip --hostile --seed 2`` (and seed 1) after the fix above:
    the far-ahead voting n2 took in n1's name floods to n3, which restarts; n3 hears no
    heartbeat of n1's (not its peer), so no rebase helps there: what keeps n1's real votings
    new is that n3 saved the counters it saw, not the highest (nodes.drip.seen)."""
    o = run([["hostile", 0, 0, 1], ["cut", 4, 0, 0], ["crash", 0, 0, 2]], 2, ())
    assert o.ok, o.witness


def test_the_floor_moves_back_to_the_members_own_word_only_far_below_it() -> None:
    far = 2**19
    seen = Seen({"n1": (far, None, None)})  # as loaded after a restart: all <= far count as seen
    assert seen.before("n1", 7, False)
    assert not seen.rebase("n1", far - SEEN_WINDOW)  # within reach: nothing moves
    assert seen.before("n1", 8, False)
    assert not seen.rebase("n1", 6)  # the member says 6: what lifted the floor was not it
    assert not seen.before("n1", 7, False) and seen.before("n1", 7, False)
    assert seen.before("n1", 5, False) and seen.row("n1")[:3] == ("n1", far, None)


def test_correct_drip_survives_a_bounded_hostile_search(capsys, tmp_path) -> None:
    assert "hostile" not in KINDS and "hostile" in TARGET.optional
    assert TARGET.needs["trust-relayed-voters"] == ("hostile",)
    f = tmp_path / "r.json"
    assert main(["sim", "run", "drip", "--hostile", "--seed", "1", "--runs", "6",
                 "--out", str(f)]) == 0
    assert "no failing schedule" in capsys.readouterr().out and not f.exists()


def test_a_message_forged_in_the_receivers_own_name_is_refused_across_a_restart() -> None:
    """Found by `harness sim run drip --hostile --budget 600s --seed 22`: a burst at n1 in n2's
    name (n2's key stolen) flooded round to n2 itself, which took counters it never sent; its
    own row saves only its counter, so after a restart it took them again (propagated-twice).
    A node now refuses a counter in its own name above the one it has sent."""
    rec = json.loads((Path(__file__).parent / "data" / "drip_forged_own_counter.json")
                     .read_text())
    assert rec["bug"] == [] and rec["witness"][0]["kind"] == "propagated-twice"
    assert run(rec["schedule"], rec["seed"], ()).ok
    r = _Run(rec["seed"], ())
    play(r.sim, rec["schedule"], r.step, ids=r.ids, latency=0.001, settle=r.progress,
         finish=r.play_out)
    assert r.sim.core("n2").refusals.snapshot().get("forged-own-counter", 0) >= 2


def test_a_refused_commit_does_not_move_the_counter_window() -> None:
    """Found by `harness sim run drip --hostile --budget 600s --seed 21`: n2 had never heard
    n1 when a burst in n1's name came; a commit refused for want of a vote had recorded its
    far-ahead counter first (journaled nowhere), so a vote far ahead of every counter n2
    had journaled taking was then inside the window (counter-out-of-window). A commit or a
    vote is refused before its counter counts."""
    rec = json.loads((Path(__file__).parent / "data" / "drip_refused_commit_moves_window.json")
                     .read_text())
    assert rec["bug"] == [] and rec["witness"][0]["kind"] == "counter-out-of-window"
    out = run(rec["schedule"], rec["seed"], ())
    assert out.ok, out.witness
