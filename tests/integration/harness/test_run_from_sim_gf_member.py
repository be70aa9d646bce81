"""``harness run --from FILE`` for Garlic Farm's ``unsafe-config-change`` finding: the sim's
search finds it at seed 1 (the leader isolated, then the removal of server 1 reaches the
leader elected next before its term's first entry commits; it appends the configuration
anyway), and the real run of that file fails ``raft.membership-safety`` the same way: the
``remove-server`` op (harness/gf_remove.py) watches for the next leader from the isolation
on, asks it the moment it is seen, with its links to the members but the removed one cut
until the change is appended. The same file with the bug off passes, the removal refused
until the new leader's entry commits and then taken. Real timing decides whether the watch
sees the leader before its first entry commits, and whether it keeps leading through the
hold: 8 of 11 runs in session 43 at load 21-35 (4 of 5 after the kept-partition fix; each
miss a plain pass, docs/sim.md), so the test asks for 2 of 5 confirmations; each real run is
35-60 s: nightly (4 min in all at load 30)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness.test_run_from_sim import found, real

pytestmark = pytest.mark.chaos

RUNS = 5


def removal(run: Path) -> dict[str, Any]:
    """The completion value of the run's one ``remove-server`` op (no error)."""
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    (done,) = [o for o in ops if o["process"] == "nemesis" and o["f"] == "remove-server"
               and o["type"] != "invoke"]
    assert "error" not in done, done
    return done["value"]


def membership(run: Path) -> dict[str, Any]:
    r = json.loads((run / "results.json").read_text())["result"]
    (raft,) = [c for c in r["children"] if c["checker"] == "raft"]
    (m,) = [c for c in raft["children"] if c["checker"] == "membership-safety"]
    return m


def test_unsafe_config_change_is_confirmed_and_the_correct_node_passes(tmp_path: Path) -> None:
    replay = found(tmp_path, "garlicfarm", "unsafe-config-change", 1)
    sim = json.loads(replay.read_text())
    assert {w["kind"] for w in sim["witness"]} >= {"config-change-before-term-commit"}

    confirmed = []
    for i in range(RUNS):
        said, run, _ = real(replay, tmp_path / f"bug{i}")
        v = removal(run)
        assert v["next_leader"] and v["accepted"], v
        if "CONFIRMED on real processes: the real run failed (raft.membership-safety)" in said:
            kinds = {a["kind"] for a in membership(run)["anomalies"]}
            assert "config-change-before-term-commit" in kinds, kinds
            assert v["held"]["leader"] == v["attempts"][0][0], v  # the leader asked, held
            confirmed.append(i)
        else:
            # a miss is the watch seeing the leader too late, never another failure
            assert "NOT confirmed: the real run passed every checker" in said, said[-3000:]
    assert len(confirmed) >= 2, f"confirmed in {confirmed} of {RUNS} runs"

    correct = tmp_path / "correct.json"
    correct.write_text(json.dumps({**sim, "bug": []}))
    said, run, _ = real(correct, tmp_path / "ok")
    assert "NOT confirmed: the real run passed every checker" in said, said[-3000:]
    v = removal(run)
    # the removal was made, after the new leader had committed an entry of its term
    assert v["accepted"] and membership(run)["valid"] is True, v
    res = json.loads((run / "results.json").read_text())["result"]
    (f,) = [c for c in res["children"] if c["checker"] == "faults"]
    assert f["valid"] is True and f["stats"]["applied"].get("membership") == 1, f
