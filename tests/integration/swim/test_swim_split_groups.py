"""Real SWIM processes that restart on both sides of a partition found one group per side
(`SwimCore._may_found`); after the heal the two groups must merge (`SwimCore._reconnect`
knocks at address-book members it never heard of). Before that, {n1, n2} and {n3, n4} stayed
two groups for good, each knowing nothing of the other. ~25 s (four restarts): nightly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.swim import PROTOCOL
from tests.swim_group import OPTS, Group
from tests.waiting import eventually

SIDES = (["n1", "n2"], ["n3", "n4"])


@pytest.mark.chaos
def test_groups_founded_on_both_sides_of_a_partition_merge_after_the_heal(
        tmp_path: Path) -> None:
    spec = TestSpec(name="swim-split", protocol=PROTOCOL, nodes=4, seed=7, store=str(tmp_path),
                    options=OPTS)

    async def body() -> None:
        async with open_cluster(spec, new_run("swim-split", tmp_path)) as cl:
            g = Group(cl, {})
            assert await eventually(g.converged, 15)
            done = await cl.nemesis_invoke({"f": "start-partition", "value": {
                "shape": "explicit", "groups": [list(s) for s in SIDES]}})
            assert "error" not in done, done
            # everyone restarts at once (generation 1: every peer is a seed) under the split
            await asyncio.gather(*(cl.kill(n) for n in cl.nodes))
            await asyncio.gather(*(cl.restart(n) for n in cl.nodes))

            async def alive(n: str) -> list[str]:
                return list((await g.state(n))["alive"])

            async def two_groups() -> bool:
                views = {n: await alive(n) for n in cl.nodes}
                return all(views[n] == [m for m in side if m != n]
                           for side in SIDES for n in side)

            assert await eventually(two_groups, 15), {n: await alive(n) for n in cl.nodes}
            await cl.nemesis_invoke({"f": "stop-partition", "value": None})
            assert await eventually(g.converged, 20), {n: await alive(n) for n in cl.nodes}

    asyncio.run(body())
