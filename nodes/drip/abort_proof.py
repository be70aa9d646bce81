"""The evidence behind an ``aborted`` answer to ``POST /outcome`` (docs/drip.md "Locks end on
an outcome"), without any I/O.

Why: a voter whose lock outlived its TTL releases the key only when the update is known to
be aborted, and it asks every peer. A compromised peer could answer ``aborted`` for an update
its initiator committed and lost, letting another value take the same version. So an
``aborted`` answer counts only with the initiator's own signature on it, in one of two forms
(``{"outcome": "aborted", "proof": {...}}``):

* ``{"token": T}``: T is a JWT issued by the initiator that signs :func:`outcome_digest` of the
  update: the initiator's own answer ("no commit of it and no open vote"), signed by its
  runtime (:func:`sign`), and passed on unchanged by any node that learned it;
* ``{"token": T, "abort": {"counter", "reset", "key"}}``: T is the token of the initiator's own
  ``POST /abort`` of the update (a single or a group token), which every node the abort
  reached holds and passes on.

:func:`check` is what the asking node's runtime runs on each answer before its core: an
``aborted`` without such evidence becomes ``undecided`` (the lock stays), and the refusal is
counted as ``unproven-outcome``. The core keeps what to answer and what proof to pass on.

A client may retry an aborted update with the same id: a new voting round (a new initiator
counter) locks the key again. So a query that names its round (``OutcomeQuery.counter``, the
counter of the ``/voting`` that took the lock) takes only a proof of that round: a statement
that signs the round, or an abort whose counter is past it (the initiator runs one round of
an id at a time, so its abort at counter A ends the round open at A and every earlier one).
A proof of an earlier attempt is refused; a query without a round (a lock read back after a
restart) takes any proof of the id, as before.
"""

from __future__ import annotations

from typing import Any

from nodes.drip import codec
from nodes.drip.auth import AuthError, Signer, Verifier, covers


def outcome_digest(uid: str, initiator: str, counter: int | None = None) -> str:
    """What an initiator's outcome statement signs: "update ``uid`` of ``initiator`` was
    aborted: it never commits" (of its voting round ``counter`` when the query named one)."""
    what: list[Any] = ["outcome-aborted", uid, initiator]
    if counter is not None:
        what.append(counter)
    return codec.statement_digest(*what)


def sign(body: Any, q: codec.OutcomeQuery, me: str, signer: Signer, now: float) -> Any:
    """Our answer to ``q`` with our signed statement added when we are the initiator and
    answer ``aborted`` (a relay's answer keeps the proof its core passed on)."""
    if (q.initiator != me or not isinstance(body, dict) or body.get("outcome") != "aborted"
            or "proof" in body):
        return body
    return {**body, "proof": {"token": signer.token(now, outcome_digest(q.uid, me, q.counter))}}


def check(body: Any, q: codec.OutcomeQuery, verifier: Verifier, now: float
          ) -> tuple[Any, str | None]:
    """``body`` as the core may take it, and why an ``aborted`` in it was not proven (None:
    nothing refused). Unproven, it becomes ``{"outcome": "undecided"}``."""
    if not isinstance(body, dict) or body.get("outcome") != "aborted":
        return body, None
    try:
        proof = body.get("proof")
        if not isinstance(proof, dict):
            raise AuthError("no proof: an aborted answer carries the initiator's own signed "
                            "abort or outcome statement")
        token = proof.get("token")
        if not isinstance(token, str):
            raise AuthError("proof.token must be a JWT string")
        claims = verifier.verify(token, q.initiator, now)
        if not covers(claims, _digest(proof, q)):
            raise AuthError(f"the proof is not {q.initiator}'s abort of {q.uid!r}" + (
                "" if q.counter is None else f" in voting round {q.counter}"))
    except AuthError as e:
        return {"outcome": "undecided"}, str(e)
    return body, None


def _digest(proof: dict[str, Any], q: codec.OutcomeQuery) -> str:
    ab = proof.get("abort")
    if ab is None:
        return outcome_digest(q.uid, q.initiator, q.counter)
    if not (isinstance(ab, dict) and type(ab.get("counter")) is int
            and isinstance(ab.get("reset"), bool) and isinstance(ab.get("key"), str)):
        raise AuthError("proof.abort must be {counter: int, reset: bool, key: str}")
    if q.counter is not None and ab["counter"] <= q.counter:  # across a wrap: refused (safe)
        raise AuthError(f"the proof is {q.initiator}'s abort at counter {ab['counter']}, not "
                        f"past voting round {q.counter} of {q.uid!r}: an earlier attempt's")
    try:
        return codec.signed_digest(codec.Abort(q.initiator, ab["counter"], ab["reset"], q.uid,
                                               ab["key"]))
    except Exception as e:  # noqa: BLE001 - a body that cannot be encoded proves nothing
        raise AuthError(f"proof.abort is not an abort request: {type(e).__name__}: {e}"
                        ) from None
