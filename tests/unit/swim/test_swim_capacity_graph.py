"""Capacity and the connectivity of the group (issue 25, item 5: "capacity 1 leaves orphans").

Tracking is symmetric (the spec: "connections are symmetrical"; a member probed by one it
does not track redirects it away), so at capacity 1 the views settle into a matching: pairs,
never one group of three or more. At capacity 2 a group of six stays one connected group."""

from __future__ import annotations

import dataclasses

import networkx as nx
import pytest

from harness.sim.swim import SwimSim as Sim
from nodes.swim.core import Options

FAST = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)


def components(s: Sim) -> int:
    g = nx.Graph()
    g.add_nodes_from(s.ids)
    g.add_edges_from((i, j) for i in s.ids for j in s.alive_view(i))
    return nx.number_connected_components(g)


@pytest.mark.parametrize("seed", range(6))
def test_capacity_two_keeps_six_members_one_group(seed: int) -> None:
    s = Sim(6, dataclasses.replace(FAST, capacity=2), seed=seed)
    s.run_for(60)
    assert components(s) == 1
    assert all(1 <= len(s.alive_view(i)) <= 2 for i in s.ids)


def test_capacity_one_splits_six_members_into_groups() -> None:
    """Why capacity 1 is documented as unable to hold a group of three or more together."""
    for seed in range(6):
        s = Sim(6, dataclasses.replace(FAST, capacity=1), seed=seed)
        s.run_for(60)
        assert components(s) >= 2
