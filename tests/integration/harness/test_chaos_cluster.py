"""The ``chaos_cluster`` fixture: a test that drives nodes and faults itself gets a started
cluster of its spec, with the session's backend, seed and Toxiproxy, its run dir in the chaos
store and a history writer there; leaving the block tears nodes and proxies down."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from harness.spec import TestSpec
from osutil.ports import is_listening
from tests.integration.harness.test_cluster import ECHO, EchoClient, _all_reachable, _reach_is
from tests.proc_state import processes_mentioning
from tests.waiting import eventually
from vocabulary.history import read_history


async def _op(c, client: EchoClient, process: int, op: dict) -> dict:
    """One client op, invoke and completion recorded in the run's history."""
    c.history.append({"type": "invoke", "process": process, **op})
    try:
        done = await client.invoke(op)
    except (TimeoutError, aiohttp.ClientError) as e:
        done = {"type": "fail", "error": type(e).__name__}
    return c.history.append({"process": process, "f": op["f"], **done})


@pytest.mark.chaos
@pytest.mark.smoke
def test_chaos_cluster_client_ops_a_fault_and_teardown(chaos_cluster, chaos_store, request):
    spec = TestSpec(name="echo-chaos-cluster", protocol=ECHO, nodes=3, seed=3)

    async def body():
        async with chaos_cluster(spec) as c:
            clients = [EchoClient(c.client_addr(i), i) for i in range(3)]  # n1, n2, n3
            try:
                for i, cl in enumerate(clients):
                    assert (await _op(c, cl, i, {"f": "write", "value": i}))["type"] == "ok"
                    read = await _op(c, cl, i, {"f": "read"})
                    assert read == {**read, "type": "ok", "value": i}
                # a fault through the nemesis: n1 cut off from its peers, then healed
                cut = await c.nemesis_invoke({"f": "start-partition",
                                              "value": {"shape": "isolate", "node": "n1"}})
                assert "error" not in cut, cut
                assert await eventually(lambda: _reach_is(c, "n1", {"n2": False, "n3": False}))
                await c.nemesis_invoke({"f": "stop-partition", "value": None})
                assert await eventually(lambda: _all_reachable(c))
                # a killed node: its client op fails, the others still answer
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
                assert not c.backend.is_running("n2")
                assert (await _op(c, clients[1], 1, {"f": "read"}))["type"] == "fail"
                assert (await _op(c, clients[2], 2, {"f": "read"}))["type"] == "ok"
            finally:
                for cl in clients:
                    await cl.close()
            assert processes_mentioning(str(c.run_dir.path))  # the nodes, while open
            ports = [int(v.rsplit(":", 1)[1]) for v in c.links.values()]
            return c.run_dir.path, ports

    rd, ports = asyncio.run(body())
    # torn down: no process of the run left, no proxy listening
    assert not processes_mentioning(str(rd))
    assert not any(is_listening(p) for p in ports)
    # the run dir is in the chaos store, recorded for JUnit, and holds the test's history
    assert Path(rd).parent.parent == chaos_store.resolve()
    assert ("run_dir", str(rd)) in request.node.user_properties
    assert ("seed", spec.seed) in request.node.user_properties
    ops = read_history(Path(rd) / "history.jsonl").ops
    assert len(ops) == 16 and [o["index"] for o in ops] == list(range(16))
