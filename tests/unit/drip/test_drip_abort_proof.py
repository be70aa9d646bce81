"""An ``aborted`` answer to ``/outcome`` releases a voter's lock only with the initiator's own
signature behind it (`nodes.drip.abort_proof`): a peer's word, a proof signed by the relay,
or the initiator's proof of another update is taken as ``undecided`` and the lock stays."""

from __future__ import annotations

import functools

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from nodes.drip import abort_proof, codec
from nodes.drip.auth import Signer, Verifier
from nodes.drip.codec import Update
from nodes.drip.core import CoreConfig, DripCore, Inbound, Outcome

NOW = 1_700_000_000.0
Q = codec.OutcomeQuery("n2", "u1", "n1")


@functools.cache
def _pair(node: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            key.public_key().public_bytes(serialization.Encoding.PEM,
                                          serialization.PublicFormat.SubjectPublicKeyInfo))


def _signer(node: str) -> Signer:
    return Signer(node, "public", _pair(node)[0])


def _verifier() -> Verifier:
    return Verifier("public", public_keys={n: _pair(n)[1] for n in ("n1", "n2", "n3")})


def _abort(counter: int = 9, key: str = "k", uid: str = "u1") -> codec.Abort:
    return codec.Abort("n1", counter, False, uid, key)


def _abort_proof(token: str, counter: int = 9, key: str = "k") -> dict[str, object]:
    return {"token": token, "abort": {"counter": counter, "reset": False, "key": key}}


def test_the_initiators_signed_answer_is_proof() -> None:
    body = abort_proof.sign({"outcome": "aborted"}, Q, "n1", _signer("n1"), NOW)
    assert set(body["proof"]) == {"token"}
    assert abort_proof.check(body, Q, _verifier(), NOW + 5) == (body, None)


def test_only_the_initiator_signs_and_only_its_aborted() -> None:
    for body, me in (({"outcome": "aborted"}, "n3"), ({"outcome": "committed"}, "n1"),
                     ({"outcome": "undecided"}, "n1")):
        assert abort_proof.sign(body, Q, me, _signer(me), NOW) == body


def test_the_initiators_abort_token_is_proof_single_or_grouped() -> None:
    single = _signer("n1").header(NOW, codec.signed_digest(_abort()))
    group = "Bearer " + _signer("n1").group_token(
        NOW, [codec.signed_digest(_abort(3, "other", "u0")), codec.signed_digest(_abort())])
    for token in (single, group):
        body = {"outcome": "aborted", "proof": _abort_proof(token)}
        assert abort_proof.check(body, Q, _verifier(), NOW) == (body, None)


FORGED = {
    "no proof": lambda: None,
    "a relay's own statement": lambda: {"token": _signer("n3").token(
        NOW, abort_proof.outcome_digest("u1", "n1"))},
    "the relay's key named n1": lambda: {"token": Signer("n1", "public", _pair("n3")[0]).token(
        NOW, abort_proof.outcome_digest("u1", "n1"))},
    "n1's statement on another update": lambda: {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u0", "n1"))},
    "n1's abort of another key": lambda: _abort_proof(
        _signer("n1").header(NOW, codec.signed_digest(_abort())), key="other"),
    "n1's vote statement": lambda: {"token": _signer("n1").token(
        NOW, codec.vote_digest("u1", "n1", 9))},
    "an expired statement": lambda: {"token": Signer("n1", "public", _pair("n1")[0], ttl_s=60)
                                     .token(NOW - 3600, abort_proof.outcome_digest("u1", "n1"))},
    "a malformed abort": lambda: {"token": "x", "abort": {"counter": "9", "reset": 0}},
    "not a token": lambda: {"token": 5},
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_forged_aborted_is_taken_as_undecided(case: str) -> None:
    proof = FORGED[case]()
    body = {"outcome": "aborted", **({"proof": proof} if proof is not None else {})}
    got, why = abort_proof.check(body, Q, _verifier(), NOW)
    assert got == {"outcome": "undecided"} and why


def _voter() -> DripCore:
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 0)
    return c


def _ask(c: DripCore, peer: str, body: object) -> None:
    checked, _ = abort_proof.check(body, Q, _verifier(), NOW)
    c.on_message(peer, Outcome(Q, 200, checked), 10)


def test_a_hostile_aborted_keeps_the_lock_and_the_initiators_releases_it() -> None:
    c = _voter()
    for proof in FORGED.values():
        p = proof()
        _ask(c, "n3", {"outcome": "aborted", **({"proof": p} if p is not None else {})})
        assert c.d.locks == {"k": ("u1", "n1")} and "u1" not in c.aborted
    n1 = DripCore("n1", ["n2"], cfg=CoreConfig())
    n1.start(0)
    (ans,) = [e.msg for e in n1.on_message(Inbound("n2", 9), Q, 10)]
    _ask(c, "n1", abort_proof.sign(ans.body, Q, "n1", _signer("n1"), NOW))
    assert not c.d.locks


def test_a_relay_passes_on_the_initiators_proof_it_learned() -> None:
    """n3 took n1's abort (with n1's token) and answers n2 with it; n3 later passes on the
    signed answer it got by asking itself; a relay that knows of the abort without a proof
    answers aborted without one, which releases nothing."""
    token = _signer("n1").header(NOW, codec.signed_digest(_abort()))
    n3 = DripCore("n3", ["n1", "n2"], cfg=CoreConfig())
    n3.start(0)
    n3.on_message(Inbound("n1", 1), codec.Abort("n1", 9, False, "u1", "k", token), 1)
    (ans,) = [e.msg for e in n3.on_message(Inbound("n2", 2), Q, 2)]
    assert ans.body == {"outcome": "aborted", "proof": _abort_proof(token)}
    c = _voter()
    _ask(c, "n3", ans.body)
    assert not c.d.locks
    (again,) = [e.msg for e in c.on_message(Inbound("n3", 3), codec.OutcomeQuery(
        "n3", "u1", "n1"), 11)]
    assert again.body == ans.body  # n2 passes the same proof on
    bare = DripCore("n3", ["n1", "n2"], cfg=CoreConfig())
    bare.start(0)
    bare.on_message(Inbound("n1", 1), codec.Abort("n1", 9, False, "u1", "k"), 1)
    (ans,) = [e.msg for e in bare.on_message(Inbound("n2", 2), Q, 2)]
    assert ans.body == {"outcome": "aborted"}
    c = _voter()
    _ask(c, "n3", ans.body)
    assert c.d.locks == {"k": ("u1", "n1")}
