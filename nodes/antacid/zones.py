"""An ARS server holding several zones, sans-IO: one `ArsCore` per zone behind one interface.

Each zone has its own topology (primary, upstreams: a node may be primary of one zone and a
replica of another, 4.1.6.1's "unless it is also a non-primary for other zones"), SSN and CSN
counters, update log, documents, reorder queue and pending submissions, exactly as a
one-zone server has; ARS defines no order across zones (3.1.2), so the zone cores share
nothing but the node's links. This module only routes:

* commands: a ``SubmitUpdate`` goes to the zone its documents fall in (4.2.1.1 step 3: none
  held is 123001, documents of two zones 123003); ``ReadZone``/``TruncateLog`` name a zone
  (None: the first);
* requests in: by the zone they name (``PropagateSubmittedUpdate``, a result notification,
  ``ContentEncodingNegotiation``, each ``ReplState`` of a pull); a push naming no zone
  prompts every zone fed by that upstream; a pull naming several zones is answered by each
  zone core and the groups sent in one answer (the first error, if any, is the answer);
* requests out: each zone core numbers its own requests, so the wire ``ReqNum`` is this
  server's (unique per peer) and the answer or ``CallFailed`` goes back to the zone and
  number it came from;
* effects out: timers are named ``(zone, name)``, durable records ``("at", zone, record)``
  (`restore_zones` and the store fold them per zone), journal events carry ``zone``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nodes.antacid import messages as m
from nodes.antacid.core import ArsCore, ArsOptions, CallFailed, ReadZone, TruncateLog
from nodes.antacid.state import Durable, Topology
from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer


def zoned(zone: str, record: tuple[Any, ...]) -> tuple[Any, ...]:
    """The durable record of ``zone`` (`restore_zones` and the store read it back)."""
    return ("at", zone, record)


def restore_zones(records: Iterable[tuple[Any, ...]], zones: Iterable[str],
                  new_incarn: int) -> dict[str, Durable]:
    """Fold a multi-zone server's records per zone; a record without a zone (written by a
    one-zone server before it held several) belongs to the first zone."""
    zones = list(zones)
    out = {z: Durable(incarn=new_incarn) for z in zones}
    for r in records:
        if r and r[0] == "at":
            if r[1] not in out:
                raise ValueError(f"record of zone {r[1]!r}, which this server does not hold "
                                 f"(zones {zones}): add the zone back to the options")
            out[r[1]].apply(r[2])
        else:
            out[zones[0]].apply(r)
    return out


def zone_of(name: str, zones: Iterable[str]) -> str | None:
    """The zone whose top node is the longest prefix of document ``name`` (zones nest by
    delegation, 3.1.2), or None."""
    best = None
    for z in zones:
        if (name == z or name.startswith(z.rstrip(".") + ".")) and (
                best is None or len(z) > len(best)):
            best = z
    return best


@dataclass
class ZonedCore:
    """The server ``me`` of every zone in ``topologies`` (zone -> its DAG; the first is the
    default zone). ``durables`` per zone (missing: a fresh one)."""

    me: str
    topologies: Mapping[str, Topology]
    durables: Mapping[str, Durable] = field(default_factory=dict)
    options: ArsOptions = field(default_factory=ArsOptions)
    bugs: Iterable[str] = ()

    def __post_init__(self) -> None:
        if not self.topologies:
            raise ValueError("a server holds at least one zone: give it a topology")
        addr = None
        for z, t in self.topologies.items():
            if t.zone != z:
                raise ValueError(f"topology of zone {t.zone!r} filed under {z!r}")
            if self.me not in t.servers:
                raise ValueError(f"{self.me!r} is not a server of zone {z!r}: remove the zone "
                                 "from its options or add it to the zone's servers")
            if addr is not None and t.servers[self.me] != addr:
                raise ValueError(f"{self.me!r} has two addresses ({addr} and "
                                 f"{t.servers[self.me]}): one listener serves every zone")
            addr = t.servers[self.me]
        bugs = tuple(self.bugs)
        self.zones: dict[str, ArsCore] = {
            z: ArsCore(self.me, t, self.durables.get(z) or Durable(), self.options, bugs=bugs)
            for z, t in self.topologies.items()}
        self.default = next(iter(self.zones))
        self._req = 0
        #: (peer, wire ReqNum) -> (zone, the zone core's ReqNum)
        self._wire: dict[tuple[Any, int], tuple[str, int]] = {}

    @property
    def server(self) -> m.ServerId:
        return self.zones[self.default].server

    # ------------------------------------------------------------------ interface

    def start(self, now: float) -> list[Effect]:
        fx: list[Effect] = []
        for z, core in self.zones.items():
            fx += self._out(z, core.start(now))
        return fx

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        if isinstance(cmd, ReadZone | TruncateLog):
            z = self.default if cmd.zone is None else cmd.zone
            if z not in self.zones:
                raise ValueError(f"zone {z!r} is not held here; zones: {list(self.zones)}")
            return self._out(z, self.zones[z].on_command(cmd, token, now))
        if isinstance(cmd, m.SubmitUpdate):
            z, err = self._submission_zone(cmd.group)
            if err is not None:
                return [Reply(token, err)]
            assert z is not None
            return self._out(z, self.zones[z].on_command(cmd, token, now))
        return self.zones[self.default].on_command(cmd, token, now)  # its error names them

    def on_timer(self, name: Any, now: float) -> list[Effect]:
        if not (isinstance(name, tuple) and len(name) == 2 and name[0] in self.zones):
            return []
        return self._out(name[0], self.zones[name[0]].on_timer(name[1], now))

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        if isinstance(msg, m.ArsResponse | CallFailed):
            got = self._wire.pop((peer, msg.req_num), None)
            if got is None:
                return [Emit("ars-stray-response", {"peer": str(peer), "req": msg.req_num})]
            z, inner = got
            return self._out(z, self.zones[z].on_message(peer, replace(msg, req_num=inner), now))
        if isinstance(msg, m.ArsRequest):
            return self._request(peer, msg, now)
        return self.zones[self.default].on_message(peer, msg, now)

    # ------------------------------------------------------------------ routing

    def _err(self, code: int, specifics: str = "") -> m.ArsError:
        return m.ArsError.of(code, self.server, specifics)

    def _submission_zone(self, group: m.UpdateGroup) -> tuple[str | None, m.ArsError | None]:
        zs = {zone_of(d.name, self.zones) for d in group.data}
        if None in zs:
            bad = next(d.name for d in group.data if zone_of(d.name, self.zones) is None)
            return None, self._err(m.ZONE_NOT_HELD, bad)
        if len(zs) > 1:
            return None, self._err(m.SPANS_ZONES, ", ".join(sorted(str(z) for z in zs)))
        return zs.pop(), None

    def _answer(self, peer: Any, req: m.ArsRequest, err: m.ArsError) -> list[Effect]:
        return [Send(peer, m.ArsResponse(req.req_num, err))]

    def _request(self, peer: Any, req: m.ArsRequest, now: float) -> list[Effect]:
        b = req.body
        if isinstance(b, m.PullCommittedUpdates):
            return self._pull(peer, req, b, now)
        if isinstance(b, m.PushCommittedUpdates) and b.zone is None:
            fed = [z for z, c in self.zones.items() if peer in c.upstreams]
            if not fed:
                return self._out(self.default, self.zones[self.default].on_message(
                    peer, req, now))  # 224001: not an upstream of ours
            fx: list[Effect] = []
            for i, z in enumerate(fed):
                out = self._out(z, self.zones[z].on_message(peer, req, now))
                fx += out if i == 0 else [e for e in out if not _answers(e, peer, req)]
            return fx
        z: str | None
        if isinstance(b, m.PropagateSubmittedUpdate):
            z = b.zone
            if z is None and b.group is not None:
                z, err = self._submission_zone(b.group)
                if err is not None:  # 123001 is the submission server's; upstream: 123002
                    code = m.UPSTREAM_ZONE_NOT_HELD if err.code == m.ZONE_NOT_HELD else err.code
                    return self._answer(peer, req, m.ArsError.of(code, self.server,
                                                                 err.specifics))
            elif z is None and len(self.zones) == 1:
                z = self.default
        elif isinstance(b, m.SubmittedUpdateResultNotification | m.ContentEncodingNegotiation
                        | m.PushCommittedUpdates):
            z = b.zone
        else:
            z = self.default  # SubmitUpdate between servers, ...: the zone core refuses it
        if z not in self.zones:
            return self._answer(peer, req, self._err(m.UPSTREAM_ZONE_NOT_HELD, str(z)))
        return self._out(z, self.zones[z].on_message(peer, req, now))

    def _pull(self, peer: Any, req: m.ArsRequest, b: m.PullCommittedUpdates,
              now: float) -> list[Effect]:
        """Each zone named answers its own states; one answer carries every zone's groups."""
        by_zone: dict[str, list[m.ReplState]] = {}
        for st in b.states:
            if st.zone not in self.zones:
                return self._answer(peer, req, self._err(m.UPSTREAM_ZONE_NOT_HELD, st.zone))
            by_zone.setdefault(st.zone, []).append(st)
        fx: list[Effect] = []
        groups: list[m.UpdateGroup] = []
        error: m.ArsError | None = None
        for z, states in by_zone.items():
            sub = replace(req, body=replace(b, states=tuple(states)))
            for e in self._out(z, self.zones[z].on_message(peer, sub, now)):
                if _answers(e, peer, req):
                    result = e.msg.result  # type: ignore[union-attr]
                    if isinstance(result, m.ArsError):
                        error = error or result
                    else:
                        groups += result.groups
                else:
                    fx.append(e)
        result_all: m.ArsAnswer | m.ArsError = error or m.ArsAnswer(groups=tuple(groups))
        return [Send(peer, m.ArsResponse(req.req_num, result_all)), *fx]

    def _out(self, zone: str, effects: list[Effect]) -> list[Effect]:
        """A zone core's effects as this server's: wire request numbers, zoned timers,
        records and events."""
        out: list[Effect] = []
        for e in effects:
            if isinstance(e, Send) and isinstance(e.msg, m.ArsRequest):
                self._req = self._req % m.U32 + 1
                while (e.to, self._req) in self._wire:  # 2^32 requests in flight: never
                    self._req = self._req % m.U32 + 1
                self._wire[(e.to, self._req)] = (zone, e.msg.req_num)
                e = Send(e.to, replace(e.msg, req_num=self._req))
            elif isinstance(e, SetTimer):
                e = SetTimer((zone, e.name), e.at)
            elif isinstance(e, Persist):
                e = Persist(e.what, zoned(zone, e.record))
            elif isinstance(e, Emit):
                e = Emit(e.type, {**e.fields, "zone": zone})
            out.append(e)
        return out


def _answers(e: Effect, peer: Any, req: m.ArsRequest) -> bool:
    """``e`` is the answer to ``req`` from ``peer``."""
    return (isinstance(e, Send) and e.to == peer and isinstance(e.msg, m.ArsResponse)
            and e.msg.req_num == req.req_num)
