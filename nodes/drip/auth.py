"""JWT signing and verification for DRiP requests (spec section 5.2).

Two modes, chosen per mesh:

* ``shared``: HS256 with one secret every node holds.
* ``public``: ES256; each node signs with its own private key and every node holds the
  public keys of every mesh node (forwarded requests keep the initiator's token, so a node
  must verify tokens of nodes that are not its direct peers).

Claims: ``iss`` (the node that initiated the request), ``iat``, and ``exp`` (``iat + ttl``).
A token is rejected (:class:`AuthError`, answered 401) when missing, malformed, badly signed,
expired, issued too far in the future, or when ``iss`` differs from ``DRiP-Node-ID``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt

SHARED_ALG = "HS256"
PUBLIC_ALG = "ES256"


class AuthError(Exception):
    """The request's Authorization is unacceptable; the message says why (answered 401)."""


@dataclass
class Signer:
    """Makes the Authorization value for requests this node initiates."""

    node_id: str
    mode: str
    key: Any  # bytes secret (shared) or PEM private key bytes (public)
    ttl_s: float = 600.0

    def token(self, now: float) -> str:
        iat = int(now)
        claims = {"iss": self.node_id, "iat": iat, "exp": iat + int(self.ttl_s)}
        alg = SHARED_ALG if self.mode == "shared" else PUBLIC_ALG
        return jwt.encode(claims, self.key, algorithm=alg)

    def header(self, now: float) -> str:
        return "Bearer " + self.token(now)


@dataclass
class Verifier:
    """Checks tokens against the mesh's key(s) and the node's own (skewable) clock."""

    mode: str
    shared_key: bytes | None = None
    public_keys: dict[str, bytes] = field(default_factory=dict)
    leeway_s: float = 30.0

    def verify(self, header: str | None, expected_iss: str, now: float) -> dict[str, Any]:
        """The token's claims, or AuthError naming what is wrong."""
        if not header:
            raise AuthError("missing Authorization header (a JWT signed by the initiating node)")
        token = header[7:] if header[:7].lower() == "bearer " else header
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as e:
            raise AuthError(f"Authorization is not a JWT: {e}") from None
        iss = unverified.get("iss")
        if iss != expected_iss:
            raise AuthError(f"token iss {iss!r} does not match DRiP-Node-ID {expected_iss!r}")
        if self.mode == "shared":
            key: Any = self.shared_key
            alg = SHARED_ALG
        else:
            key = self.public_keys.get(expected_iss)
            alg = PUBLIC_ALG
            if key is None:
                raise AuthError(f"no public key known for issuer {expected_iss!r}")
        try:
            claims = jwt.decode(token, key, algorithms=[alg], leeway=self.leeway_s,
                                options={"require": ["iss", "iat", "exp"],
                                         "verify_iat": False, "verify_exp": False})
        except jwt.PyJWTError as e:
            raise AuthError(f"token rejected: {type(e).__name__}: {e}") from None
        iat, exp = claims["iat"], claims["exp"]
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise AuthError("token iat/exp must be numbers")
        # checked against the node's own clock (jwt would use the host's wall clock)
        if now > exp + self.leeway_s:
            raise AuthError(f"token expired {now - exp:.0f}s ago (iat {iat}, exp {exp})")
        if iat > now + self.leeway_s:
            raise AuthError(f"token issued {iat - now:.0f}s in the future")
        return claims


def load_auth(node_id: str, cfg: dict[str, Any]) -> tuple[Signer, Verifier]:
    """Signer and verifier from the node config's ``jwt`` object (see docs/drip.md)."""
    mode = cfg.get("mode", "shared")
    ttl = float(cfg.get("ttl_s", 600.0))
    leeway = float(cfg.get("leeway_s", 30.0))
    if mode == "shared":
        secret = Path(cfg["shared_key_file"]).read_bytes().strip()
        return Signer(node_id, mode, secret, ttl), Verifier(mode, shared_key=secret,
                                                            leeway_s=leeway)
    if mode == "public":
        priv = Path(cfg["private_key_file"]).read_bytes()
        pubs = {n: Path(p).read_bytes() for n, p in cfg["public_keys"].items()}
        return Signer(node_id, mode, priv, ttl), Verifier(mode, public_keys=pubs, leeway_s=leeway)
    raise ValueError(f"jwt.mode must be 'shared' or 'public', got {mode!r}")
