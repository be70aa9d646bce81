"""The ``hostile`` kind of Garlic Farm's schedules (nodes/garlicfarm/hostile.py): cut, garbage
and stranger-sender messages are dropped or refused without harm; a term of 2^64-1 on a
member's link is an open robustness bug the search finds in one step (docs/sim.md): the
follower takes the term and its next election asks for a term the codec cannot encode. When it
is fixed, the last test flips: the burst must then leave the cluster live."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.sim.gf_search import KINDS, TARGET, run
from nodes.garlicfarm import codec, hostile

pytestmark = pytest.mark.sim


def test_a_burst_holds_every_kind_once_and_the_cut_ones_do_not_decode() -> None:
    burst = list(hostile.messages(random.Random(1), 2, (1, 2, 3, 4, 5)))
    kinds = [k for k, _, _ in burst]
    assert set(kinds) >= hostile.OUTSIDER | {"vote-max-term", "append-max-term", "replay"}
    assert all(link[1] in (1, 3, 4, 5) for _, link, _ in burst)  # forged from another member
    cut = next(d for k, _, d in burst if k == "truncated")
    with pytest.raises(codec.CodecError):
        codec.decode(cut)


def test_what_any_sender_can_make_leaves_the_cluster_safe_and_live() -> None:
    s = [["hostile", 10, 1, 0], ["hostile", 200, 1, 2], ["write", 10, 0, 0]]
    a, b = run(s, 2, ()), run(s, 2, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and a.trace.count(b'"hostile"') >= 8


REPLAY = Path(__file__).parent / "data" / "gf_hostile_max_term.json"


def test_the_shrunk_max_term_failure_now_replays_live_with_the_burst_refused(capsys) -> None:
    rec = json.loads(REPLAY.read_text())
    assert rec["schedule"] == [["hostile", 0, 0, 0]] and rec["witness"][0]["kind"] == "node-exception"
    out = run(rec["schedule"], rec["seed"], tuple(rec["bug"]))
    assert out.ok, out.witness
    assert b'"refused"' in out.trace and b'"counter-out-of-range"' in out.trace
    # the file holds the failing run's trace: the replay says it no longer matches, and passes
    assert main(["sim", "replay", str(REPLAY)]) == 2
    assert "witness (0 anomalies)" in capsys.readouterr().out


def test_the_same_burst_still_fails_with_no_term_bound() -> None:
    rec = json.loads(REPLAY.read_text())
    out = run(rec["schedule"], rec["seed"], ("no-term-bound",))
    assert "node-exception" in {w["kind"] for w in out.witness}


def test_hostile_is_optional_and_the_search_finds_nothing_at_seed_1(tmp_path, capsys) -> None:
    assert "hostile" not in KINDS and TARGET.optional == ("hostile", "skew")
    f = tmp_path / "h.json"
    assert main(["sim", "run", "garlicfarm", "--hostile", "--seed", "1", "--runs", "300",
                 "--out", str(f)]) == 0
    assert "no failing schedule found" in capsys.readouterr().out and not f.exists()


REJOINER = Path(__file__).parent / "data" / "gf_rejoiner_campaigns.json"


def test_a_server_invited_back_and_cut_off_no_longer_deposes_every_leader(capsys) -> None:
    """Found by `harness sim run garlicfarm --budget 600s --seed 11` on the correct core: a
    removed server invited back (its join then abandoned) campaigned on its stale
    configuration, and every leader stepped down to its terms (no leader 3 s after the last
    heal). Fixed in `nodes.garlicfarm.raft` (``catching_up``)."""
    rec = json.loads(REJOINER.read_text())
    assert rec["bug"] == [] and rec["witness"][0]["kind"] == "no-leader-after-heal"
    out = run(rec["schedule"], rec["seed"], ())
    assert out.ok, out.witness
    assert main(["sim", "replay", str(REJOINER)]) == 2  # the file holds the failing trace
    assert "witness (0 anomalies)" in capsys.readouterr().out


DEPOSED = Path(__file__).parent / "data" / "gf_deposed_leader_idle.json"


def test_a_leader_deposed_by_a_vote_it_refuses_campaigns_again(capsys) -> None:
    """Found by `harness sim run garlicfarm --hostile --skew --budget 600s --seed 12` on the
    correct core (the shrunk schedule holds neither kind): two removals leave the leader alone
    with the longest log; a candidate with a shorter log deposes it by RequestVote, and its
    election timer, lapsed while it led, was never armed again: no leader for good. Fixed in
    `nodes.garlicfarm.raft` (``_on_vote``)."""
    rec = json.loads(DEPOSED.read_text())
    assert rec["bug"] == [] and rec["witness"][0]["kind"] == "no-leader-after-heal"
    out = run(rec["schedule"], rec["seed"], ())
    assert out.ok, out.witness
    assert main(["sim", "replay", str(DEPOSED)]) == 2  # the file holds the failing trace
    assert "witness (0 anomalies)" in capsys.readouterr().out


def test_a_rejoiner_that_restarts_still_does_not_campaign(capsys) -> None:
    """Found by `harness sim run garlicfarm --budget 600s --seed 21` with the two fixes above:
    the rejoiner crashed, and its in-memory ``catching_up`` went with it while ``removed`` had
    been cleared by the invitation. ``removed`` now stays until a committed configuration
    names the server."""
    f = Path(__file__).parent / "data" / "gf_rejoiner_restarts.json"
    rec = json.loads(f.read_text())
    assert rec["witness"][0]["kind"] == "no-leader-after-heal"
    assert run(rec["schedule"], rec["seed"], ()).ok
    assert main(["sim", "replay", str(f)]) == 2
    assert "witness (0 anomalies)" in capsys.readouterr().out
