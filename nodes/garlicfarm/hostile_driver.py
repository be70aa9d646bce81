"""The real ``hostile`` fault for Garlic Farm: `hostile.messages` bursts sent as a compromised
member would send them (faults/hostile.py's driver slot; the nemesis ops ``start-hostile`` and
``stop-hostile`` drive it).

The harness writes every node's TLS material and the cluster's Digest credentials, so this
sender holds them all. A message on member ``m``'s link (``("request", m)`` or
``("response", m)``) goes on a connection opened as ``m`` opens its own: TLS verified against
the run CA, naming the target by its node id, then the Digest handshake of
`nodes.garlicfarm.client.WireConnection` (the node's own client side, not a copy), and then
the message's raw bytes. The server asks for no client certificate (tls.py: peers prove
themselves by Digest inside TLS), so ``m``'s credentials are the CA and the Digest secret.

The kinds any sender can make (`hostile.OUTSIDER`: garbage, cut bytes, stranger ids) are also
sent on two connections without valid credentials, which the node must refuse before any byte
reaches its core: ``<kind>@no-digest`` (verified TLS, a wrong Digest password: a 401) and
``<kind>@no-tls`` (plain TCP to the TLS port: the TLS handshake fails; not in a ``tls: false``
run).

``sent[node][kind]`` counts the messages written; ``outcome[node][kind][what]`` what came
back: ``accepted``/``not-accepted`` (a Response, Is Accepted 1/0), ``closed`` (the node closed
without an answer: its refusal of a bad frame or an out-of-range counter), ``no-answer`` (none
within `ANSWER_S`: a cut frame waits for bytes that never come), ``refused-digest`` (401),
``refused-tls`` (the TLS handshake failed), and the alarms ``digest-let-in`` and
``plain-answered`` (a connection without credentials got through: a real bug).
``failed[node]``: member connections that could not be made (the target down or gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodes.common.bursts import BurstTask
from nodes.garlicfarm import hostile, tls
from nodes.garlicfarm.client import WireConnection, read_frame
from nodes.garlicfarm.codec import CodecError, Response
from nodes.garlicfarm.handshake import (
    DEFAULT_CLUSTER,
    DEFAULT_PASSWORD,
    DEFAULT_USER,
    CredentialCache,
    HandshakeError,
)

#: how long a message waits for the node's answer (its core answers in well under this)
ANSWER_S = 1.0
CONNECT_S = 3.0
#: the Digest password the ``@no-digest`` connections offer
WRONG_PASSWORD = "not-the-cluster-password"
#: ways an OUTSIDER kind is also sent without credentials
NO_CREDS = ("no-digest", "no-tls")


@dataclass(frozen=True)
class Member:
    """What the harness holds for one member: its Raft id and how it opens a link."""

    node: str
    num_id: int
    ctx: ssl.SSLContext | None  # None: the run has ``tls: false``
    cluster: str = DEFAULT_CLUSTER
    username: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD


@dataclass(frozen=True)
class GfTarget:
    node: str
    num_id: int
    host: str
    port: int


@dataclass
class HostileGf(BurstTask):
    """Sends a burst of `hostile.messages` to each chosen target now and every ``interval_s``
    until `stop`, at most ``rate`` messages a second to each. The interface of
    faults.hostile.HostileSender, ``skip`` included (kinds left out of each burst)."""

    members: Mapping[int, Member]
    targets: Sequence[GfTarget]
    rng: random.Random
    rate: float = 200.0
    sent: dict[str, Counter[str]] = field(default_factory=dict)
    outcome: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    failed: Counter[str] = field(default_factory=Counter)
    #: the Digest challenges this sender holds per member, as each member's node caches them
    #: (its later connections go straight to request 2); the wrong-password ones apart
    _caches: dict[str, CredentialCache] = field(default_factory=dict, init=False, repr=False)
    #: start-hostile may name kinds to leave out (faults/nemesis.py)
    takes_skip = True

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")

    def start(self, interval_s: float, nodes: Iterable[str] | None = None,
              skip: Iterable[str] = ()) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if self.running:
            raise RuntimeError("hostile Garlic Farm traffic is already running; stop-hostile first")
        known = {t.node for t in self.targets}
        want = None if nodes is None else set(nodes)
        if want is not None and want - known:
            raise ValueError(f"no hostile target(s) {sorted(want - known)}; known: {sorted(known)}")
        chosen = [t for t in self.targets if want is None or t.node in want]
        self._launch(self._loop(chosen, interval_s, frozenset(skip)), "garlicfarm-hostile")

    async def _loop(self, targets: Sequence[GfTarget], interval_s: float,
                    skip: frozenset[str]) -> None:
        while True:  # every target at once: each is attacked from the first second
            await asyncio.gather(*(self.burst(t, skip) for t in targets))
            await asyncio.sleep(interval_s)

    async def burst(self, t: GfTarget, skip: Iterable[str] = ()) -> int:
        """One burst at ``t``, one message at a time (each on a connection of its own, so a
        refusal of one closes nothing else); how many were written."""
        leave_out = frozenset(skip)
        ids = sorted(self.members)
        n = 0
        for kind, (how, sid), data in hostile.messages(self.rng, t.num_id, ids):
            if kind in leave_out:
                continue
            as_ = self.members.get(sid) or self.members[next(i for i in ids if i != t.num_id)]
            n += await self._as_member(t, as_, kind, how, data)
            await asyncio.sleep(1.0 / self.rate)
            if kind in hostile.OUTSIDER:
                for way in NO_CREDS if as_.ctx is not None else ("no-digest",):
                    n += await self._without_creds(t, as_, f"{kind}@{way}", way, data)
                    await asyncio.sleep(1.0 / self.rate)
        return n

    def _note(self, t: GfTarget, kind: str, what: str) -> None:
        self.outcome.setdefault(t.node, {}).setdefault(kind, Counter())[what] += 1

    def _count(self, t: GfTarget, kind: str) -> int:
        self.sent.setdefault(t.node, Counter())[kind] += 1
        return 1

    def _wire(self, t: GfTarget, m: Member, password: str | None = None) -> WireConnection:
        cache = self._caches.setdefault(m.node if password is None else "", CredentialCache())
        return WireConnection(t.host, t.port, cluster=m.cluster, username=m.username,
                              password=m.password if password is None else password,
                              cache=cache, connect_timeout=CONNECT_S, tls=m.ctx,
                              server_name=t.node)

    async def _as_member(self, t: GfTarget, m: Member, kind: str, how: str,
                         data: bytes) -> int:
        conn = self._wire(t, m)
        try:
            try:
                await conn.open()
            except (TimeoutError, OSError, HandshakeError, ConnectionError):
                self.failed[t.node] += 1
                return 0
            assert conn.writer is not None and conn.reader is not None
            try:
                conn.writer.write(data)
                await asyncio.wait_for(conn.writer.drain(), ANSWER_S)
            except (TimeoutError, OSError):
                self.failed[t.node] += 1
                return 0
            self._note(t, kind, await self._answer(conn))
            return self._count(t, kind)
        finally:
            conn.close()

    @staticmethod
    async def _answer(conn: WireConnection) -> str:
        assert conn.reader is not None
        try:
            msg = await asyncio.wait_for(read_frame(conn.reader), ANSWER_S)
        except TimeoutError:
            return "no-answer"
        except (asyncio.IncompleteReadError, OSError, CodecError):
            return "closed"
        if isinstance(msg, Response):
            return "accepted" if msg.accepted else "not-accepted"
        return "closed"  # a request back: not what a node sends on an inbound link

    async def _without_creds(self, t: GfTarget, m: Member, kind: str, way: str,
                             data: bytes) -> int:
        if way == "no-digest":
            conn = self._wire(t, m, password=WRONG_PASSWORD)
            try:
                await conn.open()
            except HandshakeError as e:
                self._note(t, kind, "refused-digest" if e.status == 401 else f"refused-{e.status}")
                return self._count(t, kind)
            except (TimeoutError, OSError, ConnectionError):
                self.failed[t.node] += 1
                return 0
            else:  # the node upgraded a connection whose password is wrong
                assert conn.writer is not None
                conn.writer.write(data)
                self._note(t, kind, "digest-let-in")
                return self._count(t, kind)
            finally:
                conn.close()
        try:  # no-tls: the handshake's first request and the bytes, in the clear
            r, w = await asyncio.wait_for(asyncio.open_connection(t.host, t.port), CONNECT_S)
        except (TimeoutError, OSError):
            self.failed[t.node] += 1
            return 0
        try:
            w.write(self._wire(t, m).hs.request1() + data)
            await asyncio.wait_for(w.drain(), ANSWER_S)
            got = await asyncio.wait_for(r.read(64), ANSWER_S)
            self._note(t, kind, "plain-answered" if got.startswith(b"HTTP/") else "refused-tls")
        except (TimeoutError, OSError):
            self._note(t, kind, "refused-tls")
        finally:
            w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait_closed(), 1.0)
        return self._count(t, kind)

    def counts(self) -> dict[str, dict[str, Any]]:
        """Per node: ``{"sent": N, "by_kind": {...}, "outcome": {kind: {what: n}}}``."""
        return {n: {"sent": sum(c.values()), "by_kind": dict(sorted(c.items())),
                    "outcome": {k: dict(v) for k, v in sorted(self.outcome.get(n, {}).items())},
                    **({"failed": self.failed[n]} if self.failed[n] else {})}
                for n, c in sorted(self.sent.items())}


def refusals(state: Mapping[str, Any]) -> dict[str, int]:
    """A node's refusals from its /admin/state: the core's (``refused``: counters out of
    range) as ``core:<reason>``, the server's (``wire_refused``: bad handshakes and frames)
    as ``wire:<reason>``."""
    out = {f"core:{r}": int(n) for r, n in (state.get("refused") or {}).items()
           if isinstance(n, int)}
    out.update({f"wire:{r}": int(n) for r, n in (state.get("wire_refused") or {}).items()
                if isinstance(n, int)})
    return dict(sorted(out.items()))


def member(node: str, config: Mapping[str, Any]) -> Member:
    """A member's credentials from its config (options ``tls``, ``cluster``, ``username``,
    ``password``, as the node reads them)."""
    o = config.get("options") or {}
    files = tls.parse_option(o.get("tls"))
    ctx = tls.client_context(files.ca) if files else None
    return Member(node, int(config["num_id"]), ctx, str(o.get("cluster", DEFAULT_CLUSTER)),
                  str(o.get("username", DEFAULT_USER)), str(o.get("password", DEFAULT_PASSWORD)))


def driver(targets: Sequence[Any], rng: random.Random,
           configs: Mapping[str, Mapping[str, Any]]) -> HostileGf:
    """The cluster's hostile sender for Garlic Farm (faults.hostile.HostileDef.driver): the
    initial members' credentials from their configs (a server that starts outside the cluster,
    ``options.join``, is attacked but never posed as: the sim's senders are its five members);
    ``options.hostile_rate`` (messages/s to each target, default 200)."""
    members = {m.num_id: m for m in (member(n, c) for n, c in configs.items()
                                     if not (c.get("options") or {}).get("join"))}
    if not members:
        raise ValueError("no initial member to send hostile messages as: every node joins later")
    opts = (configs[targets[0].node].get("options") or {}) if targets else {}
    return HostileGf(members, [GfTarget(t.node, int(configs[t.node]["num_id"]), t.host, t.port)
                               for t in targets], rng,
                     rate=float(opts.get("hostile_rate", 200.0)))


def no_messages(rng: random.Random, targets: Sequence[Any]) -> list[Any]:
    """The raw-message provider slot of the HostileDef: Garlic Farm sends through `driver`."""
    return []
