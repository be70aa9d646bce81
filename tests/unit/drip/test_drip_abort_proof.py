"""An ``aborted`` answer to ``/outcome`` releases a voter's lock only with the initiator's own
signature behind it (`nodes.drip.abort_proof`): a peer's word, a proof signed by the relay,
or the initiator's proof of another update is taken as ``undecided`` and the lock stays."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from nodes.common.effects import Persist
from nodes.drip import abort_proof, codec
from nodes.drip.auth import Signer, Verifier
from nodes.drip.codec import Update
from nodes.drip.core import ClientUpdate, CoreConfig, DripCore, Inbound, Outcome
from nodes.drip.records import Durable, Init, Lock
from nodes.drip.store import Store

NOW = 1_700_000_000.0
Q = codec.OutcomeQuery("n2", "u1", "n1", 6)  # n2's lock was taken by n1's /voting at counter 6


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
        NOW, abort_proof.outcome_digest("u1", "n1", 6))},
    "the relay's key named n1": lambda: {"token": Signer("n1", "public", _pair("n3")[0]).token(
        NOW, abort_proof.outcome_digest("u1", "n1", 6))},
    "n1's statement on another update": lambda: {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u0", "n1", 6))},
    "n1's abort of another key": lambda: _abort_proof(
        _signer("n1").header(NOW, codec.signed_digest(_abort())), key="other"),
    "n1's vote statement": lambda: {"token": _signer("n1").token(
        NOW, codec.vote_digest("u1", "n1", 9))},
    "an expired statement": lambda: {"token": Signer("n1", "public", _pair("n1")[0], ttl_s=60)
                                     .token(NOW - 3600, abort_proof.outcome_digest("u1", "n1", 6))},
    "n1's statement on an earlier attempt (round 3)": lambda: {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u1", "n1", 3))},
    "n1's statement naming no round": lambda: {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u1", "n1"))},
    "n1's abort of an earlier attempt (counter 5)": lambda: _abort_proof(
        _signer("n1").header(NOW, codec.signed_digest(_abort(5))), counter=5),
    "n1's abort at the round's own counter": lambda: _abort_proof(
        _signer("n1").header(NOW, codec.signed_digest(_abort(6))), counter=6),
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
    n1.counter = 9  # it sent that /voting at 6, and more since
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


def test_a_query_naming_no_round_takes_any_proof_of_the_id() -> None:
    """A lock read back after a restart has no known round: its query keeps the old shape
    and the old check (compatible with a peer that sends no counter)."""
    q = codec.OutcomeQuery("n2", "u1", "n1")
    req = codec.encode(q)
    assert req.body == {"id": "u1", "initiator": "n1"}
    assert codec.decode(req.method, req.path, req.headers, req.body_bytes()) == q
    for proof in ({"token": _signer("n1").token(NOW, abort_proof.outcome_digest("u1", "n1"))},
                  _abort_proof(_signer("n1").header(NOW, codec.signed_digest(_abort(5))), 5)):
        body = {"outcome": "aborted", "proof": proof}
        assert abort_proof.check(body, q, _verifier(), NOW) == (body, None)


def test_the_round_goes_on_the_wire() -> None:
    req = codec.encode(Q)
    assert req.body == {"id": "u1", "initiator": "n1", "counter": 6}
    assert codec.decode(req.method, req.path, req.headers, req.body_bytes()) == Q
    assert codec.decode(req.method, req.path, req.headers, req.body_bytes()).counter == 6
    with pytest.raises(codec.CodecError, match="counter"):
        codec.decode("POST", "/outcome", req.headers,
                     b'{"id": "u1", "initiator": "n1", "counter": "6"}')


def _retried() -> DripCore:
    """n2 voted yes on attempt 1 of u1 (round 3), n1 aborted it, and the client's retry
    (round 6) locked k again; the abort of round 3 never reached n2."""
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 3, False, Update("u1", "k", 1)), 0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 1)
    assert c.d.locks == {"k": ("u1", "n1")} and c.lock_rounds == {"k": ("u1", 6)}
    return c


def test_a_proof_of_an_earlier_attempt_does_not_release_the_retrys_lock() -> None:
    c = _retried()
    q = [e.msg for e in c.on_timer(("lock", "k", "u1"), 100) if hasattr(e, "msg")]
    assert q and all(m == Q for m in q)  # every peer is asked about round 6
    for proof in (
            {"token": _signer("n1").token(NOW, abort_proof.outcome_digest("u1", "n1", 3))},
            _abort_proof(_signer("n1").header(NOW, codec.signed_digest(_abort(4))), 4)):
        checked, why = abort_proof.check({"outcome": "aborted", "proof": proof}, Q,
                                         _verifier(), NOW)
        assert checked == {"outcome": "undecided"} and why
        assert "earlier attempt" in why or "in voting round 6" in why, why
        c.on_message("n3", Outcome(Q, 200, checked), 10)
        assert c.d.locks == {"k": ("u1", "n1")}
    # n1's own answer to a query of round 3 (sent before the retry locked) comes late: it is
    # proof of round 3 only, so it releases nothing now
    q3 = codec.OutcomeQuery("n2", "u1", "n1", 3)
    late = {"outcome": "aborted", "proof": {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u1", "n1", 3))}}
    assert abort_proof.check(late, q3, _verifier(), NOW) == (late, None)
    c.on_message("n1", Outcome(q3, 200, late), 10)
    assert c.d.locks == {"k": ("u1", "n1")}
    # the proof of the right round releases it: a statement of round 6, or the abort at 9
    right = _abort_proof(_signer("n1").header(NOW, codec.signed_digest(_abort(9))))
    checked, why = abort_proof.check({"outcome": "aborted", "proof": right}, Q, _verifier(), NOW)
    assert why is None
    c.on_message("n1", Outcome(Q, 200, checked), 10)
    assert not c.d.locks


def test_a_restarted_voter_asks_with_its_locks_saved_round() -> None:
    """The retry's lock (round 6) survives n2's restart through its store with its round:
    the restarted n2 asks about round 6, round 3's proofs leave the lock, round 6's releases
    it. A lock saved without a round (a store from before rounds) asks as before."""
    store = Store(":memory:")
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    out = c.start(0)
    out += c.on_message(Inbound("n1", 1), codec.Voting("n1", 3, False, Update("u1", "k", 1)), 0)
    out += c.on_message(Inbound("n1", 1), codec.Voting("n1", 6, False, Update("u1", "k", 1)), 1)
    for e in out:
        if isinstance(e, Persist):
            store.write(e.record)
    store.commit()
    c = DripCore("n2", ["n1", "n3"], durable=store.load(), cfg=CoreConfig())
    c.start(50)
    assert c.d.locks == {"k": ("u1", "n1")} and c.lock_rounds == {"k": ("u1", 6)}
    q = [e.msg for e in c.on_timer(("lock", "k", "u1"), 100) if hasattr(e, "msg")]
    assert q and all(m == Q for m in q)
    stale = {"outcome": "aborted", "proof": {"token": _signer("n1").token(
        NOW, abort_proof.outcome_digest("u1", "n1", 3))}}
    checked, why = abort_proof.check(stale, Q, _verifier(), NOW)
    assert checked == {"outcome": "undecided"} and why
    c.on_message("n3", Outcome(Q, 200, checked), 110)
    assert c.d.locks == {"k": ("u1", "n1")}
    right = abort_proof.sign({"outcome": "aborted"}, Q, "n1", _signer("n1"), NOW)
    assert abort_proof.check(right, Q, _verifier(), NOW) == (right, None)
    c.on_message("n1", Outcome(Q, 200, right), 110)
    assert not c.d.locks
    store.close()
    old = DripCore("n2", ["n1", "n3"], durable=Durable.of([Init(), Lock("k", "u1", "n1")]),
                   cfg=CoreConfig())
    old.start(0)
    assert old.lock_rounds == {}
    q = [e.msg for e in old.on_timer(("lock", "k", "u1"), 100) if hasattr(e, "msg")]
    assert q and all(m == codec.OutcomeQuery("n2", "u1", "n1") for m in q)


def test_the_initiator_answers_per_round() -> None:
    """n1 answers "aborted" for an earlier round of an id whose retry is open, "undecided"
    for the open round, and "unknown" for a round past its counter (never signs ahead)."""
    n1 = DripCore("n1", ["n2"], cfg=CoreConfig())
    n1.start(0)
    n1.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 0)
    (open_round,) = [t.counter for t in n1.tallies.values()]

    def ask(counter: int | None) -> object:
        (ans,) = [e.msg for e in n1.on_message(Inbound("n2", 9), codec.OutcomeQuery(
            "n2", "u1", "n1", counter), 1)]
        return ans.body

    assert ask(open_round) == {"outcome": "undecided"}
    assert ask(None) == {"outcome": "undecided"}
    assert ask(open_round - 1) == {"outcome": "aborted"}
    assert ask(n1.counter + 1) == {"outcome": "unknown"}
    q = codec.OutcomeQuery("n2", "u1", "n1", open_round - 1)
    signed = abort_proof.sign({"outcome": "aborted"}, q, "n1", _signer("n1"), NOW)
    assert abort_proof.check(signed, q, _verifier(), NOW) == (signed, None)
    assert abort_proof.check(signed, replace(q, counter=open_round), _verifier(), NOW)[1]
