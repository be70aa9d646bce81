"""Catch-up through direct peers only (spec 4.6, issue 26): a node whose only peer is behind
still ends with every commit, because every member voted yes on it, so the commit is owed to
that peer (outbox or a durable owed sync) and travels on from it once it arrives."""

from __future__ import annotations

import pytest

from harness.sim.drip import DripSim

LINE = [("n1", "n2"), ("n2", "n3"), ("n3", "n4")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_node_whose_only_peer_is_behind_catches_up_through_it(seed: int) -> None:
    sim = DripSim(LINE, seed=seed)
    sim.run_for(1.0)
    sim.update("n1", "k", 1, "u1")
    while sim.outcome("u1") is None:  # the instant n1 decides: its commit is on the way
        sim.run_for(0.0005)
    assert sim.committed("u1")
    sim.cut("n2", "n3")  # n3 (and so n4) will not get the commit now
    sim.crash("n4")
    sim.run_for(3.0)
    assert sim.value("n2", "k") == 1 and sim.value("n3", "k") is None
    sim.restart("n4")  # syncs from n3, its only peer, which is behind (and alone with n4,
    sim.run_for(6.0)  # so it goes active first: "A mesh that restarted whole", docs/drip.md)
    done = sim.events_of("n4", "sync-done")
    assert done and done[-1]["source"] == "n3" and sim.core("n4").state == "active"
    assert sim.value("n4", "k") is None  # caught up with n3: still behind
    sim.heal()
    sim.run_for(6.0)
    assert [sim.value(n, "k") for n in ("n1", "n2", "n3", "n4")] == [1, 1, 1, 1]
    assert sim.stored("n4").kv["k"].uid == "u1"
