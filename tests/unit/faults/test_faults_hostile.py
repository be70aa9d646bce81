"""faults/hostile.py against real sockets on loopback, and its nemesis ops."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Iterator, Sequence

import pytest

from faults import schedules as sch
from faults.hostile import HostileDef, HostileSender, Target, report
from faults.nemesis import Nemesis
from faults.udp_relay import fmt_addr


def _provider(rng: random.Random, targets: Sequence[Target]) -> Iterator[tuple[str, str, bytes]]:
    for t in targets:
        yield t.node, "small", b"s" + rng.randbytes(3)
        yield t.node, "big", b"b" * 1000


def _refusals(state: dict) -> dict[str, int]:
    return {"malformed": int(state["malformed"])}


SPEC = HostileDef(_provider, _refusals)


@pytest.fixture
def udp_target() -> Iterator[tuple[socket.socket, Target]]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    yield s, Target("n1", 1, "127.0.0.1", s.getsockname()[1])
    s.close()


def _drain(s: socket.socket) -> list[bytes]:
    out = []
    s.settimeout(0.2)
    try:
        while True:
            out.append(s.recv(70_000))
    except TimeoutError:
        return out


def test_a_burst_arrives_as_datagrams_and_is_counted(udp_target) -> None:
    s, t = udp_target
    sender = HostileSender(SPEC, [t], random.Random(7))
    try:
        assert asyncio.run(sender.burst()) == 2
    finally:
        sender.close()
    got = _drain(s)
    assert len(got) == 2 and got[1] == b"b" * 1000 and got[0][:1] == b"s"
    assert sender.counts() == {"n1": {"sent": 2, "by_kind": {"big": 1, "small": 1}}}


def test_the_same_seed_sends_the_same_bytes(udp_target) -> None:
    s, t = udp_target
    seen = []
    for _ in range(2):
        sender = HostileSender(SPEC, [t], random.Random(7))
        asyncio.run(sender.burst())
        sender.close()
        seen.append(_drain(s))
    assert seen[0] == seen[1]


def test_start_repeats_bursts_until_stop(udp_target) -> None:
    s, t = udp_target
    sender = HostileSender(SPEC, [t], random.Random(1))

    async def go() -> None:
        sender.start(0.05)
        assert sender.running
        await asyncio.sleep(0.3)
        await sender.stop()
        assert not sender.running

    asyncio.run(go())
    sent = sender.counts()["n1"]["sent"]
    sender.close()
    assert sent >= 6 and sent % 2 == 0
    assert len(_drain(s)) == sent  # nothing after stop


def test_tcp_transport_connects_sends_and_closes() -> None:
    got: list[bytes] = []

    async def go() -> None:
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            got.append(await r.read())
            w.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        sender = HostileSender(HostileDef(_provider, _refusals, transport="tcp"),
                               [Target("n1", 1, "127.0.0.1", port)], random.Random(3))
        assert await sender.burst() == 2
        await asyncio.sleep(0.1)
        server.close()
        await server.wait_closed()

    asyncio.run(go())
    assert sorted(len(b) for b in got) == [4, 1000]


def test_refused_connection_counts_as_failed_not_sent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connect is refused
        sender = HostileSender(HostileDef(_provider, _refusals, transport="tcp"),
                               [Target("n1", 1, "127.0.0.1", port)], random.Random(3))
        assert asyncio.run(sender.burst()) == 0
    assert sender.counts() == {} and sender.failed == {"n1": 2}


def test_bad_providers_and_arguments_are_clear_errors(udp_target) -> None:
    _, t = udp_target
    stray = HostileDef(lambda rng, ts: [("n9", "x", b"x")], _refusals)
    huge = HostileDef(lambda rng, ts: [("n1", "x", b"x" * 70_000)], _refusals)
    for spec, msg in ((stray, "addressed 'n9'"), (huge, "cannot be sent")):
        sender = HostileSender(spec, [t], random.Random(0))
        with pytest.raises(ValueError, match=msg):
            asyncio.run(sender.burst())
        sender.close()
    with pytest.raises(ValueError, match="no hostile target"):
        asyncio.run(HostileSender(SPEC, [t], random.Random(0)).burst(["n2"]))
    with pytest.raises(ValueError, match="transport"):
        HostileDef(_provider, _refusals, transport="sctp")


def test_report_puts_sent_beside_refused() -> None:
    out = report(SPEC, {"n1": {"sent": 4, "by_kind": {"big": 2, "small": 2}}},
                 {"n1": {"malformed": 3}, "n2": None})
    assert out == {"n1": {"sent": 4, "by_kind": {"big": 2, "small": 2},
                          "refused": {"malformed": 3}, "refused_total": 3},
                   "n2": {"sent": 0, "by_kind": {}, "refused": None, "refused_total": None}}
    # a driver's own detail per node (Garlic Farm's answers per kind) is kept beside
    more = report(SPEC, {"n1": {"sent": 1, "by_kind": {"big": 1},
                                "outcome": {"big": {"closed": 1}}}}, {"n1": {"malformed": 0}})
    assert more["n1"]["outcome"] == {"big": {"closed": 1}} and more["n1"]["refused_total"] == 0


def test_nemesis_ops_start_stop_and_heal_all(udp_target) -> None:
    s, t = udp_target
    sender = HostileSender(SPEC, [t], random.Random(2))
    nem = Nemesis(random.Random(0), node_names=["n1"], hostile=sender)

    async def go() -> tuple[dict, dict, dict, dict]:
        start = await nem.invoke(sch.op("start-hostile", {"interval_s": 0.05}))
        await asyncio.sleep(0.15)
        stop = await nem.invoke(sch.stop_op(start))
        await nem.invoke(sch.op("start-hostile", {"nodes": ["n1"]}))
        healed = await nem.heal_all()
        bad = await nem.invoke(sch.op("start-hostile", {"nodes": ["n7"]}))
        return start, stop, healed, bad

    start, stop, healed, bad = asyncio.run(go())
    sender.close()
    assert "error" not in start and start["value"]["interval_s"] == 0.05
    assert stop["f"] == "stop-hostile" and stop["value"]["sent"]["n1"]["sent"] >= 4
    assert "hostile-stopped" in healed and not sender.running
    assert "no hostile target" in bad["error"]
    _drain(s)


def test_a_protocol_without_hostile_messages_fails_the_op_clearly() -> None:
    done = asyncio.run(Nemesis(random.Random(0)).invoke(sch.op("start-hostile", {})))
    assert "declares no hostile messages" in done["error"]


def test_hostile_is_a_named_kind_with_its_stop() -> None:
    kind = sch.kinds_for(["hostile"], ["n1", "n2"])[0]
    start = kind.make(random.Random(0))
    assert start["f"] == "start-hostile" and sch.stop_op(start)["f"] == "stop-hostile"


def test_a_message_forged_from_a_member_arrives_from_its_relay_address() -> None:
    """Through a real UdpRelay: a message with ``via`` goes into link ``via -> node`` and
    reaches the node from the address the node holds for ``via`` (L(node, via)); one without
    ``via`` comes from the attacker's own socket; a ``via`` with no route is a clear error."""
    from faults.udp_relay import UdpRelay, parse_addr

    def forged(rng: random.Random, ts: Sequence[Target]) -> Iterator[tuple]:
        yield "n1", "plain", b"p"
        yield "n1", "as-n2", b"f", "n2"

    async def go() -> tuple[list[tuple[bytes, tuple]], dict]:
        relay = UdpRelay(seed=1)
        n1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        n2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for s in (n1, n2):
                s.bind(("127.0.0.1", 0))
            listen = await relay.add_links({
                ("n1", "n2"): f"127.0.0.1:{n2.getsockname()[1]}",
                ("n2", "n1"): f"127.0.0.1:{n1.getsockname()[1]}"})
            routes = {f: parse_addr(a) for f, a in listen.items()}
            sender = HostileSender(HostileDef(forged, _refusals),
                                   [Target("n1", 1, *n1.getsockname())], random.Random(0), routes)
            assert await sender.burst() == 2
            n1.setblocking(False)
            got: list[tuple[bytes, tuple]] = []
            for _ in range(50):
                await asyncio.sleep(0.02)
                try:
                    got.append(n1.recvfrom(100))
                except BlockingIOError:
                    if len(got) == 2:
                        break
            counts = sender.counts()
            sender.close()
            lost = HostileSender(HostileDef(forged, _refusals),
                                 [Target("n1", 1, *n1.getsockname())], random.Random(0))
            with pytest.raises(ValueError, match="no route .* as if from n2"):
                await lost.burst()
            lost.close()
            return got, {"counts": counts, "n1_holds_n2_at": listen[("n1", "n2")]}
        finally:
            n1.close()
            n2.close()
            await relay.close()

    got, info = asyncio.run(go())
    by_data = {d: addr for d, addr in got}
    assert set(by_data) == {b"p", b"f"}
    assert fmt_addr(by_data[b"f"]) == info["n1_holds_n2_at"]  # what n1 knows as n2's address
    assert fmt_addr(by_data[b"p"]) != info["n1_holds_n2_at"]
    assert info["counts"] == {"n1": {"sent": 2, "by_kind": {"as-n2": 1, "plain": 1}}}


def test_start_hostile_leaves_out_the_kinds_it_is_told_to_skip(udp_target) -> None:
    """``skip`` (a sim replay's step that sent only some kinds): those kinds are not sent and
    not counted; a driver without kind filtering refuses ``skip`` instead of ignoring it."""
    s, t = udp_target
    sender = HostileSender(SPEC, [t], random.Random(2))
    nem = Nemesis(random.Random(0), node_names=["n1"], hostile=sender)

    async def go() -> dict:
        await nem.invoke(sch.op("start-hostile", {"interval_s": 3600, "skip": ["big"]}))
        await asyncio.sleep(0.1)
        return await nem.invoke(sch.op("stop-hostile"))

    stop = asyncio.run(go())
    sender.close()
    assert stop["value"]["sent"] == {"n1": {"sent": 1, "by_kind": {"small": 1}}}
    assert [d[:1] for d in _drain(s)] == [b"s"]

    class Driver:  # the DRiP driver's interface: start(interval_s, nodes), no kinds
        running = False

        def start(self, interval_s: float, nodes: object = None) -> None:
            raise AssertionError("not to be started with a skip it cannot honour")

    nem2 = Nemesis(random.Random(0), node_names=["n1"], hostile=Driver())  # type: ignore[arg-type]
    bad = asyncio.run(nem2.invoke(sch.op("start-hostile", {"skip": ["big"]})))
    assert "needs the generic hostile sender" in bad["error"]


def test_a_burst_at_one_node_is_built_knowing_every_member(udp_target) -> None:
    """A forged message names another member (SWIM's ``member-*``): a burst at n1 alone is
    built with n2 in view, and only what is addressed to n1 is sent."""
    s, t = udp_target
    seen: list[list[str]] = []

    def forger(rng: random.Random, ts: Sequence[Target]) -> Iterator[tuple]:
        seen.append([x.node for x in ts])
        for x in ts:
            others = [o.node for o in ts if o.node != x.node]
            if others:
                yield x.node, "names-another", others[0].encode()

    other = Target("n2", 2, "127.0.0.1", 9)  # the discard port: nothing is sent to it
    sender = HostileSender(HostileDef(forger, _refusals), [other, t], random.Random(0))
    try:
        assert asyncio.run(sender.burst(["n1"])) == 1
    finally:
        sender.close()
    assert seen == [["n1", "n2"]] and _drain(s) == [b"n2"]
    assert sender.counts() == {"n1": {"sent": 1, "by_kind": {"names-another": 1}}}


def test_start_hostile_resolves_a_pick_and_passes_skip_to_a_driver_that_takes_it() -> None:
    """A sim replay's Garlic Farm step names ``"leader"``/``"follower"``: the nemesis resolves
    the pick when the op runs and says whom it chose; a driver that declares ``takes_skip``
    (Garlic Farm's) gets the kinds to leave out."""

    class Control:  # only what _resolve asks of a NodeControl
        async def leader(self) -> str | None:
            return "n2"

    class Driver:
        takes_skip = True
        running = False
        started: list[tuple[float, list[str] | None, list[str]]] = []

        def start(self, interval_s: float, nodes: list[str] | None = None,
                  skip: list[str] = ()) -> None:  # type: ignore[assignment]
            self.started.append((interval_s, nodes, list(skip)))

    d = Driver()
    nem = Nemesis(random.Random(0), nodes=Control(), node_names=["n1", "n2", "n3"],  # type: ignore[arg-type]
                  hostile=d)  # type: ignore[arg-type]

    async def go() -> tuple[dict, dict]:
        lead = await nem.invoke(sch.op("start-hostile", {"nodes": "leader", "skip": ["big"]}))
        fol = await nem.invoke(sch.op("start-hostile", {"nodes": "follower"}))
        return lead, fol

    lead, fol = asyncio.run(go())
    assert "error" not in lead and lead["value"]["nodes"] == ["n2"], lead
    assert fol["value"]["nodes"][0] in ("n1", "n3"), fol
    assert d.started[0] == (0.5, ["n2"], ["big"]) and d.started[1][1] != ["n2"]
