"""nodes.drip.admit.Gate: the checks before the core, shared by the HTTPS server and the
simulator. The server's own refusals are covered end to end by tests/integration/drip; here
the gate alone, with real ES256 tokens: what it refuses, and what it hands on."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from multidict import CIMultiDict

from nodes.drip import codec
from nodes.drip.admit import Gate, Refusal
from nodes.drip.auth import Signer, Verifier
from nodes.drip.codec import Heartbeat, VoteResponse


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
