"""nodes.drip.admit.Gate: the checks before the core, shared by the HTTPS server and the
simulator. The server's own refusals are covered end to end by tests/integration/drip; here
the gate alone, with real ES256 tokens: what it refuses, and what it hands on."""

from __future__ import annotations

import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from multidict import CIMultiDict

from nodes.drip import codec
from nodes.drip.admit import Gate, Refusal
from nodes.drip.auth import Signer, Verifier
from nodes.drip.codec import Commit, Heartbeat, SyncRequest, Update, VoteResponse, Voting
from nodes.drip.seen import Seen
from nodes.drip.sync import Refused


def _pair() -> tuple[bytes, bytes]:
    k = ec.generate_private_key(ec.SECP256R1())
    return (k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()),
            k.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo))


KEYS = {n: _pair() for n in ("n1", "n2", "n3")}
NOW = 1000.0


def gate(bugs: frozenset[str] = frozenset(), pin: str | None = None) -> tuple[Gate, list]:
    notes: list = []
    v = Verifier("public", public_keys={n: pub for n, (_, pub) in KEYS.items()})
    g = Gate("n1", v, codec.Limits(), lambda: {"n2", "n3"}, lambda: 7,
             lambda n: pin if n == "n2" else None,
             lambda reason, **d: notes.append((reason, d)), bugs)
    return g, notes


def request(msg: codec.Message, by: str, **over: str) -> tuple[str, str, CIMultiDict, bytes]:
    req = codec.encode(msg)
    digest = codec.signed_digest(codec.decode(req.method, req.path, req.headers,
                                              req.body_bytes()))
    h = CIMultiDict({**req.headers, codec.H_AUTH: Signer(by, "public", KEYS[by][0]).header(
        NOW, digest, once=not isinstance(msg, codec.FLOODED)), **over})
    return req.method, req.path, h, req.body_bytes()


def test_the_gate_refuses_in_the_servers_order() -> None:
    g, _ = gate(pin="abc")
    hb = request(Heartbeat("n3", "active", ("n1", "n2", "n3")), "n3")
    assert g.admit(None, None, *hb, NOW).reason == "no-client-cert"  # type: ignore[union-attr]
    r = g.admit("n9", None, *hb, NOW)
    assert isinstance(r, Refusal) and r.status == 403 and r.body()["epoch"] == 7
    assert g.admit("n2", "zzz", *hb, NOW).reason == "cert-mismatch"  # type: ignore[union-attr]
    assert isinstance(g.admit("n3", None, *hb, NOW), Heartbeat)
    # replayed: the same token of a request made on the sender's own behalf
    assert g.admit("n3", None, *hb, NOW).reason == "replayed"  # type: ignore[union-attr]
    # n3's request arriving over n2's TLS connection
    other = request(Heartbeat("n3", "active", ("n1", "n2", "n3")), "n3")
    r = g.admit("n2", "abc", *other, NOW)
    assert isinstance(r, Refusal) and r.reason == "not-own-behalf" and r.status == 403
    m, p, h, b = request(Heartbeat("n3", "active", ("n1", "n2", "n3")), "n3")
    r = g.admit("n3", None, m, p, h, b.replace(b"active", b"inactiv"), NOW)
    assert isinstance(r, Refusal) and r.status in (400, 401)
    late = request(Heartbeat("n3", "active", ("n1", "n2", "n3")), "n3")
    assert g.admit("n3", None, *late, NOW + 3600).status == 401  # type: ignore[union-attr]


def test_a_relayed_yes_keeps_only_the_voters_whose_statements_check_out() -> None:
    yes = VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                       voters=("n2", "n3"), version=0)
    g, notes = gate()
    got = g.admit("n2", None, *request(yes, "n2"), NOW)
    assert isinstance(got, VoteResponse) and got.voters == ("n2",)
    assert [r for r, _ in notes] == ["unproven-vote"] and notes[0][1]["voter"] == "n3"
    stmt = Signer("n3", "public", KEYS["n3"][0]).token(NOW, codec.vote_digest("u1", "n1", 5))
    proven = g.admit("n2", None, *request(
        VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                     voters=("n2", "n3"), version=0, statements=(("n3", stmt),)), "n2"), NOW)
    assert isinstance(proven, VoteResponse) and proven.voters == ("n2", "n3")
    planted, _ = gate(frozenset({"trust-relayed-voters"}))
    taken = planted.admit("n2", None, *request(yes, "n2"), NOW)
    assert isinstance(taken, VoteResponse) and taken.voters == ("n2", "n3")


def test_the_hops_own_yes_is_proven_by_the_channel_and_its_statement_is_not_checked_there(
        ) -> None:
    """The responder's own yes counts by how the request came; a statement of its own that
    it adds anyway (for a relay above to pass up) is not checked at this hop, so a bad one
    costs no ES256 check here and is still refused where it is relayed to."""
    bad = Signer("n3", "public", KEYS["n3"][0]).token(NOW, codec.vote_digest("u9", "n1", 5))
    g, notes = gate()
    checked = g.verifier.checked
    got = g.admit("n2", None, *request(
        VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                     voters=("n2",), version=0, statements=(("n2", bad),)), "n2"), NOW)
    assert isinstance(got, VoteResponse) and got.voters == ("n2",) and not notes
    assert g.verifier.checked == checked + 1  # the request's own token, nothing more
    relayed = g.admit("n2", None, *request(
        VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                     voters=("n2", "n3"), version=0, statements=(("n3", bad),)), "n2"), NOW)
    assert isinstance(relayed, VoteResponse) and relayed.voters == ("n2",)
    assert [r for r, _ in notes] == ["unproven-vote"]  # the voter behind the hop: checked


class _View:
    """A core's read-only view: n2 is owed a sync, n3 is not; counters as `Seen` keeps them."""

    def __init__(self) -> None:
        self.seen = Seen({}, window=100)
        self.seen.before("n3", 10, False)

    def out_of_window(self, node: str, counter: int, reset: bool):  # type: ignore[no-untyped-def]
        return self.seen.out_of_window(node, counter, reset)

    def sync_refusal(self, hop: str) -> Refused | None:
        return None if hop == "n2" else Refused(409, "sync-not-needed", f"{hop} needs none")

    #: keys held locked per initiator
    locks = {"n3": 4}

    def locks_of(self, initiator: str) -> int:
        return self.locks.get(initiator, 0)


def _forged(req: tuple[str, str, CIMultiDict, bytes]) -> tuple[str, str, CIMultiDict, bytes]:
    """``req`` with its token signed by another member's key: a 401 once it is checked."""
    m, p, h, b = req
    digest = codec.signed_digest(codec.decode(m, p, h, b))
    h = CIMultiDict({**h, codec.H_AUTH: Signer("n3", "public", KEYS["n2"][0]).header(
        NOW, digest, once=True)})
    return m, p, h, b


def test_cheapest_refusal_first_before_the_token_is_checked() -> None:
    """A doubly bad request gets the first refusal in the gate's order (docs/drip.md
    "Limits and refusals"): the head's state checks, then the body's bounds, then the token."""
    g, _ = gate()
    g.view = _View
    sync = request(SyncRequest("n3"), "n3")
    assert g.admit("n3", None, *_forged(sync), NOW).reason == "sync-not-needed"  # type: ignore[union-attr]
    ok = request(SyncRequest("n2"), "n2")
    assert isinstance(g.admit("n2", None, *ok, NOW), SyncRequest)
    far = request(Voting("n3", 500, False, Update("u1", "k", 1)), "n3")
    r = g.admit("n3", None, *_forged(far), NOW)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (400, "counter-window")
    near = request(Voting("n3", 50, False, Update("u2", "k", 1)), "n3")
    assert g.admit("n3", None, *_forged(near), NOW).reason == "bad-token"  # type: ignore[union-attr]
    assert isinstance(g.admit("n3", None, *near, NOW), Voting)
    m, p, h, _ = _forged(near)
    deep = g.admit("n3", None, m, p, h, b"[" * 1000 + b"]" * 1000, NOW)
    assert isinstance(deep, Refusal) and (deep.status, deep.reason) == (400, "malformed")
    h = CIMultiDict({**h, codec.H_COUNTER: "\u0661"})
    bad = g.admit("n3", None, m, p, h, b"{}", NOW)
    assert isinstance(bad, Refusal) and (bad.status, bad.reason) == (400, "malformed")


def test_an_initiator_over_its_vote_rounds_is_refused_from_the_head() -> None:
    """A key holder flooding in-window votings on fresh keys runs a whole vote round in
    every node per request: past ``initiator_rounds`` locks held for its initiator, a /voting
    is a 429 before its body or token is read; other initiators and other paths pass."""
    g, _ = gate()
    g.view = _View
    near = request(Voting("n3", 50, False, Update("u2", "k", 1)), "n3")
    assert isinstance(g.admit("n3", None, *near, NOW), Voting)  # no bound: 0
    g.initiator_rounds = 4
    r = g.admit("n3", None, *_forged(request(Voting("n3", 51, False, Update("u3", "k", 1)),
                                             "n3")), NOW)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (429, "initiator-rounds")
    assert "initiator 'n3'" in r.error
    g.initiator_rounds = 5
    assert isinstance(g.admit("n3", None, *request(Voting("n3", 52, False, Update("u4", "k", 1)),
                                                   "n3"), NOW), Voting)
    g.initiator_rounds = 1  # n2 holds none: its voting passes; a commit is no new round
    assert isinstance(g.admit("n2", None, *request(Voting("n2", 7, False, Update("u5", "j", 1)),
                                                   "n2"), NOW), Voting)
    c = request(Commit("n3", 53, False, Update("u2", "k", 1), 1), "n3")
    assert isinstance(g.admit("n3", None, *c, NOW), Commit)


def test_a_batch_item_voting_over_its_initiators_rounds_is_refused_as_a_request_is() -> None:
    """Batch items (a POST /batch or a lane's exchange) meet the same bound: before session
    46 a /voting inside a batch skipped it."""
    g, _ = gate()
    g.view = _View
    g.initiator_rounds = 4  # _View: n3 holds 4 locks here, n2 none
    v3 = Voting("n3", 51, False, Update("u3", "k", 1), Signer("n3", "public", KEYS["n3"][0])
                .header(NOW, codec.signed_digest(Voting("n3", 51, False, Update("u3", "k", 1)))))
    r = g.item("n2", v3, NOW)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (429, "initiator-rounds")
    g.initiator_rounds = 5
    assert g.item("n2", v3, NOW) == v3
    g.initiator_rounds = 1
    v2 = Voting("n2", 7, False, Update("u5", "j", 1), Signer("n2", "public", KEYS["n2"][0])
                .header(NOW, codec.signed_digest(Voting("n2", 7, False, Update("u5", "j", 1)))))
    assert g.item("n2", v2, NOW) == v2


def test_a_flooded_item_from_its_initiator_is_proven_by_the_batch_and_checked_beyond() -> None:
    """A batch's own authentication (its token, or a lane's MAC) proves the sender's own
    flooded messages: their tokens are not checked at this hop, but every hop beyond checks
    them (here: the same item relayed by n3 is refused for its token binding another
    request). A token-less item is refused either way."""
    g, _ = gate()
    up = Update("u5", "j", 1)
    other = Signer("n2", "public", KEYS["n2"][0]).header(
        NOW, codec.signed_digest(Voting("n2", 8, False, Update("u6", "j", 2))))
    v2 = Voting("n2", 7, False, up, other)
    checked = g.verifier.checked
    assert g.item("n2", v2, NOW) == v2 and g.verifier.checked == checked
    r = g.item("n3", v2, NOW)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (401, "retargeted")
    r = g.item("n2", Voting("n2", 9, False, up), NOW)
    assert isinstance(r, Refusal) and r.status == 401


def test_the_read_only_window_check_is_what_before_would_raise() -> None:
    s = Seen({}, window=100)
    s.before("n1", 2**64 - 20, False)
    s.before("n1", 0, True)  # the wrap-around: a new epoch at 0
    for counter, reset in [(0, True), (5, True), (300, False), (100, False), (201, False),
                           (2**64 - 1, False), (50, False), (0, False)]:
        told = s.out_of_window("n1", counter, reset)
        try:
            s.before("n1", counter, reset)
            raised = False
        except ValueError:
            raised = True
        assert (told is not None) == raised, (counter, reset)
    assert raised is False and s.out_of_window("n1", 301, False) is not None


def test_a_batch_token_binds_the_exact_body_bytes_it_was_signed_over() -> None:
    yes = VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                       voters=("n2",), version=0)
    batch = codec.Batch("n2", (yes, VoteResponse("n2", False, None, None, None)))
    m, p, h, b = request(batch, "n2")
    assert codec.signed_digest(batch) == codec.batch_digest("n2", b)
    g, _ = gate()
    got = g.admit("n2", None, m, p, h, b, NOW)
    assert isinstance(got, codec.Batch) and got.items == batch.items
    assert g.admit("n2", None, m, p, h, b, NOW).reason == "replayed"  # type: ignore[union-attr]
    # the same items in other bytes (JSON spaced out): a fresh token over the original bytes
    # does not cover them, though they decode to the very same batch
    m, p, h, b = request(batch, "n2")
    spaced = json.dumps(json.loads(b)).encode()
    assert spaced != b and codec.decode(m, p, h, spaced).items == batch.items  # type: ignore[union-attr]
    r = g.admit("n2", None, m, p, h, spaced, NOW)
    assert isinstance(r, Refusal) and r.status == 401 and r.reason == "retargeted"


def test_a_laned_batch_is_admitted_without_a_token_and_keeps_every_other_check() -> None:
    """A lane's exchange (its MAC checked by the server under the key of a signed upgrade)
    has no batch token: none is checked, and everything else is as for a POST /batch."""
    g, notes = gate()
    own = VoteResponse(responder="n2", yes=True, initiator="n1", counter=5, uid="u1",
                       voters=("n2", "n3"), version=0)  # n3's yes unproven: no statement
    batch = codec.Batch("n2", (own, VoteResponse("n2", False, None, None, None)))
    req = codec.encode(batch)
    h = g.head("n2", None, {codec.H_NODE: "n2"}, NOW, "POST", "/batch")
    assert not isinstance(h, Refusal) and h.auth is None
    checked = g.verifier.checked
    got = g.body(h, "POST", "/batch", {codec.H_NODE: "n2"}, req.body_bytes(), NOW, laned=True)
    assert isinstance(got, codec.Batch) and got.items == batch.items
    assert g.verifier.checked == checked  # no token, no signature check
    # without laned, the same tokenless batch is refused as before
    r = g.body(h, "POST", "/batch", {codec.H_NODE: "n2"}, req.body_bytes(), NOW)
    assert isinstance(r, Refusal) and r.status == 401
    # the codec's bounds, and nothing but a batch, on a lane
    r = g.body(h, "POST", "/batch", {codec.H_NODE: "n2"}, b"[1]", NOW, laned=True)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (400, "malformed")
    r = g.body(h, "GET", "/state", {codec.H_NODE: "n2"}, b"", NOW, laned=True)
    assert isinstance(r, Refusal) and (r.status, r.reason) == (400, "malformed")
    # a batch in another node's name over n2's lane: not own behalf
    h3 = g.head("n2", None, {codec.H_NODE: "n3"}, NOW, "POST", "/batch")
    assert not isinstance(h3, Refusal)
    r = g.body(h3, "POST", "/batch", {codec.H_NODE: "n3"},
               codec.encode(codec.Batch("n3", (VoteResponse("n3", True, None, None, None),))
               ).body_bytes(), NOW, laned=True)
    assert isinstance(r, Refusal) and r.reason == "not-own-behalf"
    # each item keeps its own checks: another responder's vote, and the proof of a relayed yes
    r = g.item("n2", VoteResponse("n3", True, None, None, None), NOW)
    assert isinstance(r, Refusal) and r.reason == "not-own-behalf"
    item = g.item("n2", own, NOW)
    assert isinstance(item, VoteResponse) and item.voters == ("n2",)  # the lane proves n2's
    assert [r for r, _ in notes] == ["unproven-vote"]
