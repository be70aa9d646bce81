"""Partition shapes: graph properties, for several cluster sizes."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faults import partitions as P


def names(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


def undirected_left(nodes: list[str], grudge: frozenset[P.Flow]) -> nx.Graph:
    """Edges where both directions survive."""
    g = P.remaining_graph(nodes, grudge)
    u = nx.Graph()
    u.add_nodes_from(nodes)
    u.add_edges_from((a, b) for a, b in g.edges if g.has_edge(b, a))
    return u


@pytest.mark.parametrize("n", range(2, 10))
def test_halves_two_components_floor_ceil(n: int) -> None:
    nodes = names(n)
    grudge = P.halves(nodes)
    comps = sorted(nx.connected_components(undirected_left(nodes, grudge)), key=len)
    assert len(comps) == 2
    assert [len(c) for c in comps] == [n // 2, n - n // 2]
    assert grudge == P.symmetric(grudge)
    # every cut flow crosses components, and every crossing flow is cut
    side = {x: i for i, c in enumerate(comps) for x in c}
    assert all(side[a] != side[b] for a, b in grudge)
    assert len(grudge) == 2 * (n // 2) * (n - n // 2)


def test_halves_one_way_cuts_only_first_to_second() -> None:
    nodes = names(5)
    grudge = P.halves(nodes, one_way=True)
    assert grudge == {(a, b) for a in ["n1", "n2"] for b in ["n3", "n4", "n5"]}
    assert P.reverse(grudge).isdisjoint(grudge)


@given(st.integers(min_value=2, max_value=9), st.integers(min_value=0, max_value=2**32))
def test_random_halves_is_halves_of_a_permutation_and_seeded(n: int, seed: int) -> None:
    nodes = names(n)
    g1 = P.random_halves(nodes, random.Random(seed))
    g2 = P.random_halves(nodes, random.Random(seed))
    assert g1 == g2
    comps = P.components(nodes, g1)
    assert sorted(len(c) for c in comps) == [n // 2, n - n // 2]


@pytest.mark.parametrize("n", range(2, 8))
def test_isolate_cuts_exactly_one_node(n: int) -> None:
    nodes = names(n)
    grudge = P.isolate(nodes, "n2")
    assert P.components(nodes, grudge) == sorted([["n2"], [x for x in nodes if x != "n2"]])
    assert all("n2" in f for f in grudge)
    assert len(grudge) == 2 * (n - 1)


def test_isolate_random_reports_the_choice_and_is_seeded() -> None:
    nodes = names(5)
    node, grudge = P.isolate_random(nodes, random.Random(7))
    assert (node, grudge) == P.isolate_random(nodes, random.Random(7))
    assert grudge == P.isolate(nodes, node)


def test_isolate_unknown_node_is_an_error() -> None:
    with pytest.raises(ValueError, match="not one of"):
        P.isolate(names(3), "zz")


def test_isolate_one_way_node_still_hears() -> None:
    nodes = names(5)
    grudge = P.isolate(nodes, "n1", one_way=True)
    assert P.visible(nodes, grudge, "n1") == set(nodes)  # it hears everyone
    for other in nodes[1:]:
        assert "n1" not in P.visible(nodes, grudge, other)  # nobody hears it


@pytest.mark.parametrize("n", range(5, 12))
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_majorities_ring_every_node_sees_a_distinct_majority(n: int, seed: int | None) -> None:
    nodes = names(n)
    grudge = P.majorities_ring(nodes, None if seed is None else random.Random(seed))
    views = [P.visible(nodes, grudge, x) for x in nodes]
    assert all(len(v) == P.majority(n) for v in views)
    assert len(set(views)) == n  # no two nodes see the same majority
    if P.majority(n) % 2 == 1:
        assert grudge == P.symmetric(grudge)


@pytest.mark.parametrize("n", range(3, 10))
def test_bridge_one_node_connects_two_disconnected_halves(n: int) -> None:
    nodes = names(n)
    bridge_node, grudge = P.bridge(nodes)
    g = undirected_left(nodes, grudge)
    assert nx.is_connected(g)
    rest = g.subgraph([x for x in nodes if x != bridge_node])
    comps = list(nx.connected_components(rest))
    assert len(comps) == 2
    for c in comps:
        assert all(g.has_edge(bridge_node, x) for x in c)
    assert nx.minimum_node_cut(g) == {bridge_node}


def test_from_components_rejects_overlap() -> None:
    with pytest.raises(ValueError, match="more than one group"):
        P.from_components([["a", "b"], ["b", "c"]])


def test_from_components_three_groups_one_way_is_a_dag() -> None:
    grudge = P.from_components([["a"], ["b"], ["c"]], one_way=True)
    assert grudge == {("a", "b"), ("a", "c"), ("b", "c")}


def test_all_flows_and_encode() -> None:
    flows = P.all_flows(names(3), include_client=True)
    assert len(flows) == 6 + 6
    assert P.encode({("b", "a"), ("a", "b")}) == [["a", "b"], ["b", "a"]]


# ---- shapes against a topology ---------------------------------------------------------------

LINE5 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5")]
RING5 = [*LINE5, ("n1", "n5")]
N5 = ["n1", "n2", "n3", "n4", "n5"]


def test_a_cut_between_nodes_that_never_talk_severs_nothing() -> None:
    full = [(a, b) for a, b in P.all_flows(N5) if a < b]
    assert P.severs(N5, full, P.halves(N5)) and P.severs(N5, LINE5, P.halves(N5))
    _, g = P.bridge(N5)  # {n1,n2} | {n4,n5}, n3 between: on a line there is no such link
    assert not P.severs(N5, LINE5, g)
    assert not P.severs(N5, full, g)  # a relaying mesh routes through the bridge node
    assert P.severs(N5, LINE5, P.isolate(N5, "n3"))
    assert P.severs(N5, LINE5, frozenset({("n2", "n3")}))  # one way is enough


def test_min_edge_cut_is_one_link_of_a_line_and_two_of_a_ring() -> None:
    for edges, links in ((LINE5, 1), (RING5, 2)):
        for seed in range(10):
            g = P.min_edge_cut(N5, edges, random.Random(seed))
            assert P.severs(N5, edges, g)
            cut_links = {tuple(sorted(f)) for f in g} & set(edges)
            assert len(cut_links) == links, (edges, seed, g)
            assert len(P.topology_components(N5, edges, g)) == 2


def test_articulation_cut_isolates_a_cut_vertex_and_keeps_its_pieces_apart() -> None:
    node, g = P.articulation_cut(N5, LINE5, random.Random(3))
    assert node in {"n2", "n3", "n4"}
    comps = P.topology_components(N5, LINE5, g)
    assert [node] in comps and len(comps) == 3
    with pytest.raises(ValueError, match="no articulation point"):
        P.articulation_cut(N5, RING5, random.Random(3))
