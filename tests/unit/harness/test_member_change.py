"""A membership change retried as an operator tool would (harness/member_change.py), and the
runner playing the cluster's retries as ops of their own (harness/runner.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harness import generators as g
from harness.member_change import (
    BACKOFF_MAX_S,
    MIN_ATTEMPT_S,
    Attempt,
    MemberChange,
    in_effect,
    outcome_of,
)
from harness.nemesis_generator import from_schedule
from harness.runner import _NoProgress, _Run
from harness.spec import TestSpec, Workload
from vocabulary.history import HistoryWriter, pairs, read_history


def failed(n: int, via: str, status: int | None = 409) -> Attempt:
    return Attempt(n, via, float(n), outcome_of(status), status, "no vote from ['n2']")


def test_a_refused_change_is_retried_at_another_member_with_backoff() -> None:
    ch = MemberChange("decommission", "n4")
    assert ch.uid == "decommission-n4"
    assert ch.next_via(["n1", "n2", "n3"]) == "n1"
    ch.record(failed(1, "n1"))
    assert ch.outcome is None and ch.uid == "decommission-n4-2"
    assert ch.next_via(["n1", "n2", "n3"]) == "n2"  # not the member that just failed
    waits = [ch.retry_in(0.0, 100.0)]
    for i, via in enumerate(["n2", "n3", "n1", "n2"], start=2):
        ch.record(failed(i, via, 503 if i % 2 else None))
        waits.append(ch.retry_in(0.0, 100.0))
    assert waits == [0.5, 1.0, 2.0, 4.0, BACKOFF_MAX_S]
    assert ch.next_via(["n1", "n2", "n3"]) == "n3"  # the one asked longest ago
    ch.record(Attempt(6, "n3", 6.0, "committed", 200))
    assert ch.outcome == "committed" and ch.retry_in(0.0, 100.0) is None
    assert [a["via"] for a in ch.to_json()["attempts"]] == ["n1", "n2", "n3", "n1", "n2", "n3"]


def test_no_retry_for_a_bad_request_nor_near_the_time_limit() -> None:
    bad = MemberChange("add-member", "n5")
    bad.record(failed(1, "n1", 400))
    assert bad.outcome == "refused" and bad.retry_in(0.0, 100.0) is None
    late = MemberChange("add-member", "n5")
    assert late.uid == "add-n5"
    late.record(failed(1, "n1", 504))
    assert late.retry_in(10.0, 10.0 + MIN_ATTEMPT_S) is None and late.outcome == "gave-up"
    still = MemberChange("decommission", "n4")
    still.close()
    assert still.outcome == "gave-up"


def test_in_effect_reads_a_members_agreed_membership() -> None:
    assert in_effect("decommission", "n4", ["n1", "n2", "n3"])
    assert not in_effect("decommission", "n4", ["n1", "n4"])
    assert in_effect("add-member", "n5", ["n1", "n5"])
    assert not in_effect("add-member", "n5", None)


class Operator:
    """A cluster whose membership change fails twice, then commits; the heal it needs is an
    op of the same nemesis, played between the retries."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.tries = 0

    async def nemesis_invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(op["f"])
        if op["f"] != "decommission":
            return {**op, "type": "info"}
        self.tries += 1
        if self.tries < 3:
            return {**op, "type": "info", "value": {"node": "n4", "attempt": self.tries},
                    "error": "409: aborted", "retry_in_s": 0.05}
        return {**op, "type": "info", "value": {"node": "n4", "attempt": 3,
                                                 "outcome": "committed"}}


def test_the_runner_plays_each_retry_as_its_own_op_between_others(tmp_path: Path) -> None:
    steps = [(0.0, {"f": "start-partition", "value": None}),
             (0.0, {"f": "decommission", "value": {"node": "n4"}}),
             (0.02, {"f": "stop-partition", "value": None})]
    spec = TestSpec(name="t", workload=Workload(client=None, generator=None, checkers={}), time_limit=2.0)
    h = HistoryWriter(tmp_path / "history.jsonl")
    cluster = Operator()
    run = _Run(spec, spec.workload, h, cluster, _NoProgress())  # type: ignore[arg-type]
    asyncio.run(run.nemesis_thread(g.time_limit(2.0, from_schedule(steps))))
    h.close()
    assert cluster.seen == ["start-partition", "decommission", "stop-partition",
                            "decommission", "decommission"]
    done = [p.complete for p in pairs(read_history(tmp_path / "history.jsonl").ops)
            if p.invoke["f"] == "decommission"]
    assert [d["value"]["attempt"] for d in done] == [1, 2, 3]
    assert done[0]["error"] == "409: aborted" and done[-1]["value"]["outcome"] == "committed"
