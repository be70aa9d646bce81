"""Several zones per ARS server (`nodes.antacid.zones`): two zones with different primaries
and DAGs on the same three servers, submissions interleaved; every message crosses the real
XML encoding (tests/unit/antacid/net.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nodes.antacid import messages as m
from nodes.antacid.core import ReadZone
from nodes.antacid.state import Topology
from nodes.antacid.zones import ZonedCore, restore_zones, zone_of
from nodes.common.effects import Emit, Persist, SetTimer
from tests.unit.antacid.net import Net

SERVERS = {"n1": ("n1.test", 5001), "n2": ("n2.test", 5002), "n3": ("n3.test", 5003)}
ZA, ZB = "blocks:a", "blocks:b"
#: zone a: n1 primary, n1 -> n2 -> n3; zone b: n2 primary, n2 -> n1 -> n3
TOPOS = {ZA: Topology(ZA, "n1", SERVERS, {"n2": ("n1",), "n3": ("n2",)}),
         ZB: Topology(ZB, "n2", SERVERS, {"n1": ("n2",), "n3": ("n1",)})}


@dataclass
class ZNet(Net):
    """`Net` with a `ZonedCore` per node."""

    def boot(self, node: str, incarn: int) -> None:
        durables = restore_zones(self.records.get(node, []), TOPOS, incarn)
        self.cores[node] = ZonedCore(node, TOPOS, durables, self.options)  # type: ignore[assignment]
        self.take(node, self.cores[node].start(self.now))

    def zdocs(self, node: str, zone: str) -> dict[str, tuple[str, int]]:
        return dict(self.cores[node].zones[zone].durable.docs)  # type: ignore[attr-defined]

    def zlog(self, node: str, zone: str) -> list[tuple[int, str, int]]:
        return [(e.csn, e.gsid.server.host, e.gsid.ssn)
                for e in self.cores[node].zones[zone].durable.log]  # type: ignore[attr-defined]


def net() -> ZNet:
    n = ZNet(topology=Topology(ZA, "n1", SERVERS, {"n2": ("n1",), "n3": ("n2",)}))
    n.run()
    return n


def test_two_zones_interleaved_have_independent_ssns_and_csns() -> None:
    z = net()
    sub = []
    for i in range(3):  # interleaved at the leaf n3: a, b, a, b, a, b
        sub.append(z.submit("n3", (f"{ZA}.d{i}", f"a{i}", "write")).gsid)
        sub.append(z.submit("n3", (f"{ZB}.d{i}", f"b{i}", "write")).gsid)
    # SSNs per (server, zone) (3.1.2): both zones count 1, 2, 3 at n3
    assert [g.ssn for g in sub] == [1, 1, 2, 2, 3, 3]
    z.run()
    for node in SERVERS:
        assert z.zlog(node, ZA) == [(2, "n3.test", 1), (3, "n3.test", 2), (4, "n3.test", 3)]
        assert z.zlog(node, ZB) == [(2, "n3.test", 1), (3, "n3.test", 2), (4, "n3.test", 3)]
        assert z.zdocs(node, ZA) == {f"{ZA}.d{i}": (f"a{i}", i + 2) for i in range(3)}
        assert z.zdocs(node, ZB) == {f"{ZB}.d{i}": (f"b{i}", i + 2) for i in range(3)}
    # each zone's CSNs came from its own primary: n1 committed zone a, n2 zone b
    assert z.cores["n1"].zones[ZA].primary and z.cores["n2"].zones[ZB].primary
    assert {(x.zone, x.csn) for x in z.notified} == {(ZA, 2), (ZA, 3), (ZA, 4),
                                                     (ZB, 2), (ZB, 3), (ZB, 4)}
    # more commits in one zone move only that zone's CSN
    z.submit("n1", (f"{ZA}.d0", "again", "write"))
    z.run()
    assert [c.zones[ZA].durable.last_csn for c in z.cores.values()] == [5, 5, 5]
    assert [c.zones[ZB].durable.last_csn for c in z.cores.values()] == [4, 4, 4]


def test_zoned_effects_name_their_zone() -> None:
    z = net()
    z.submit("n3", (f"{ZB}.x", "v", "write"))
    fx = z.cores["n2"].on_timer((ZB, "pull"), 0.0) + z.cores["n3"].on_timer((ZA, "pull"), 0.0)
    assert all(isinstance(e.name, tuple) and e.name[0] in TOPOS
               for e in fx if isinstance(e, SetTimer))
    recs = z.records["n3"]
    assert recs and all(r[0] == "at" and r[1] in TOPOS for r in recs)
    core = z.cores["n3"]
    events = core.on_command(m.SubmitUpdate(m.UpdateGroup((m.DatumAndOp(f"{ZA}.y", "v"),))),
                             "t", 0.0)
    assert {e.fields["zone"] for e in events if isinstance(e, Emit)} == {ZA}
    assert all(p.record[1] == ZA for p in events if isinstance(p, Persist))


def test_submission_spanning_zones_or_outside_them_is_refused() -> None:
    z = net()
    both = z.submit("n1", (f"{ZA}.x", "1", "write"), (f"{ZB}.x", "2", "write"))
    assert isinstance(both, m.ArsError) and both.code == m.SPANS_ZONES
    none = z.submit("n1", ("blocks:c.x", "1", "write"))
    assert isinstance(none, m.ArsError) and none.code == m.ZONE_NOT_HELD
    z.run()
    assert all(not c.zones[x].durable.log for c in z.cores.values() for x in TOPOS)


def test_a_pull_naming_both_zones_gets_both_zones_groups() -> None:
    z = net()
    z.submit("n1", (f"{ZA}.x", "1", "write"))
    z.submit("n2", (f"{ZB}.x", "2", "write"))
    z.run()
    # n3 is downstream of n2 in zone a and of n1 in zone b: ask n2 for both (b is refused
    # there: n3 is not n2's downstream in zone b), then n1 for both (a refused likewise)
    pull = m.PullCommittedUpdates("n3.test", 5003, (m.ReplState(ZA, 0), m.ReplState(ZB, 0)))
    fx = z.cores["n2"].on_message("n3", m.ArsRequest(77, pull), 0.0)
    answer = fx[0].msg  # type: ignore[union-attr]
    assert answer.req_num == 77 and answer.result.code == m.PULL_NOT_DOWNSTREAM
    ok = m.PullCommittedUpdates("n3.test", 5003, (m.ReplState(ZA, 1),))
    fx = z.cores["n2"].on_message("n3", m.ArsRequest(78, ok), 0.0)
    groups = fx[0].msg.result.groups  # type: ignore[union-attr]
    assert [(g.zone, g.csn) for g in groups] == [(ZA, 2)]
    # one answer of two zones: a server that feeds the same peer in both zones
    topos = {ZA: Topology(ZA, "n1", SERVERS, {"n2": ("n1",), "n3": ("n1",)}),
             ZB: Topology(ZB, "n1", SERVERS, {"n2": ("n1",), "n3": ("n2",)})}
    core = ZonedCore("n1", topos)
    core.start(0.0)
    for zone in (ZA, ZB):
        core.on_command(m.SubmitUpdate(m.UpdateGroup((m.DatumAndOp(f"{zone}.d", zone),))),
                        "t", 0.0)
    both = m.PullCommittedUpdates("n2.test", 5002, (m.ReplState(ZA, 1), m.ReplState(ZB, 1)))
    wire = m.parse(m.encode(m.ArsRequest(5, both)))
    fx = core.on_message("n2", wire, 0.0)
    answer = m.parse(m.encode(fx[0].msg))  # type: ignore[union-attr]
    assert [(g.zone, g.csn, g.data[0].content) for g in answer.result.groups] == [
        (ZA, 2, ZA), (ZB, 2, ZB)]
    unknown = m.PullCommittedUpdates("n2.test", 5002, (m.ReplState("blocks:c", 1),))
    fx = core.on_message("n2", m.ArsRequest(6, unknown), 0.0)
    assert fx[0].msg.result.code == m.UPSTREAM_ZONE_NOT_HELD  # type: ignore[union-attr]


def test_a_push_without_zone_prompts_each_zone_that_upstream_feeds() -> None:
    z = net()
    # n3 pulls zone a from n2 and zone b from n1
    push = m.PushCommittedUpdates("n1.test", 5001)  # an old-style push: no zone named
    fx = z.cores["n3"].on_message("n1", m.ArsRequest(9, push), 0.0)
    acks = [e for e in fx if isinstance(e.msg, m.ArsResponse)]  # type: ignore[union-attr]
    assert len(acks) == 1 and acks[0].msg.req_num == 9  # type: ignore[union-attr]
    pulls = [e.msg.body for e in fx if isinstance(e.msg, m.ArsRequest)]  # type: ignore[union-attr]
    assert [[s.zone for s in b.states] for b in pulls] == [[ZB]]  # n1 feeds n3 zone b only


def test_failed_submission_and_results_route_by_zone_after_restart() -> None:
    z = net()
    ga = z.submit("n3", (f"{ZA}.x", "1", "write")).gsid
    gb = z.submit("n3", (f"{ZB}.x", "2", "write")).gsid
    assert ga == gb  # same server, same SSN 1: only the zone tells them apart
    z.run()
    z.boot("n3", 999)  # restart from its own zoned records
    z.run()
    assert z.zdocs("n3", ZA) == {f"{ZA}.x": ("1", 2)}
    assert z.zdocs("n3", ZB) == {f"{ZB}.x": ("2", 2)}
    assert z.cores["n3"].zones[ZA].durable.last_ssn == 1
    nxt = z.submit("n3", (f"{ZB}.y", "3", "write")).gsid
    assert nxt.ssn == 2
    z.run()
    assert z.zlog("n1", ZB)[-1] == (3, "n3.test", 2)
    assert z.cores["n1"].on_command(ReadZone(ZB), "r", 0.0)[0].value["last_csn"] == 3


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one zone"):
        ZonedCore("n1", {})
    other = {"n1": ("n1.test", 6000), "n2": ("n2.test", 5002), "n3": ("n3.test", 5003)}
    with pytest.raises(ValueError, match="two addresses"):
        ZonedCore("n1", {ZA: TOPOS[ZA], ZB: Topology(ZB, "n1", other, {"n2": ("n1",),
                                                                       "n3": ("n1",)})})
    with pytest.raises(ValueError, match="does not hold"):
        restore_zones([("at", "blocks:c", ("ssn", 1))], TOPOS, 5)


def test_zone_of_takes_the_longest_top_node() -> None:
    zones = ["blocks:a", "blocks:a.sub", "blocks:b"]
    assert zone_of("blocks:a.sub.x", zones) == "blocks:a.sub"
    assert zone_of("blocks:a.x", zones) == "blocks:a"
    assert zone_of("blocks:ab", zones) is None


def test_the_zone_attributes_cross_the_wire() -> None:
    gsid = m.GlobalSubmitID(m.ServerId("n3.test", 5003, 7), 4)
    for body in (m.PushCommittedUpdates("n1.test", 5001, ZB),
                 m.PushCommittedUpdates("n1.test", 5001),
                 m.PropagateSubmittedUpdate(gsid, "n3.test", 5003, None, ZB),
                 m.PropagateSubmittedUpdate(gsid, "n3.test", 5003, m.UpdateGroup(
                     (m.DatumAndOp(f"{ZA}.x", "v"),)), ZA)):
        assert m.parse(m.encode(m.ArsRequest(3, body))).body == body  # type: ignore[union-attr]
    # a FailedUpdateSubmission naming no zone cannot be routed on a two-zone server
    z = net()
    fail = m.PropagateSubmittedUpdate(gsid, "n3.test", 5003, None)
    fx = z.cores["n2"].on_message("n3", m.ArsRequest(4, fail), 0.0)
    assert fx[0].msg.result.code == m.UPSTREAM_ZONE_NOT_HELD  # type: ignore[union-attr]


def test_a_propagation_without_zone_goes_by_its_documents() -> None:
    z = net()
    gsid = m.GlobalSubmitID(m.ServerId("n3.test", 5003, 7), 1)

    def offer(*names: str) -> m.ArsAnswer | m.ArsError:
        group = m.UpdateGroup(tuple(m.DatumAndOp(n, "v") for n in names))
        body = m.PropagateSubmittedUpdate(gsid, "n3.test", 5003, group)  # an old sender
        wire = m.parse(m.encode(m.ArsRequest(8, body)))
        return z.cores["n1"].on_message("n2", wire, 0.0)[0].msg.result  # type: ignore[union-attr]

    assert offer(f"{ZA}.x", f"{ZB}.x").code == m.SPANS_ZONES  # type: ignore[union-attr]
    assert offer("blocks:c.x").code == m.UPSTREAM_ZONE_NOT_HELD  # type: ignore[union-attr]
    assert offer(f"{ZA}.x").gsid == gsid  # type: ignore[union-attr]  # zone a's primary takes it
