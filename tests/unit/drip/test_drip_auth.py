"""JWT rules of spec 5.2 in both key modes: what is accepted and what gets a 401."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.drip import codec
from nodes.drip.auth import MAX_GROUP, ONCE_TTL_S, AuthError, Signer, Verifier, load_auth
from nodes.drip.material import ensure_jwt_keypair, ensure_shared_secret

NOW = 1_800_000_000.0
VOTE = codec.Voting("n1", 7, False, codec.Update("u1", "k", 1, "n1"))
D = codec.signed_digest(VOTE)


@pytest.fixture(params=["shared", "public"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Signer, Verifier, Path]:
    if request.param == "shared":
        cfg = {"mode": "shared", "shared_key_file": str(ensure_shared_secret(tmp_path))}
    else:
        keys = {n: ensure_jwt_keypair(tmp_path, n) for n in ("n1", "n2")}
        cfg = {"mode": "public", "private_key_file": str(keys["n1"][0]),
               "public_keys": {n: str(p) for n, (_, p) in keys.items()}}
    s, v = load_auth("n1", cfg)
    return s, v, tmp_path


def test_a_fresh_token_from_the_right_issuer_passes(pair) -> None:
    s, v, _ = pair
    claims = v.verify(s.header(NOW, D), "n1", NOW + 5)
    assert claims["iss"] == "n1" and claims["iat"] == int(NOW)


def test_missing_token(pair) -> None:
    _, v, _ = pair
    with pytest.raises(AuthError, match="missing Authorization"):
        v.verify(None, "n1", NOW)


def test_expired_token(pair) -> None:
    s, v, _ = pair
    with pytest.raises(AuthError, match="expired"):
        v.verify(s.header(NOW - 3600, D), "n1", NOW)


def test_iss_must_match_the_node_id_header(pair) -> None:
    s, v, _ = pair
    with pytest.raises(AuthError, match="does not match DRiP-Node-ID"):
        v.verify(s.header(NOW, D), "n2", NOW)


def test_forged_signature(pair, tmp_path: Path) -> None:
    s, v, _ = pair
    if s.mode == "shared":
        forged = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 60}, "wrong-secret-of-sufficient-length-32b",
                            algorithm="HS256")
    else:
        other, _ = ensure_jwt_keypair(tmp_path / "evil", "n1")
        forged = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 60},
                            other.read_bytes(), algorithm="ES256")
    with pytest.raises(AuthError, match="Signature|signature"):
        v.verify("Bearer " + forged, "n1", NOW)


def test_unsigned_token_is_refused(pair) -> None:
    _, v, _ = pair
    unsigned = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 60}, None,
                          algorithm="none")
    with pytest.raises(AuthError):
        v.verify(unsigned, "n1", NOW)


def test_garbage_is_not_a_jwt(pair) -> None:
    _, v, _ = pair
    with pytest.raises(AuthError, match="not a JWT"):
        v.verify("Bearer eyJ0e...", "n1", NOW)


def _heartbeat(n: int) -> codec.Heartbeat:
    return codec.Heartbeat("n1", "active", tuple(f"n{i}" for i in range(1, n + 1)))


def test_a_token_signs_one_request_not_its_issuer(pair) -> None:
    """Re-targeted: the same token with another path, body or counter is refused."""
    s, v, _ = pair
    hb = _heartbeat(3)
    claims = v.verify(s.header(NOW, codec.signed_digest(hb), once=True), "n1", NOW)
    v.bind(claims, codec.signed_digest(hb), once=True, now=NOW)
    others = [_heartbeat(4),  # another body
              codec.NodeNotice("n1", False),  # another path
              codec.Voting("n1", 8, False, VOTE.update),  # another counter
              codec.Voting("n1", 7, True, VOTE.update),  # another reset flag
              codec.Commit("n1", 7, False, VOTE.update, 1)]  # another endpoint, same counter
    for other in others:
        claims = v.verify(s.header(NOW, codec.signed_digest(hb), once=True), "n1", NOW)
        with pytest.raises(AuthError, match="signs another request"):
            v.bind(claims, codec.signed_digest(other), once=True, now=NOW)


def test_the_digest_ignores_only_what_forwarders_may_change() -> None:
    base = codec.signed_digest(VOTE)
    assert codec.signed_digest(codec.Voting("n1", 7, False, VOTE.update, "Bearer x", 250)) == base
    bare = codec.VoteResponse("n2", True, None, None, None)
    assert codec.signed_digest(bare) != codec.signed_digest(
        codec.VoteResponse("n2", False, None, None, None))
    sync_put = codec.decode("PUT", "/sync/node/n1", {codec.H_NODE: "n1"}, b"")
    sync_post = codec.decode("POST", "/sync/node/n1", {codec.H_NODE: "n1"}, b"")
    assert codec.signed_digest(sync_put) == codec.signed_digest(sync_post)  # one meaning


def test_an_own_behalf_token_is_taken_once_a_flooded_one_once_per_path(pair) -> None:
    s, v, _ = pair
    d = codec.signed_digest(_heartbeat(2))
    token = s.header(NOW, d, once=True)
    v.bind(v.verify(token, "n1", NOW), d, once=True, now=NOW)
    with pytest.raises(AuthError, match="replayed"):
        v.bind(v.verify(token, "n1", NOW + 1), d, once=True, now=NOW + 1)
    flood = s.header(NOW, D)
    for _ in range(3):  # the initiator's token reaching a node by three paths
        v.bind(v.verify(flood, "n1", NOW), D, once=False, now=NOW)


def test_the_replay_table_is_bounded_and_forgets_expired_ids(pair) -> None:
    s, v, _ = pair
    v.max_seen = 3
    d = codec.signed_digest(_heartbeat(2))
    for _ in range(3):
        v.bind(v.verify(s.header(NOW, d, once=True), "n1", NOW), d, once=True, now=NOW)
    with pytest.raises(AuthError, match="too many live tokens"):
        v.bind(v.verify(s.header(NOW, d, once=True), "n1", NOW), d, once=True, now=NOW)
    later = NOW + s.ttl_s + v.leeway_s + 1  # the three have expired
    v.bind(v.verify(s.header(later, d, once=True), "n1", later), d, once=True, now=later)
    assert len(v.seen) == 1


def test_a_token_without_the_request_claims_is_refused(pair) -> None:
    s, v, _ = pair
    if s.mode != "shared":
        pytest.skip("one mode is enough: the claim check is before the key matters")
    bare = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 60}, s.key,
                      algorithm="HS256")
    with pytest.raises(AuthError, match="no 'jti' claim"):
        v.verify(bare, "n1", NOW)


def test_a_cached_token_is_still_checked_for_issuer_expiry_and_replay(pair) -> None:
    """The verified-token cache skips only the signature check: a token seen before is still
    refused for another issuer, after it expires, and when its id comes again."""
    s, v, _ = pair
    header = s.header(NOW, D, once=True)
    claims = v.verify(header, "n1", NOW)
    assert header[7:] in v.verified
    v.bind(claims, D, once=True, now=NOW)
    with pytest.raises(AuthError, match="does not match DRiP-Node-ID"):
        v.verify(header, "n2", NOW)
    with pytest.raises(AuthError, match="replayed"):
        v.bind(v.verify(header, "n1", NOW), D, once=True, now=NOW)
    with pytest.raises(AuthError, match="expired"):
        v.verify(header, "n1", NOW + s.ttl_s + v.leeway_s + 1)
    with pytest.raises(AuthError, match="signs another request"):
        v.bind(v.verify(header, "n1", NOW), "other-digest", once=False, now=NOW)


def test_a_token_altered_after_it_was_cached_is_checked_afresh(pair) -> None:
    s, v, _ = pair
    header = s.header(NOW, D, once=True)
    v.verify(header, "n1", NOW)
    head, body, sig = header[7:].split(".")
    tampered = ".".join((head, body, sig[:-4] + ("AAAA" if sig[-4:] != "AAAA" else "BBBB")))
    with pytest.raises(AuthError, match="token rejected"):
        v.verify("Bearer " + tampered, "n1", NOW)


def test_each_refusal_names_its_kind(pair) -> None:
    """The node counts refusals by ``AuthError.reason``, not by reading the message."""
    s, v, _ = pair
    with pytest.raises(AuthError) as e:
        v.verify(None, "n1", NOW)
    assert e.value.reason == "bad-token"
    d = codec.signed_digest(_heartbeat(2))
    token = s.header(NOW, d, once=True)
    with pytest.raises(AuthError) as e:
        v.bind(v.verify(token, "n1", NOW), codec.signed_digest(_heartbeat(3)), True, NOW)
    assert e.value.reason == "retargeted"
    v.bind(v.verify(token, "n1", NOW), d, once=True, now=NOW)
    with pytest.raises(AuthError) as e:
        v.bind(v.verify(token, "n1", NOW), d, once=True, now=NOW)
    assert e.value.reason == "replayed"
    v.max_seen = 1
    with pytest.raises(AuthError) as e:
        v.bind(v.verify(s.header(NOW, d, once=True), "n1", NOW), d, once=True, now=NOW)
    assert e.value.reason == "replay-table-full"


def test_a_long_lived_token_is_not_taken_for_a_request_made_once(pair) -> None:
    """The replay table remembers an id until its token expires, so a token bound once may
    live ONCE_TTL_S at most: the table holds a minute of requests, not ten (issue 23)."""
    s, v, _ = pair
    d = codec.signed_digest(_heartbeat(2))
    long = s.header(NOW, d)  # a flooded request's lifetime
    with pytest.raises(AuthError) as e:
        v.bind(v.verify(long, "n1", NOW), d, once=True, now=NOW)
    assert e.value.reason == "long-lived" and not v.seen
    claims = v.verify(s.header(NOW, d, once=True), "n1", NOW)
    assert claims["exp"] - claims["iat"] == ONCE_TTL_S
    v.bind(claims, d, once=True, now=NOW)
    assert v.seen[claims["jti"]] == NOW + ONCE_TTL_S + v.leeway_s


# ---- group tokens: one signature for the flooded messages (or yes statements) sent together


def _other_votes(n: int) -> list[str]:
    return [codec.signed_digest(codec.Voting("n1", 8 + i, False, codec.Update(f"u{i + 2}", f"k{i}",
                                                                           i, "n1")))
            for i in range(n)]


def test_a_group_token_binds_each_request_it_lists_and_no_other(pair) -> None:
    s, v, _ = pair
    listed = [D, *_other_votes(2)]
    tok = s.group_token(NOW, listed)
    for d in listed:
        v.bind(v.verify(tok, "n1", NOW), d, once=False, now=NOW)
    stranger = _other_votes(4)[3]
    with pytest.raises(AuthError, match="signs another request") as e:
        v.bind(v.verify(tok, "n1", NOW), stranger, once=False, now=NOW)
    assert e.value.reason == "retargeted"


def test_a_group_token_never_signs_a_request_made_once(pair) -> None:
    s, v, _ = pair
    tok = s.group_token(NOW, [D, *_other_votes(1)])
    with pytest.raises(AuthError, match="group token"):
        v.bind(v.verify(tok, "n1", NOW), D, once=True, now=NOW)


def test_a_group_token_whose_list_does_not_hash_to_req_binds_nothing(pair) -> None:
    """A signer's own inconsistent token (reqs not what req hashes): refused, so no verifier
    may read a list other than the one the ``req`` it signed stands for."""
    s, v, _ = pair
    listed = [D, *_other_votes(1)]
    tok = s.token(NOW, "0" * 64, reqs=listed)
    with pytest.raises(AuthError, match="signs another request"):
        v.bind(v.verify(tok, "n1", NOW), D, once=False, now=NOW)


def test_a_group_checked_once_does_not_vouch_for_another_list_under_its_req(pair) -> None:
    """`covers` remembers a group's list once it hashed to its req: a token signing that req
    beside another list (one more digest) still binds nothing, the listed ones included."""
    s, v, _ = pair
    listed = [D, *_other_votes(2)]
    good = s.group_token(NOW, listed)
    v.bind(v.verify(good, "n1", NOW), D, once=False, now=NOW)  # checked, and remembered
    req = v.verify(good, "n1", NOW)["req"]
    stranger = _other_votes(4)[3]
    bad = s.token(NOW, req, reqs=[*listed, stranger])
    for d in (stranger, D):
        with pytest.raises(AuthError, match="signs another request"):
            v.bind(v.verify(bad, "n1", NOW), d, once=False, now=NOW)
    v.bind(v.verify(good, "n1", NOW), listed[2], once=False, now=NOW)


def test_a_group_token_is_bounded(pair) -> None:
    s, v, _ = pair
    with pytest.raises(ValueError, match="group token"):
        s.group_token(NOW, _other_votes(MAX_GROUP + 1))
    assert s.group_token(NOW, [D]).count(".") == 2  # one digest: a plain token
    assert "reqs" not in v.verify(s.group_token(NOW, [D]), "n1", NOW)


def test_checked_hmac_remembers_a_good_secret_and_refuses_a_key_shaped_one_every_time(
        tmp_path: Path) -> None:
    """PyJWT's HS256 key check runs once per secret (CheckedHMAC), with the same answers."""
    from jwt.algorithms import HMACAlgorithm

    from nodes.drip.auth import CheckedHMAC

    secret = ensure_shared_secret(tmp_path)
    load_auth("n1", {"mode": "shared", "shared_key_file": str(secret)})
    alg = jwt.api_jws.get_algorithm_by_name("HS256")
    assert isinstance(alg, CheckedHMAC)
    key = secret.read_bytes().strip()
    assert alg.prepare_key(key) == HMACAlgorithm(HMACAlgorithm.SHA256).prepare_key(key)
    assert alg.prepare_key(key) is alg.prepare_key(key)  # remembered
    claims = {"iss": "n1", "iat": 1, "exp": 2}
    tok = jwt.encode(claims, key, algorithm="HS256")
    assert jwt.decode(tok, key, algorithms=["HS256"], options={"verify_exp": False}) == claims
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tok, key + b"x", algorithms=["HS256"], options={"verify_exp": False})
    pem = b"-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----"
    for _ in range(2):  # a refusal is not remembered as a pass
        with pytest.raises(jwt.InvalidKeyError):
            jwt.encode(claims, pem, algorithm="HS256")


_SEGMENT_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.! \x00\xff"


def _outcome(f: Any, seg: bytes) -> tuple[str, Any]:
    try:
        return "ok", f(seg, "payload")
    except Exception as e:  # noqa: BLE001 - the kind and text of a refusal are compared
        return type(e).__name__, str(e)


@settings(max_examples=600, deadline=None)
@given(st.one_of(
    st.binary(max_size=24),
    st.lists(st.sampled_from(list(_SEGMENT_BYTES)), max_size=40).map(bytes),
    st.binary(max_size=60).map(lambda b: base64.urlsafe_b64encode(b)),  # padded
    st.binary(max_size=60).map(lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")),
))
def test_the_fast_segment_check_answers_as_pyjwts_own(seg: bytes) -> None:
    """FastSegmentJWS decodes a token segment (or refuses it) exactly as PyJWT's function."""
    from jwt.api_jws import PyJWS

    from nodes.drip.auth import FastSegmentJWS

    assert _outcome(FastSegmentJWS._decode_base64url_segment, seg) == \
        _outcome(PyJWS._decode_base64url_segment, seg)


def test_signer_and_verifier_check_segments_in_c(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's tokens go through FastSegmentJWS, and PyJWT's alphabet scan never runs for
    a well-formed token (it would for a padded or stray-byte segment)."""
    from jwt.api_jws import PyJWS

    s, v, _ = pair
    scanned: list[bytes] = []
    orig = PyJWS._decode_base64url_segment
    monkeypatch.setattr(PyJWS, "_decode_base64url_segment",
                        staticmethod(lambda seg, name: scanned.append(seg) or orig(seg, name)))
    tok = s.group_token(NOW, _other_votes(6))
    assert "reqs" in v.verify(tok, "n1", NOW)
    assert scanned == []
    h, p, sig = tok.split(".")
    with pytest.raises(AuthError, match="DecodeError: Invalid .* padding"):
        v.verify(f"{h}.{p}.{sig}!", "n1", NOW)
    assert scanned  # the odd segment went to PyJWT's own check


def test_a_good_token_is_decoded_once_and_refusals_keep_their_words(
        pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issuer is read by hand from an unverified payload only when the check fails (a
    good token is decoded once, by PyJWT); refusals are worded as before."""
    from nodes.drip import auth

    s, v, tmp_path = pair
    read: list[str] = []
    orig = auth._unverified_iss
    monkeypatch.setattr(auth, "_unverified_iss", lambda t: read.append(t) or orig(t))
    assert v.verify(s.header(NOW, D), "n1", NOW)["iss"] == "n1"
    assert read == []
    with pytest.raises(AuthError, match="iss 'n1' does not match DRiP-Node-ID 'n2'"):
        v.verify(s.header(NOW, D), "n2", NOW)
    with pytest.raises(AuthError, match="not a JWT"):
        v.verify("Bearer eyJ0e...", "n1", NOW)
    if s.mode == "public":
        with pytest.raises(AuthError, match="iss 'n1' does not match DRiP-Node-ID 'n9'"):
            v.verify(s.header(NOW, D), "n9", NOW)  # no key for n9: the issuer is named first
        n9 = Signer("n9", "public", ensure_jwt_keypair(tmp_path / "n9", "n9")[0].read_bytes())
        with pytest.raises(AuthError, match="no public key known for issuer 'n9'"):
            v.verify(n9.header(NOW, D), "n9", NOW)
