"""ANTACID under faults, through the harness: real nodes (ARS over BEEP), Toxiproxy links,
the ordering checker (``checkers/csn_order.py``) and the liveness checker.

Correct nodes must come out valid, with a minimum of ok submissions, every requested fault
applied and evidence in every leaf. Each bug mode must be caught by its exact ``csn-order``
leaf, and a correct-node control on the same seed and schedule must leave that leaf valid.
The primary killed for good is unavailability (``availability`` unknown), never an
inconsistency.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from faults import schedules as sch
from harness.nemesis_generator import from_schedule
from harness.pytest_plugin import record_run
from harness.spec import TestSpec
from harness.suites.antacid import PROTOCOL, _edges
from vocabulary.history import read_history

pytestmark = pytest.mark.chaos


def spec(name: str, nodes: int, shape: str = "chain", *, time_limit: float = 8.0,
         bugs: list[str] | None = None, options: dict[str, Any] | None = None,
         schedule: list[sch.Step] | None = None, seed: int = 7,
         kill_for_good: dict[str, float] | None = None) -> TestSpec:
    return TestSpec(name=name, protocol=PROTOCOL, nodes=nodes, topology=_edges(shape),
                    time_limit=time_limit, concurrency=3, bugs=list(bugs or []),
                    options={"pull_interval": 0.3, **(options or {})}, quiesce_s=5.0,
                    op_timeout=6.0, seed=seed, kill_for_good=dict(kill_for_good or {}),
                    nemesis=from_schedule(schedule) if schedule is not None else None,
                    nemesis_desc="explicit" if schedule is not None else "none")


def slow_links() -> list[sch.Step]:
    return sch.explicit([(0.5, sch.op("start-latency", {"ms": 20, "jitter_ms": 5})),
                         (3.0, sch.op("stop-latency"))])


def replica_kills(rounds: int = 2) -> list[sch.Step]:
    steps: list[sch.Step] = []
    for i in range(rounds):
        steps += [(1.0, sch.op("kill", {"node": f"n{3 + i}"})), (1.5, sch.op("restart"))]
    return sch.explicit(steps)


# ---- correct node: valid ------------------------------------------------------------------

@pytest.mark.smoke
def test_correct_chain_with_latency(chaos_run) -> None:
    chaos_run(spec("antacid-chain-latency", 4, schedule=slow_links()), min_ok=10)


def test_correct_diamond_replica_kills(chaos_run) -> None:
    chaos_run(spec("antacid-diamond-kills", 5, "diamond", time_limit=10.0,
                   schedule=replica_kills()), min_ok=10)


def test_correct_tree_partitions(chaos_run) -> None:
    steps = sch.explicit([(1.0, sch.op("start-partition", {"shape": "halves"})),
                          (2.0, sch.op("stop-partition"))] * 2)
    chaos_run(spec("antacid-tree-partitions", 6, "tree", time_limit=10.0, schedule=steps),
              min_ok=5)


def test_correct_two_zones_diamond_replica_kills(chaos_run) -> None:
    """Two zones (primaries n1 and n2, the diamond rooted at each), replicas killed: every
    zone judged apart and valid."""
    chaos_run(spec("antacid-two-zones-kills", 5, "diamond", time_limit=10.0,
                   options={"zone_count": 2}, schedule=replica_kills()), min_ok=10)


# ---- bug modes: caught by their leaf ------------------------------------------------------

@pytest.mark.smoke
def test_bug_csn_reused_is_caught(chaos_run) -> None:
    chaos_run(partial(spec, "antacid-bug-csn-reused", 3, bugs=["csn-reused"],
                      schedule=slow_links()),
              expect="csn-order.csn-order", anomaly="csn-conflict", min_ok=5)


def test_bug_csn_reused_is_caught_with_two_zones(chaos_run) -> None:
    chaos_run(partial(spec, "antacid-bug-csn-reused-zones", 3, bugs=["csn-reused"],
                      schedule=slow_links(), options={"zone_count": 2}),
              expect="csn-order.csn-order", anomaly="csn-conflict", min_ok=5)


def test_bug_skip_csn_is_caught(chaos_run) -> None:
    chaos_run(partial(spec, "antacid-bug-skip-csn", 4, bugs=["skip-csn"],
                      schedule=slow_links()),
              expect="csn-order.csn-order", anomaly="csn-gap", min_ok=5)


def test_bug_partial_group_is_caught(chaos_run) -> None:
    chaos_run(partial(spec, "antacid-bug-partial-group", 4, bugs=["partial-group"],
                      schedule=slow_links(), options={"read_every": 2}),
              expect="csn-order.group-atomic", anomaly="partial-group", min_ok=5)


# ---- the primary killed: unavailability, not inconsistency ----------------------------------

def test_primary_killed_is_unavailability_not_inconsistency(chaos_options, chaos_store,
                                                            chaos_toxiproxy, request) -> None:
    """The spec gives the primary no failover: while it is down, submissions get no commit
    outcome in time. ``availability`` counts those committed after its restart as resolved
    (``committed_late``) and is unknown, with the reason, for the rest; every safety leaf stays
    valid on what was committed."""
    from harness.runner import run

    steps = sch.explicit([(2.0, sch.op("kill", {"node": "n1"})), (3.0, sch.op("restart"))])
    s = spec("antacid-primary-killed", 4, time_limit=8.0, schedule=steps)
    chaos_options.apply(s)
    s.store = s.store or str(chaos_store)
    res = run(s, toxiproxy_url=chaos_toxiproxy)
    record_run(request.node, res.seed, res.run_dir.path)
    avail = res.result.find("csn-order.availability")
    # the primary back, a submission made while it was down either committed late (its
    # outcome known from the journals) or has none (unknown, with the reason): never False
    assert avail is not None and avail.valid is not False, avail
    assert avail.valid is True or "no commit outcome" in avail.note, avail.note
    # the outage was exercised: submissions made while n1 was down failed at n1 (no channel)
    # or waited at a replica and committed only once n1 was back (or had no outcome in time)
    from vocabulary.history import read_history

    ops = read_history(res.run_dir.history).ops
    down = next(o["time"] for o in ops if o.get("f") == "kill" and o["type"] != "invoke")
    back = next(o["time"] for o in ops if o.get("f") == "restart" and o["type"] == "invoke")
    inv = {}
    during = []
    for o in ops:
        if o.get("f") != "submit":
            continue
        if o["type"] == "invoke":
            inv[o["process"]] = o
        elif down < inv[o["process"]]["time"] < back:
            during.append(o)
    assert during, "no submission while the primary was down"
    early = [o for o in during if o["type"] == "ok" and o["time"] < back]
    assert not early, ("committed while the primary was down", early)
    assert any(o["type"] in ("ok", "fail") for o in during) or \
        avail.stats["committed_late"] + avail.stats["unresolved"] >= 1, avail.stats
    for leaf in ("csn-order", "ssn-order", "group-atomic", "acked-present", "no-double-commit",
                 "convergence"):
        r = res.result.find(f"csn-order.{leaf}")
        assert r is not None and r.valid is True, (leaf, r)
    assert res.result.find("faults").valid is True
    acked = res.result.find("csn-order.acked-present").examined["acked"]
    assert acked >= 5, acked


def test_primary_killed_for_good_is_unavailability_judged_on_the_replicas(
        chaos_options, chaos_store, chaos_toxiproxy, request) -> None:
    """The primary gone for good (``kill_for_good``: the final heal leaves it down), with a
    replica killed and restarted meanwhile: ``availability`` is unknown and says the primary
    was killed for good; every safety leaf and liveness are judged, valid, on the replicas
    alone (the gone primary owes no final state, so it is no evidence gap; n3, whose only
    upstream is n1, is not required to get CSNs it can no longer reach)."""
    from harness.runner import run

    steps = sch.explicit([(1.0, sch.op("kill", {"node": "n3"})), (1.0, sch.op("restart"))])
    s = spec("antacid-primary-gone", 4, "diamond", time_limit=8.0, schedule=steps,
             kill_for_good={"n1": 4.0})
    chaos_options.apply(s)
    s.store = s.store or str(chaos_store)
    res = run(s, toxiproxy_url=chaos_toxiproxy)
    record_run(request.node, res.seed, res.run_dir.path)
    heal = [op for op in read_history(res.run_dir.history).ops
            if op.get("f") == "heal-all" and op.get("type") == "info"][-1]
    assert heal["value"]["gone"] == ["n1"] and heal["value"]["restarted"] == [], heal
    assert (res.run_dir.path / "nodes/n1/gone.json").is_file()
    assert not (res.run_dir.path / "nodes/n1/state.json").exists()
    avail = res.result.find("csn-order.availability")
    assert avail is not None and avail.valid == "unknown", avail
    assert "primary n1 was killed for good" in avail.note, avail.note
    for leaf in ("csn-order", "ssn-order", "group-atomic", "acked-present", "no-double-commit",
                 "convergence"):
        r = res.result.find(f"csn-order.{leaf}")
        assert r is not None and r.valid is True, (leaf, r)
    assert res.result.find("csn-order.convergence").examined["nodes_with_state"] == 3
    live = res.result.find("liveness")
    assert live.valid is True and live.stats["live_nodes"] == ["n2", "n3", "n4"], live
    assert res.result.find("faults").valid is True
    acked = res.result.find("csn-order.acked-present").examined["acked"]
    assert acked >= 5, acked


def duplicate_chances(kills: int = 8) -> list[sch.Step]:
    """Slowed links (so a propagation is often in flight) and ``kills`` kills of the two
    submission servers below the primary, alternately, each restarted a second later: every
    kill that lands after the primary committed a propagation but before its answer arrived
    is one chance for a resubmission after restart (several per run, not one)."""
    steps: list[sch.Step] = [(0.5, sch.op("start-latency", {"ms": 150, "jitter_ms": 40}))]
    for i in range(kills):
        steps += [(0.6, sch.op("kill", {"node": ("n2", "n3")[i % 2]})), (0.6, sch.op("restart"))]
    return sch.explicit(steps + [(0.3, sch.op("stop-latency"))])


def test_bug_duplicates_undetected_is_caught(chaos_run) -> None:
    """A restarted submission server offers its pending submissions again, and a primary
    that ignores the SSNs it already committed commits them twice."""
    res = chaos_run(partial(spec, "antacid-bug-duplicates", 3, time_limit=12.0,
                            bugs=["duplicates-undetected"], schedule=duplicate_chances()),
                    expect="csn-order.no-double-commit", anomaly="committed-twice", min_ok=5)
    twice = res.result.find("csn-order.no-double-commit").anomalies
    print(f"committed twice: {len(twice)} GlobalSubmitIDs")
