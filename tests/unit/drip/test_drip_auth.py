"""JWT rules of spec 5.2 in both key modes: what is accepted and what gets a 401."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest

from nodes.drip.auth import AuthError, Signer, Verifier, load_auth
from nodes.drip.material import ensure_jwt_keypair, ensure_shared_secret

NOW = 1_800_000_000.0


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
    claims = v.verify(s.header(NOW), "n1", NOW + 5)
    assert claims["iss"] == "n1" and claims["iat"] == int(NOW)


def test_missing_token(pair) -> None:
    _, v, _ = pair
    with pytest.raises(AuthError, match="missing Authorization"):
        v.verify(None, "n1", NOW)


def test_expired_token(pair) -> None:
    s, v, _ = pair
    with pytest.raises(AuthError, match="expired"):
        v.verify(s.header(NOW - 3600), "n1", NOW)


def test_iss_must_match_the_node_id_header(pair) -> None:
    s, v, _ = pair
    with pytest.raises(AuthError, match="does not match DRiP-Node-ID"):
        v.verify(s.header(NOW), "n2", NOW)


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
