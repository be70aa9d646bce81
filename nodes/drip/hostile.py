"""DRiP's hostile traffic for the ``hostile`` fault: what issue 26 drove real meshes with.

DRiP speaks HTTPS with mutual TLS and a JWT per request, so its attacks are whole HTTP/1.1
requests, most of them made by a *compromised peer*: one holding a configured member's
certificate and JWT key (the run's PKI material, `Creds`), so they pass the TLS and token
checks and meet the node's protocol checks. Others come from unauthenticated clients: the
plain-HTTP client port, and TLS connections without a client certificate.

`build` makes one burst for one target: a list of `Attack` (kind, port, TLS mode, raw bytes,
how to send). `HostileDrip` sends bursts to every target at a bounded rate until stopped,
holds the slow and idle connections it opened and closes every one of them on `stop`, and
counts per node what it sent per kind and the HTTP statuses the node answered (the run's
evidence). `INTENT` lists the kinds and what each one tries.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import ssl
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from nodes.drip import codec
from nodes.drip.auth import Signer, load_auth
from nodes.drip.codec import (
    Commit,
    Heartbeat,
    Item,
    SyncBatch,
    SyncRequest,
    Update,
    VoteResponse,
    Voting,
)
from nodes.drip.material import NodeFiles

#: what each kind tries (issue 26, items 1-9)
INTENT: dict[str, str] = {
    "heartbeat-ghost": "a heartbeat listing a member 'ghost' nobody configured",
    "heartbeat-5000-members": "a heartbeat listing 5,000 made-up members",
    "voting-unknown-node": "a /voting from a DRiP-Node-ID that is not a member",
    "commit-version-2^63-1": "a /commit with version 2^63-1 (SQLite's largest integer)",
    "commit-version-2^64": "a /commit with version 2^64 (above any 64-bit integer)",
    "commit-without-vote": "a /commit for an update nobody voted on",
    "commit-other-initiator": "a /voting as one member, then a validly signed /commit of the "
                              "same update naming another member as its initiator",
    "revote-applied": "a /voting for an update already applied",
    "sync-unsolicited": "a sync batch nobody asked for",
    "vote-response-forged-voters": "a yes listing every member as a voter, none of whom voted",
    "vote-response-relayed-voters": "a yes for an update the compromised member holds a lock "
                                    "for, listing every member as a voter without their statements",
    "voting-counter-near-max": "a /voting with counter 2^64-2",
    "voting-reset": "a /voting with DRiP-Node-Counter-reset: true far from wrap-around",
    "voting-flood-hot-key": "many /voting for one hot key",
    "sync-request-flood": "many sync requests",
    "deep-json": "a /voting body of JSON nested 100,000 deep",
    "lone-surrogate-key": "a key with a lone UTF-16 surrogate (peer /voting and client update)",
    "budget-non-ascii-digits": "DRiP-Vote-Budget-Ms written in Arabic-Indic digits",
    "oversize-value": "a client update whose value is above 1 MiB",
    "slow-connection": "a request sent a few bytes at a time",
    "idle-partial-head": "a connection that sends half a request head and waits",
    "tls-no-client-cert": "a TLS connection without a client certificate, held open",
}
#: a fresh counter is this far ahead of its member's own, plus up to FRESH_SPREAD: inside the
#: counter window (2^20, nodes/drip/seen.py), beyond any counter the real node reaches in a run
#: by itself. The locks such a /voting takes used to stay for good (the member answered
#: "unknown" about a round it never reached); since session 45 the member, asked about a
#: round it saw forged in its name, moves its counter past it and answers "aborted", so they
#: end after the voters' lock TTL (`DripCore._pass_asked_round`); the member's counter,
#: read again before each burst (`Known`), then includes those jumps
FRESH_AHEAD = 2**19
FRESH_SPREAD = 2**18
MAX_I63 = 2**63 - 1
MAX_U64 = 2**64 - 1
DEEP = 100_000
MANY_MEMBERS = 5_000
ONE_MIB = 1 << 20
#: the loopback address the harness's attacker connects from: the nodes' peers connect from
#: 127.0.0.1 (directly or through their proxies), and an attacker is another host
SOURCE = "127.0.0.2"
#: Arabic-Indic "١٠٠" (100): str.isdigit() says yes, the spec's ASCII digits say no
ARABIC_100 = "\u0661\u0660\u0660"


@dataclass(frozen=True)
class Creds:
    """A compromised member: its id, its JWT signer, and TLS contexts with and without its
    certificate (both trust the run's CA; host names are not checked: we dial by address)."""

    node: str
    signer: Signer
    with_cert: ssl.SSLContext
    without_cert: ssl.SSLContext
    #: the compromised node's own admin API (``http://host:port``): what it knows of itself
    admin: str | None = None

    @classmethod
    def load(cls, node: str, tls: Mapping[str, str], jwt_cfg: Mapping[str, Any],
             admin: str | None = None) -> Creds:
        """From a node's config keys ``tls`` {ca, cert, key} and ``jwt`` (suite node_extra);
        ``admin``: its admin API, read before each burst (`Known`)."""
        files = NodeFiles(Path(tls["ca"]), Path(tls["cert"]), Path(tls["key"]))
        signer, _ = load_auth(node, dict(jwt_cfg))
        bare = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca))
        bare.check_hostname = False
        full = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca))
        full.load_cert_chain(str(files.cert), str(files.key))
        full.check_hostname = False
        return cls(node, signer, full, bare, admin)


@dataclass(frozen=True)
class DripTarget:
    """A node to attack: its name and its peer (HTTPS) and client (HTTP) addresses."""

    node: str
    host: str
    peer_port: int
    client_port: int


@dataclass(frozen=True)
class Attack:
    """One hostile request: ``port`` "peer" or "client"; ``tls`` "cert", "bare" (no client
    certificate) or None (plain); ``how`` "send" (send, read the status, close), "slow" (a few
    bytes at a time) or "hold" (send, then keep the connection open until stop)."""

    node: str
    kind: str
    port: str
    tls: str | None
    raw: bytes
    how: str = "send"
    #: a request sent first on its own connection, its answer awaited (the vote round a
    #: commit then contradicts)
    setup: bytes | None = None


@dataclass(frozen=True)
class Known:
    """What the compromised members know of their own nodes before a burst (their admin API):
    each one's current counter, and update ids applied there a burst ago (long enough for
    them to be applied everywhere). Fresh counters just ahead of a member's own reach the
    targets' protocol checks instead of the counter window's 400."""

    counters: Mapping[str, int] = field(default_factory=dict)
    applied: tuple[str, ...] = ()
    #: update ids the compromised members hold a lock for (voted yes, vote still open): an
    #: initiator may still wait on that member for them, so a forged answer can land
    locked: tuple[str, ...] = ()


def http(method: str, path: str, headers: Mapping[str, str], body: bytes = b"",
         host: str = "127.0.0.1") -> bytes:
    """A whole HTTP/1.1 request (UTF-8 header values: the hostile ones are not Latin-1)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close",
             f"Content-Length: {len(body)}"]
    if body:
        lines.append("Content-Type: application/json")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def signed(msg: codec.Message, signer: Signer, *, headers: Mapping[str, str] | None = None,
           body: bytes | None = None) -> bytes:
    """``msg`` as its HTTP request with a valid token for it; ``headers``/``body`` replace the
    encoded ones (the token still signs ``msg``: a body the codec cannot read never gets that
    far)."""
    req = codec.encode(msg)
    try:  # the digest of what the receiver decodes (it may normalise, e.g. sort members)
        digest = codec.signed_digest(codec.decode(req.method, req.path, req.headers,
                                                  req.body_bytes()))
    except codec.CodecError:  # beyond what the codec reads: the token signs ``msg`` as built
        digest = codec.signed_digest(msg)
    h = {**req.headers, **(headers or {}), codec.H_AUTH: signer.header(
        time.time(), digest, once=not isinstance(msg, codec.FLOODED))}  # as a real peer signs
    return http(req.method, req.path, h, req.body_bytes() if body is None else body)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class Burst:
    """Builds the attacks of one burst for one target; ``flood``: requests per flood kind."""

    creds: Creds
    members: Sequence[str]
    rng: random.Random
    flood: int = 20
    #: a second compromised member (another peer of the target) for commit-other-initiator
    second: Creds | None = None
    #: see `HostileDrip.key_holder_lies`
    key_holder_lies: bool = True

    def _uid(self) -> str:
        return f"hostile-{self.rng.randbytes(6).hex()}"

    def _counter(self) -> int:
        return self.rng.randrange(1 << 20, 1 << 40)

    def _fresh(self, known: Known, node: str) -> int:
        """A counter of ``node`` no target has seen, inside the window (random and far out
        when its node's counter is unknown). Never an old one: a target that missed it (a
        partition, the first seconds) would take the real message with it as a repeat."""
        base = known.counters.get(node)
        if base is None:
            return self._counter()
        return base + FRESH_AHEAD + self.rng.randrange(FRESH_SPREAD)

    def _update(self, key: str | None = None, value: Any = "hostile") -> Update:
        return Update(self._uid(), key or f"hk{self.rng.randrange(4)}", value)

    def build(self, t: DripTarget, known: Known | None = None) -> list[Attack]:
        known = known or Known()
        me, s = self.creds.node, self.creds.signer
        other = next((m for m in self.members if m not in (me, t.node)), t.node)
        out: list[Attack] = []

        def peer(kind: str, raw: bytes, tls: str = "cert", how: str = "send",
                 setup: bytes | None = None) -> None:
            out.append(Attack(t.node, kind, "peer", tls, raw, how, setup))

        def client(kind: str, raw: bytes, how: str = "send") -> None:
            out.append(Attack(t.node, kind, "client", None, raw, how))

        def voting(**kw: Any) -> Voting:
            fields: dict[str, Any] = {"initiator": me, "counter": self._counter(),
                                      "reset": False, "update": self._update()}
            return Voting(**{**fields, **kw})

        def commit(version: int, initiator: str = me, counter: int | None = None,
                   update: Update | None = None) -> Commit:
            return Commit(initiator=initiator, counter=counter or self._counter(), reset=False,
                          update=update or self._update(), version=version)

        # first: it lands only while the target waits on us. Our own yes in it is a key
        # holder's lie no node can refuse (DRiP tolerates crashed members, not lying ones):
        # only the relayed voters beside it are refusable, so a correct-node run leaves it out
        # (the attack's own votes lock too: only real votes are worth answering)
        real = [u for u in known.locked if not u.startswith("hostile-")]
        for uid in real[:4] if self.key_holder_lies else ():
            peer("vote-response-relayed-voters", signed(VoteResponse(
                responder=me, yes=True, initiator=t.node, counter=0, uid=uid,
                voters=tuple(self.members), version=0), s))
        peer("heartbeat-ghost", signed(Heartbeat(me, "active", (*self.members, "ghost")), s))
        many = tuple(f"m{i:04d}" for i in range(MANY_MEMBERS))
        peer("heartbeat-5000-members", signed(Heartbeat(me, "active", many), s))
        stranger = f"mallory-{self.rng.randbytes(3).hex()}"
        peer("voting-unknown-node",
             signed(voting(initiator=stranger), Signer(stranger, s.mode, s.key)))
        # after a vote of ours on that update, so a node without the bound applies it
        # (`no-version-bound`: `version-out-of-bounds`); the bound refuses it before the core
        up63 = self._update(f"hk-{self.rng.randrange(1 << 32):08x}")
        c63 = self._fresh(known, me)
        peer("commit-version-2^63-1", signed(commit(MAX_I63, counter=c63 + 1, update=up63), s),
             setup=signed(voting(counter=c63, update=up63), s))
        # the bad-body kinds carry counters inside the window: a far one is refused first
        # (400 counter-window from the head alone, nodes/drip/admit.py) and the body unread
        peer("commit-version-2^64", signed(commit(MAX_U64 + 1, counter=self._fresh(known, me)),
                                           s))
        peer("commit-without-vote",
             signed(commit(self.rng.randrange(1, 1000), counter=self._fresh(known, me)), s))
        # we vote as ourselves, then commit that update as the second member (a forwarded
        # commit keeps its initiator's token); without a second one the token is forged (401)
        up = self._update(f"hk-{self.rng.randrange(1 << 32):08x}")  # a key no other vote holds
        vote = signed(voting(counter=self._fresh(known, me), update=up), s)
        if self.second is not None and self.second.node != t.node:
            peer("commit-other-initiator", signed(commit(
                self.rng.randrange(1, 1000), self.second.node,
                self._fresh(known, self.second.node), up),
                self.second.signer), setup=vote)
        else:
            peer("commit-other-initiator", signed(commit(self.rng.randrange(1, 1000), other),
                                                  Signer(other, s.mode, s.key)))
        if known.applied:
            done = Update(self.rng.choice(known.applied), f"hk{self.rng.randrange(4)}", "again")
            peer("revote-applied", signed(voting(counter=self._fresh(known, me), update=done), s))
        items = tuple(Item(f"hk{i}", f"unsolicited-{i}", self.rng.randrange(1, 1000), self._uid())
                      for i in range(50))
        peer("sync-unsolicited", signed(SyncBatch(me, self._fresh(known, me), False, True,
                                                  f"sync-{self._uid()}", items), s))
        peer("vote-response-forged-voters", signed(VoteResponse(
            responder=me, yes=True, initiator=t.node, counter=self._counter(), uid=self._uid(),
            voters=tuple(self.members), version=1), s))
        peer("voting-counter-near-max", signed(voting(counter=MAX_U64 - 1), s))
        peer("voting-reset", signed(voting(counter=self.rng.randrange(1, 100), reset=True), s))
        for _ in range(self.flood):
            peer("voting-flood-hot-key", signed(voting(update=self._update("hk0")), s))
            peer("sync-request-flood", signed(SyncRequest(me), s))
        deep = b"[" * DEEP + b"]" * DEEP
        peer("deep-json", signed(voting(counter=self._fresh(known, me)), s, body=deep))
        surrogate = b'{"id":"%s","key":"k\\ud800","value":1}' % self._uid().encode()
        peer("lone-surrogate-key", signed(voting(counter=self._fresh(known, me)), s,
                                          body=surrogate))
        client("lone-surrogate-key", http("POST", "/client/update", {}, surrogate))
        peer("budget-non-ascii-digits", signed(voting(counter=self._fresh(known, me)), s,
                                               headers={codec.H_BUDGET: ARABIC_100}))
        big = _dumps({"id": self._uid(), "key": "hk-big", "value": "v" * (ONE_MIB + 1024)})
        client("oversize-value", http("POST", "/client/update", {}, big))
        client("slow-connection", http("GET", "/client/read?key=hk0", {}), how="slow")
        peer("slow-connection", signed(Heartbeat(me, "active", tuple(self.members)), s),
             how="slow")
        client("idle-partial-head", b"POST /client/update HTTP/1.1\r\nHost: 127.0.0.1\r\n",
               how="hold")
        peer("tls-no-client-cert", signed(Heartbeat(me, "active", tuple(self.members)), s),
             tls="bare", how="hold")
        return out


@dataclass
class HostileDrip:
    """Sends `Burst` s to the targets every ``interval_s`` at most ``rate`` requests/s (all
    loopback), until `stop`, which cancels every task and closes every connection held.
    ``creds[node]``: the compromised member that attacks ``node`` (one of its configured peers,
    so its certificate passes). The interface of faults.hostile.HostileSender (the nemesis
    ops ``start-hostile``/``stop-hostile`` drive it).

    ``sent[node][kind]``: requests written; ``status[node][kind][code]``: what the node
    answered (``"closed"``: it closed without a status line, ``"timeout"``: none in time,
    ``"held"``: a connection we kept open on purpose); ``failed[node]``: connects refused.
    """

    creds: Mapping[str, Creds]
    targets: Sequence[DripTarget]
    rng: random.Random
    rate: float = 50.0
    interval_s: float = 1.0
    flood: int = 20
    slow_step_s: float = 0.05
    max_held: int = 50
    #: also send what only a lying key holder could (its own yes on a vote the target really
    #: waits on): for the bug modes that trust relayed voters; off for correct-node runs
    key_holder_lies: bool = True
    #: ``second[node]``: another compromised peer of ``node`` (commit-other-initiator)
    second: Mapping[str, Creds] = field(default_factory=dict)
    #: the local address every connection is opened from (None: the system's choice): a
    #: real attacker is another host than the members it holds keys of, and a node admits
    #: new connections per source address (``conn_rate``, nodes/common/conns.py)
    source: str | None = None
    sent: dict[str, Counter[str]] = field(default_factory=dict)
    status: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    failed: Counter[str] = field(default_factory=Counter)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _held: list[asyncio.StreamWriter] = field(default_factory=list, init=False, repr=False)
    _inflight: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.interval_s <= 0:
            raise ValueError(f"rate and interval_s must be positive, got {self.rate}, "
                             f"{self.interval_s}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, interval_s: float | None = None, nodes: Sequence[str] | None = None) -> None:
        """Attack ``nodes`` (default every target) now and every ``interval_s``."""
        if self.running:
            raise RuntimeError("hostile DRiP traffic is already running; stop-hostile first")
        if interval_s is not None:
            if interval_s <= 0:
                raise ValueError(f"interval_s must be positive, got {interval_s}")
            self.interval_s = interval_s
        known = {t.node for t in self.targets}
        if nodes is not None and set(nodes) - known:
            raise ValueError(f"no hostile target(s) {sorted(set(nodes) - known)}; "
                             f"known: {sorted(known)}")
        chosen = [t for t in self.targets if nodes is None or t.node in nodes]
        self._task = asyncio.get_running_loop().create_task(self._loop(chosen),
                                                            name="drip-hostile")

    async def _loop(self, targets: Sequence[DripTarget]) -> None:
        members = [t.node for t in self.targets]
        bursts = {t.node: Burst(self.creds[t.node], members, self.rng, self.flood,
                                self.second.get(t.node), self.key_holder_lies)
                  for t in targets}
        applied: tuple[str, ...] = ()
        while True:
            counters, now_applied, locked = await self._known()
            known, applied = Known(counters, applied, locked), now_applied
            # round-robin over the targets, so every node is attacked from the first second
            built = {t.node: bursts[t.node].build(t, known) for t in targets}
            for row in itertools.zip_longest(*built.values()):
                for a in row:
                    if a is None:
                        continue
                    t = next(x for x in targets if x.node == a.node)
                    task = asyncio.get_running_loop().create_task(self._send(t, a))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
                    await asyncio.sleep(1.0 / self.rate)
            await asyncio.sleep(self.interval_s)

    async def _known(self) -> tuple[dict[str, int], tuple[str, ...], tuple[str, ...]]:
        """Each compromised member's counter, applied update ids and locked update ids, from
        its own admin API (members without one, or that do not answer, are left out)."""
        counters: dict[str, int] = {}
        applied: set[str] = set()
        locked: set[str] = set()
        own = {c.node: c for c in [*self.creds.values(), *self.second.values()] if c.admin}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as s:
            for node, c in sorted(own.items()):
                try:
                    async with s.get(f"{c.admin}/admin/state") as r:
                        st = await r.json()
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    continue
                if isinstance(st, dict) and isinstance(st.get("counter"), int):
                    counters[node] = st["counter"]
                    applied |= {str(v["uid"]) for v in (st.get("kv") or {}).values()
                                if isinstance(v, dict) and v.get("uid")}
                    locked |= {str(u) for u in (st.get("locks") or {}).values()}
        return counters, tuple(sorted(applied)), tuple(sorted(locked))

    async def stop(self) -> None:
        """Stop sending; cancel what is in flight; close every connection we opened."""
        task, self._task = self._task, None
        pending = [*([task] if task else []), *self._inflight]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        held, self._held = self._held, []
        for w in held:
            w.close()
        for w in held:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait_closed(), 1.0)

    def close(self) -> None:
        """Synchronous last resort (the cluster's close, Ctrl-C): cancel and close all."""
        for t in [*([self._task] if self._task else []), *self._inflight]:
            t.cancel()
        self._task = None
        held, self._held = self._held, []
        for w in held:
            w.close()

    def _note(self, a: Attack, outcome: str) -> None:
        self.status.setdefault(a.node, {}).setdefault(a.kind, Counter())[outcome] += 1

    async def _send(self, t: DripTarget, a: Attack) -> None:
        if a.setup is not None:  # its answer is noted as ``<kind>:setup``, not counted as sent
            await self._send(t, replace(a, kind=f"{a.kind}:setup", raw=a.setup, setup=None))
        port = t.peer_port if a.port == "peer" else t.client_port
        creds = self.creds[t.node]
        ctx = {"cert": creds.with_cert, "bare": creds.without_cert, None: None}[a.tls]
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(
                t.host, port, ssl=ctx, local_addr=(self.source, 0) if self.source else None),
                3.0)
        except (TimeoutError, OSError, ssl.SSLError):
            self.failed[a.node] += 1
            return
        keep = False
        try:
            if a.how == "slow":
                for i in range(0, len(a.raw), 8):
                    w.write(a.raw[i:i + 8])
                    await w.drain()
                    await asyncio.sleep(self.slow_step_s)
            else:
                w.write(a.raw)
                await asyncio.wait_for(w.drain(), 5.0)
            if not a.kind.endswith(":setup"):
                self.sent.setdefault(a.node, Counter())[a.kind] += 1
            if a.how == "hold" and len(self._held) < self.max_held:
                self._held.append(w)
                keep = True
            line = await asyncio.wait_for(r.readline(), 10.0)
            parts = line.split()
            self._note(a, parts[1].decode() if len(parts) > 1 else "closed")
        except TimeoutError:
            self._note(a, "held" if keep else "timeout")
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            self._note(a, "closed")
        finally:
            if not keep:
                w.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(w.wait_closed(), 1.0)

    def counts(self) -> dict[str, dict[str, Any]]:
        """Per node: ``{"sent": N, "by_kind": {...}, "status": {kind: {code: n}}}``."""
        return {n: {"sent": sum(c.values()), "by_kind": dict(sorted(c.items())),
                    "status": {k: dict(v) for k, v in sorted(self.status.get(n, {}).items())},
                    **({"failed": self.failed[n]} if self.failed[n] else {})}
                for n, c in sorted(self.sent.items())}


def refusals(state: Mapping[str, Any]) -> dict[str, int]:
    """Refusal counters from a DRiP /admin/state: its per-reason ``refused`` map
    (nodes/common/refusals.py) as ``refused:<reason>``."""
    return {f"refused:{r}": int(n) for r, n in sorted((state.get("refused") or {}).items())
            if isinstance(n, int)}


def driver(targets: Sequence[Any], rng: random.Random,
           configs: Mapping[str, Mapping[str, Any]]) -> HostileDrip:
    """The cluster's hostile sender for DRiP (faults.hostile.HostileDef.driver): each target
    is attacked with the credentials of its first configured peer, read from that peer's
    config (``tls``, ``jwt``, and its admin port for `Known`), and its second peer's for
    commit-other-initiator; ``options.hostile_rate`` (requests/s, default 50) and
    ``options.hostile_flood`` (requests per flood kind per burst, default 20) bound it;
    ``options.hostile_key_holder_lies: false`` leaves out the forged own yes (`HostileDrip`);
    it connects from ``options.hostile_source`` (default `SOURCE`: not the members' address)."""
    creds: dict[str, Creds] = {}
    second: dict[str, Creds] = {}
    by_peer: dict[str, Creds] = {}

    def load(p: str) -> Creds:
        if p not in by_peer:
            c = configs[p]
            admin = f"http://{c.get('host', '127.0.0.1')}:{c['ports']['admin']}" \
                if "admin" in (c.get("ports") or {}) else None
            by_peer[p] = Creds.load(p, c["tls"], c["jwt"], admin)
        return by_peer[p]

    for t in targets:
        peers = sorted(configs[t.node].get("peers") or {})
        if not peers:
            raise ValueError(f"{t.node} has no configured peer to attack it as")
        creds[t.node] = load(peers[0])
        if len(peers) > 1:
            second[t.node] = load(peers[1])
    opts = (configs[targets[0].node].get("options") or {}) if targets else {}
    return HostileDrip(
        creds, [DripTarget(t.node, t.host, t.port, int(configs[t.node]["ports"]["client"]))
                for t in targets], rng, rate=float(opts.get("hostile_rate", 50.0)),
        flood=int(opts.get("hostile_flood", 20)), second=second,
        key_holder_lies=bool(opts.get("hostile_key_holder_lies", True)),
        source=str(opts.get("hostile_source", SOURCE)) or None)


def no_messages(rng: random.Random, targets: Sequence[Any]) -> list[Any]:
    """The raw-message provider slot of the HostileDef: DRiP sends through `driver` only."""
    return []
