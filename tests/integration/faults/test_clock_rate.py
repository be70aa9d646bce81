"""The ``clock-rate`` fault on real node processes (faults/clockrate.py): a node started under
libfaketime runs its clocks at the rate the nemesis sets, from what they read (no jump back),
keeps it through a restart, and true time comes back with the final heal; a backend that
cannot preload the library is refused before any node starts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from faults.clockrate import ClockRateError, library
from harness.cluster import ClusterError, open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from tests.integration.harness.test_cluster import ECHO

try:
    library()
    HAVE = True
except ClockRateError:
    HAVE = False
GAP = 0.6  # true seconds between two readings of the nodes' clocks
needs_lib = pytest.mark.skipif(not HAVE, reason="libfaketime is not installed "
                               "(scripts/setup-faketime)")


async def stamps(c, gap: float) -> dict[str, float]:
    """How far each node's clock moved over ``gap`` true seconds: the journal stamps (the
    node's own ``time.time()``) of two ``clock`` events ``gap`` apart."""
    async def stamp() -> dict[str, float]:
        out = {}
        for n in c.nodes:
            await c.set_clock_offset(n, 0.0)
            ev = (await c.admin(n, "GET", "/admin/events?since=0"))["events"]
            out[n] = [e["t"] for e in ev if e["type"] == "clock"][-1]
        return out

    a = await stamp()
    t0 = time.monotonic()
    await asyncio.sleep(gap)
    b = await stamp()
    scale = gap / (time.monotonic() - t0)  # the stamps' own spread is small beside gap
    return {n: (b[n] - a[n]) * scale for n in c.nodes}


@needs_lib
def test_a_nodes_clock_runs_at_the_rate_the_nemesis_sets(tmp_path):
    spec = TestSpec(name="echo", protocol=ECHO, nodes=2, seed=5, store=str(tmp_path),
                    options={"clock_rate": True})

    async def body():
        async with open_cluster(spec, new_run("echo", tmp_path)) as c:
            done = await c.nemesis_invoke({"f": "clock-rate", "value": {"node": "n1", "rate": 2}})
            assert done["value"]["nodes"] == ["n1"] and "error" not in done, done
            moved = await stamps(c, GAP)
            assert 1.7 * GAP < moved["n1"] < 2.3 * GAP and 0.85 * GAP < moved["n2"] < 1.15 * GAP, moved
            await c.nemesis_invoke({"f": "clock-rate", "value": {"node": "n1", "rate": 0.5}})
            moved = await stamps(c, GAP)
            assert 0.35 * GAP < moved["n1"] < 0.65 * GAP, moved  # slower, and never back (moved > 0)
            # the clock is the machine's: a restarted node comes back at its rate
            await c.nemesis_invoke({"f": "kill", "value": {"node": "n1"}})
            await c.nemesis_invoke({"f": "restart", "value": {"node": "n1"}})
            moved = await stamps(c, GAP)
            assert 0.35 * GAP < moved["n1"] < 0.65 * GAP, moved
            healed = await c.heal_all()
            assert healed["clocks-reset"] == ["n1"], healed
            moved = await stamps(c, GAP)
            assert 0.85 * GAP < moved["n1"] < 1.15 * GAP, moved

    shm = set(Path("/dev/shm").glob("*faketime*"))
    asyncio.run(body())
    # libfaketime's shared memory of the nodes (killed ones too) is gone with the cluster
    left = set(Path("/dev/shm").glob("*faketime*")) - shm
    assert not left, left


def test_a_clock_rate_run_on_another_backend_is_refused_before_a_node_starts(tmp_path):
    spec = TestSpec(name="echo", protocol=ECHO, nodes=2, seed=5, store=str(tmp_path),
                    backend="docker", options={"clock_rate": True})

    async def body():
        async with open_cluster(spec, new_run("echo", tmp_path)):
            pass

    with pytest.raises(ClusterError, match="needs the local backend, not docker"):
        asyncio.run(body())
