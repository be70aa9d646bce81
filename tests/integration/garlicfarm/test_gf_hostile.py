"""The real Garlic Farm ``hostile`` fault (nodes/garlicfarm/hostile_driver.py) against real node
processes: one burst at the leader of a 3-node cluster, as a compromised member (TLS and the
Digest handshake with the run's credentials) and, for the kinds anyone can make, without
credentials. Every node survives, the target refuses what it must where it must (no connection
without credentials gets through; out-of-range counters and bad frames are counted), keeps its
term below the bound, and the cluster still commits. (The chaos test runs it under a partition
at every node: tests/chaos/test_garlicfarm_chaos.py.)"""

from __future__ import annotations

import asyncio
import json
import random

from nodes.garlicfarm import hostile
from nodes.garlicfarm.client import WireConnection
from nodes.garlicfarm.codec import MsgType, Request
from nodes.garlicfarm.hostile_driver import GfTarget, driver, refusals
from nodes.garlicfarm.raft import MAX_COUNTER

from .cluster import LocalCluster

FORGED = 6  # the kinds only a member's link carries (hostile.messages less OUTSIDER)


def test_one_burst_at_the_leader_is_refused_and_the_cluster_commits(tmp_path):
    c = LocalCluster(tmp_path, n=3)
    try:
        c.start_all()
        first = c.leader()
        configs = {n: json.loads((tmp_path / n / "config.json").read_text()) for n in c.ids}
        targets = [GfTarget(n, c.num(n), "127.0.0.1", c.ports[n]["peer"]) for n in c.ids]

        async def go():
            sender = driver(targets, random.Random(5), configs)
            target = next(t for t in sender.targets if t.node == first)
            assert await sender.burst(target) == FORGED + 3 * len(hostile.OUTSIDER)
            leader = c.leader()
            conn = WireConnection("127.0.0.1", c.ports[leader]["peer"], tls=c.client_tls(),
                                  server_name=leader)
            try:  # the cluster still elects and commits after the bursts
                resp = await conn.request(Request(MsgType.CLIENT_REQUEST, 0, 0, 0), 5)
            finally:
                conn.close()
            return sender.counts(), resp

        counts, resp = asyncio.run(go())
        assert resp.accepted, resp
        assert [n for n in c.ids if c.procs[n].poll() is not None] == []  # nobody died
        assert sorted(counts) == [first]
        for n in [first]:
            h = counts[n]
            assert not h.get("failed"), (n, h)
            out = h["outcome"]
            for kind in hostile.OUTSIDER:  # nothing without credentials gets through
                assert out[f"{kind}@no-digest"] == {"refused-digest": 1}, (n, out)
                assert out[f"{kind}@no-tls"] == {"refused-tls": 1}, (n, out)
            # a term or commit index past the bound is refused by closing, never answered
            for kind in ("vote-max-term", "append-max-term", "append-stale-huge-commit"):
                assert out[kind] == {"closed": 1}, (n, kind, out)
            assert out["response-stale-max-next"] == {"closed": 1}, (n, out)
            st = c.admin(n, "/admin/state")
            assert st["term"] <= MAX_COUNTER, (n, st["term"])
            got = refusals(st)
            assert got.get("core:counter-out-of-range", 0) >= 3, (n, got)
            assert got.get("wire:digest-refused", 0) >= len(hostile.OUTSIDER), (n, got)
            assert got.get("wire:response-frame", 0) >= 1, (n, got)
    finally:
        c.stop_all()
