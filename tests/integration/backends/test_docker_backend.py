"""The docker backend for real: containers on a real engine, the real cluster and Toxiproxy,
and nothing of ours left after a clean run, a run that fails midway, or Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import aiohttp
import pytest
from backend_helpers import docker_leftovers

from harness.backends.base import NodeSpec
from harness.backends.docker import DockerBackend
from harness.cluster import open_cluster
from harness.runner import run
from harness.spec import TestSpec, Workload
from harness.store import new_run
from osutil.ports import free_port
from tests.child_run import interrupt_a_run
from tests.integration.harness.test_cluster import ECHO, Exploding
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
ECHO_MODULE = "tests.integration.harness.echo_node"


async def _reachable(c, n) -> dict[str, bool]:
    return (await c.admin(n, "GET", "/admin/state"))["reachable"]


async def _all_reachable(c) -> bool:
    for n in c.nodes:
        if not all((await _reachable(c, n)).values()):
            return False
    return True


def test_cluster_in_containers(tmp_path, docker_client):
    """Host-network mode through the real cluster: partitions cut container links, kill is
    a dead container, restart keeps the volume's data, pause freezes the container."""
    spec = TestSpec(name="echo", protocol=ECHO, nodes=3, seed=5, store=str(tmp_path),
                    backend="docker")

    async def body():
        rd = new_run("echo", tmp_path)
        async with open_cluster(spec, rd) as c:
            b = c.backend
            assert isinstance(b, DockerBackend)
            names = {n: b.containers[n].name for n in c.nodes}
            assert await eventually(lambda: _all_reachable(c))
            done = await c.nemesis_invoke({"f": "start-partition",
                                           "value": {"shape": "isolate", "node": "n1"}})
            assert "error" not in done, done

            async def n1_cut():
                return (await _reachable(c, "n1")) == {"n2": False, "n3": False}

            assert await eventually(n1_cut)
            assert (await _reachable(c, "n2"))["n3"] is True
            await c.nemesis_invoke({"f": "stop-partition", "value": None})
            assert await eventually(lambda: _all_reachable(c))

            await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
            assert docker_client.containers.get(names["n2"]).status == "exited"
            assert not b.is_running("n2")
            await c.nemesis_invoke({"f": "pause", "value": {"node": "n3"}})
            assert docker_client.containers.get(names["n3"]).status == "paused"
            assert b.is_running("n3")
            await c.heal_all()  # restarts n2 (same container, same volume), resumes n3
            assert docker_client.containers.get(names["n3"]).status == "running"
            assert await eventually(lambda: _all_reachable(c))
            ev = (await c.admin("n2", "GET", "/admin/events?since=0"))["events"]
            assert [e["seq"] for e in ev if e["type"] == "start"] == [0, 1]  # journal survived
            # a paused node can be killed (while frozen) and restarted
            await c.pause("n1")
            await c.kill("n1")
            assert docker_client.containers.get(names["n1"]).status == "exited"
            await c.restart("n1")
            assert await eventually(lambda: _all_reachable(c))
            await c.collect()
        assert docker_leftovers(docker_client, rd.path) == []
        # the volumes were copied back before removal: journals and data dirs are in the run dir
        for n in ("n1", "n2", "n3"):
            assert (rd.path / "nodes" / n / "events.jsonl").stat().st_size > 0
            assert (rd.path / "nodes" / n / "data" / "events.jsonl").exists()
            assert "starting with bugs" in (rd.path / "nodes" / n / "log.txt").read_text()

    asyncio.run(body())


def test_failing_run_leaves_nothing(tmp_path, docker_client):
    wl = Workload(client=Exploding, generator=lambda s: iter(lambda: {"f": "read"}, None),
                  checkers={})
    spec = TestSpec(name="explode", protocol=ECHO, workload=wl, nodes=3, concurrency=2, seed=1,
                    store=str(tmp_path), time_limit=5, backend="docker")
    with pytest.raises(RuntimeError, match="exploded midway"):
        run(spec)
    rd = sorted((tmp_path / "explode").iterdir())[-1]
    assert json.loads((rd / "test.json").read_text())["status"] == "failed"
    assert docker_leftovers(docker_client, rd) == []


def test_ctrl_c_leaves_nothing(tmp_path, docker_client):
    interrupt_a_run(tmp_path, "docker",
                    running=lambda rd: docker_leftovers(docker_client, rd) != [],
                    gone=lambda rd: docker_leftovers(docker_client, rd) == [])


def _echo_spec(tmp_path: Path, n: str, ports: dict[str, int], peers: dict[str, str]) -> NodeSpec:
    nd = tmp_path / "run" / "nodes" / n
    nd.mkdir(parents=True)
    cfg = {"id": n, "num_id": int(n[1:]), "host": "127.0.0.1", "data_dir": str(nd / "data"),
           "ports": ports, "bugs": [], "seed": 1, "options": {},
           "peers": {p: {"num_id": int(p[1:]), "peer": a} for p, a in peers.items()}}
    (nd / "config.json").write_text(json.dumps(cfg))
    return NodeSpec(id=n, argv=["{python}", "-m", ECHO_MODULE, "--config", str(nd / "config.json")],
                    config_path=nd / "config.json", data_dir=nd / "data",
                    log_path=nd / "log.txt", cwd=ROOT)


def test_bridge_network_through_toxiproxy(tmp_path, docker_client):
    """Bridge mode: nodes in their own network namespace, admin ports published on the
    host's loopback, peer traffic through Toxiproxy proxies listening on the gateway."""
    from faults.toxiproxy import ToxiproxyServer

    async def body():
        b = DockerBackend(network="bridge", client=docker_client)
        gw = b.proxy_host
        assert gw != "127.0.0.1"
        ports = {n: {k: free_port() for k in ("peer", "client", "admin")} for n in ("n1", "n2")}
        with ToxiproxyServer.from_env() as tox:
            client = tox.client(prefix=f"bridge{os.getpid()}-")
            try:
                listen = await client.create_proxies(
                    {"n1->n2": f"127.0.0.1:{ports['n2']['peer']}",
                     "n2->n1": f"127.0.0.1:{ports['n1']['peer']}"}, listen_host=gw)
                # the config says 127.0.0.1 like the cluster writes it; the backend rewrites it
                specs = [_echo_spec(tmp_path, "n1", ports["n1"],
                                    {"n2": "127.0.0.1:" + listen["n1->n2"].rsplit(":", 1)[1]}),
                         _echo_spec(tmp_path, "n2", ports["n2"],
                                    {"n1": "127.0.0.1:" + listen["n2->n1"].rsplit(":", 1)[1]})]
                await asyncio.gather(*(b.start(s) for s in specs))
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
                    async def reach(n: str) -> dict[str, bool]:
                        url = f"http://127.0.0.1:{ports[n]['admin']}/admin/state"
                        async with s.get(url) as r:
                            return (await r.json())["reachable"]

                    async def both(want: bool) -> bool:
                        return (await reach("n1")) == {"n2": want} and (await reach("n2")) == {"n1": want}

                    assert await eventually(lambda: both(True), 20), (tmp_path / "run").glob("*/*/log.txt")
                    await client.set_enabled("n1->n2", False)
                    await client.set_enabled("n2->n1", False)
                    assert await eventually(lambda: both(False))
                    await client.set_enabled("n1->n2", True)
                    await client.set_enabled("n2->n1", True)
                    assert await eventually(lambda: both(True))
                    ip = docker_client.containers.get(b.containers["n1"].name).attrs[
                        "NetworkSettings"]["Networks"]
                    assert list(ip) == [b._net.name]  # really on the run's own bridge
            finally:
                await b.close()
                await client.delete_proxies()
                await client.close()
        assert docker_leftovers(docker_client, tmp_path / "run") == []
        assert docker_client.networks.list(names=[b._net.name]) == []

    asyncio.run(body())


def test_bridge_cluster_with_proxies_on_the_gateway(tmp_path, docker_client, monkeypatch):
    """The whole cluster in bridge mode: proxies listen on the bridge's gateway
    (``backend.proxy_host``), nodes in containers reach each other only through them."""
    from harness.cluster import Cluster

    spec = TestSpec(name="bridge", protocol=ECHO, nodes=3, seed=7, store=str(tmp_path),
                    backend="docker-bridge")

    async def body():
        rd = new_run("bridge", tmp_path)
        c = Cluster(spec, rd)
        gw = c.backend.proxy_host
        try:
            await c.start()
            assert all(v.startswith(gw + ":") for v in c.links.values())
            assert await eventually(lambda: _all_reachable(c), 20)
            await c.nemesis_invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n2"}})

            async def n2_cut():
                return (await _reachable(c, "n2")) == {"n1": False, "n3": False}

            assert await eventually(n2_cut)
            await c.heal_all()
            await c.kill("n3")
            await c.restart("n3")
            assert await eventually(lambda: _all_reachable(c))
        finally:
            await c.close()
        assert docker_leftovers(docker_client, rd.path) == []

    asyncio.run(body())
