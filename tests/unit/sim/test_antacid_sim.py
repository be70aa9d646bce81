"""ANTACID on the simulator: the real core, the real XML codec, a primary and three replicas in
a DAG; a run with loss, a partition and a replica crash is valid for `checkers.csn_order`, each
planted bug mode is caught by the leaf meant for it, and the primary down is unavailability."""

from __future__ import annotations

import random

import pytest

from checkers import csn_order
from checkers.result import Result
from harness.sim.antacid import AntacidSim, topology


def workload(sim: AntacidSim, rounds: int = 10, *, faults: bool = True) -> Result:
    servers = list(sim.topo.servers)
    for i in range(rounds):
        node = servers[i % len(servers)]
        if node in sim.down:
            node = "r2"  # partitioned from the primary: propagation waits for the heal
        sim.submit(node, (f"blocks:z.k{i % 3}", f"v{i}", "write"),
                   (f"blocks:z.g{i}", f"w{i}", "write"))
        sim.run_for(0.3)
        sim.read(servers[(i + 1) % len(servers)])
        if faults and i == 2:
            sim.partition(["p", "r1"], ["r2", "r3"])
            sim.crash("r3")
        if faults and i == 4:
            sim.heal()
            sim.boot("r3")
    sim.run_for(20)
    history = sim.finish()
    return csn_order.check(sim.test(), history, sim.observations())


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_a_faulty_run_is_valid(seed: int) -> None:
    sim = AntacidSim(seed=seed, loss=0.05, jitter_ms=5)
    r = workload(sim)
    assert r.valid is True, r.explain()
    assert r.find("acked-present").examined["acked"] >= 4
    assert r.find("group-atomic").examined["groups_compared"] > 0


@pytest.mark.parametrize(("bug", "node", "leaf"), [
    ("csn-reused", "p", "csn-order"),
    ("partial-group", "r2", "group-atomic"),
    ("skip-csn", "r1", "csn-order"),
])
def test_each_bug_mode_is_caught(bug: str, node: str, leaf: str) -> None:
    sim = AntacidSim(seed=3, bugs={node: [bug]})
    r = workload(sim, faults=False)
    assert r.find(leaf).valid is False, r.explain()


def test_duplicates_undetected_commits_a_submission_twice() -> None:
    sim = AntacidSim(seed=1, bugs={"p": ["duplicates-undetected"]}, call_timeout=0.05,
                     latency_ms=40)
    r = workload(sim, faults=False)
    assert r.find("no-double-commit").valid is False, r.explain()


def test_the_primary_down_is_unavailability() -> None:
    sim = AntacidSim(seed=2)
    sim.submit("r1", ("blocks:z.a", "1", "write"))
    sim.run_for(2)
    sim.crash("p")
    sim.submit("r2", ("blocks:z.b", "2", "write"))
    sim.run_for(20)
    r = csn_order.check(sim.test(), sim.finish(), sim.observations())
    assert not [c.checker for c in r.children if c.valid is False], r.explain()
    av = r.find("availability")
    assert av.valid == "unknown" and "primary p was down" in av.note, av.note


def test_an_unknown_bug_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ANTACID bug mode"):
        AntacidSim(bugs={"p": ["nope"]})


def chaos(seed: int) -> tuple[AntacidSim, Result]:
    """Random submissions and reads under loss, duplication, jitter, partitions and crashes
    of the primary and of replicas, each fault healed; then a long quiet period."""
    rng = random.Random(seed)
    sim = AntacidSim(seed=seed, loss=0.1, dup=0.05, jitter_ms=20)
    servers = list(sim.topo.servers)

    def up() -> list[str]:
        return [s for s in servers if s not in sim.down and sim.nodes[s].up]

    for i in range(15):
        if not up():
            sim.run_for(2)
        k = rng.randrange(4)
        sim.submit(rng.choice(up()), (f"blocks:z.k{k}", f"v{i}", "write"),
                   (f"blocks:z.k{(k + 1) % 4}", f"w{i}", "write"))
        sim.run_for(rng.uniform(0, 0.5))
        r, victim = rng.random(), rng.choice(servers)
        if r < 0.2 and victim in up():
            sim.crash(victim)
            sim.at(sim.now + 1.5, lambda v=victim: sim.boot(v))
        elif r < 0.3:
            sim.partition(["p", "r1"], ["r2", "r3"])
            sim.at(sim.now + 2, sim.heal)
        if up():
            sim.read(rng.choice(up()))
    sim.run_for(5)
    sim.heal()
    sim.run_for(60)
    return sim, csn_order.check(sim.test(), sim.finish(), sim.observations())


@pytest.mark.parametrize("seed", [1, 2, 5, 7, 24])  # each hung a submission before result_wait
def test_crashes_of_the_primary_leave_no_inconsistency_and_no_hung_submission(seed: int) -> None:
    sim, r = chaos(seed)
    assert not [c.checker for c in r.children if c.valid is False], r.explain()
    assert sim.of("commit") and sim.of("apply")
    # every submission got an outcome (a restarted primary's lost holds are offered again)
    assert [op for op in sim.history if op["type"] == "info"] == []


Z1, Z2 = "blocks:z", "blocks:z2"


def test_two_zones_put_their_primaries_apart_and_key_results_by_zone() -> None:
    """r2's first submission in each zone has SSN 1 in both (SSNs count per zone): a result
    keyed by the GlobalSubmitID alone would give the second the first's CSN."""
    sim = AntacidSim(seed=3, loss=0.05, jitter_ms=5, zones=2)
    assert {z: t.primary for z, t in sim.topos.items()} == {Z1: "p", Z2: "r1"}
    assert sim.topos[Z2].upstream == {"r2": ("r1",), "r3": ("r2", "r1"), "p": ("r3", "r1")}
    sim.submit("p", (f"{Z2}.a", "0", "write"))
    sim.run_for(0.5)
    first, second = (sim.submit("r2", (f"{z}.k", f"v-{z}", "write"),
                                (f"{z}.g", f"w-{z}", "write")) for z in (Z1, Z2))
    sim.partition(["p", "r1"], ["r2", "r3"])
    for i in range(6):
        z = (Z1, Z2)[i % 2]
        sim.submit(("p", "r1", "r3")[i % 3], (f"{z}.k{i % 3}", f"v{i}", "write"))
        sim.run_for(0.3)
        sim.read(("r1", "r3")[i % 2], z)
    sim.heal()
    sim.run_for(20)
    r = csn_order.check(sim.test(), sim.finish(), sim.observations())
    assert r.valid is True, r.explain()
    assert r.stats == {"zones": [Z1, Z2]}
    assert first["value"]["ssn"] == second["value"]["ssn"] == 1
    assert (first["type"], second["type"]) == ("ok", "ok")
    assert (first["value"]["zone"], second["value"]["csn"]) == (Z1, 3)
    state = sim.observations()["nodes"]["r3"]["state"]
    assert state["zones"][Z2]["docs"][f"{Z2}.g"] == {"content": f"w-{Z2}", "csn": 3}
    assert state["zones"][Z1]["docs"][f"{Z1}.g"]["csn"] == first["value"]["csn"]
    assert r.find("acked-present").examined["acked"] >= 8


def test_a_bug_in_one_zones_primary_is_caught_in_that_zone_only() -> None:
    sim = AntacidSim(seed=3, bugs={"r1": ["csn-reused"]}, zones=2)
    for i in range(8):
        z = (Z1, Z2)[i % 2]
        sim.submit(("p", "r1", "r2", "r3")[i % 4], (f"{z}.k{i % 3}", f"v{i}", "write"))
        sim.run_for(0.3)
    sim.run_for(20)
    r = csn_order.check(sim.test(), sim.finish(), sim.observations())
    bad = r.find("csn-order")
    assert bad.valid is False, r.explain()
    assert {a.witness["zone"] for a in bad.anomalies} == {Z2}


def test_zones_and_a_topology_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="either a topology"):
        AntacidSim(topo=topology(), zones=2)
    with pytest.raises(ValueError, match="at least one zone"):
        AntacidSim(zones=0)
