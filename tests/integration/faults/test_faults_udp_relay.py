"""The UDP link relay on loopback: addressing, drops, delays, one-way cuts, process mode."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from typing import Any

from faults_helpers import pid_alive, port_listening, port_of

from faults.links import CLIENT, Kind
from faults.nemesis import Nemesis
from faults.udp_relay import (
    UdpLinks,
    UdpRelay,
    UdpRelayClient,
    UdpRelayProcess,
    fmt_addr,
    parse_addr,
)


class Peer(asyncio.DatagramProtocol):
    """A UDP node: records (data, sender, arrival time); answers b"ping..." with b"pong..."."""

    def __init__(self) -> None:
        self.got: list[tuple[bytes, tuple[str, int], float]] = []
        self.transport: Any = None
        self.arrived = asyncio.Event()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.got.append((data, addr, time.monotonic()))
        self.arrived.set()
        if data.startswith(b"ping"):
            self.transport.sendto(b"pong" + data[4:], addr)

    def send(self, data: bytes, addr: str) -> None:
        self.transport.sendto(data, parse_addr(addr))

    @property
    def addr(self) -> str:
        return fmt_addr(self.transport.get_extra_info("sockname")[:2])


async def peer() -> Peer:
    loop = asyncio.get_running_loop()
    _, p = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.1", 0))
    return p


async def setup(relay: UdpRelay | UdpRelayClient) -> tuple[dict[str, Peer], UdpLinks]:
    peers = {n: await peer() for n in ("a", "b", CLIENT)}
    real = {("a", "b"): peers["b"].addr, ("b", "a"): peers["a"].addr,
            (CLIENT, "b"): peers["b"].addr}
    return peers, await UdpLinks.create(relay, real)


async def teardown(peers: dict[str, Peer], links: UdpLinks) -> None:
    await links.close()
    for p in peers.values():
        p.transport.close()


async def settle(s: float = 0.1) -> None:
    await asyncio.sleep(s)


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_addressing_stable_sender_and_replies_go_back_through_the_reverse_link() -> None:
    async def body() -> None:
        peers, links = await setup(UdpRelay(seed=1))
        try:
            peers["a"].send(b"ping1", links.listen[("a", "b")])
            await settle()
            data, sender, _ = peers["b"].got[0]
            assert data == b"ping1"
            assert fmt_addr(sender) == links.listen[("b", "a")]  # b sees a at b's address for a
            data, sender, _ = peers["a"].got[0]
            assert data == b"pong1" and fmt_addr(sender) == links.listen[("a", "b")]
            # a client (no reverse link) gets its reply from the address it sent to
            peers[CLIENT].send(b"ping2", links.listen[(CLIENT, "b")])
            await settle()
            data, sender, _ = peers[CLIENT].got[0]
            assert data == b"pong2" and fmt_addr(sender) == links.listen[(CLIENT, "b")]
            stats = await links.relay.stats()
            assert stats[("b", CLIENT)].forwarded == 1
        finally:
            await teardown(peers, links)
    run(body())


async def blast(src: Peer, dst_addr: str, n: int) -> None:
    for i in range(n):
        src.send(b"d%d" % i, dst_addr)
        if i % 50 == 49:
            await asyncio.sleep(0.002)  # pace, so no kernel buffer drops distort the count


def test_drop_all_and_drop_thirty_percent_seeded() -> None:
    async def dropped(seed: int, p: float, n: int) -> tuple[int, int, int]:
        peers, links = await setup(UdpRelay(seed=seed))
        try:
            await links.apply(Kind.LOSS, [("a", "b")], p=p)
            await blast(peers["a"], links.listen[("a", "b")], n)
            await settle(0.2)
            s = (await links.relay.stats())[("a", "b")]
            assert s.received == n
            return s.dropped, s.forwarded, len(peers["b"].got)
        finally:
            await teardown(peers, links)

    async def body() -> None:
        assert await dropped(1, 1.0, 200) == (200, 0, 0)
        d, fwd, got = await dropped(7, 0.3, 1000)
        assert 250 <= d <= 350 and fwd == got == 1000 - d
        assert (await dropped(7, 0.3, 1000))[0] == d  # same seed, same drops
    run(body())


def test_duplicate_delivers_twice_and_heals() -> None:
    async def body() -> None:
        peers, links = await setup(UdpRelay(seed=5))
        try:
            await links.apply(Kind.DUPLICATE, [("a", "b")], p=1.0)
            await blast(peers["a"], links.listen[("a", "b")], 50)
            await settle(0.2)
            s = (await links.relay.stats())[("a", "b")]
            assert s.received == 50 and s.duplicated == 50 and len(peers["b"].got) == 100
            payloads = [g[0] for g in peers["b"].got]
            assert all(payloads.count(p) == 2 for p in set(payloads))
            await links.heal(Kind.DUPLICATE)
            await blast(peers["a"], links.listen[("a", "b")], 10)
            await settle(0.2)
            assert len(peers["b"].got) == 110
        finally:
            await teardown(peers, links)
    run(body())


def test_latency_and_jitter_delay_datagrams() -> None:
    async def body() -> None:
        peers, links = await setup(UdpRelay(seed=3))
        try:
            await links.latency([("a", "b")], ms=100, one_way=True)
            t0 = time.monotonic()
            peers["a"].send(b"pingslow", links.listen[("a", "b")])
            await asyncio.wait_for(peers["b"].arrived.wait(), 2)
            assert peers["b"].got[0][2] - t0 >= 0.100
            # b's reply (flow b -> a) is not delayed by a one-way a -> b latency
            await settle(0.05)
            assert peers["a"].got[0][2] - peers["b"].got[0][2] < 0.05

            await links.latency([("a", "b")], ms=60, jitter_ms=40, one_way=True)
            peers["b"].got.clear()
            sent = {}
            for i in range(30):
                sent[b"j%d" % i] = time.monotonic()
                peers["a"].send(b"j%d" % i, links.listen[("a", "b")])
            await settle(0.3)
            delays = [t - sent[d] for d, _, t in peers["b"].got]
            assert len(delays) == 30
            assert all(0.019 <= x <= 0.2 for x in delays) and max(delays) - min(delays) > 0.02
            assert (await links.relay.stats())[("a", "b")].delayed == 31
        finally:
            await teardown(peers, links)
    run(body())


def test_one_way_cut_and_heal() -> None:
    async def body() -> None:
        peers, links = await setup(UdpRelay())
        try:
            assert await links.cut([("a", "b")], one_way=True) == [("a", "b")]
            peers["a"].send(b"lost", links.listen[("a", "b")])
            peers["b"].send(b"fine", links.listen[("b", "a")])
            await settle()
            assert peers["b"].got == [] and [g[0] for g in peers["a"].got] == [b"fine"]
            assert await links.heal() == [("a", "b")]
            peers["a"].send(b"back", links.listen[("a", "b")])
            await settle()
            assert [g[0] for g in peers["b"].got] == [b"back"]
        finally:
            await teardown(peers, links)
    run(body())


def test_relay_process_over_http_and_no_leak_after_close() -> None:
    async def body(proc: UdpRelayProcess) -> list[int]:
        peers, links = await setup(proc.client())
        try:
            nem = Nemesis(random.Random(0), None, links, node_names=["a", "b"])
            done = await nem.invoke({"f": "start-loss", "value": {"p": 1.0}})
            assert done["value"]["flows"] == [["a", "b"], ["b", "a"]], done
            await blast(peers["a"], links.listen[("a", "b")], 100)
            await settle()
            assert peers["b"].got == []
            stats = await links.relay.stats()
            assert stats[("a", "b")].dropped == 100
            await nem.invoke({"f": "stop-loss", "value": None})
            peers["a"].send(b"ok", links.listen[("a", "b")])
            await settle()
            assert [g[0] for g in peers["b"].got] == [b"ok"]
            return [port_of(a) for a in links.listen.values()]
        finally:
            await teardown(peers, links)

    with UdpRelayProcess(seed=5) as proc:
        pid, control = proc.proc.pid, port_of(proc.url)
        udp_ports = asyncio.run(asyncio.wait_for(body(proc), 20))
        assert all(port_listening(p, socket.SOCK_DGRAM) for p in udp_ports)
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)
    assert not port_listening(control)
    assert not any(port_listening(p, socket.SOCK_DGRAM) for p in udp_ports)


def test_link_sockets_on_their_own_host_and_retarget_to_a_moved_node() -> None:
    """The docker-bridge shape on loopback aliases: control on 127.0.0.1, link sockets on
    127.0.0.2 (the gateway), b on 127.0.0.3 (its container), first known only at 127.0.0.1
    (where nothing listens). Before the retarget b gets nothing; after it, b gets a's
    datagram from b's own address for a, and b's reply reaches a through the reverse link."""
    async def body(proc: UdpRelayProcess) -> None:
        loop = asyncio.get_running_loop()
        _, a = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.2", 0))
        _, b = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.3", 0))
        client = proc.client()
        links = await UdpLinks.create(client, {("a", "b"): f"127.0.0.1:{port_of(b.addr)}",
                                               ("b", "a"): a.addr})
        try:
            assert all(parse_addr(x)[0] == "127.0.0.2" for x in links.listen.values())
            assert proc.url.startswith("http://127.0.0.1:")
            a.send(b"ping1", links.listen[("a", "b")])
            await settle()
            assert b.got == []
            assert await client.retarget("b", "127.0.0.3") == [("a", "b")]
            a.send(b"ping2", links.listen[("a", "b")])
            await settle()
            assert [(d, fmt_addr(s)) for d, s, _ in b.got] == [(b"ping2", links.listen[("b", "a")])]
            assert [d for d, _, _ in a.got] == [b"pong2"]
            try:
                await client.retarget("nobody", "127.0.0.3")
                raise AssertionError("a retarget to an unknown node must be refused")
            except RuntimeError as e:
                assert "no link into 'nobody'" in str(e)
        finally:
            await links.close()
            a.transport.close()
            b.transport.close()

    with UdpRelayProcess(seed=5, link_host="127.0.0.2") as proc:
        asyncio.run(asyncio.wait_for(body(proc), 20))
