"""The cluster end to end with a minimal node: real processes, real Toxiproxy, real faults,
and nothing left behind after a clean run, a failing run, or Ctrl-C."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from harness import generators as g
from harness.cluster import open_cluster
from harness.runner import run
from harness.spec import NodeAddr, ProtocolDef, TestSpec, Workload
from harness.store import new_run
from osutil.ports import is_listening
from tests.child_run import interrupt_a_run
from tests.proc_state import gone, processes_mentioning, settles
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]


class EchoClient:
    def __init__(self, addr: NodeAddr, process: int) -> None:
        self.node = addr.node
        self.url = f"http://{addr.host}:{addr.port}"
        self.s = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1))

    async def invoke(self, op):
        if op["f"] == "write":
            async with self.s.post(self.url + "/write", json={"value": op["value"]}) as r:
                r.raise_for_status()
            return {"type": "ok"}
        async with self.s.get(self.url + "/read") as r:
            return {"type": "ok", "value": (await r.json())["value"]}

    async def close(self):
        await self.s.close()


def workload() -> Workload:
    return Workload(client=EchoClient,
                    generator=lambda s: g.stagger(0.02, g.mix(g.repeat({"f": "read"}),
                                                             lambda c: {"f": "write", "value": c.rng.randrange(9)})),
                    checkers={})


ECHO = ProtocolDef(name="echo", module="tests.integration.harness.echo_node",
                   workloads={"echo": workload}, default_workload="echo")


def test_links_faults_and_node_control(tmp_path):
    spec = TestSpec(name="echo", protocol=ECHO, nodes=3, seed=5, store=str(tmp_path))

    async def reachable(c, n):
        return (await c.admin(n, "GET", "/admin/state"))["reachable"]

    async def body():
        rd = new_run("echo", tmp_path)
        async with open_cluster(spec, rd) as c:
            pids = {n: c.backend.pid(n) for n in c.nodes}
            proxy_ports = [int(v.rsplit(":", 1)[1]) for v in c.links.values()]
            assert len(c.links) == 3 * 2 + 3  # ordered node pairs + client links
            assert await eventually(lambda: _all_reachable(c))
            # a partition through the nemesis: n1 isolated, really cut both ways
            done = await c.nemesis_invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n1"}})
            assert "error" not in done, done
            assert await eventually(lambda: _reach_is(c, "n1", {"n2": False, "n3": False}))
            assert (await reachable(c, "n2"))["n3"] is True
            await c.nemesis_invoke({"f": "stop-partition", "value": None})
            assert await eventually(lambda: _all_reachable(c))
            # kill, restart keeps the data dir, pause/resume
            await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
            assert gone(pids["n2"]) and not c.backend.is_running("n2")
            done = await c.nemesis_invoke({"f": "pause", "value": {"node": "n3"}})
            assert "n3" in str(done["value"]), done
            assert await settles(pids["n3"], ("T",)) == "T"
            healed = await c.heal_all()
            assert c.backend.is_running("n2") and "n3" in str(healed)
            assert await eventually(lambda: _all_reachable(c))
            # clock skew through the admin API lands in the node's journal
            await c.set_clock_offset("n1", 2.5)
            ev = (await c.admin("n1", "GET", "/admin/events?since=0"))["events"]
            assert any(e["type"] == "clock" and e["offset_s"] == 2.5 for e in ev)
            tox = c._toxiproxy.url
        for pid in [c.backend.pid(n) for n in c.nodes]:
            assert gone(pid)
        assert not any(is_listening(p) for p in proxy_ports)
        with pytest.raises(aiohttp.ClientError):
            async with aiohttp.ClientSession() as s, s.get(tox + "/proxies") as r:
                await r.read()

    asyncio.run(body())


async def _all_reachable(c) -> bool:
    for n in c.nodes:
        if not all((await c.admin(n, "GET", "/admin/state"))["reachable"].values()):
            return False
    return True


async def _reach_is(c, n, want) -> bool:
    got = (await c.admin(n, "GET", "/admin/state"))["reachable"]
    return all(got[k] == v for k, v in want.items())


class Exploding(EchoClient):
    def __init__(self, addr, process):
        if process >= 2:
            raise RuntimeError("client factory exploded midway")
        super().__init__(addr, process)

    async def invoke(self, op):
        raise ConnectionError("indeterminate")  # info -> process retired -> factory explodes


def test_failing_run_leaves_nothing(tmp_path):
    wl = Workload(client=Exploding, generator=lambda s: g.repeat({"f": "read"}), checkers={})
    spec = TestSpec(name="explode", protocol=ECHO, workload=wl, nodes=3, concurrency=2, seed=1,
                    store=str(tmp_path), time_limit=5)
    with pytest.raises(RuntimeError, match="exploded midway"):
        run(spec)
    rd = sorted((tmp_path / "explode").iterdir())[-1]
    import json
    test = json.loads((rd / "test.json").read_text())
    assert test["status"] == "failed"
    ports = []
    for n in ("n1", "n2", "n3"):
        cfg = json.loads((rd / "nodes" / n / "config.json").read_text())
        ports += list(cfg["ports"].values()) + [int(p["peer"].rsplit(":", 1)[1]) for p in cfg["peers"].values()]
    assert not any(is_listening(p) for p in ports)
    assert _our_processes(rd) == []


def _our_processes(rd: Path) -> list[str]:
    """Processes whose command line mentions this run dir (nodes) or toxiproxy started by it."""
    return list(processes_mentioning(str(rd)).values())


def test_ctrl_c_tears_everything_down(tmp_path):
    interrupt_a_run(tmp_path, "local", running=lambda rd: _our_processes(rd) != [],
                    gone=lambda rd: _our_processes(rd) == [])
