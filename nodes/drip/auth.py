"""JWT signing and verification for DRiP requests (spec section 5.2).

Two modes, chosen per mesh:

* ``shared``: HS256 with one secret every node holds.
* ``public``: ES256; each node signs with its own private key and every node holds the
  public keys of every mesh node (forwarded requests keep the initiator's token, so a node
  must verify tokens of nodes that are not its direct peers).

Claims: ``iss`` (the node that initiated the request), ``iat``, ``exp`` (``iat + ttl``), and
two of ours that make the token sign one request rather than vouch for an issuer:

* ``req``: :func:`nodes.drip.codec.signed_digest` of the request (method, path, propagation
  headers, body): the same token on another path, with another body or other counters fails
  (a ``/batch``, never forwarded, binds its exact body bytes instead: ``codec.batch_digest``);
* ``reqs`` (optional): a *group token* signs several requests at once: ``reqs`` lists their
  digests (at most ``MAX_GROUP``) and ``req`` is the SHA-256 of that list. An initiator signs
  the flooded requests it releases together with one token, and a voter its yes statements
  that leave together (docs/drip.md "Group tokens"); each request still binds only if its
  own digest is in the list. Never for a request made once (its id would cover several);
* ``jti``: a random id. A receiver remembers the ids it took until they expire; a request made
  on the sender's own behalf (heartbeat, vote response, notices, sync) is refused when its id
  comes again. A flooded request (``/voting``, ``/commit``, ``/abort``) keeps the initiator's
  token on every path, so it legitimately arrives once per path: its repeats go to the core,
  which answers them as duplicates by the initiator's counter (spec 4.4) and changes nothing.

A token is rejected (:class:`AuthError`, answered 401) when missing, malformed, badly signed,
expired, issued too far in the future, when ``iss`` differs from ``DRiP-Node-ID``, when it
binds another request, or when it is replayed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from jwt.algorithms import HMACAlgorithm
from jwt.api_jws import PyJWS
from jwt.exceptions import DecodeError
from jwt.utils import base64url_decode, base64url_encode

from nodes.common import fastjson

SHARED_ALG = "HS256"
PUBLIC_ALG = "ES256"


class AuthError(Exception):
    """The request's Authorization is unacceptable; the message says why (answered 401) and
    ``reason`` names the kind of refusal the node counts it under."""

    def __init__(self, message: str, reason: str = "bad-token") -> None:
        super().__init__(message)
        self.reason = reason


#: the longest a token for a request made once (on the sender's own behalf: vote responses,
#: batches, heartbeats, notices, sync) may live. Its id is remembered until it expires, so the
#: replay table holds (this + leeway) x the request rate, not 10 minutes of it
ONCE_TTL_S = 30.0

#: the most request digests one group token signs: each is 64 hex characters and the token
#: travels in an HTTP header (aiohttp takes 8,190 bytes), so 16 keep it near 1.5 KB
MAX_GROUP = 16


def group_digest(digests: list[str]) -> str:
    """The ``req`` of a group token: SHA-256 (hex) of its ``reqs`` list as signed."""
    return hashlib.sha256(fastjson.canonical(digests)).hexdigest()


def covers(claims: dict[str, Any], digest: str) -> bool:
    """Whether verified ``claims`` sign the request (or vote) whose digest is ``digest``: the
    token's own ``req``, or one of a group token's ``reqs`` (whose hash must be ``req``)."""
    if claims["req"] == digest:
        return True
    reqs = claims.get("reqs")
    if not (isinstance(reqs, list) and len(reqs) <= MAX_GROUP and digest in reqs):
        return False
    if _GROUPS.get(claims["req"]) == reqs:  # this very list was hashed to this req before
        return True
    if group_digest(reqs) != claims["req"]:
        return False
    while len(_GROUPS) >= _MAX_GROUPS:  # the oldest first: no cliff where all miss at once
        _GROUPS.popitem(last=False)
    _GROUPS[claims["req"]] = list(reqs)
    return True


#: group ``req`` -> the ``reqs`` list it was found to hash, so `covers` hashes a group once,
#: not once per request it covers (a group token covers up to MAX_GROUP requests, each
#: arriving once per path): a pure function of the list, remembered only after it matched
_GROUPS: OrderedDict[str, list[str]] = OrderedDict()
#: a group's requests arrive within seconds of each other; each entry is up to 16 digests
#: (~2 KB), so 1,024 hold ~2 MB (4,096 held ~8 MB, issue 26, session 44)
_MAX_GROUPS = 1024


def groups_hashed() -> int:
    """Group digests remembered (``sizes`` in ``/admin/state``)."""
    return len(_GROUPS)


#: the longest ``jti`` taken: ours are 24 hex characters, and the replay table holds every
#: one for up to 90 s, so its bytes must not be the signer's choice
MAX_JTI = 64


@dataclass
class Signer:
    """Makes the Authorization value for requests this node initiates."""

    node_id: str
    mode: str
    key: Any  # bytes secret (shared) or PEM private key bytes (public)
    ttl_s: float = 600.0
    #: lifetime of a token for a request made once on our own behalf (ONCE_TTL_S)
    once_ttl_s: float = 30.0
    #: tokens signed so far (GET /admin/state ``jwt``): the bench reports them per update
    signed: int = 0

    def __post_init__(self) -> None:
        # parsed once: PyJWT would parse the PEM again for every token it signs
        self._key: Any = self.key if self.mode == "shared" else load_pem_private_key(self.key, None)

    def token(self, now: float, digest: str, once: bool = False, **extra: Any) -> str:
        """A token for the one request whose :func:`signed_digest` is ``digest``; ``once``:
        a request on our own behalf, whose id the receiver remembers (short-lived)."""
        iat = int(now)
        ttl = min(self.ttl_s, self.once_ttl_s) if once else self.ttl_s
        claims = {"iss": self.node_id, "iat": iat, "exp": iat + int(ttl),
                  "jti": secrets.token_hex(12), "req": digest, **extra}
        alg = SHARED_ALG if self.mode == "shared" else PUBLIC_ALG
        self.signed += 1
        return _JWT.encode(claims, self._key, algorithm=alg)

    def header(self, now: float, digest: str, once: bool = False) -> str:
        return "Bearer " + self.token(now, digest, once)

    def group_token(self, now: float, digests: list[str]) -> str:
        """One token for up to MAX_GROUP requests (or statements) that are not made once:
        one signature, and one check per receiver (its verified-token cache), for all."""
        if not 1 <= len(digests) <= MAX_GROUP:
            raise ValueError(f"a group token signs 1 to {MAX_GROUP} digests, not {len(digests)}")
        if len(digests) == 1:
            return self.token(now, digests[0])
        return self.token(now, group_digest(digests), reqs=list(digests))


@dataclass
class Verifier:
    """Checks tokens against the mesh's key(s) and the node's own (skewable) clock."""

    mode: str
    shared_key: bytes | None = None
    public_keys: dict[str, bytes] = field(default_factory=dict)
    leeway_s: float = 30.0
    #: token ids taken, with when they stop mattering (their exp + leeway)
    seen: OrderedDict[str, float] = field(default_factory=OrderedDict)
    #: at most this many remembered ids: a peer signing faster than that is refused, not
    #: allowed to grow the table. A remembered token lives at most ONCE_TTL_S (+ leeway), so
    #: the table holds rate x 60 s: 3,300 requests/s of all peers together
    max_seen: int = 200_000
    #: tokens whose signature checked out, with their claims: a flooded request's token
    #: arrives once per path and a relayed vote statement once per hop, and an ES256 check
    #: costs more CPU than the rest of the request. Only the signature check is skipped;
    #: iss, times, ``req`` and ``jti`` are checked on every use.
    verified: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)
    max_verified: int = 4096
    #: and at most this many characters of tokens in it (a token is up to ~8 KB, the header
    #: line's limit; ours are 0.3-1.5 KB), the oldest forgotten first
    max_verified_chars: int = 4 << 20
    _verified_chars: int = 0
    _keys: dict[str, Any] = field(default_factory=dict)
    #: signatures checked so far (tokens not in ``verified``; GET /admin/state ``jwt``)
    checked: int = 0

    def verify(self, header: str | None, expected_iss: str, now: float) -> dict[str, Any]:
        """The token's claims, or AuthError naming what is wrong."""
        if not header:
            raise AuthError("missing Authorization header (a JWT signed by the initiating node)")
        token = header[7:] if header[:7].lower() == "bearer " else header
        claims = self.verified.get(token)
        if claims is None:
            claims = self._check_signature(token, expected_iss)
            self._remember_verified(token, claims)
        elif claims.get("iss") != expected_iss:
            raise AuthError(f"token iss {claims.get('iss')!r} does not match DRiP-Node-ID "
                            f"{expected_iss!r}")
        return self._check_claims(dict(claims), now)

    def _remember_verified(self, token: str, claims: dict[str, Any]) -> None:
        """Cache a checked token; past either bound the oldest go first (clearing the whole
        cache when full, as before session 44, made every token of the next moments miss)."""
        v = self.verified
        while v and (len(v) >= self.max_verified
                     or self._verified_chars + len(token) > self.max_verified_chars):
            old, _ = v.popitem(last=False)
            self._verified_chars -= len(old)
        v[token] = claims
        self._verified_chars += len(token)

    def _check_signature(self, token: str, expected_iss: str) -> dict[str, Any]:
        """The claims of a token signed by ``expected_iss`` that says so, or AuthError.

        The token is checked with ``expected_iss``'s key straight away, and then its verified
        ``iss`` must be ``expected_iss``: a token signed with that key that names another
        issuer is refused as before, and one naming ``expected_iss`` but signed otherwise
        fails its signature. The issuer is read by hand from the unverified payload only
        when the check fails, to refuse with the same words as before this order (an
        ``iss`` other than DRiP-Node-ID first): reading it first cost a second base64 and
        JSON decoding of every token (6 of 21 us for a six-request group token). A forger
        gains no cheaper refusal either way: naming the header's node as ``iss`` always
        reached the signature check."""
        self.checked += 1
        try:
            if self.mode == "shared":
                key: Any = self.shared_key
                alg = SHARED_ALG
            else:
                key = self._public_key(expected_iss)
                alg = PUBLIC_ALG
            claims: dict[str, Any] = _JWT.decode(
                token, key, algorithms=[alg], leeway=self.leeway_s,
                options={"require": ["iss", "iat", "exp"], "verify_iat": False,
                         "verify_exp": False})
        except (AuthError, jwt.PyJWTError) as e:
            iss = _unverified_iss(token)  # "not a JWT" for what has no readable payload
            if iss != expected_iss:
                raise AuthError(f"token iss {iss!r} does not match DRiP-Node-ID "
                                f"{expected_iss!r}") from None
            if isinstance(e, AuthError):  # no public key for the issuer
                raise
            raise AuthError(f"token rejected: {type(e).__name__}: {e}") from None
        if claims.get("iss") != expected_iss:
            raise AuthError(f"token iss {claims.get('iss')!r} does not match DRiP-Node-ID "
                            f"{expected_iss!r}")
        return claims

    def _public_key(self, iss: str) -> Any:
        key = self._keys.get(iss)
        if key is None:
            pem = self.public_keys.get(iss)
            if pem is None:
                raise AuthError(f"no public key known for issuer {iss!r}")
            try:
                key = self._keys[iss] = load_pem_public_key(pem)
            except (ValueError, TypeError) as e:
                raise AuthError(f"the public key of {iss!r} is unusable: {e}") from None
        return key

    def trust(self, node: str, pem: str | None) -> None:
        """Take ``node``'s public key from an agreed membership (None: forget it), dropping
        whatever was verified or parsed with the old one."""
        self._keys.pop(node, None)
        self.verified = OrderedDict((t, c) for t, c in self.verified.items()
                                    if c.get("iss") != node)
        self._verified_chars = sum(len(t) for t in self.verified)
        if pem is None:
            self.public_keys.pop(node, None)
        else:
            self.public_keys[node] = pem.encode()

    def _check_claims(self, claims: dict[str, Any], now: float) -> dict[str, Any]:
        iat, exp = claims["iat"], claims["exp"]
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise AuthError("token iat/exp must be numbers")
        # checked against the node's own clock (jwt would use the host's wall clock)
        if now > exp + self.leeway_s:
            raise AuthError(f"token expired {now - exp:.0f}s ago (iat {iat}, exp {exp})")
        if iat > now + self.leeway_s:
            raise AuthError(f"token issued {iat - now:.0f}s in the future")
        for k in ("jti", "req"):
            if not isinstance(claims.get(k), str) or not claims[k]:
                raise AuthError(f"token has no {k!r} claim: DRiP tokens sign one request "
                                "(docs/drip.md, Authorization)")
        if len(claims["jti"]) > MAX_JTI:
            raise AuthError(f"token jti is {len(claims['jti'])} characters, more than "
                            f"{MAX_JTI}")
        return claims

    def bind(self, claims: dict[str, Any], digest: str, once: bool, now: float) -> None:
        """The token must sign this very request; ``once``: its id must be new (then it is
        remembered until it expires)."""
        if once and "reqs" in claims:
            raise AuthError("a group token (reqs) cannot sign a request made once", "retargeted")
        if not covers(claims, digest):
            raise AuthError("token signs another request (method, path, headers or body "
                            "differ from what the issuer signed)", "retargeted")
        if not once:
            return
        if float(claims["exp"]) - float(claims["iat"]) > ONCE_TTL_S:
            raise AuthError(f"a token for a single request may live {ONCE_TTL_S:.0f} s at "
                            f"most, this one {float(claims['exp']) - float(claims['iat']):.0f} s:"
                            " sign it with a shorter exp", "long-lived")
        jti = claims["jti"]
        if jti in self.seen:
            raise AuthError(f"token replayed (jti {jti[:32]!r} was already taken)", "replayed")
        self._expire(now)
        if len(self.seen) >= self.max_seen:
            self.seen = OrderedDict((j, t) for j, t in self.seen.items() if t > now)
            if len(self.seen) >= self.max_seen:
                raise AuthError("too many live tokens to remember; retry later",
                                "replay-table-full")
        self.seen[jti] = float(claims["exp"]) + self.leeway_s

    def _expire(self, now: float) -> None:
        """Forget the oldest remembered ids whose tokens expired, a few per request.

        Why: the table was pruned only once it held ``max_seen`` (200,000) ids, so it grew
        with every request made once (votes' answers, batches, heartbeats: the quiet mesh too)
        to ~30 MB per node before the first prune, and each prune scanned all of it. Ids are
        taken in about the order they expire (each lives ``exp + leeway``, and a token taken
        once lives at most ONCE_TTL_S past its ``iat``, which is near now), so popping expired
        ones from the front keeps the table at the live tokens. One that outlives those after
        it holds them back at most its own lifetime (~90 s); the scan at ``max_seen`` stays
        for that."""
        seen = self.seen
        for _ in range(8):  # bounded work per request; amortized, more than one is added
            if not seen:
                return
            first = next(iter(seen))  # O(1) in an OrderedDict (a dict scans its dead slots)
            if seen[first] > now:
                return
            seen.popitem(last=False)


class CheckedHMAC(HMACAlgorithm):
    """PyJWT's HS256 with its key check done once per secret. PyJWT's ``prepare_key`` checks
    on every token signed or verified that the secret is not a PEM, SSH, DER or JWK key
    (parsing it as JSON); that was ~4 % of a shared-key node's CPU (py-spy, docs/drip.md
    session 41). The check is a pure function of the secret's bytes, so a secret that passed
    is remembered (at most 16); one that fails is checked, and refused, every time."""

    _MAX_KEYS = 16

    def __init__(self) -> None:
        super().__init__(HMACAlgorithm.SHA256)
        self._checked: dict[bytes | str, bytes] = {}

    def prepare_key(self, key: str | bytes) -> bytes:
        if (done := self._checked.get(key)) is not None:
            return done
        prepared = super().prepare_key(key)  # raises for a key shaped as an asymmetric one
        if len(self._checked) < self._MAX_KEYS:
            self._checked[key] = prepared
        return prepared


def _use_checked_hmac() -> None:
    """Install `CheckedHMAC` as PyJWT's HS256 (PyJWT's public register_algorithm API), for
    PyJWT's module-level functions too (our own `_JWT` has it from the start)."""
    if not isinstance(jwt.api_jws.get_algorithm_by_name(SHARED_ALG), CheckedHMAC):
        jwt.unregister_algorithm(SHARED_ALG)
        jwt.register_algorithm(SHARED_ALG, CheckedHMAC())


#: the bytes of base64url (RFC 4648 section 5) without padding: PyJWT's alphabet
_B64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


class FastSegmentJWS(PyJWS):
    """PyJWT's JWS with its check of a segment's alphabet done in C.

    Why: PyJWS._decode_base64url_segment tests every byte of each of a token's three
    segments against the base64url alphabet in a Python generator (``any(c not in
    ALPHABET for c in stripped)``): 23 of the 38 us of an HS256 check of a six-request group
    token, 7 of 19 us of a plain one (docs/drip.md "Per-item CPU, session 46"). A segment
    made of alphabet bytes only is recognised by ``bytes.translate`` deleting them all; for
    it PyJWT's function would run exactly the steps below (no ``=`` to strip, so no padding
    checks; the generator finds nothing), so the result and every refusal are PyJWT's. Any
    other segment (padding, a stray byte) goes to PyJWT's own function unchanged. Signature
    checks, headers, algorithms and claims stay PyJWT's. A hypothesis test holds this to
    PyJWT's function, byte for byte and refusal for refusal."""

    @staticmethod
    def _decode_base64url_segment(segment: bytes, name: str) -> bytes:
        if not isinstance(segment, bytes) or segment.translate(None, _B64URL):
            return PyJWS._decode_base64url_segment(segment, name)
        if len(segment) % 4 == 1:
            raise DecodeError(f"Invalid {name} padding")
        try:
            decoded = base64url_decode(segment)
        except (TypeError, binascii.Error) as err:
            raise DecodeError(f"Invalid {name} padding") from err
        if base64url_encode(decoded) != segment:
            raise DecodeError(f"Invalid {name} padding")
        return decoded


def _own_jwt() -> jwt.PyJWT:
    """PyJWT's JWT API over `FastSegmentJWS`, with `CheckedHMAC` as its HS256 (as PyJWT builds
    its own module-level object: a PyJWT whose ``_jws`` is the JWS it uses)."""
    jws = FastSegmentJWS()
    jws.unregister_algorithm(SHARED_ALG)
    jws.register_algorithm(SHARED_ALG, CheckedHMAC())
    api = jwt.PyJWT()
    api._jws = jws
    return api


#: what `Signer` and `Verifier` sign and check with
_JWT = _own_jwt()


def load_auth(node_id: str, cfg: dict[str, Any]) -> tuple[Signer, Verifier]:
    """Signer and verifier from the node config's ``jwt`` object (see docs/drip.md)."""
    mode = cfg.get("mode", "shared")
    ttl = float(cfg.get("ttl_s", 600.0))
    leeway = float(cfg.get("leeway_s", 30.0))
    if mode == "shared":
        _use_checked_hmac()
        secret = Path(cfg["shared_key_file"]).read_bytes().strip()
        return Signer(node_id, mode, secret, ttl), Verifier(mode, shared_key=secret,
                                                            leeway_s=leeway)
    if mode == "public":
        priv = Path(cfg["private_key_file"]).read_bytes()
        pubs = {n: Path(p).read_bytes() for n, p in cfg["public_keys"].items()}
        return Signer(node_id, mode, priv, ttl), Verifier(mode, public_keys=pubs, leeway_s=leeway)
    raise ValueError(f"jwt.mode must be 'shared' or 'public', got {mode!r}")


def _unverified_iss(token: str) -> Any:
    """The issuer a token claims, read before its signature is checked (to pick the key).
    Read by hand: a second full PyJWT decode per token cost as much CPU as the ES256 check."""
    parts = token.split(".")
    if len(parts) != 3:
        raise AuthError(f"Authorization is not a JWT: {len(parts)} segments, not 3")
    seg = parts[1]
    try:
        payload = json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))
    except (ValueError, binascii.Error) as e:
        raise AuthError(f"Authorization is not a JWT: payload unreadable: {e}") from None
    if not isinstance(payload, dict):
        raise AuthError("Authorization is not a JWT: payload is not a JSON object")
    return payload.get("iss")
