"""The ``hostile`` fault on real processes: protocol-made bad datagrams to every node's own
port (faults/hostile.py) while the group is partitioned and healed; the group must stay valid
and every node must have refused something (the run's test.json says "sent N, refused M").

SWIM only for now: SDS's node still accepts some of its hostile messages (issue 24), so its
provider has unit tests and no chaos test yet.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from faults import schedules as sch
from harness.nemesis_generator import from_schedule
from harness.spec import TestSpec
from harness.suites.swim import PROTOCOL as SWIM

FAST = {"period_s": 0.2, "probe_timeout_s": 0.1, "suspicion_mult": 4}


@pytest.mark.chaos
@pytest.mark.smoke
def test_swim_hostile_with_partition_stays_valid(chaos_run: Any) -> None:
    steps = sch.explicit([
        (1.0, sch.op("start-hostile", {"interval_s": 0.5})),
        (2.0, sch.op("start-partition", {"shape": "halves"})), (4.0, sch.op("stop-partition")),
        (4.0, sch.op("stop-hostile")),
    ])
    spec = TestSpec(name="swim-hostile", protocol=SWIM, nodes=5, concurrency=5,
                    nemesis=from_schedule(steps), nemesis_desc="hostile,partition",
                    time_limit=14, quiesce_s=4, options=dict(FAST), seed=11)
    res = chaos_run(spec, min_ok=1)  # SWIM's only client op: the clock-sync
    hostile = json.loads(res.run_dir.test_json.read_text())["hostile"]
    assert sorted(hostile) == [f"n{i}" for i in range(1, 6)]
    for node, h in hostile.items():
        assert h["sent"] >= 5 * 17, (node, h)  # every kind, at least 5 bursts
        assert h["refused_total"] and h["refused_total"] > 0, (node, h)
