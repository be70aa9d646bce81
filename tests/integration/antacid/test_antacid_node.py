"""ANTACID nodes as real processes over BEEP through Toxiproxy: a chain n1 <- n2 <- n3 (n1 the
zone primary). A submission at the leaf commits at the primary and reaches every replica, its
result notification reaches the client's listener, and a replica killed with -9 and restarted
keeps its zone and catches up by pull on what it missed."""

from __future__ import annotations

import asyncio

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.antacid import PROTOCOL, layered, upstreams
from nodes.antacid import beep
from nodes.antacid import messages as m
from nodes.antacid.beep.runtime import connect
from nodes.antacid.client import AntacidClient, AntacidRefused
from nodes.antacid.server import PROFILE
from tests.waiting import eventually

ZONE = "zone.test"


def test_dag_shapes() -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    assert upstreams("chain", nodes) == {"n2": ["n1"], "n3": ["n2"], "n4": ["n3"]}
    assert upstreams("tree", nodes) == {"n2": ["n1"], "n3": ["n1"], "n4": ["n2"]}
    assert upstreams("diamond", nodes) == {"n2": ["n1"], "n3": ["n1"], "n4": ["n3", "n2"]}  # rotated by index
    for shape in ("chain", "tree", "diamond"):  # --topology's links give back the same DAG
        links = PROTOCOL.topologies[shape](nodes)
        assert upstreams(layered(nodes, links), nodes) == upstreams(shape, nodes)


def test_chain_submit_notify_kill_restart(tmp_path) -> None:
    spec = TestSpec(name="antacid-node", protocol=PROTOCOL, nodes=3, seed=5, store=str(tmp_path),
                    options={"topology": "chain", "propagate_rounds": 60})

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-node", tmp_path)) as c:
            leaf = c.client_addr(2)
            assert leaf.node == "n3"
            cl = AntacidClient(leaf.host, leaf.port, admin_url=leaf.admin_url)
            await cl.start()

            async def zones() -> dict[str, dict]:
                return {n: await c.admin(n, "GET", "/antacid/zone") for n in c.nodes}

            async def all_hold(name: str, content: str) -> bool:
                return all(z["docs"].get(name, {}).get("content") == content
                           for z in (await zones()).values())

            try:
                gsid = await cl.submit({f"{ZONE}.a": "one", f"{ZONE}.b": "two"})
                assert gsid.ssn == 1
                note = await cl.result(gsid, 15.0)
                assert note.error is None and note.csn >= 2
                assert await eventually(lambda: all_hold(f"{ZONE}.b", "two"), 15.0)
                z = await zones()
                assert {n: v["last_csn"] for n, v in z.items()} == dict.fromkeys(c.nodes, note.csn)

                # a document outside the zone is refused with an ARSError
                try:
                    await cl.submit({"x.elsewhere": "no"})
                    raise AssertionError("a document outside the zone was accepted")
                except AntacidRefused as e:
                    assert e.error.code == 123001

                # kill -9 the middle replica; the leaf's submissions wait; restart: caught up
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
                g2 = await cl.submit({f"{ZONE}.a": "three"})
                await c.nemesis_invoke({"f": "restart", "value": {"node": "n2"}})
                note2 = await cl.result(g2, 30.0)
                assert note2.error is None and note2.csn > note.csn
                assert await eventually(lambda: all_hold(f"{ZONE}.a", "three"), 20.0)
                st = await c.admin("n2", "GET", "/admin/state")
                assert st["last_csn"] == note2.csn
                ev = (await c.admin("n2", "GET", "/admin/events?since=0"))["events"]
                starts = [e for e in ev if e["type"] == "start"]
                assert len(starts) == 2 and starts[1]["last_csn"] == note.csn  # kept its zone

                # kill -9 the leaf replica while the others commit; restart: pulls what it missed
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n3"}})
                mid = c.client_addr(1)
                cl2 = AntacidClient(mid.host, mid.port)
                try:
                    g3 = await cl2.submit({f"{ZONE}.c": "four"})
                    assert (await cl2.result(g3, 15.0)).error is None
                finally:
                    await cl2.close()
                await c.nemesis_invoke({"f": "restart", "value": {"node": "n3"}})
                assert await eventually(lambda: all_hold(f"{ZONE}.c", "four"), 20.0)

                # garbage and a non-ARS MSG on the real peer port: refused, the node serves on
                port = c.ports["n1"]["peer"]
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"MSG 0 x garbage\r\n")
                await w.drain()
                w.close()
                conn = await connect("127.0.0.1", port)
                try:
                    ch = conn.session.start_channel(PROFILE, "n2")
                    while not isinstance(ev := await conn.next_event(), beep.ChannelStarted):
                        pass
                    assert ev.channel == ch
                    conn.session.send_msg(ch, b"<notars/>")
                    await conn.flush()
                    while not isinstance(ev := await conn.next_event(), beep.ErrorReply):
                        pass
                    err = m.parse(ev.body)
                    assert isinstance(err, m.ArsError) and err.code == m.MALFORMED_ANY
                finally:
                    await conn.aclose()
                st = await c.admin("n1", "GET", "/admin/state")
                assert st["io"]["malformed_in"] == 1
                assert await cl.submit({f"{ZONE}.d": "five"})
            finally:
                await cl.close()

    asyncio.run(body())


def test_write_write_conflict_detection_on_real_nodes(tmp_path) -> None:
    """Option ``detect_conflicts``: a write naming a stale CSN, submitted at a replica, is
    refused by the primary with 126001 in the result notification; one naming the current
    CSN commits."""
    spec = TestSpec(name="antacid-conflict", protocol=PROTOCOL, nodes=2, seed=6,
                    store=str(tmp_path), options={"topology": "chain", "detect_conflicts": True})

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-conflict", tmp_path)) as c:
            leaf = c.client_addr(1)
            cl = AntacidClient(leaf.host, leaf.port, admin_url=leaf.admin_url)
            await cl.start()
            try:
                name = f"{ZONE}.a"
                first = await cl.result(await cl.submit([m.DatumAndOp(name, "one", "create")]), 15.0)
                assert first.error is None
                ok = await cl.result(await cl.submit([m.DatumAndOp(name, "two", "write", first.csn)]), 15.0)
                assert ok.error is None and ok.csn == first.csn + 1
                stale = await cl.result(await cl.submit([m.DatumAndOp(name, "three", "write", first.csn)]), 15.0)
                assert stale.csn == 0 and stale.error.code == m.WRITE_CONFLICT
                assert stale.error.at.host == c.client_addr(0).host
                zone = await c.admin("n1", "GET", "/antacid/zone")
                assert zone["last_csn"] == ok.csn and zone["docs"][name]["content"] == "two"
            finally:
                await cl.close()

    asyncio.run(body())


async def _as_peer(port: int, poser: str, *reqs: m.ArsRequest) -> list[m.ArsAnswer | m.ArsError]:
    """Send ``reqs`` to a node's peer port on one ARS channel, posing as server ``poser``;
    the results of their answers, in order."""
    conn = await connect("127.0.0.1", port)
    try:
        ch = conn.session.start_channel(PROFILE, poser)
        while not isinstance(ev := await conn.next_event(), beep.ChannelStarted):
            pass
        results: list[m.ArsAnswer | m.ArsError] = []
        for req in reqs:
            conn.session.send_msg(ch, m.encode(req))
            await conn.flush()
            while not isinstance(ev := await conn.next_event(), beep.Reply | beep.ErrorReply):
                pass
            got = m.parse(ev.body)
            results.append(got.result if isinstance(got, m.ArsResponse) else got)
        return results
    finally:
        await conn.aclose()


def test_the_primary_keeps_its_reorder_queue_across_kill_9(tmp_path) -> None:
    """Submission server E's SSN 2 reaches the primary before SSN 1 and is held (4.2.2.3); the
    primary is killed with -9 and restarted; the held SSN 2 is still there (a resend is a
    duplicate), and SSN 1 releases it: both commit, in SSN order."""
    spec = TestSpec(name="antacid-held", protocol=PROTOCOL, nodes=2, seed=7, store=str(tmp_path),
                    options={"topology": "chain", "reorder_timeout": 300.0})

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-held", tmp_path)) as c:
            e = m.ServerId("e.test", 5999, 7)

            def prop(ssn: int, req: int, name: str) -> m.ArsRequest:
                return m.ArsRequest(req, m.PropagateSubmittedUpdate(
                    m.GlobalSubmitID(e, ssn), "e.test", 5999,
                    m.UpdateGroup((m.DatumAndOp(f"{ZONE}.{name}", f"ssn{ssn}", "write"),))))

            [held] = await _as_peer(c.ports["n1"]["peer"], "n2", prop(2, 1, "a"))
            assert isinstance(held, m.ArsAnswer) and held.gsid.ssn == 2
            ev = (await c.admin("n1", "GET", "/admin/events?since=0"))["events"]
            assert [x["ssn"] for x in ev if x["type"] == "hold"] == [2]
            assert (await c.admin("n1", "GET", "/antacid/zone"))["last_csn"] <= 1

            await c.nemesis_invoke({"f": "kill", "value": {"node": "n1"}})
            await c.nemesis_invoke({"f": "restart", "value": {"node": "n1"}})

            again, first = await _as_peer(c.ports["n1"]["peer"], "n2", prop(2, 2, "a"),
                                          prop(1, 3, "b"))
            assert isinstance(again, m.ArsError) and again.code == m.DUPLICATE_SUBMISSION
            assert isinstance(first, m.ArsAnswer) and first.gsid.ssn == 1

            async def committed() -> bool:
                z = await c.admin("n1", "GET", "/antacid/zone")
                return z["last_csn"] == 3
            assert await eventually(committed, 15.0)
            z = await c.admin("n1", "GET", "/antacid/zone")
            assert z["docs"] == {f"{ZONE}.b": {"content": "ssn1", "csn": 2},
                                 f"{ZONE}.a": {"content": "ssn2", "csn": 3}}

            async def replicated() -> bool:
                return (await c.admin("n2", "GET", "/antacid/zone"))["docs"] == z["docs"]
            assert await eventually(replicated, 20.0)

    asyncio.run(body())


def test_notify_ok_on_current_channel(tmp_path) -> None:
    """NotifyOkOnCurrentChannel="yes": the result comes back on the submission channel while
    it is open; with that channel closed before the result is ready, on a new channel to
    NotifyHost/NotifyPort (3.2.1.1). Without the flag, always the listener."""
    spec = TestSpec(name="antacid-onchannel", protocol=PROTOCOL, nodes=2, seed=8,
                    store=str(tmp_path), options={"topology": "chain", "propagate_rounds": 60})

    async def body() -> None:
        async with open_cluster(spec, new_run("antacid-onchannel", tmp_path)) as c:
            leaf = c.client_addr(1)
            cl = AntacidClient(leaf.host, leaf.port)
            await cl.start()
            try:
                g1 = await cl.submit({f"{ZONE}.a": "one"}, on_channel=True)
                assert (await cl.result(g1, 15.0)).error is None
                assert cl.arrived[g1] == "channel"
                g2 = await cl.submit({f"{ZONE}.a": "two"})
                assert (await cl.result(g2, 15.0)).error is None
                assert cl.arrived[g2] == "listener"
                st = await c.admin("n2", "GET", "/admin/state")
                assert st["io"]["notify_on_channel"] == 1

                # the primary down: the submission waits; its channel closes meanwhile
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n1"}})
                g3 = await cl.submit({f"{ZONE}.a": "three"}, on_channel=True)
                assert cl._conn is not None
                await cl._conn.aclose()
                await c.nemesis_invoke({"f": "restart", "value": {"node": "n1"}})
                note = await cl.result(g3, 30.0)
                assert note.error is None and cl.arrived[g3] == "listener"
                st = await c.admin("n2", "GET", "/admin/state")
                assert st["io"]["notify_on_channel"] == 1
            finally:
                await cl.close()

    asyncio.run(body())
