"""The start waits for the nodes to find each other (`Cluster.wait_settled`, a protocol's
``settled``): DRiP's workload once started while heartbeats were still finding peers, so its
first updates could only abort, holding their key's locks for a vote timeout."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from harness.cluster import Cluster
from harness.suites import drip


def _st(state: str = "active", **peers: bool) -> dict[str, Any]:
    return {"state": state, "peers": {p: {"up": up, "state": "active"} for p, up in peers.items()}}


def test_a_drip_mesh_is_settled_when_every_node_is_active_and_hears_every_peer() -> None:
    ring = {"n1": _st(n2=True, n3=True), "n2": _st(n1=True, n3=True),
            "n3": _st(n1=True, n2=True)}
    assert drip.settled(ring)
    assert not drip.settled({**ring, "n2": _st(n1=True, n3=False)})  # a peer not heard yet
    assert not drip.settled({**ring, "n3": _st("inactive", n1=True, n2=True)})
    assert not drip.settled({**ring, "n3": _st("sync", n1=True, n2=True)})
    assert not drip.settled({**ring, "n1": None})  # no answer
    assert drip.settled({"n1": _st()})  # a node with no peers has none to wait for
    for other in ({"state": "active"}, {"state": "active", "peers": ["n2"]},
                  {"state": "active", "peers": {"n2": True}}, ["active"]):
        assert not drip.settled({"n1": other})  # another implementation's state: not told
    assert drip.PROTOCOL.settled is drip.settled


def _cluster(answers: list[bool]) -> SimpleNamespace:
    """A cluster whose protocol says each poll's answer in turn (the last one for ever)."""
    polls: list[list[str]] = []

    async def states(names: list[str]) -> dict[str, Any]:
        polls.append(names)
        return {}

    def settled(_: dict[str, Any]) -> bool:
        return answers[min(len(polls), len(answers)) - 1]

    return SimpleNamespace(proto=SimpleNamespace(settled=settled), states=states, polls=polls)


def test_the_start_waits_until_the_protocol_says_settled() -> None:
    c = _cluster([False, False, True])
    assert asyncio.run(Cluster.wait_settled(c, ["n1", "n2"], 5.0))  # type: ignore[arg-type]
    assert c.polls == [["n1", "n2"]] * 3


def test_a_mesh_that_never_settles_is_the_runs_to_show_after_the_timeout(caplog) -> None:  # noqa: ANN001
    c = _cluster([False])
    assert not asyncio.run(Cluster.wait_settled(c, ["n1"], 0.2))  # type: ignore[arg-type]
    assert 2 <= len(c.polls) <= 10
    assert "workload starts anyway" in caplog.text


def test_a_protocol_without_the_notion_does_not_wait() -> None:
    c = SimpleNamespace(proto=SimpleNamespace(settled=None))
    assert asyncio.run(Cluster.wait_settled(c, ["n1"]))  # type: ignore[arg-type]
