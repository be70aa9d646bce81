"""Link-set arithmetic: flows, which proxy stream carries which flow, toxic bookkeeping."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from faults import partitions as P
from faults.links import (
    CLIENT,
    Kind,
    TcpLinks,
    UnsupportedFault,
    flow_targets,
    flows_of,
    link_name,
    node_pairs,
    toxic_for,
)
from faults.toxiproxy import Toxic

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_flows_of_symmetric_and_one_way() -> None:
    assert flows_of([("a", "b")]) == {("a", "b"), ("b", "a")}
    assert flows_of([("a", "b")], one_way=True) == {("a", "b")}
    with pytest.raises(ValueError):
        flows_of([("a", "a")])


def test_node_pairs_counts() -> None:
    assert len(node_pairs(NODES)) == 20
    assert len(node_pairs(NODES, include_client=True)) == 25
    assert (CLIENT, "n3") in node_pairs(NODES, include_client=True)


def test_flow_a_to_b_is_upstream_of_ab_and_downstream_of_ba() -> None:
    links = node_pairs(["a", "b"])
    assert sorted(flow_targets(("a", "b"), links)) == [(("a", "b"), "upstream"),
                                                         (("b", "a"), "downstream")]
    assert sorted(flow_targets(("b", "a"), links)) == [(("a", "b"), "downstream"),
                                                         (("b", "a"), "upstream")]


def test_client_flows_use_the_client_proxy_both_ways() -> None:
    links = {(CLIENT, "n1")}
    assert flow_targets((CLIENT, "n1"), links) == [((CLIENT, "n1"), "upstream")]
    assert flow_targets(("n1", CLIENT), links) == [((CLIENT, "n1"), "downstream")]
    assert flow_targets(("n1", "n2"), links) == []


def test_every_stream_carries_exactly_one_flow() -> None:
    links = node_pairs(NODES, include_client=True)
    flows = P.all_flows(NODES, include_client=True)
    targets = [t for f in flows for t in flow_targets(f, links)]
    assert len(targets) == len(set(targets)) == 2 * len(links)


def test_toxic_shapes() -> None:
    assert toxic_for(Kind.CUT, "upstream", {}).to_json() == {
        "name": "h_cut_upstream", "type": "timeout", "stream": "upstream", "toxicity": 1.0,
        "attributes": {"timeout": 0}}
    lat = toxic_for(Kind.LATENCY, "downstream", {"ms": 50, "jitter_ms": 5})
    assert (lat.type, dict(lat.attributes)) == ("latency", {"latency": 50, "jitter": 5})
    assert toxic_for(Kind.BANDWIDTH, "upstream", {"kbps": 8}).attributes == {"rate": 8}
    assert toxic_for(Kind.RESET_PEER, "upstream", {}).type == "reset_peer"
    assert toxic_for(Kind.SLICER, "upstream", {}).type == "slicer"
    with pytest.raises(UnsupportedFault):
        toxic_for(Kind.LOSS, "upstream", {})


def test_toxic_defaults_match_toxiproxy() -> None:
    t = Toxic(type="latency")
    assert (t.name, t.stream, t.toxicity) == ("latency_downstream", "downstream", 1.0)
    with pytest.raises(ValueError):
        Toxic(type="latency", stream="sideways")


class FakeClient:
    """Records calls instead of talking HTTP."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def add_toxic(self, link: str, toxic: Toxic) -> dict[str, Any]:
        self.calls.append(("add", link, toxic.stream, toxic.type))
        return toxic.to_json()

    async def update_toxic(self, link: str, toxic: Toxic) -> dict[str, Any]:
        self.calls.append(("update", link, toxic.stream, dict(toxic.attributes)))
        return toxic.to_json()

    async def remove_toxic(self, link: str, name: str, missing_ok: bool = True) -> None:
        self.calls.append(("remove", link, name))

    async def set_enabled(self, link: str, enabled: bool) -> dict[str, Any]:
        self.calls.append(("enabled", link, enabled))
        return {}


def make_links(**kw: Any) -> tuple[TcpLinks, FakeClient]:
    client = FakeClient()
    listen = {pair: f"127.0.0.1:{20000 + i}"
              for i, pair in enumerate(sorted(node_pairs(NODES, include_client=True)))}
    return TcpLinks(client, listen, **kw), client  # type: ignore[arg-type]


def test_one_way_cut_touches_upstream_of_ab_and_downstream_of_ba() -> None:
    links, client = make_links()
    flows = asyncio.run(links.cut([("n1", "n2")], one_way=True))
    assert flows == [("n1", "n2")]
    assert sorted(client.calls) == [("add", link_name(("n1", "n2")), "upstream", "timeout"),
                                    ("add", link_name(("n2", "n1")), "downstream", "timeout")]


def test_halves_partition_toxic_count_and_idempotence() -> None:
    links, client = make_links()
    grudge = P.halves(NODES)
    asyncio.run(links.apply(Kind.CUT, grudge))
    assert len(client.calls) == 2 * len(grudge) == 24
    asyncio.run(links.apply(Kind.CUT, grudge))  # already cut: no new calls
    assert len(client.calls) == 24
    assert links.active()["cut"] == P.encode(grudge)


def test_latency_again_updates_instead_of_adding() -> None:
    links, client = make_links()
    asyncio.run(links.latency([("n1", "n2")], ms=10))
    asyncio.run(links.latency([("n1", "n2")], ms=30))
    assert [c[0] for c in client.calls] == ["add"] * 4 + ["update"] * 4


def test_heal_of_a_cut_bounces_proxies_around_the_removal() -> None:
    links, client = make_links()
    asyncio.run(links.cut([("n1", "n2")]))
    client.calls.clear()
    healed = asyncio.run(links.heal())
    assert healed == [("n1", "n2"), ("n2", "n1")]
    kinds = [c[0] if c[0] != "enabled" else f"enabled-{c[2]}" for c in client.calls]
    assert kinds == ["enabled-False"] * 2 + ["remove"] * 4 + ["enabled-True"] * 2
    assert links.active() == {}


def test_heal_without_bounce_and_by_kind() -> None:
    links, client = make_links(reset_connections_on_heal=False)
    asyncio.run(links.cut([("n1", "n2")]))
    asyncio.run(links.latency([("n3", "n4")], ms=5))
    client.calls.clear()
    assert asyncio.run(links.heal(Kind.LATENCY)) == [("n3", "n4"), ("n4", "n3")]
    assert all(c[0] == "remove" for c in client.calls)
    assert list(links.active()) == ["cut"]
    assert asyncio.run(links.heal(Kind.CUT, [("n1", "n2")])) == [("n1", "n2")]
    assert links.active()["cut"] == [["n2", "n1"]]


def test_unsupported_kind_on_tcp() -> None:
    links, _ = make_links()
    with pytest.raises(UnsupportedFault):
        asyncio.run(links.apply(Kind.LOSS, [("n1", "n2")], p=0.5))
