"""Mesh shapes for DRiP tests, built with networkx: node ids -> undirected peer edges.

``figure1`` is the spec's figure 1 (A-B, A-C, B-C, B-D) for the first four nodes; each further
node joins the two nodes before it, so the mesh stays connected with alternative paths.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

Topology = Callable[[list[str]], list[tuple[str, str]]]


def _edges(g: nx.Graph, ids: list[str]) -> list[tuple[str, str]]:
    return sorted((ids[a], ids[b]) if a < b else (ids[b], ids[a]) for a, b in g.edges())


def ring(ids: list[str]) -> list[tuple[str, str]]:
    return _edges(nx.cycle_graph(len(ids)), ids)


def line(ids: list[str]) -> list[tuple[str, str]]:
    return _edges(nx.path_graph(len(ids)), ids)


def figure1(ids: list[str]) -> list[tuple[str, str]]:
    g = nx.Graph()
    g.add_nodes_from(range(len(ids)))
    g.add_edges_from(e for e in [(0, 1), (0, 2), (1, 2), (1, 3)] if max(e) < len(ids))
    for i in range(4, len(ids)):
        g.add_edges_from([(i, i - 1), (i, i - 2)])
    if not nx.is_connected(g):
        raise ValueError(f"figure1 needs at least 2 nodes, got {len(ids)}")
    return _edges(g, ids)


def full(ids: list[str]) -> list[tuple[str, str]]:
    return _edges(nx.complete_graph(len(ids)), ids)


TOPOLOGIES: dict[str, Topology] = {"ring": ring, "line": line, "figure1": figure1, "full": full}
