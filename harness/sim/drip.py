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

The mesh's own requests are the trusted TLS mesh of a real run and go straight to the core.
A hostile request (`DripSim.hostile_burst`: `nodes.drip.hostile`'s, the real ``hostile``
fault's) travels as its raw method, path, headers and body and, on arrival, meets the node's
real pre-core checks (`nodes.drip.admit.Gate`: TLS peer identity, JWT with its request
binding and replay id, decoding with the codec's bounds, own-behalf, the statements behind a
relayed yes) before the core, as if sent over TLS by the compromised member it names. The
mesh signs with ES256 keys made once per process (a node's public-key JWT mode, the suite's
default): the attacker holds only the compromised member's key.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import random
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from multidict import CIMultiDict

from harness.sim.driver import Simulation, Wire
from nodes.common.effects import Persist
from nodes.drip import codec, hostile
from nodes.drip.admit import Gate, Refusal
from nodes.drip.auth import Signer, Verifier
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
from nodes.drip.records import Delivered, Durable


@dataclass(frozen=True)
class HostileRequest:
    """A hostile peer request as it reaches a node: the TLS identity it came with (None: no
    client certificate) and the raw HTTP request, decoded only by the node's `Gate`."""

    ident: str | None
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: the attack it belongs to (`hostile.INTENT`), for the trace only
    kind: str = ""


def _encode(msg: Any) -> bytes:
    if isinstance(msg, HostileRequest):
        return b"H" + json.dumps({"ident": msg.ident, "method": msg.method, "path": msg.path,
                                  "headers": msg.headers,
                                  "body": msg.body.decode("latin-1"),
                                  "kind": msg.kind}).encode()
    if isinstance(msg, Answer):
        return b"A" + json.dumps({"status": msg.status, "body": msg.body}).encode()
    req = codec.encode(msg)
    return b"R" + json.dumps({"method": req.method, "path": req.path, "headers": req.headers,
                              "body": req.body_bytes().decode()}).encode()


def _decode(raw: bytes, limits: codec.Limits = codec.DEFAULT_LIMITS) -> Any:
    d = json.loads(raw[1:])
    if raw[:1] == b"H":
        return HostileRequest(d["ident"], d["method"], d["path"],
                              tuple((k, v) for k, v in d["headers"]), d["body"].encode("latin-1"),
                              d["kind"])
    if raw[:1] == b"A":
        return Answer(int(d["status"]), d["body"])
    return codec.decode(d["method"], d["path"], d["headers"], d["body"].encode(),
                        limits=limits)


WIRE = Wire(_encode, _decode)


def _wire(bugs: frozenset[str]) -> Wire:
    """The mesh's wire: decoded with the bounds of the nodes' servers, which the planted
    ``no-version-bound`` lifts (its 2^63-1 version then travels on from node to node, as
    between real nodes that all run the bug)."""
    top = codec.node_limits(codec.MAX_VALUE_BYTES, 0.0, bugs).max_version
    if top == codec.DEFAULT_LIMITS.max_version:
        return WIRE
    lim = dataclasses.replace(codec.DEFAULT_LIMITS, max_version=top)
    return Wire(_encode, functools.partial(_decode, limits=lim))


@functools.cache
def _pem_pair(node: str) -> tuple[bytes, bytes]:
    """``node``'s ES256 key pair (private, public PEM), made once per process: keys never
    reach a trace (an ES256 signature has one length), so runs stay byte for byte."""
    key = ec.generate_private_key(ec.SECP256R1())
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            key.public_key().public_bytes(serialization.Encoding.PEM,
                                          serialization.PublicFormat.SubjectPublicKeyInfo))


@dataclass
class _SimSigner(Signer):
    """A compromised member's signer whose tokens are dated by the simulated clock (the
    builders date them by the host's)."""

    clock: Callable[[], float] = field(default=lambda: 0.0)

    def header(self, now: float, digest: str, once: bool = False) -> str:
        return super().header(self.clock(), digest, once)


@functools.cache
def _no_tls() -> ssl.SSLContext:
    """`hostile.Creds` holds TLS contexts; the simulator dials nothing, so one bare one."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _http(raw: bytes) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """Method, path, headers and body of one whole HTTP/1.1 request (`hostile.http`'s)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    first, *lines = head.decode("utf-8", "surrogateescape").split("\r\n")
    method, path, _ = first.split(" ", 2)
    headers = [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines)]
    return method, path, headers, body


#: hostile kinds that are about sockets or the client port, not the peer checks and the core:
#: a slow or idle connection, and the client API's own checks (the sim has no client port)
NOT_SIMULATED = ("slow-connection", "idle-partial-head")


def durable_of(records: Iterable[Persist]) -> Durable:
    """What `nodes.drip.store.Store.load` would hand a restarted node."""
    return Durable.of([p.record for p in records])


class DripSim(Simulation):
    """A DRiP mesh whose links are ``edges`` (pairs of node ids), booted at time 0."""

    def __init__(self, edges: Iterable[tuple[str, str]], seed: int = 1,
                 bugs: Iterable[str] = (), cfg: CoreConfig | None = None,
                 policy: Policy = allow_all, latency: float = 0.001, jitter: float = 0.0,
                 loss: float = 0.0, bugs_of: dict[str, frozenset[str]] | None = None) -> None:
        self.edges = [tuple(e) for e in edges]
        ids = sorted({a for e in self.edges for a in e})
        self.cfg = cfg or CoreConfig(bugs=frozenset(bugs))
        #: per-node bug modes (a mixed cluster: a core beside its bug-mode variant), in place
        #: of ``cfg.bugs`` for the nodes it names
        self.bugs_of: dict[str, frozenset[str]] = dict(bugs_of or {})
        self._pending: dict[int, tuple[str, str, codec.Message, int]] = {}
        self._calls = itertools.count()
        self._uids: dict[str, int] = {}
        self.joiners: set[str] = set()  # added later with a fresh data directory (spec 4.6)
        #: each node's pre-core checks, with the boot they belong to (a restart forgets the
        #: replay table, as a real process does)
        self._gates: dict[str, tuple[int, Gate]] = {}
        #: hostile requests each node refused before its core, by reason
        self.hostile_refused: dict[str, dict[str, int]] = {}

        def make(i: str, durable: list[Persist], _boot: int, _rng: random.Random) -> DripCore:
            return DripCore(i, self.peers(i), durable_of(durable), self.cfg_of(i), policy,
                            mesh_members=ids, join=i in self.joiners)

        super().__init__(ids, make, seed=seed, wire=_wire(self.cfg.bugs), latency=latency, jitter=jitter,
                         loss=loss)
        self.boot_all()
        self.run_until(0.0)

    #: how long a delivery mark stays in memory: the server commits it without an fsync, in
    #: the next durable group (`server._commit_groups`), so a crash meanwhile loses it and the
    #: restarted node delivers that commit again (a quiet mesh carries it longer than this)
    DELIVERED_FLUSH_S = 1.0

    def buffers(self, n: Any, p: Persist) -> float | None:
        return self.DELIVERED_FLUSH_S if isinstance(p.record, Delivered) else None

    def cfg_of(self, n: str) -> CoreConfig:
        """Node ``n``'s configuration: ``cfg`` with its own bug modes in a mixed cluster."""
        bugs = self.bugs_of.get(n)
        return self.cfg if bugs is None else replace(self.cfg, bugs=bugs)

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
            if kind == "hostile":  # the attacker reads the status and goes on
                self.trace.append((self.now, "hostile-answer", src, call, msg.status))
                return []
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
        if isinstance(msg, HostileRequest):
            return self._admit(dst, msg)
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

    # ---- hostile peers
    ATTACKER = "mallory"

    def gate(self, n: str) -> Gate:
        """Node ``n``'s pre-core checks as its server makes them (`nodes.drip.admit`)."""
        boot = self.nodes[n].boot
        have = self._gates.get(n)
        if have is not None and have[0] == boot:
            return have[1]
        ids = {*self.ids, *self.joiners}
        verifier = Verifier("public", public_keys={i: _pem_pair(i)[1] for i in sorted(ids)})

        def note(reason: str, **detail: Any) -> None:
            self._refused(n, reason, "")

        bugs = self.cfg_of(n).bugs
        g = Gate(n, verifier, codec.node_limits(codec.MAX_VALUE_BYTES, self.cfg.vote_timeout_s,
                                                bugs),
                 lambda: self.core(n).peers, lambda: self.core(n).epoch, lambda _: None, note,
                 bugs, lambda: self.core(n))
        self._gates[n] = (boot, g)
        return g

    def _refused(self, n: str, reason: str, kind: str) -> None:
        by = self.hostile_refused.setdefault(n, {})
        by[reason] = by.get(reason, 0) + 1
        self.trace.append((self.now, "hostile-refused", n, kind, reason))

    def _admit(self, n: str, req: HostileRequest) -> tuple[Any, Any] | None:
        node = self.nodes[n]
        wall = self.wall(n, node.local(self.now) if self._skewed else self.now)
        got = self.gate(n).admit(req.ident, None, req.method, req.path,
                                 CIMultiDict(req.headers), req.body, wall)
        if isinstance(got, Refusal):
            self._refused(n, got.reason, req.kind)
            return None
        if isinstance(got, codec.Batch):  # no builder sends one: the core takes items singly
            self.trace.append((self.now, "hostile-batch-dropped", n))
            return None
        assert req.ident is not None
        return Inbound(req.ident, ("hostile", self.ATTACKER, req.kind)), got

    def hostile_burst(self, n: str, flood: int = 2, key_holder_lies: bool = False) -> int:
        """One burst of `nodes.drip.hostile`'s requests (the real ``hostile`` fault's
        builders) at node ``n``, as from its first peer (a compromised member holding that
        peer's certificate and key; its second peer's for ``commit-other-initiator``), each
        onto the network from the attacker and through ``n``'s `Gate` on arrival. What the
        attacker knows (`hostile.Known`) is read off the simulated nodes: the compromised
        members' counters and locks, the updates applied everywhere. Socket kinds
        (`NOT_SIMULATED`) and the client port's are traced as skipped. ``flood``: requests per
        flood kind; ``key_holder_lies``: see `hostile.HostileDrip`. Drawn from a random seeded
        by the run's seed and the time, so a replay sends the same requests. Returns how many
        reached the network."""
        peers = [p for p in self.peers(n) if p in self.nodes]
        if not self.running(n) or not peers:
            return 0
        rng = random.Random(f"{self.seed}:hostile:{self.now!r}:{n}")

        def creds(m: str) -> hostile.Creds:
            signer = _SimSigner(m, "public", _pem_pair(m)[0], clock=lambda: self.now)
            return hostile.Creds(m, signer, _no_tls(), _no_tls())

        me = creds(peers[0])
        second = creds(peers[1]) if len(peers) > 1 else None
        running = [m for m in self.ids if self.running(m)]
        counters = {m: self.core(m).counter for m in peers[:2] if self.running(m)}
        applied = set.intersection(*({i.uid for i in self.core(m).d.kv.values()}
                                     for m in running)) if running else set()
        locked = tuple(sorted(uid for uid, _ in self.core(peers[0]).d.locks.values())) \
            if self.running(peers[0]) else ()
        known = hostile.Known(counters, tuple(sorted(applied)), locked)
        burst = hostile.Burst(me, sorted({*self.ids, *self.joiners}), rng, flood, second,
                              key_holder_lies)
        sent = 0
        for atk in burst.build(hostile.DripTarget(n, "sim", 0, 0), known):
            if atk.port != "peer" or atk.kind in NOT_SIMULATED:
                self.trace.append((self.now, "hostile-skipped", n, atk.kind, atk.port))
                continue
            self.trace.append((self.now, "hostile", n, atk.kind))
            ident = me.node if atk.tls == "cert" else None
            if atk.setup is not None:  # its answer awaited: the request follows 10 ms on
                self._hostile_send(n, ident, atk.setup, f"{atk.kind}:setup")
                self.at(self.now + 0.01, lambda i=ident, r=atk.raw, k=atk.kind:
                        self._hostile_send(n, i, r, k))
            else:
                self._hostile_send(n, ident, atk.raw, atk.kind)
            sent += 1
        return sent

    def _hostile_send(self, n: str, ident: str | None, raw: bytes, kind: str) -> None:
        method, path, headers, body = _http(raw)
        self.inject(self.ATTACKER, n, self.ATTACKER,
                    _encode(HostileRequest(ident, method, path, tuple(headers), body, kind)))

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


__all__ = ["WIRE", "DripSim", "HostileRequest", "durable_of"]
