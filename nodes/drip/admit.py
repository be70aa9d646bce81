"""The checks a DRiP node makes on a peer request before its core, without any I/O.

Why its own module: the HTTPS server (`nodes.drip.server`) and the simulator's DRiP transport
(`harness.sim.drip`, its ``hostile`` kind) both run these checks, so a hostile request meets
the very same refusals in a simulated mesh as on a real socket; nothing here reads a socket,
a clock or a file. Inputs: the TLS peer identity (the name in the client certificate, None
without one) and the certificate's SHA-256, the request's method, path, headers and body, and
the node's calendar time. Output: the decoded message for the core, or a `Refusal` (HTTP
status, the reason it is counted under, the error text).

Two phases, as the server reads a request: `Gate.head` (before the body is read: identity,
``DRiP-Node-ID``, and the refusals the node's state makes from the head alone) and `Gate.body`
(decoding with the codec's bounds, then the token's signature and times, the token bound to
this very request and its replay id, own-behalf, and the signed statements behind a relayed
yes); `Gate.admit` is both at once. A batch on a lane has no token: its frame's MAC under the
lane's key, which the upgrade's token bound, stands for it (`Gate.body`'s ``laned``). The order and the checks are those listed in
`nodes.drip.server`'s docstring.

Cheapest first (issue 26: a flood of validly signed refusals cost the mesh a third of its
commit rate, and the ES256 check was most of a refusal's CPU after TLS): a request that is
refused on several counts gets the refusal of the first check in that order, so a malformed
body with a bad token is a 400 ``malformed``, a sync request nobody needs with a bad token a
409 ``sync-not-needed``. A request is only ever refused before its token is checked; nothing
is recorded for it, so an unsigned request can learn no more than which refusal comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from nodes.common.fastinit import fast_frozen_init
from nodes.drip import codec
from nodes.drip.auth import AuthError, Verifier, covers
from nodes.drip.codec import CodecError, Message
from nodes.drip.seen import CounterOutOfWindow
from nodes.drip.sync import Refused

#: messages a node sends on its own behalf: DRiP-Node-ID must be the TLS peer itself
OWN_BEHALF = (codec.VoteResponse, codec.Heartbeat, codec.NodeNotice, codec.SyncRequest,
              codec.SyncBatch, codec.StateQuery, codec.OutcomeQuery, codec.Batch,
              codec.LaneOpen)


@fast_frozen_init
@dataclass(frozen=True)
class Refusal:
    """A request refused before the core: answered ``status`` with ``{"error": error,
    **extra}``, counted under ``reason`` (`nodes.common.refusals`)."""

    status: int
    reason: str
    error: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"error": self.error, **self.extra}


#: paths whose ``DRiP-Node-Counter`` is the sender's own (an initiator's, a sync source's)
COUNTED = ("/voting", "/commit", "/abort")


class NodeView(Protocol):
    """What the gate reads of the node's core before a token is checked (read-only)."""

    def out_of_window(self, node: str, counter: int, reset: bool
                      ) -> CounterOutOfWindow | None: ...

    def sync_refusal(self, hop: str) -> Refused | None: ...

    def locks_of(self, initiator: str) -> int: ...


@fast_frozen_init
@dataclass(frozen=True)
class Head:
    """A request whose head passed: who sent it over TLS, who it says it is, its token."""

    ident: str
    sender: str
    auth: str | None


@dataclass
class Gate:
    """One node's pre-core checks. ``peers``/``epoch``/``pin`` read the node's current view
    (the agreed membership changes them); ``note`` counts a refusal that does not refuse the
    request (an unproven voter in a relayed yes), as ``note(reason, **detail)``."""

    me: str
    verifier: Verifier
    limits: codec.Limits
    peers: Callable[[], Collection[str]]
    epoch: Callable[[], int]
    #: the certificate SHA-256 an agreed membership entry pins for a peer (None: no pin)
    pin: Callable[[str], str | None]
    note: Callable[..., None]
    bugs: Collection[str] = frozenset()
    #: the node's core as it is now (None: no state checks before the token)
    view: Callable[[], NodeView] | None = None
    #: vote rounds of one initiator this node takes part in at once (keys it holds locked
    #: for that initiator's updates); a /voting beyond them is refused from its head (429
    #: ``initiator-rounds``). 0: no bound. A correct initiator has at most its admission cap
    #: (``max_initiating``) of updates open, so the server sets twice that
    initiator_rounds: int = 0

    def head(self, ident: str | None, cert_sha256: str | None, headers: Mapping[str, str],
             now: float, method: str = "", path: str = "") -> Head | Refusal:
        """Checks 1-3: a configured peer's certificate, a well-formed ``DRiP-Node-ID``, and
        what the node's state refuses from the head alone (`early`)."""
        if ident is None:
            return Refusal(403, "no-client-cert", "no TLS client certificate: DRiP peers "
                           "authenticate with mutual TLS")
        if ident not in self.peers():
            msg = (f"{ident!r} is not a peer of {self.me} (configured, or added by an agreed "
                   "membership, and not decommissioned); request ignored")
            # the epoch lets a member added at run time, decommissioned and restarted, learn
            # it left (core._disowned, docs/drip.md "A decommissioned member that restarts")
            return Refusal(403, "not-a-peer", msg, {"refusal": "not-a-peer",
                                                     "epoch": self.epoch()})
        pin = self.pin(ident)
        if pin is not None and cert_sha256 != pin:
            return Refusal(403, "cert-mismatch", f"{ident!r} presented a certificate other "
                           "than the one its agreed membership entry pins")
        try:
            sender = codec.parse_node_id(headers.get(codec.H_NODE))
        except CodecError as e:
            return Refusal(e.status, "malformed", str(e))
        early = self.early(ident, sender, method, path, headers)
        return early if early is not None else Head(ident, sender, headers.get(codec.H_AUTH))

    def early(self, ident: str, sender: str, method: str, path: str,
              headers: Mapping[str, str]) -> Refusal | None:
        """Refusals the core would make anyway, from the head and the node's state alone:
        a sync request from a peer that needs none (409 ``sync-not-needed``), a counter beyond
        the window of its initiator (400 ``counter-window``; a malformed counter header is a
        400 ``malformed``), a /voting of an initiator already holding ``initiator_rounds``
        locks here (429 ``initiator-rounds``: a key holder's flood of in-window votings on
        fresh keys would run a whole vote round in every node per request). The floods of validly signed requests (sync requests, votings with
        far-ahead counters) then cost a TLS handshake and an HTTP head, not a body read, an
        ES256 check, a decode and a core turn."""
        if self.view is None or method not in ("PUT", "POST"):
            return None
        if path.startswith("/sync/node/"):
            refused = self.view().sync_refusal(ident)
            return None if refused is None else Refusal(refused.status, refused.reason,
                                                        str(refused))
        if path not in COUNTED:  # (the core's window honours ignore-counter-window)
            return None
        try:
            counter = codec.parse_counter(headers.get(codec.H_COUNTER))
            reset = codec.parse_reset(headers.get(codec.H_RESET), counter)
        except CodecError as e:
            return Refusal(e.status, "malformed", str(e))
        view = self.view()
        far = view.out_of_window(sender, counter, reset)
        if far is not None:
            return Refusal(400, "counter-window", str(far))
        return self.rounds(sender, view) if path == "/voting" else None

    def rounds(self, initiator: str, view: NodeView) -> Refusal | None:
        """A /voting of an initiator already holding ``initiator_rounds`` locks here: 429
        ``initiator-rounds`` (a single request from its head, a batch item before its token)."""
        if self.initiator_rounds > 0 and view.locks_of(initiator) >= self.initiator_rounds:
            return Refusal(429, "initiator-rounds", f"{self.me} already takes part in "
                           f"{self.initiator_rounds} vote rounds of initiator {initiator!r} "
                           "(the most one initiator may have here: twice "
                           "options.max_initiating); retry once some are decided")
        return None

    def body(self, h: Head, method: str, path: str, headers: Mapping[str, str], body: bytes,
             now: float, *, laned: bool = False) -> Message | Refusal:
        """Checks 4-6 on a request whose head passed: decoding first (no signature check
        for a body the bounds refuse), then the token; a relayed yes keeps only its proven
        voters (`proven`).

        ``laned``: a batch that came as an exchange frame on a lane whose MAC and seq the
        caller checked under the key its signed upgrade carried (`nodes.drip.lane`). That
        stands for the batch token, so there is none to check; everything else is as for a
        POST /batch (bounds, own behalf, and each item's own checks in `item`). Only a batch
        comes this way: anything else is refused as malformed."""
        try:
            msg = codec.decode(method, path, headers, body, h.auth, self.limits)
        except CodecError as e:
            return Refusal(e.status, "malformed", str(e))
        except Exception as e:  # noqa: BLE001 - a decoder bug must be a 400, never a 500
            return Refusal(400, "malformed", f"undecodable request: {type(e).__name__}: {e}")
        if laned:
            if not isinstance(msg, codec.Batch):
                return Refusal(400, "malformed", "a lane frame carries a batch, not a "
                               f"{type(msg).__name__}")
        else:
            try:
                claims = self.verifier.verify(h.auth, h.sender, now)
                digest = codec.batch_digest(msg.sender, body) if isinstance(msg, codec.Batch) \
                    else codec.signed_digest(msg)  # a batch binds the bytes read, not a re-encoding
                self.verifier.bind(claims, digest, once=not isinstance(msg, codec.FLOODED),
                                   now=now)
            except AuthError as e:
                return Refusal(401, e.reason, str(e))
        if isinstance(msg, OWN_BEHALF) and h.sender != h.ident:
            return Refusal(403, "not-own-behalf", f"{codec.H_NODE} {h.sender!r} is not the "
                           f"TLS peer {h.ident!r}")
        if isinstance(msg, codec.VoteResponse):
            msg = self.proven(msg, h.ident, now)
        return msg

    def admit(self, ident: str | None, cert_sha256: str | None, method: str, path: str,
              headers: Mapping[str, str], body: bytes, now: float) -> Message | Refusal:
        """Every check on one whole request: what the core is handed, or the refusal."""
        h = self.head(ident, cert_sha256, headers, now, method, path)
        return h if isinstance(h, Refusal) else self.body(h, method, path, headers, body, now)

    def item(self, ident: str, m: Message, now: float) -> Message | Refusal:
        """A batch item as a single request would be admitted (the initiator's rounds bound
        too: session 46, when a lane first carried single votings in batches, found batch items
        passed it; the core's own counter-window check stands in for the head's)."""
        if isinstance(m, codec.Voting) and self.view is not None:
            over = self.rounds(m.initiator, self.view())
            if over is not None:
                return over
        if isinstance(m, codec.FLOODED):
            if m.initiator == ident and m.auth:
                # the initiator's own message in a batch it authenticated itself (its batch
                # token over these very bytes, or its lane's MAC under the key its signed
                # upgrade carried), proven as its vote responses are: its token goes on with
                # it and is checked at every hop beyond (docs/drip.md, session 50)
                return m
            try:  # the initiator's own token, as on a single request
                claims = self.verifier.verify(m.auth, m.initiator, now)
                self.verifier.bind(claims, codec.signed_digest(m), once=False, now=now)
            except AuthError as e:
                return Refusal(401, e.reason, str(e))
            return m
        assert isinstance(m, codec.VoteResponse)
        if m.responder != ident:
            return Refusal(403, "not-own-behalf",
                           f"batch item from {m.responder!r} is not the TLS peer {ident!r}")
        return self.proven(m, ident, now)

    def proven(self, msg: codec.VoteResponse, hop: str, now: float) -> codec.VoteResponse:
        """Only voters whose own signed statement checks out count: a relay cannot invent a
        yes. The responder's own yes (``hop``, the TLS peer, which own-behalf made the
        responder) is proven by how the request came: by its own token (a single request, a
        POST /batch's batch token), or on a lane by the frame's MAC under the key that the
        responder's signed upgrade carried (docs/drip.md "Lane frames under a per-lane key")."""
        if msg.uid is None or msg.initiator is None or msg.counter is None:
            return msg
        if "trust-relayed-voters" in self.bugs:  # planted: a relay's list taken as is
            return msg
        digest = codec.vote_digest(msg.uid, msg.initiator, msg.counter)
        given = dict(msg.statements)
        proven: list[str] = []
        for voter in msg.voters:
            if voter == hop:  # its statement, if any, is checked where it is relayed to
                proven.append(voter)
                continue
            try:
                claims = self.verifier.verify(given.get(voter), voter, now)
                if not covers(claims, digest):
                    raise AuthError("the statement is about another vote")
                proven.append(voter)
            except AuthError as e:
                self.note("unproven-vote", peer=hop, voter=voter, uid=msg.uid, error=str(e))
        if len(proven) == len(msg.voters) and all(v in proven for v, _ in msg.statements):
            return msg  # every voter proven, no statement to drop: the same message
        return replace(msg, voters=tuple(proven), statements=tuple(
            (v, t) for v, t in msg.statements if v in proven))
