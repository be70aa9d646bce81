"""The ``hostile`` kind of SWIM's schedules: nodes.swim.hostile's datagrams (extreme
generations, forged senders, replays, truncation) sent through the simulated network reach the
real core, which refuses them; a correct group survives a bounded search with them."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.sim.search import search
from harness.sim.swim import SwimSim
from harness.sim.swim_search import KINDS, OPTS, TARGET, N, hostile_burst, run

pytestmark = pytest.mark.sim


def test_a_burst_reaches_the_core_and_is_refused_by_it() -> None:
    sim = SwimSim(N, OPTS, seed=3)
    sim.run_for(10)
    before = dict(sim.cores[2].counters.refused)
    outsider = hostile_burst(sim, 2, 1)  # from an address no member has
    sim.run_for(0.1)
    mid = dict(sim.cores[2].counters.refused)
    assert outsider > 10
    assert mid.get("unknown-address", 0) - before.get("unknown-address", 0) >= outsider - 2
    gens = sim.cores[2].counters.refused_generations
    forged = hostile_burst(sim, 2, 2)  # from a member's address, naming it as sender
    sim.run_for(0.1)
    after = sim.cores[2].counters
    assert forged >= 6
    # the deeper checks met them: implausible generations, a Leave for another, a guessed ack
    assert after.refused_generations > gens
    assert after.refused.get("origin-mismatch", 0) + after.refused.get("ack-seq", 0) > \
        mid.get("origin-mismatch", 0) + mid.get("ack-seq", 0)
    # undecodable datagrams (truncated, garbage, oversize) are dropped as the runtime drops them
    assert b'"undecodable"' in sim.trace_bytes()


def test_a_hostile_schedule_runs_the_same_byte_for_byte() -> None:
    s = [["hostile", 10, 0, 1], ["partition", 100, 0, 3], ["hostile", 50, 2, 0]]
    a, b = run(s, 5, ()), run(s, 5, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and b'"hostile"' in a.trace


def test_hostile_is_drawn_only_when_asked() -> None:
    assert "hostile" not in KINDS and TARGET.optional == ("hostile", "skew")
    with pytest.raises(ValueError, match="no optional kind"):
        search(TARGET, 1, (), 5.0, runs=1, extra=("clock",))


def test_correct_swim_survives_a_bounded_hostile_search(capsys, tmp_path) -> None:
    assert main(["sim", "run", "swim", "--hostile", "--seed", "1", "--runs", "25",
                 "--out", str(tmp_path / "r.json")]) == 0
    assert "no failing schedule" in capsys.readouterr().out
    # an optional kind the protocol lacks is bad input (every protocol has hostile now)
    assert main(["sim", "run", "swim", "--members", "--runs", "1"]) == 254
