"""Two zones on three real ANTACID nodes over BEEP through Toxiproxy (test option
``zone_count`` 2): zone.test with primary n1 (chain n1 <- n2 <- n3) and zone2.test with
primary n2 (chain n2 <- n3 <- n1). Submissions interleaved at one leaf commit at each zone's
own primary with their own SSNs and CSNs, reach every replica of that zone and nothing else;
a kill -9 and restart keeps both zones; the checker judges the two zones apart."""

from __future__ import annotations

import asyncio

from checkers import csn_order
from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.antacid import PROTOCOL, primaries, zone_names
from nodes.antacid.client import AntacidClient, AntacidRefused
from tests.waiting import eventually

ZA, ZB = "zone.test", "zone2.test"


def test_two_zones_with_different_primaries_on_real_nodes(tmp_path) -> None:
    spec = TestSpec(name="antacid-zones", protocol=PROTOCOL, nodes=3, seed=7,
                    store=str(tmp_path),
                    options={"topology": "chain", "zone_count": 2, "propagate_rounds": 60})
    assert zone_names(spec) == [ZA, ZB] and primaries(spec) == {ZA: "n1", ZB: "n2"}

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-zones", tmp_path)) as c:
            leaf = c.client_addr(0)  # n1: primary of zone a, the leaf of zone b
            assert leaf.node == "n1"
            cl = AntacidClient(leaf.host, leaf.port, admin_url=leaf.admin_url)
            await cl.start()

            async def zone(n: str, z: str) -> dict:
                return await c.admin(n, "GET", f"/antacid/zone?zone={z}")

            async def all_at(z: str, csn: int) -> bool:
                at = [(await zone(n, z))["last_csn"] for n in c.nodes]
                return at == [csn] * len(c.nodes)

            try:
                got = []
                for i in range(3):  # a, b, a, b, a, b
                    for z in (ZA, ZB):
                        g = await cl.submit({f"{z}.d{i}": f"{z}-{i}"})
                        got.append((z, g))
                assert [g.ssn for _, g in got] == [1, 1, 2, 2, 3, 3]  # per (server, zone)
                notes = {(z, g.ssn): await cl.result(g, 20.0, z) for z, g in got}
                assert all(nt.error is None for nt in notes.values())
                assert sorted((nt.zone, nt.csn) for nt in notes.values()) == [
                    (ZA, 2), (ZA, 3), (ZA, 4), (ZB, 2), (ZB, 3), (ZB, 4)]
                assert await eventually(lambda: all_at(ZA, 4), 20.0)
                assert await eventually(lambda: all_at(ZB, 4), 20.0)
                for n in c.nodes:
                    a, b = await zone(n, ZA), await zone(n, ZB)
                    assert sorted(a["docs"]) == [f"{ZA}.d{i}" for i in range(3)], n
                    assert sorted(b["docs"]) == [f"{ZB}.d{i}" for i in range(3)], n
                # each zone's primary is its own node
                st = {n: await c.admin(n, "GET", "/admin/state") for n in c.nodes}
                assert {z: [n for n in c.nodes if st[n]["zones"][z]["primary"]]
                        for z in (ZA, ZB)} == {ZA: ["n1"], ZB: ["n2"]}
                assert st["n1"]["zones"][ZB]["upstreams"] == ["n3"]
                # a group spanning both zones is refused whole (123003)
                try:
                    await cl.submit({f"{ZA}.x": "1", f"{ZB}.x": "2"})
                    raise AssertionError("a group spanning two zones was accepted")
                except AntacidRefused as e:
                    assert e.error.code == 123003

                # kill -9 zone b's primary; zone a keeps committing; restart: zone b resumes
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
                ga = await cl.submit({f"{ZA}.after": "a"})
                assert (await cl.result(ga, 20.0, ZA)).csn == 5
                gb = await cl.submit({f"{ZB}.after": "b"})
                await c.nemesis_invoke({"f": "restart", "value": {"node": "n2"}})
                nb = await cl.result(gb, 30.0, ZB)
                assert nb.error is None and (nb.zone, nb.csn) == (ZB, 5)
                assert await eventually(lambda: all_at(ZA, 5), 20.0)
                assert await eventually(lambda: all_at(ZB, 5), 20.0)
                st2 = await c.admin("n2", "GET", "/admin/state")
                assert st2["zones"][ZB]["last_ssn"] == 0 and st2["zones"][ZA]["last_csn"] == 5

                # the ordering checker on the nodes' journals and final states: valid, per zone
                obs = {"nodes": {}}
                for n in c.nodes:
                    ev = (await c.admin(n, "GET", "/admin/events?since=0"))["events"]
                    obs["nodes"][n] = {"events": ev,
                                       "state": await c.admin(n, "GET", "/admin/state")}
                history = [{"index": i, "process": 0, "f": "submit", "type": "ok",
                            "value": {"server": f"{g.server.host}:{g.server.port}",
                                      "incarn": g.server.incarn, "ssn": g.ssn,
                                      "csn": notes[(z, g.ssn)].csn, "zone": z}}
                           for i, (z, g) in enumerate(got)]
                r = csn_order.check({}, history, obs)
                assert r.stats["zones"] == [ZA, ZB]
                for leaf_name in ("csn-order", "ssn-order", "no-double-commit",
                                  "convergence", "acked-present"):
                    assert r.find(leaf_name).valid is True, r.explain()
            finally:
                await cl.close()

    asyncio.run(body())
