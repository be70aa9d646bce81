"""DRiP on the simulator: a mesh of `DripCore`s, rebuilt from their durable records, whose
HTTP requests and answers cross the seeded network.

A ``Send(peer, msg)`` is an HTTP request: it reaches ``peer`` as ``Inbound(sender, conn)``
and the core's ``Send(Inbound, Answer)`` travels back to the sender, which is handed
``Outcome(msg, status, body)``. A request that gets no answer ends in ``Outcome(msg, 0)``:
one network delay later when the peer is down (a refused connection), after the request
timeout (``CoreConfig.peer_timeout_s``) when the request or its answer was lost or cut.
Both directions go through the wire format (the codec's HTTP request; the answer as JSON),
so no object is shared between nodes. Links are the mesh's edges: ``cut`` a link, ``heal``
them all.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable
from typing import Any

from harness.sim.driver import Simulation, Wire
from nodes.common.effects import Persist
from nodes.drip import codec
from nodes.drip.codec import Item, Update
from nodes.drip.core import (
    Answer,
    ClientMembers,
    ClientRead,
    ClientUpdate,
    CoreConfig,
    DripCore,
    Inbound,
    Outcome,
)
from nodes.drip.entitlement import Policy, allow_all
from nodes.drip.records import Durable


def _encode(msg: Any) -> bytes:
    if isinstance(msg, Answer):
        return b"A" + json.dumps({"status": msg.status, "body": msg.body}).encode()
    req = codec.encode(msg)
    return b"R" + json.dumps({"method": req.method, "path": req.path, "headers": req.headers,
                              "body": req.body_bytes().decode()}).encode()


def _decode(raw: bytes) -> Any:
    d = json.loads(raw[1:])
    if raw[:1] == b"A":
        return Answer(int(d["status"]), d["body"])
    return codec.decode(d["method"], d["path"], d["headers"], d["body"].encode())


WIRE = Wire(_encode, _decode)


def durable_of(records: Iterable[Persist]) -> Durable:
    """What `nodes.drip.store.Store.load` would hand a restarted node."""
    return Durable.of([p.record for p in records])


class DripSim(Simulation):
    """A DRiP mesh whose links are ``edges`` (pairs of node ids), booted at time 0."""

    def __init__(self, edges: Iterable[tuple[str, str]], seed: int = 1,
                 bugs: Iterable[str] = (), cfg: CoreConfig | None = None,
                 policy: Policy = allow_all, latency: float = 0.001, jitter: float = 0.0,
                 loss: float = 0.0) -> None:
        self.edges = [tuple(e) for e in edges]
        ids = sorted({a for e in self.edges for a in e})
        self.cfg = cfg or CoreConfig(bugs=frozenset(bugs))
        self._pending: dict[int, tuple[str, str, codec.Message, int]] = {}
        self._calls = itertools.count()
        self._uids: dict[str, int] = {}
        self.joiners: set[str] = set()  # added later with a fresh data directory (spec 4.6)

        def make(i: str, durable: list[Persist], _boot: int, _rng: random.Random) -> DripCore:
            return DripCore(i, self.peers(i), durable_of(durable), self.cfg, policy,
                            mesh_members=ids, join=i in self.joiners)

        super().__init__(ids, make, seed=seed, wire=WIRE, latency=latency, jitter=jitter,
                         loss=loss)
        self.boot_all()
        self.run_until(0.0)

    def peers(self, n: str) -> list[str]:
        return sorted({b for a, b in self.edges if a == n} | {a for a, b in self.edges if b == n})

    def join(self, n: str, peers: Iterable[str]) -> None:
        """Boot a new node ``n`` with a fresh data directory, linked to ``peers`` (whose own
        peer lists stay as booted until they restart): it syncs before it is active."""
        self.edges += [(p, n) for p in peers]
        self.joiners.add(n)
        self.add_node(n)
        self.boot(n)

    # ---- links
    def cut(self, a: str, b: str) -> None:
        """Cut the link between ``a`` and ``b`` both ways (requests on it time out)."""
        self.net.cut |= {(a, b), (b, a)}
        self.trace.append((self.now, "cut", a, b))

    # ---- requests and answers
    def route(self, src: Any, to: Any, msg: Any) -> list[tuple[Any, Any]]:
        if isinstance(to, Inbound):
            kind, caller, call = to.conn
            if call not in self._pending:
                return []  # the caller gave up on it already
            return [(caller, ("answer", call))]
        if to not in self.nodes or to == src:
            return []
        call = next(self._calls)
        self._pending[call] = (src, to, msg, self.nodes[src].boot)
        self._end_later(call, 0, "timeout", self.cfg.peer_timeout_s)
        return [(to, Inbound(src, ("request", src, call)))]

    def arrive(self, dst: Any, seen_as: Any, msg: Any) -> tuple[Any, Any] | None:
        if isinstance(seen_as, tuple) and seen_as[0] == "answer":
            p = self._pending.pop(seen_as[1], None)
            if p is None or p[3] != self.nodes[dst].boot:
                return None
            assert isinstance(msg, Answer)
            return p[1], Outcome(p[2], msg.status, msg.body)
        return seen_as, msg

    def lost(self, dst: Any, seen_as: Any, raw: Any) -> None:
        if isinstance(seen_as, Inbound):
            self._end_later(seen_as.conn[2], 0, f"connection to {dst} refused",
                            self.net.latency)

    def _end_later(self, call: int, status: int, why: str, after: float) -> None:
        p = self._pending.get(call)
        if p is None:
            return
        caller, to, msg, boot = p
        self._answer_later(caller, boot, after,
                           lambda c, now: c.on_message(to, Outcome(msg, status, why), now),
                           open_=lambda: call in self._pending,
                           close=lambda: self._pending.pop(call, None))

    # ---- client commands
    def update(self, n: str, key: str, value: Any, uid: str, owner: str | None = None) -> int:
        """Initiate an update at ``n`` now; its answer is ``outcome(uid)`` once decided."""
        token = self.command(n, ClientUpdate(Update(uid, key, value, owner)))
        self._uids[uid] = token
        return token

    def members(self, n: str, uid: str, add: Iterable[str] = (),
                remove: Iterable[str] = (),
                addresses: dict[str, dict[str, Any]] | None = None) -> int:
        """Ask ``n``'s admin API to change the membership; ``outcome(uid)`` once decided.
        ``addresses``: entries for added nodes no member was configured with (the sim routes
        by id, so only their presence matters: members wire to them)."""
        token = self.command(n, ClientMembers(uid, tuple(add), tuple(remove),
                                              dict(addresses or {})))
        self._uids[uid] = token
        return token

    def outcome(self, uid: str) -> Answer | None:
        a = self.replies.get(self._uids.get(uid, -1))
        assert a is None or isinstance(a, Answer)
        return a

    def committed(self, uid: str) -> bool:
        a = self.outcome(uid)
        return a is not None and a.status == 200

    def read(self, n: str, key: str) -> dict[str, Any]:
        token = self.command(n, ClientRead(key))
        a = self.replies[token]
        assert isinstance(a, Answer)
        return a.body

    # ---- views
    def core(self, n: str) -> DripCore:
        c = self.nodes[n].core
        assert isinstance(c, DripCore), f"node {n} is not running"
        return c

    def item(self, n: str, key: str) -> Item | None:
        return self.core(n).d.kv.get(key)

    def value(self, n: str, key: str) -> Any:
        it = self.item(n, key)
        return None if it is None else it.value

    def stored(self, n: str) -> Durable:
        """What node ``n`` would load from its store if it restarted now."""
        return durable_of(self.nodes[n].durable)

    def events_of(self, n: str, type_: str) -> list[dict[str, Any]]:
        return [e.fields for e in self.events if e.node == n and e.type == type_]

    def observations(self) -> dict[str, Any]:
        """The mesh as `checkers.twopc` reads a run: each node's journal and its state."""
        nodes: dict[str, Any] = {}
        for n in self.ids:
            evs = [{"seq": k, "t": e.t, "type": e.type, **e.fields}
                   for k, e in enumerate(e for e in self.events if e.node == n)]
            up = self.nodes[n].up and self.nodes[n].core is not None
            nodes[n] = {"events": evs, "state": self.core(n).snapshot() if up else None,
                        "missing": []}
        return {"nodes": nodes, "run_dir": "sim"}


__all__ = ["WIRE", "DripSim", "durable_of"]
