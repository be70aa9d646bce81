"""Link faults against the real toxiproxy-server: bytes really stop, slow down, reset."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import toxiproxy.exceptions as legacy
from faults_helpers import Recorder, connect, echo_server, read_within
from toxiproxy.api import APIConsumer

from faults import partitions as P
from faults.links import CLIENT, Kind, TcpLinks, node_pairs
from faults.nemesis import Nemesis
from faults.toxiproxy import (
    InvalidToxicError,
    NotFoundError,
    ProxyExistsError,
    Toxic,
    ToxicExistsError,
    ToxiproxyServer,
    legacy_client,
)


def run(coro):  # noqa: ANN001, ANN201 - tiny sync bridge, no pytest-asyncio in the project
    return asyncio.run(asyncio.wait_for(coro, 20))


async def echo_link(server: ToxiproxyServer, prefix: str):  # noqa: ANN201
    echo, addr = await echo_server()
    links = await TcpLinks.create(server.client(prefix), {(CLIENT, "n1"): addr})
    return echo, links


def test_cut_black_holes_and_heal_gives_a_clean_new_connection(toxiproxy, prefix) -> None:
    async def body() -> None:
        echo, links = await echo_link(toxiproxy, prefix)
        try:
            r, w = await connect(links.listen[(CLIENT, "n1")])
            w.write(b"hello")
            assert await read_within(r, 5, 1.0) == b"hello"
            await links.cut([(CLIENT, "n1")])
            w.write(b"lost?")
            assert await read_within(r, 5, 0.5) is None  # silence: no reply, no EOF
            r2, w2 = await connect(links.listen[(CLIENT, "n1")])  # new connections hang too
            w2.write(b"new")
            assert await read_within(r2, 3, 0.5) is None
            await links.heal()
            # the connections that crossed the cut are closed, not left with a hole in them
            assert await read_within(r, 5, 1.0) == b""
            r3, w3 = await connect(links.listen[(CLIENT, "n1")])
            w3.write(b"again")
            assert await read_within(r3, 5, 1.0) == b"again"
            for wr in (w, w2, w3):
                wr.close()
        finally:
            await links.close()
            echo.close()
    run(body())


def test_old_connection_is_closed_at_heal(toxiproxy, prefix) -> None:
    async def body() -> None:
        echo, links = await echo_link(toxiproxy, prefix)
        try:
            r, w = await connect(links.listen[(CLIENT, "n1")])
            await links.cut([(CLIENT, "n1")])
            await links.heal()
            assert await read_within(r, 1, 1.0) == b""  # EOF: the node must reconnect
            w.close()
        finally:
            await links.close()
            echo.close()
    run(body())


def test_one_way_cut_blocks_only_that_direction(toxiproxy, prefix) -> None:
    """Cut a->b: a's requests to b and a's replies to b vanish; b->a traffic still flows."""
    async def body() -> None:
        a, b = await Recorder().start(), await Recorder().start()
        links = await TcpLinks.create(toxiproxy.client(prefix),
                                      {("a", "b"): b.addr, ("b", "a"): a.addr})
        try:
            ra, wa = await connect(links.listen[("a", "b")])  # a's connection to b
            rb, wb = await connect(links.listen[("b", "a")])  # b's connection to a
            b_in, b_out = await b.accept()
            a_in, a_out = await a.accept()
            await links.cut([("a", "b")], one_way=True)

            wa.write(b"a-req")                                  # a -> b upstream: cut
            assert await read_within(b_in, 5, 0.5) is None
            b_out.write(b"b-rep")                               # b -> a downstream: flows
            assert await read_within(ra, 5, 1.0) == b"b-rep"
            wb.write(b"b-req")                                  # b -> a upstream: flows
            assert await read_within(a_in, 5, 1.0) == b"b-req"
            a_out.write(b"a-rep")                               # a -> b downstream: cut
            assert await read_within(rb, 5, 0.5) is None
            for wr in (wa, wb, b_out, a_out):
                wr.close()
        finally:
            await links.close()
            await a.close()
            await b.close()
    run(body())


def test_latency_delays_by_at_least_its_amount(toxiproxy, prefix) -> None:
    async def rtt(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> float:
        t0 = time.monotonic()
        w.write(b"x")
        assert await read_within(r, 1, 3.0) == b"x"
        return time.monotonic() - t0

    async def body() -> None:
        echo, links = await echo_link(toxiproxy, prefix)
        try:
            r, w = await connect(links.listen[(CLIENT, "n1")])
            assert await rtt(r, w) < 0.1
            await links.latency([(CLIENT, "n1")], ms=150, one_way=True)
            assert await rtt(r, w) >= 0.150
            await links.latency([(CLIENT, "n1")], ms=100)  # both ways: 2 x 100 ms per round trip
            assert await rtt(r, w) >= 0.200
            await links.heal(Kind.LATENCY)
            assert await rtt(r, w) < 0.1  # latency heal keeps the connection
            w.close()
        finally:
            await links.close()
            echo.close()
    run(body())


def test_reset_peer_resets_the_connection(toxiproxy, prefix) -> None:
    async def body() -> None:
        echo, links = await echo_link(toxiproxy, prefix)
        try:
            await links.reset_peer([(CLIENT, "n1")])
            r, w = await connect(links.listen[(CLIENT, "n1")])
            w.write(b"boom")
            with pytest.raises(ConnectionResetError):  # an RST, not a FIN
                await asyncio.wait_for(r.read(4), 2.0)
            w.close()
        finally:
            await links.close()
            echo.close()
    run(body())


def test_bandwidth_and_slicer_still_deliver(toxiproxy, prefix) -> None:
    async def body() -> None:
        echo, links = await echo_link(toxiproxy, prefix)
        try:
            await links.slicer([(CLIENT, "n1")], average_size=4, size_variation=2, delay_us=100)
            await links.bandwidth([(CLIENT, "n1")], kbps=64, one_way=True)
            r, w = await connect(links.listen[(CLIENT, "n1")])
            payload = bytes(range(256)) * 16  # 4 KiB at 64 KB/s: ~60 ms
            t0 = time.monotonic()
            w.write(payload)
            got = await asyncio.wait_for(r.readexactly(len(payload)), 5)
            assert got == payload and time.monotonic() - t0 >= 0.04
            w.close()
        finally:
            await links.close()
            echo.close()
    run(body())


def test_errors_are_typed_and_compatible_with_toxiproxy_python(toxiproxy, prefix) -> None:
    async def body() -> None:
        client = toxiproxy.client(prefix)
        try:
            await client.create_proxies({"x": "127.0.0.1:9"})
            with pytest.raises(ProxyExistsError) as e:
                await client.create_proxies({"x": "127.0.0.1:9"})
            assert isinstance(e.value, legacy.ProxyExists)
            await client.add_toxic("x", Toxic("latency", attributes={"latency": 1}))
            with pytest.raises(ToxicExistsError):
                await client.add_toxic("x", Toxic("latency", attributes={"latency": 1}))
            with pytest.raises(InvalidToxicError, match="invalid toxic type"):
                await client.add_toxic("x", Toxic("nonsense"))
            with pytest.raises(NotFoundError) as nf:
                await client.remove_toxic("x", "nope", missing_ok=False)
            assert isinstance(nf.value, legacy.NotFound) and nf.value.status == 404
            await client.remove_toxic("x", "nope")  # missing_ok by default
            assert [t.name for t in await client.toxics("x")] == ["latency_downstream"]
        finally:
            await client.delete_proxies()
            await client.close()
    run(body())


def test_prefixes_isolate_concurrent_runs(toxiproxy, prefix) -> None:
    async def body() -> None:
        mine, theirs = toxiproxy.client(prefix + "a-"), toxiproxy.client(prefix + "b-")
        try:
            ports_a = await mine.create_proxies({f"l{i}": "127.0.0.1:9" for i in range(5)})
            ports_b = await theirs.create_proxies({f"l{i}": "127.0.0.1:9" for i in range(5)})
            assert len(set(ports_a.values()) | set(ports_b.values())) == 10  # no collisions
            assert sorted(await mine.delete_proxies()) == [f"l{i}" for i in range(5)]
            assert sorted(await theirs.proxies()) == [f"l{i}" for i in range(5)]
        finally:
            await theirs.delete_proxies()
            await mine.close()
            await theirs.close()
    run(body())


def test_nemesis_partition_over_real_proxies(toxiproxy, prefix) -> None:
    """halves on 5 nodes: n1 still reaches n2, not n3; stop-partition restores n1->n3."""
    async def body() -> None:
        nodes = ["n1", "n2", "n3", "n4", "n5"]
        servers = {n: await echo_server() for n in nodes}
        links = await TcpLinks.create(toxiproxy.client(prefix),
                                      {(a, b): servers[b][1] for a, b in node_pairs(nodes)})
        nem = Nemesis(random.Random(0), None, links, node_names=nodes)
        try:
            done = await nem.invoke({"f": "start-partition", "value": {"shape": "halves"}})
            assert done["value"]["cut"] == P.encode(P.halves(nodes))

            async def reaches(a: str, b: str) -> bool:
                r, w = await connect(links.listen[(a, b)])
                w.write(b"?")
                ok = await read_within(r, 1, 0.3) == b"?"
                w.close()
                return ok

            assert await reaches("n1", "n2") and await reaches("n3", "n5")
            assert not await reaches("n1", "n3") and not await reaches("n4", "n2")
            await nem.invoke({"f": "stop-partition", "value": None})
            assert await reaches("n1", "n3")
            assert (await nem.heal_all())["links"] == []
        finally:
            await links.close()
            for s, _ in servers.values():
                s.close()
    run(body())


def test_toxiproxy_python_sees_and_drives_our_proxies(toxiproxy, prefix) -> None:
    """Interop: the old client, aimed at our server, reads what the wrapper made."""
    async def body() -> None:
        links = await TcpLinks.create(toxiproxy.client(prefix), {("a", "b"): "127.0.0.1:9"})
        try:
            await links.cut([("a", "b")], one_way=True)
            with legacy_client(toxiproxy.url) as old:  # blocking calls: fine in a test
                proxy = old.get_proxy(prefix + "a_to_b")
                assert proxy is not None and proxy.listen == links.listen[("a", "b")]
                assert sorted(proxy.toxics()) == ["h_cut_upstream"]
                proxy.add_toxic(type="latency", attributes={"latency": 5})
            assert APIConsumer.port == 8474  # the global address is restored
            toxics = await links.client.toxics("a_to_b")
            assert sorted(t.type for t in toxics) == ["latency", "timeout"]
        finally:
            await links.close()
    run(body())
