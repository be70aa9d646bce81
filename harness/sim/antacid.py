"""ANTACID on the simulator: the real `ArsCore` per server of one zone's DAG (several zones:
the real `ZonedCore`, zone k's primary on server k, as the suite places them), every message
through the real XML codec, request/response calls that end in ``CallFailed`` when no answer
comes in ``call_timeout`` (what the BEEP runtime does), and a client that submits, reads and
takes result notifications (answering them, as a NotifyHost would). It records the history
and observations `checkers.csn_order` reads (docs/antacid.md, "Checker evidence"); with
several zones each op, journal event and final state names its zone, so the checker judges
each zone apart, and results are keyed by (zone, GlobalSubmitID). One zone runs `ArsCore`
alone, so every one-zone run stays byte for byte what it was."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping
from typing import Any

from harness.sim.driver import Simulation, Wire
from nodes.antacid import hostile
from nodes.antacid import messages as m
from nodes.antacid.beep import LISTENER, ChannelStarted, Message, Session, SessionClosed
from nodes.antacid.core import ArsCore, ArsOptions, CallFailed, NotifyDest, ReadZone
from nodes.antacid.state import Durable, Topology
from nodes.antacid.zones import ZonedCore, restore_zones, zone_of
from nodes.common.effects import Persist

#: where every simulated client wants its result notifications
CLIENT = NotifyDest("client.test", 7000)


def topology(n_replicas: int = 3, zone: str = "blocks:z") -> Topology:
    """A primary ``p`` and replicas ``r1..rn`` in a DAG: r1 pulls from p, every later one from
    the replica before it and then from p (two upstreams: the failover path)."""
    names = ["p", *(f"r{i}" for i in range(1, n_replicas + 1))]
    servers = {n: (f"{n}.test", 5000 + i) for i, n in enumerate(names)}
    up = {f"r{i}": (("p",) if i == 1 else (f"r{i - 1}", "p")) for i in range(1, n_replicas + 1)}
    return Topology(zone, "p", servers, up)


def zone_name(k: int) -> str:
    """Zone ``k`` (from 0): ``blocks:z``, ``blocks:z2``, ``blocks:z3``, ..."""
    return "blocks:z" if k == 0 else f"blocks:z{k + 1}"


def zone_topologies(zones: int, n_replicas: int = 3) -> dict[str, Topology]:
    """``zones`` zones over the servers of `topology`: zone k's primary is server k (``p``,
    ``r1``, ...; wrapping), its DAG `topology`'s shape over the servers rotated to start there
    (as the suite roots each zone's shape at its own primary). Zone 0 is `topology` itself."""
    if zones < 1:
        raise ValueError(f"an ANTACID simulation holds at least one zone, got {zones}")
    servers = topology(n_replicas).servers
    names = list(servers)
    out: dict[str, Topology] = {}
    for k in range(zones):
        i = k % len(names)
        rot = names[i:] + names[:i]
        up = {rot[j]: ((rot[0],) if j == 1 else (rot[j - 1], rot[0]))
              for j in range(1, len(rot))}
        out[zone_name(k)] = Topology(zone_name(k), rot[0], servers, up)
    return out


class AntacidSim(Simulation):
    """The servers of ``topo``; ``submit``/``read`` make the history, ``observations`` the
    rest of what the checker reads."""

    def __init__(self, topo: Topology | None = None, options: ArsOptions | None = None,
                 seed: int = 0, loss: float = 0.0, dup: float = 0.0, latency_ms: int = 1,
                 jitter_ms: int = 0, call_timeout: float = 0.5,
                 bugs: Mapping[str, Iterable[str]] | None = None, zones: int = 1) -> None:
        if topo is not None and zones != 1:
            raise ValueError("give either a topology (one zone) or zones, not both")
        self.topo = topo or topology()
        #: zone -> its DAG; the first is ``topo``'s zone (the default zone)
        self.topos = {self.topo.zone: self.topo} if zones == 1 else zone_topologies(zones)
        opts = options or ArsOptions(pull_interval=0.5, reorder_timeout=3.0)
        self.call_timeout = call_timeout
        self.bugs = {k: tuple(v) for k, v in (bugs or {}).items()}
        self.history: list[dict[str, Any]] = []
        self._open: set[tuple[Any, int, Any, int]] = set()
        self._by_token: dict[int, dict[str, Any]] = {}
        self._by_gsid: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        self._outcomes: dict[tuple[str, str, int, int], tuple[int, int | None]] = {}
        self._process = itertools.count()
        names = list(self.topo.servers)

        def make(n: str, durable: list[Persist], _boot: int,
                 _rng: random.Random) -> ArsCore | ZonedCore:
            records, incarn = [p.record for p in durable], 100 + names.index(n)
            if not self.zoned:
                return ArsCore(n, self.topo, Durable.restore(records, incarn), opts,
                               bugs=self.bugs.get(n, ()))
            return ZonedCore(n, self.topos, restore_zones(records, self.topos, incarn), opts,
                             bugs=self.bugs.get(n, ()))

        super().__init__(names, make, seed=seed, wire=Wire(m.encode, m.parse),
                         latency=latency_ms / 1000, jitter=jitter_ms / 1000, loss=loss, dup=dup)
        self.boot_all()
        self.run_for(0)

    #: the hostile peer's address: no server's, as the real fault's own connection is not
    ATTACKER = "mallory"

    def hostile_burst(self, n: str, a: int = 0) -> int:
        """One burst of ANTACID's hostile exchanges at server ``n``: `nodes.antacid.hostile`'s
        (the real ``hostile`` fault's) BEEP byte streams, read by the listener's own BEEP
        session (`nodes.antacid.beep.Session`), as the node's listener reads them: a framing
        attack ends the session there (traced ``hostile-closed``); each whole MSG on a channel
        started naming a server goes onto the network from the attacker, handed to ``n``'s core
        as from that server (XML the codec refuses is dropped as ``undecodable``, where the
        node answers an ARSError). The core's answers go to the server posed as, which drops
        them as answers to no call of its own. A client channel's MSGs (no server named) are
        traced, not delivered: a node refuses a server request there before its core, and the
        generator's client submissions are malformed. ``a % 2 == 1``: only the exchanges that
        reach the core. Drawn from a random seeded by the run's seed and the time, so a replay
        sends the same bytes. Returns how many messages reached the network."""
        rng = random.Random(f"{self.seed}:hostile:{self.now!r}:{n}")

        class _T:
            def __init__(self, node: str) -> None:
                self.node = node

        targets = [_T(n)] + [_T(o) for o in self.ids if o != n]
        sent = 0
        for node, kind, data in hostile.messages(rng, targets):
            if node != n:
                continue
            listener = Session(LISTENER, (hostile.PROFILE,))
            names: dict[int, str | None] = {}
            bodies: list[tuple[str | None, bytes]] = []
            closed = False
            for ev in listener.receive_data(data):
                if isinstance(ev, ChannelStarted):
                    name = ev.content.strip()
                    names[ev.channel] = name if name in self.topo.servers else None
                elif isinstance(ev, Message):
                    bodies.append((names.get(ev.channel), ev.body))
                elif isinstance(ev, SessionClosed):
                    closed = True
            if a % 2 == 1 and not any(peer for peer, _ in bodies):
                continue
            self.trace.append((self.now, "hostile", n, kind))
            for peer, body in bodies:
                if peer is None:
                    self.trace.append((self.now, "hostile-client-msg", n, len(body)))
                else:
                    sent += self.inject(self.ATTACKER, n, peer, body)
            if closed:
                self.trace.append((self.now, "hostile-closed", n, kind))
        return sent

    @property
    def zoned(self) -> bool:
        """Several zones: `ZonedCore` servers, zones named in ops, events and states."""
        return len(self.topos) > 1

    @property
    def cores(self) -> dict[str, ArsCore]:
        """Each running server's core of the default zone."""
        return {i: n.core.zones[n.core.default] if isinstance(n.core, ZonedCore) else n.core
                for i, n in self.nodes.items() if isinstance(n.core, ArsCore | ZonedCore)}

    def quiescent(self) -> bool:
        """Nothing left to happen but pulls: every server up and running with no timer but
        its periodic pull and no call out but a pull, nothing pending, held or owed, no server
        booting, every zone's servers at one CSN, and every submission answered. From here
        on a settle would only repeat pulls that bring nothing."""
        if any(kind == "boot" for _, _, kind, _, _ in self._q):
            return False
        if any(op["type"] == "invoke" for op in self.history if op["f"] == "submit"):
            return False
        csns: dict[str, set[int]] = {}
        for n in self.nodes.values():
            if not n.up or n.paused or any(name != "pull" and name[1:] != ("pull",)
                                           for name in n.timers):  # zoned: (zone, "pull")
                return False
            zs = (n.core.zones.values() if isinstance(n.core, ZonedCore)
                  else (n.core,) if isinstance(n.core, ArsCore) else ())
            for c in zs:
                d = c.durable
                if (d.pending or d.held or d.owed or c._push_outstanding
                        or any(o.why != "pull" for o in c._out.values())):
                    return False
                csns.setdefault(c.zone, set()).add(max(d.last_csn, 1))
        return all(len(v) == 1 for v in csns.values())

    # ---- the calls
    def route(self, src: Any, to: Any, msg: Any) -> list[tuple[Any, Any]]:
        if isinstance(to, NotifyDest):
            self._notified(src, to, msg)
            return []
        if to not in self.nodes or to == src:
            return []
        if isinstance(msg, m.ArsRequest):
            call = (src, self.nodes[src].boot, to, msg.req_num)
            self._open.add(call)
            self._answer_later(src, call[1], self.call_timeout,
                               lambda c, now: c.on_message(to, CallFailed(msg.req_num), now),
                               open_=lambda: call in self._open,
                               close=lambda: self._open.discard(call))
        return [(to, src)]

    def arrive(self, dst: Any, seen_as: Any, msg: Any) -> tuple[Any, Any] | None:
        if isinstance(msg, m.ArsResponse):
            call = (dst, self.nodes[dst].boot, seen_as, msg.req_num)
            if call not in self._open:
                return None  # the caller timed out (got CallFailed) or restarted
            self._open.discard(call)
        return seen_as, msg

    def _notified(self, src: str, to: NotifyDest, req: m.ArsRequest) -> None:
        """The client gets a result notification: complete its op, answer the server."""
        b = req.body
        if isinstance(b, m.SubmittedUpdateResultNotification):
            key = _key(b.zone, b.gsid)
            self._outcomes.setdefault(key, (b.csn, b.error.code if b.error else None))
            self._complete(key)
        boot = self.nodes[src].boot
        self._answer_later(src, boot, self.net.latency,
                           lambda c, now: c.on_message(to, m.ArsResponse(req.req_num), now),
                           open_=lambda: True, close=lambda: None)

    def _complete(self, key: tuple[str, str, int, int]) -> None:
        """The first notification decides the op (a primary may notify before the submit's
        own reply is handled: the outcome waits in ``_outcomes``)."""
        op, got = self._by_gsid.get(key), self._outcomes.get(key)
        if op is not None and got is not None and op["type"] == "invoke":
            op["type"] = "fail" if got[1] is not None else "ok"
            op["value"].update(csn=got[0], error=got[1])
            op["time"] = self.now

    # ---- the client
    def submit(self, node: str, *docs: tuple[str, str, str]) -> dict[str, Any]:
        """Submit one UpdateGroup of (name, content, action) at ``node``; the op completes
        when the result notification comes (``info`` at ``finish`` if it never does)."""
        group = m.UpdateGroup(tuple(m.DatumAndOp(n, c, a) for n, c, a in docs))
        zone = (zone_of(docs[0][0], self.topos) if docs else None) or self.topo.zone
        op = {"index": len(self.history), "process": next(self._process), "f": "submit",
              "type": "invoke", "node": node, "time": self.now,
              "value": {"docs": [d[0] for d in docs]}}
        if self.zoned:
            op["value"]["zone"] = zone
        self.history.append(op)
        answer = self.replies[self.command(node, m.SubmitUpdate(group, CLIENT.host,
                                                                CLIENT.port))]
        if isinstance(answer, m.ArsError):
            op.update(type="fail", value={**op["value"], "error": answer.code})
        else:
            g = answer.gsid
            op["value"].update(server=f"{g.server.host}:{g.server.port}",
                               incarn=g.server.incarn, ssn=g.ssn)
            self._by_gsid[_key(zone, g)] = op
            self._complete(_key(zone, g))
        return op

    def read(self, node: str, zone: str | None = None) -> dict[str, Any]:
        """A ReadZone of ``zone`` (None: the default zone) at ``node``."""
        value = self.replies[self.command(node, ReadZone(zone))]
        if self.zoned:
            value = {**value, "zone": zone or self.topo.zone}
        op = {"index": len(self.history), "process": next(self._process), "f": "read",
              "type": "ok", "node": node, "time": self.now, "value": value}
        self.history.append(op)
        return op

    def finish(self) -> list[dict[str, Any]]:
        """End of run: a submission with no outcome is ``info`` (indeterminate)."""
        for op in self.history:
            if op["type"] == "invoke":
                op["type"] = "info"
        return self.history

    def observations(self) -> dict[str, Any]:
        """Each server's journal and its final ReadZone state (None for a server down)."""
        nodes: dict[str, Any] = {}
        for n in self.ids:
            evs = [{"seq": k, "t": e.t, "type": e.type, **e.fields}
                   for k, e in enumerate(e for e in self.events if e.node == n)]
            up = self.nodes[n].up and not self.nodes[n].paused
            nodes[n] = {"events": evs, "missing": [], "state": self._state(n) if up else None}
        return {"nodes": nodes, "run_dir": "sim"}

    def _state(self, n: str) -> dict[str, Any]:
        """``n``'s final ReadZone; with several zones the default zone's at the top and every
        zone's under ``zones`` (the real server's ``/admin/state`` shape)."""
        if not self.zoned:
            return self.replies[self.command(n, ReadZone())]  # type: ignore[no-any-return]
        zones = {z: self.replies[self.command(n, ReadZone(z))] for z in self.topos}
        return {**zones[self.topo.zone], "zones": zones}

    def test(self) -> dict[str, Any]:
        t = {"name": "antacid-sim", "primary": self.topo.primary, "seed": self.seed}
        if self.zoned:
            t["primaries"] = {z: topo.primary for z, topo in self.topos.items()}
        return t


def _key(zone: str, g: m.GlobalSubmitID) -> tuple[str, str, int, int]:
    """A submission's result key: GlobalSubmitIDs are per (server, zone) (SSNs count per
    zone), so the zone is part of it."""
    return (zone, f"{g.server.host}:{g.server.port}", g.server.incarn, g.ssn)
