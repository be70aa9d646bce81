"""Two runs on one machine that would draw the same ports (same allocator seed) both start,
with real processes: the failure seen in a 10-seed DRiP chaos run, where another run took a
node's peer port between the harness choosing it and the node binding it."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from osutil import ports
from tests.integration.harness.test_cluster import ECHO

ROOT = Path(__file__).resolve().parents[3]

# The other run: reserves ports as a harness would, binds them only when told (its nodes
# starting later than ours chose theirs), then reports whether any was already taken.
OTHER = """
import random, socket, sys
from osutil import ports
ports._rng = random.Random(int(sys.argv[1]))
mine = [ports.free_port() for _ in range(int(sys.argv[2]))]
print(" ".join(map(str, mine)), flush=True)
sys.stdin.readline()
held, clashed = [], []
for p in mine:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.listen(); held.append(s)
    except OSError:
        clashed.append(p)
print("clashed " + " ".join(map(str, clashed)), flush=True)
sys.stdin.readline()
"""


def test_a_run_starts_beside_another_that_drew_the_same_ports(tmp_path, monkeypatch):
    monkeypatch.setenv(ports.PORTS_DIR_ENV, str(tmp_path / "ports"))
    seed = 20261125
    other = subprocess.Popen([sys.executable, "-c", OTHER, str(seed), "40"], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdin is not None
        theirs = {int(p) for p in other.stdout.readline().split()}
        assert len(theirs) == 40
        # the premise: with their seed, our allocator's first draw is one of their ports
        draw = random.Random(seed)
        lo, hi = ports.ephemeral_range()
        r0, r1 = draw.choice([(r0, r1) for r0, r1 in ((10000, lo - 1), (hi + 1, 65535)) if r1 - r0 > 1000])
        assert draw.randint(r0, r1) in theirs
        monkeypatch.setattr(ports, "_rng", random.Random(seed))  # we draw their ports first

        async def body() -> tuple[set[int], set[int]]:
            spec = TestSpec(name="clash", protocol=ECHO, nodes=3, seed=3, store=str(tmp_path))
            async with open_cluster(spec, new_run("clash", tmp_path)) as c:
                nodes = {p for n in c.nodes for p in c.ports[n].values()}
                assert all((tmp_path / "ports" / f"{p}.port").exists() for p in nodes)
                ours = nodes | {int(v.rsplit(":", 1)[1]) for v in c.links.values()}
                for n in c.nodes:  # every node up and answering
                    assert (await c.admin(n, "GET", "/admin/health"))["ok"]
                other.stdin.write("bind\n")
                other.stdin.flush()
                clash = await asyncio.to_thread(other.stdout.readline)
                assert clash.split() == ["clashed"], clash  # their nodes would start too
                return ours, nodes

        ours, nodes = asyncio.run(body())
        # closed: the stopped nodes' ports are given back, the other run's stay reserved
        assert not any((tmp_path / "ports" / f"{p}.port").exists() for p in nodes)
        assert all((tmp_path / "ports" / f"{p}.port").exists() for p in theirs)
        assert len(ours) == 3 * len(ECHO.ports) + 9 and not ours & theirs
    finally:
        other.kill()
        other.wait()

