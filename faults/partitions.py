"""Partition shapes, computed on a networkx graph of the nodes.

A partition is described by a *grudge*: the set of directed flows ``(src, dst)`` that are cut,
meaning "bytes/datagrams sent by ``src`` never reach ``dst``". A symmetric partition holds both
``(a, b)`` and ``(b, a)``; an asymmetric ("one-way") one holds only one of them. The link layer
(`faults.links`) turns a grudge into toxics, so the shapes stay pure data: easy to test and to
write into the history exactly as applied.

Shapes follow Jepsen's `jepsen.nemesis` (halves, random halves, isolate one node, majorities
ring, bridge). Clients are not part of the node graph: shapes never cut ``"client"`` flows.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import networkx as nx

Flow = tuple[str, str]
Grudge = frozenset[Flow]


def majority(n: int) -> int:
    """The smallest number of nodes that is more than half of ``n``."""
    return n // 2 + 1


def full_graph(nodes: Iterable[str]) -> nx.DiGraph:
    """Every node can send to every other node: the healthy network."""
    g = nx.complete_graph(list(nodes), create_using=nx.DiGraph)
    return g


def remaining_graph(nodes: Iterable[str], grudge: Iterable[Flow]) -> nx.DiGraph:
    """The directed "can send to" graph left after cutting ``grudge``."""
    g = full_graph(nodes)
    g.remove_edges_from(grudge)
    return g


def components(nodes: Iterable[str], grudge: Iterable[Flow]) -> list[list[str]]:
    """Groups of nodes that can talk both ways, sorted; what the history records."""
    g = remaining_graph(nodes, grudge)
    both_ways = nx.Graph((a, b) for a, b in g.edges if g.has_edge(b, a))
    both_ways.add_nodes_from(g.nodes)
    return sorted(sorted(c) for c in nx.connected_components(both_ways))


def visible(nodes: Iterable[str], grudge: Iterable[Flow], node: str) -> frozenset[str]:
    """The nodes ``node`` can hear from (itself included)."""
    g = remaining_graph(nodes, grudge)
    return frozenset([node, *g.predecessors(node)])


def from_components(groups: Sequence[Iterable[str]], one_way: bool = False) -> Grudge:
    """Cut every flow between different groups.

    ``one_way=True`` cuts only flows from an earlier group to a later one (group 0 cannot reach
    group 1, but group 1 still reaches group 0): Jepsen's asymmetric partition.
    """
    sets = [list(dict.fromkeys(g)) for g in groups]
    seen: set[str] = set()
    for s in sets:
        dup = seen.intersection(s)
        if dup:
            raise ValueError(f"node(s) {sorted(dup)} appear in more than one group")
        seen.update(s)
    cut: set[Flow] = set()
    for i, a_group in enumerate(sets):
        for j, b_group in enumerate(sets):
            if i == j or (one_way and j < i):
                continue
            cut.update((a, b) for a in a_group for b in b_group)
    return frozenset(cut)


def split_halves(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """First ``floor(n/2)`` nodes, then the rest (the bigger half, a majority)."""
    k = len(nodes) // 2
    return list(nodes[:k]), list(nodes[k:])


def halves(nodes: Sequence[str], one_way: bool = False) -> Grudge:
    """Two components: the first floor(n/2) nodes and the remaining ceil(n/2)."""
    return from_components(split_halves(nodes), one_way=one_way)


def random_halves(nodes: Sequence[str], rng: random.Random, one_way: bool = False) -> Grudge:
    """`halves` over a seeded shuffle of the nodes."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return halves(shuffled, one_way=one_way)


def isolate(nodes: Sequence[str], node: str, one_way: bool = False) -> Grudge:
    """Cut ``node`` off from everyone (``one_way``: it can still hear, its sends vanish)."""
    if node not in nodes:
        raise ValueError(f"cannot isolate {node!r}: not one of {list(nodes)}")
    return from_components([[node], [n for n in nodes if n != node]], one_way=one_way)


def isolate_random(
    nodes: Sequence[str], rng: random.Random, one_way: bool = False
) -> tuple[str, Grudge]:
    """Isolate a node chosen by ``rng``; returns which one, for the history."""
    node = rng.choice(list(nodes))
    return node, isolate(nodes, node, one_way=one_way)


def bridge(nodes: Sequence[str]) -> tuple[str, Grudge]:
    """Two halves that cannot talk, and one node (returned) that talks to both.

    With nodes ``a..e``: ``{a, b}`` and ``{d, e}`` are cut from each other, ``c`` is the bridge.
    Needs at least 3 nodes.
    """
    if len(nodes) < 3:
        raise ValueError("bridge needs at least 3 nodes")
    left, right = split_halves(nodes)
    bridge_node, right = right[0], right[1:]
    return bridge_node, from_components([left, right])


def majorities_ring(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Every node hears a majority, and no two nodes hear the same majority (n >= 5).

    Jepsen's `majorities-ring`: lay the (shuffled) nodes on a ring; each node hears the window of
    ``majority(n)`` consecutive nodes centred on it and drops flows from everyone else. When the
    majority is odd (n = 5, 9, 13, ...) the window is centred and the result is symmetric;
    otherwise it is lopsided and some cuts are one-way.
    """
    ring = list(nodes)
    if rng is not None:
        rng.shuffle(ring)
    n = len(ring)
    m = majority(n)
    if n < 3:
        raise ValueError("majorities ring needs at least 3 nodes")
    cut: set[Flow] = set()
    before = m // 2
    for i, centre in enumerate(ring):
        window = {ring[(i - before + k) % n] for k in range(m)}
        cut.update((other, centre) for other in ring if other not in window)
    return frozenset(cut)


def reverse(grudge: Iterable[Flow]) -> Grudge:
    """The same cut with every flow's direction flipped."""
    return frozenset((b, a) for a, b in grudge)


def symmetric(grudge: Iterable[Flow]) -> Grudge:
    """Close a grudge under reversal: a one-way cut made two-way."""
    g = frozenset(grudge)
    return g | reverse(g)


def all_flows(nodes: Iterable[str], include_client: bool = False) -> Grudge:
    """Every directed node-node flow (and client<->node flows if asked)."""
    ns = list(nodes)
    flows = {(a, b) for a in ns for b in ns if a != b}
    if include_client:
        flows |= {("client", n) for n in ns} | {(n, "client") for n in ns}
    return frozenset(flows)


# ---- shapes against a topology (a mesh where not every pair of nodes talks) --------------


def _topology(nodes: Iterable[str], edges: Iterable[Flow]) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return g


def severs(nodes: Iterable[str], edges: Iterable[Flow], grudge: Iterable[Flow]) -> bool:
    """Does ``grudge`` split the topology, leaving some node unable to reach another over the
    edges that are left (either way, for one-way cuts)? A cut that severs no path is no
    partition: every message still gets through, only by another route."""
    g = _topology(nodes, edges).to_directed()
    before = nx.number_strongly_connected_components(g)
    g.remove_edges_from(grudge)
    return nx.number_strongly_connected_components(g) > before


def _cut_between(g: nx.Graph, groups: list[list[str]]) -> Grudge:
    return from_components(sorted(sorted(c) for c in groups))


def min_edge_cut(nodes: Sequence[str], edges: Iterable[Flow], rng: random.Random) -> Grudge:
    """Cut a minimum edge cut between two nodes picked by ``rng``: the cheapest partition of
    the topology (one link of a line, two of a ring, a whole node of a full mesh)."""
    g = _topology(nodes, edges)
    if not nx.is_connected(g) or len(g) < 2:
        raise ValueError("a minimum edge cut needs a connected topology of 2 nodes or more")
    s, t = rng.sample(sorted(g.nodes), 2)
    g.remove_edges_from(nx.minimum_edge_cut(g, s, t))
    return _cut_between(g, [list(c) for c in nx.connected_components(g)])


def articulation_cut(nodes: Sequence[str], edges: Iterable[Flow],
                     rng: random.Random) -> tuple[str, Grudge]:
    """Isolate an articulation point picked by ``rng`` (a node whose loss splits the rest):
    returns it and a grudge that also cuts the pieces it held together from each other."""
    g = _topology(nodes, edges)
    points = sorted(nx.articulation_points(g))
    if not points:
        raise ValueError("the topology has no articulation point (no single node holds it "
                         "together); use min-edge-cut")
    node = rng.choice(points)
    g.remove_node(node)
    return node, _cut_between(g, [[node], *(list(c) for c in nx.connected_components(g))])


def topology_components(nodes: Iterable[str], edges: Iterable[Flow],
                        grudge: Iterable[Flow]) -> list[list[str]]:
    """`components` over the topology's edges instead of the full mesh."""
    g = _topology(nodes, edges).to_directed()
    g.remove_edges_from(grudge)
    both = nx.Graph((a, b) for a, b in g.edges if g.has_edge(b, a))
    both.add_nodes_from(g.nodes)
    return sorted(sorted(c) for c in nx.connected_components(both))


def encode(grudge: Iterable[Flow]) -> list[list[str]]:
    """JSON-friendly, sorted form of a grudge for history values."""
    return [list(f) for f in sorted(grudge)]
