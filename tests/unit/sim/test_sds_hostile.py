"""The ``hostile`` kind of SDS's schedules: nodes.sds.hostile's datagrams (a Lamport time of
2^64-1, a 50,000-character id, unknown senders, datagram-filling histories and repair lists,
an all-ones bloom, a replay, truncation, garbage) from an address outside the channel reach
the real core, which refuses them; a correct channel survives a bounded search with them."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.sim.sds_search import KINDS, TARGET, _Run, hostile_burst, run

pytestmark = pytest.mark.sim


def test_a_burst_reaches_the_core_and_is_refused_by_it() -> None:
    r = _Run(1, ())
    sent = hostile_burst(r.sim, "n1", 0)
    r.sim.run_for(1)
    snap = r.sim.cores["n1"].snapshot(1000)
    assert sent == 10  # every kind of nodes.sds.hostile.INTENT, the replay twice
    assert {"history-too-long", "id-too-long", "repair-requests-over-limit",
            "bloom-from-unknown-sender"} <= set(snap["refused"])
    assert snap["counters"]["wire_errors"] == 2  # the truncated and the garbage datagrams
    r2 = _Run(1, ())
    assert hostile_burst(r2.sim, "n1", 1) == 8  # only those that decode
    r2.sim.run_for(1)
    assert r2.sim.cores["n1"].snapshot(1000)["counters"]["wire_errors"] == 0


def test_a_hostile_schedule_runs_the_same_byte_for_byte() -> None:
    s = [["hostile", 10, 0, 1], ["send", 10, 0, 1], ["partition", 100, 0, 3],
         ["hostile", 50, 1, 0]]
    a, b = run(s, 5, ()), run(s, 5, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and a.trace.count(b'"hostile"') >= 18


def test_correct_sds_survives_a_bounded_hostile_search(capsys, tmp_path) -> None:
    assert "hostile" not in KINDS and TARGET.optional == ("hostile", "skew", "gone")
    f = tmp_path / "r.json"
    assert main(["sim", "run", "sds", "--hostile", "--seed", "1", "--runs", "25",
                 "--out", str(f)]) == 0
    assert "no failing schedule" in capsys.readouterr().out and not f.exists()
