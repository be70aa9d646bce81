"""The nemesis: completions record every decision; heal_all undoes everything."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from typing import Any

from faults import partitions as P
from faults.links import Flow, Kind
from faults.nemesis import Nemesis
from faults.schedules import RandomSchedule, default_kinds

NODES = ["n1", "n2", "n3", "n4", "n5"]


class FakeNodes:
    def __init__(self, leader: str | None = "n3") -> None:
        self.nodes = list(NODES)
        self.calls: list[tuple[str, str, Any]] = []
        self._leader = leader

    async def kill(self, node: str) -> None:
        self.calls.append(("kill", node, None))

    async def restart(self, node: str) -> None:
        self.calls.append(("restart", node, None))

    async def pause(self, node: str) -> None:
        self.calls.append(("pause", node, None))

    async def resume(self, node: str) -> None:
        self.calls.append(("resume", node, None))

    async def set_clock_offset(self, node: str, offset_s: float) -> None:
        self.calls.append(("clock", node, offset_s))

    async def set_clock_rate(self, node: str, rate: float) -> None:
        self.calls.append(("rate", node, rate))

    async def leader(self) -> str | None:
        return self._leader


class FakeLinks:
    """A LinkFaults backend keeping its active faults in a dict."""

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self.kinds = frozenset(kinds)
        self.active: dict[Kind, set[Flow]] = {}

    @property
    def links(self) -> frozenset[Flow]:
        return P.all_flows(NODES)

    async def apply(self, kind: Kind, flows: Iterable[Flow], **params: Any) -> list[Flow]:
        fl = set(flows)
        self.active.setdefault(kind, set()).update(fl)
        return sorted(fl)

    async def heal(self, kind: Kind | None = None,
                   flows: Iterable[Flow] | None = None) -> list[Flow]:
        healed: set[Flow] = set()
        for k in list(self.active):
            if kind is not None and k is not kind:
                continue
            take = self.active[k] if flows is None else self.active[k] & set(flows)
            healed |= take
            self.active[k] -= take
            if not self.active[k]:
                del self.active[k]
        return sorted(healed)


def make(seed: int = 1, **kw: Any) -> tuple[Nemesis, FakeNodes, FakeLinks]:
    nodes = FakeNodes(**kw)
    links = FakeLinks([Kind.CUT, Kind.LATENCY, Kind.BANDWIDTH, Kind.SLICER, Kind.RESET_PEER])
    return Nemesis(random.Random(seed), nodes, [links]), nodes, links


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_partition_completion_names_components_and_cut_flows() -> None:
    nem, _, links = make()
    op = {"process": "nemesis", "type": "invoke", "f": "start-partition",
          "value": {"shape": "halves"}}
    done = run(nem.invoke(op))
    assert done["type"] == "info" and done["process"] == "nemesis" and "error" not in done
    assert done["value"]["components"] == [["n1", "n2"], ["n3", "n4", "n5"]]
    assert done["value"]["cut"] == P.encode(P.halves(NODES))
    assert links.active[Kind.CUT] == P.halves(NODES)
    stop = run(nem.invoke({"f": "stop-partition", "value": None}))
    assert stop["value"]["healed"] == P.encode(P.halves(NODES))
    assert links.active == {}


def test_isolate_random_records_the_node_and_is_seeded() -> None:
    values = []
    for _ in range(2):
        nem, _, _ = make(seed=42)
        values.append(run(nem.invoke({"f": "start-partition",
                                      "value": {"shape": "isolate", "node": "random"}}))["value"])
    assert values[0] == values[1]
    node = values[0]["node"]
    assert [node] in values[0]["components"]


def test_second_partition_replaces_the_first() -> None:
    nem, _, links = make()
    run(nem.invoke({"f": "start-partition", "value": {"shape": "halves"}}))
    done = run(nem.invoke({"f": "start-partition", "value": {"shape": "bridge"}}))
    assert done["value"]["replaced"] == P.encode(P.halves(NODES))
    assert done["value"]["bridge"] == "n3"
    assert links.active[Kind.CUT] == P.bridge(NODES)[1]


def test_the_partition_in_force_asked_again_is_kept_without_a_heal_between() -> None:
    # a sim replay isolates the leader twice: the second must not let the node through for a
    # moment, nor cost a heal and a cut (on a loaded machine those took 0.6 s, past an election)
    nem, _, links = make()
    run(nem.invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n2"}}))
    healed: list[Any] = []
    real_heal = links.heal

    async def heal(kind: Kind | None = None, flows: Iterable[Flow] | None = None) -> list[Flow]:
        healed.append(kind)
        return await real_heal(kind, flows)

    links.heal = heal  # type: ignore[method-assign]
    done = run(nem.invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n2"}}))
    assert done["value"]["kept"] is True and "replaced" not in done["value"] and healed == []
    assert links.active[Kind.CUT] == nem.partition


def test_a_hold_cut_adds_to_the_partition_and_gives_back_only_its_own_flows() -> None:
    nem, _, links = make()
    run(nem.invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n2"}}))
    before = set(links.active[Kind.CUT])
    held = run(nem.hold_cut([("n1", "n2"), ("n1", "n3"), ("n3", "n1")]))
    assert held == [("n1", "n3"), ("n3", "n1")]  # n1-n2 was cut already
    assert links.active[Kind.CUT] == before | set(held)
    run(nem.release_cut(held + [("n1", "n2")]))
    assert links.active[Kind.CUT] == before and nem.partition == before


def test_one_way_and_explicit_partitions() -> None:
    nem, _, links = make()
    done = run(nem.invoke({"f": "start-partition",
                           "value": {"shape": "explicit", "cut": [["n1", "n2"]]}}))
    assert done["value"]["cut"] == [["n1", "n2"]]
    done = run(nem.invoke({"f": "start-partition",
                           "value": {"shape": "halves", "one_way": True}}))
    assert links.active[Kind.CUT] == P.halves(NODES, one_way=True)


def test_kill_leader_random_and_restart() -> None:
    nem, nodes, _ = make()
    done = run(nem.invoke({"f": "kill", "value": {"node": "leader"}}))
    assert done["value"]["nodes"] == ["n3"]
    done = run(nem.invoke({"f": "kill", "value": {"node": "random"}}))
    (second,) = done["value"]["nodes"]
    assert second != "n3"  # a random kill picks among live nodes
    done = run(nem.invoke({"f": "restart", "value": None}))
    assert done["value"]["nodes"] == sorted(["n3", second])
    assert [c[0] for c in nodes.calls] == ["kill", "kill", "restart", "restart"]


def test_a_node_killed_for_good_stays_down_through_the_heal() -> None:
    nem, nodes, _ = make()
    run(nem.invoke({"f": "kill", "value": {"node": "n2"}}))
    done = run(nem.invoke({"f": "kill", "value": {"node": ["n1", "n2"], "for_good": True}}))
    assert "error" not in done and done["value"]["nodes"] == ["n1", "n2"]
    assert nem.gone == {"n1", "n2"} and not nem.killed  # n2's plain kill became for good
    for _ in range(10):  # random kills and pauses pick among the others
        k = run(nem.invoke({"f": "kill", "value": {"node": "random"}}))
        assert set(k["value"]["nodes"]).isdisjoint({"n1", "n2"})
        run(nem.invoke({"f": "restart", "value": None}))
        p = run(nem.invoke({"f": "pause", "value": {"node": "random"}}))
        assert set(p["value"]["nodes"]).isdisjoint({"n1", "n2"})
    assert "killed for good" in run(nem.invoke({"f": "restart", "value": {"node": "n1"}}))["error"]
    nodes.calls.clear()
    out = run(nem.heal_all())
    assert out["gone"] == ["n1", "n2"] and out["restarted"] == [] and "errors" not in out
    assert not any(c[0] == "restart" for c in nodes.calls)


def test_follower_is_never_the_leader() -> None:
    for seed in range(20):
        nem, nodes, _ = make()
        nem.rng.seed(seed)
        done = run(nem.invoke({"f": "pause", "value": {"node": "follower"}}))
        (node,) = done["value"]["nodes"]
        assert node != "n3" and node in NODES


def test_no_leader_is_an_error_with_nothing_done() -> None:
    nem, nodes, _ = make(leader=None)
    done = run(nem.invoke({"f": "kill", "value": {"node": "leader"}}))
    assert "no leader" in done["error"] and nodes.calls == []


def test_unknown_op_and_unsupported_loss_complete_with_error() -> None:
    nem, _, _ = make()
    assert "unknown nemesis op" in run(nem.invoke({"f": "explode"}))["error"]
    done = run(nem.invoke({"f": "start-loss", "value": {"p": 0.5}}))
    assert done["type"] == "info" and "UDP relay" in done["error"]


def test_latency_on_given_links_one_way() -> None:
    nem, _, links = make()
    done = run(nem.invoke({"f": "start-latency",
                           "value": {"ms": 50, "links": [["n1", "n2"]], "one_way": True}}))
    assert done["value"]["flows"] == [["n1", "n2"]] and done["value"]["jitter_ms"] == 0
    assert links.active[Kind.LATENCY] == {("n1", "n2")}


def test_heal_all_undoes_everything() -> None:
    nem, nodes, links = make()
    for op in [{"f": "start-partition", "value": {"shape": "majorities-ring"}},
               {"f": "start-latency", "value": {"ms": 10}},
               {"f": "kill", "value": {"node": "n1"}},
               {"f": "pause", "value": {"node": ["n2", "n4"]}},
               {"f": "clock-skew", "value": {"node": "n5", "offset_s": -2.5}}]:
        assert "error" not in run(nem.invoke(op)), op
    nodes.calls.clear()
    out = run(nem.heal_all())
    assert links.active == {}
    assert out["restarted"] == ["n1"] and out["resumed"] == ["n2", "n4"]
    assert out["clocks-reset"] == ["n5"] and "errors" not in out
    assert ("clock", "n5", 0.0) in nodes.calls
    assert not (nem.killed or nem.paused or nem.skewed or nem.partition)
    assert run(nem.heal_all()) == {"links": [], "resumed": [], "restarted": [],
                                   "clocks-reset": []}


def test_heal_all_is_also_an_op_a_schedule_can_play() -> None:
    """A sim replay's last heal comes at its time in the schedule, not at the run's end: the
    ``heal-all`` op does what `heal_all` does and completes with what it undid."""
    nem, nodes, links = make()
    for op in [{"f": "start-partition", "value": {"shape": "isolate", "node": "n1"}},
               {"f": "pause", "value": {"node": "n3"}}]:
        assert "error" not in run(nem.invoke(op)), op
    done = run(nem.invoke({"f": "heal-all", "value": None}))
    assert done["type"] == "info" and "error" not in done, done
    assert done["value"]["resumed"] == ["n3"] and done["value"]["links"]
    assert links.active == {} and not (nem.paused or nem.partition)
    assert "heal-all" in nem.supported


def test_a_clock_rate_is_set_put_back_by_the_heal_and_refused_when_not_positive() -> None:
    nem, nodes, _ = make()
    done = run(nem.invoke({"f": "clock-rate", "value": {"node": "n2", "rate": 2}}))
    assert done["value"] == {"node": "n2", "rate": 2.0, "nodes": ["n2"]} and nem.rated == {"n2": 2.0}
    assert "must be positive" in run(nem.invoke({"f": "clock-rate",
                                                 "value": {"node": "n3", "rate": 0}}))["error"]
    run(nem.invoke({"f": "kill", "value": {"node": "n2", "for_good": True}}))
    nodes.calls.clear()
    out = run(nem.heal_all())
    # a node gone for good has no process to ask its offset of; its rate file is reset
    assert out["clocks-reset"] == ["n2"] and "errors" not in out
    assert nodes.calls == [("rate", "n2", 1.0)] and not nem.rated


def test_random_schedule_runs_through_the_nemesis_deterministically() -> None:
    def trace(seed: int) -> list[dict[str, Any]]:
        nem, _, _ = make(seed=seed)
        sched = RandomSchedule(default_kinds(NODES), seed=seed, count=10)
        return [run(nem.invoke(op)) for _, op in sched]

    t1, t2 = trace(5), trace(5)
    assert t1 == t2
    assert all("error" not in d for d in t1), [d for d in t1 if "error" in d]


def test_isolate_the_leader() -> None:
    nem, _, links = make()
    done = run(nem.invoke({"f": "start-partition",
                           "value": {"shape": "isolate", "node": "leader"}}))
    assert done["value"]["node"] == "n3" and ["n3"] in done["value"]["components"]
    assert links.active[Kind.CUT] == P.isolate(NODES, "n3")


def test_every_named_fault_runs_through_the_nemesis() -> None:
    from faults.hostile import HostileDef, HostileSender, Target
    from faults.schedules import named_kinds, stop_op

    nodes = FakeNodes()
    links = FakeLinks(list(Kind))
    quiet = HostileSender(HostileDef(lambda rng, targets: [], lambda state: {}),
                          [Target("n1", 1, "127.0.0.1", 9)], random.Random(0))
    nem = Nemesis(random.Random(3), nodes, [links], hostile=quiet)
    rng = random.Random(3)
    for name, kind in named_kinds(NODES).items():
        start = kind.make(rng)
        for o in (start, stop_op(start)):
            done = run(nem.invoke(o))
            assert "error" not in done, (name, done)
    assert links.active == {} and not (nem.killed or nem.paused or nem.skewed or nem.rated)


def test_on_a_sparse_topology_a_shape_that_severs_nothing_becomes_a_min_edge_cut() -> None:
    line = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5")]
    links = FakeLinks([Kind.CUT])
    nem = Nemesis(random.Random(1), FakeNodes(), [links], topology=line)
    done = run(nem.invoke({"f": "start-partition", "value": {"shape": "bridge"}}))["value"]
    assert done["asked"] == "bridge" and done["shape"] == "min-edge-cut", done
    assert "severs no path" in done["why"] and "bridge" not in done
    assert len(done["components"]) == 2 and P.severs(NODES, line, links.active[Kind.CUT])
    run(nem.invoke({"f": "stop-partition", "value": None}))
    kept = run(nem.invoke({"f": "start-partition", "value": {"shape": "isolate",
                                                              "node": "n3"}}))["value"]
    assert "asked" not in kept and kept["components"] == [["n1", "n2"], ["n3"], ["n4", "n5"]]
    run(nem.invoke({"f": "stop-partition", "value": None}))
    art = run(nem.invoke({"f": "start-partition", "value": {"shape": "articulation"}}))["value"]
    assert art["node"] in {"n2", "n3", "n4"} and [art["node"]] in art["components"]


def test_articulation_on_a_full_mesh_falls_back_to_a_min_edge_cut_and_says_why() -> None:
    nem, _, _ = make()
    done = run(nem.invoke({"f": "start-partition", "value": {"shape": "articulation"}}))
    assert "error" not in done and done["value"]["shape"] == "min-edge-cut"
    assert "no articulation point" in done["value"]["why"]
    assert len(done["value"]["components"]) == 2


def test_a_late_node_not_started_is_no_random_follower_or_all_pick() -> None:
    """A fresh server that joins later (Garlic Farm ``late_nodes``) is not killed before its
    "join": a kill would put it among the killed, and the restart after would start it early."""
    for seed in range(20):
        nem, nodes, _ = make()
        nem.unstarted = {"n5"}
        nem.rng.seed(seed)
        picks = [run(nem.invoke({"f": f, "value": {"node": spec}}))["value"]["nodes"]
                 for f, spec in (("kill", "follower"), ("pause", "random"), ("pause", "all"))]
        assert all("n5" not in names for names in picks), picks
    nem.unstarted.clear()  # once it runs, it is a node like the others
    assert "n5" in run(nem.invoke({"f": "kill", "value": {"node": "all"}}))["value"]["nodes"]
