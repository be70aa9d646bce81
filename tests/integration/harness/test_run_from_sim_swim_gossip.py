"""``harness run --from FILE`` for SWIM's ``gossip-too-slow`` finding: the sim's search finds
``no-gossip-retransmit`` at seed 4 (a member leaves; after the last heal it rejoins in a quiet
stretch and its gossip reaches the last member only from its own fourth probe), and the real
run of that file fails the membership checker's dissemination leaf on that member's rejoin
(the real run samples that quiet rejoin three times, each judged at the sim's bound or, lower,
half a period under the joiner's own-probe floor: `realrun.swim_gossip_bound`); the same file
with the bug off passes with every sample judged. Two real runs of about 60 s each: nightly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.sim.realrun import SWIM_GOSSIP_SAMPLES
from tests.integration.harness.test_run_from_sim import found, real

pytestmark = pytest.mark.chaos


def dissemination(run: Path) -> dict[str, Any]:
    """The run's ``membership.dissemination`` result."""
    r = json.loads((run / "results.json").read_text())["result"]
    (m,) = [c for c in r["children"] if c["checker"] == "membership"]
    (d,) = [c for c in m["children"] if c["checker"] == "dissemination"]
    return d


def rejoins(d: dict[str, Any], joiner: str, gen: int) -> list[float | None]:
    """Periods each judged rejoin of ``joiner`` from generation ``gen`` on took to reach
    everyone (None: never reached everyone): the sim's quiet rejoin, sampled
    `realrun.SWIM_GOSSIP_SAMPLES` times."""
    got = [j["periods"] for j in d["stats"]["joins_judged"]
           if j["node"] == joiner and j["gen"] >= gen]
    assert len(got) == SWIM_GOSSIP_SAMPLES, d["stats"]
    return got


def test_swim_gossip_too_slow_is_confirmed_and_the_correct_node_passes(tmp_path: Path) -> None:
    replay = found(tmp_path, "swim", "no-gossip-retransmit", 4)
    sim = json.loads(replay.read_text())
    (w,) = sim["witness"]
    assert w["kind"] == "gossip-too-slow", w
    joiner, gen = w["witness"]["joiner"], w["witness"]["gen"]

    said, run, test = real(replay, tmp_path / "bug")
    assert test["node_options"]["period_s"] == 1.0  # the sim's period, so periods compare
    # the sim's 3.48, under the joiner's own-probe floor of 3 periods at 5 members
    bound = test["options"]["swim_max_dissemination_periods"]
    assert bound == 2.5
    assert "CONFIRMED on real processes: the real run failed (membership.dissemination)" in \
        said, said[-3000:]
    slow = rejoins(dissemination(run), joiner, gen)
    assert any(x is None or x > bound for x in slow), slow  # a rejoin of the finding's failed

    correct = tmp_path / "correct.json"
    correct.write_text(json.dumps({**sim, "bug": []}))
    said, run, test = real(correct, tmp_path / "ok")
    assert test["bugs"] == []
    assert "NOT confirmed: the real run passed every checker" in said, said[-3000:]
    d = dissemination(run)
    fast = rejoins(d, joiner, gen)
    assert d["valid"] is True and all(x is not None and x <= bound for x in fast), d
