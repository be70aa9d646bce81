"""The Garlic Farm HTTP handshake with RFC 2617 Digest auth, sans-IO (both sides).

Request 1 ``GET /GarlicFarm/CLUSTER/VERSION/websocket`` -> 404 on a wrong path, else 401
with ``WWW-Authenticate: Digest realm=..., qop="auth", nonce=..., opaque=..., algorithm=MD5``;
the connection is then closed. Request 2 (same path, ``Connection: keep-alive, Upgrade``,
``Upgrade: websocket``, ``Authorization: Digest ...``) -> 101 Switching Protocols, after which
the same socket carries frames, or another 401 (closed).

Nonces are ``hex(issued_s).random.HMAC(secret, ...)`` with a secret drawn afresh by
each server process, valid for the spec's credential-cache period (``NONCE_TTL_S`` = 1 h),
then answered 401 ``stale=true``. The client side caches a challenge per server for the same
``CACHE_TTL_S`` and then goes straight to request 2 with an increasing ``nc``.

What the server insists on (each refusal changes no state):
- request 2's ``Connection`` names ``Upgrade`` and its ``Upgrade`` is ``websocket``, else 400;
- an ``Authorization`` that is not a well-formed Digest header (no nonce, nc or cnonce, an
  ``nc`` that is not 8 hex digits), else 400;
- ``qop=auth`` (it is the only qop offered; RFC 2069 responses without qop get 401);
- each (nonce, nonce-count) once: a replayed request 2 gets 401. The record of used counts
  is bounded (MAX_LIVE_NONCES, MAX_COUNTS_PER_NONCE): a nonce dropped to make room turns
  stale, never replayable. It is per process and dropped with the nonce's expiry; a restarted node draws a new secret,
  so a nonce from before the restart is stale rather than replayable.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

log = logging.getLogger("garlicfarm.handshake")

DEFAULT_CLUSTER = "farm"
VERSION = "1"
DEFAULT_USER = "farm"
DEFAULT_PASSWORD = "farm"
REALM = "GarlicFarm"
#: the spec: "Credentials shall be cached for at least one hour"
CACHE_TTL_S = 3600
NONCE_TTL_S = CACHE_TTL_S
#: bounds on the replay record: nonces tracked at once, and counts accepted per nonce
MAX_LIVE_NONCES = 4096
MAX_COUNTS_PER_NONCE = 1024
#: clock skew a nonce's issue time may show (a client's clock is not the server's)
NONCE_FUTURE_S = 60
_NC = re.compile(r"^[0-9a-fA-F]{8}$")
MAX_HEAD = 16 * 1024


class HandshakeError(ValueError):
    """Malformed HTTP head, or a handshake the peer refused (see ``status``)."""

    def __init__(self, msg: str, status: int | None = None) -> None:
        super().__init__(msg)
        self.status = status


def path_for(cluster: str, version: str = VERSION) -> str:
    return f"/GarlicFarm/{cluster}/{version}/websocket"


def _md5(s: str) -> str:
    return hashlib.md5(s.encode(), usedforsecurity=False).hexdigest()


@dataclass
class HttpHead:
    start: str  # request line or status line
    headers: dict[str, str]  # lower-cased names

    @property
    def status(self) -> int:
        parts = self.start.split(" ", 2)
        try:
            return int(parts[1])
        except (IndexError, ValueError):
            raise HandshakeError(f"bad status line {self.start!r}") from None


def parse_head(data: bytes) -> HttpHead:
    """Parse an HTTP head (everything up to and including the blank line)."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 cannot fail
        raise HandshakeError("undecodable head") from None
    lines = text.split("\r\n")
    if not lines or not lines[0]:
        raise HandshakeError("empty HTTP head")
    headers: dict[str, str] = {}
    for ln in lines[1:]:
        if not ln:
            continue
        name, sep, value = ln.partition(":")
        if not sep:
            raise HandshakeError(f"bad header line {ln!r}")
        headers[name.strip().lower()] = value.strip()
    return HttpHead(lines[0], headers)


_PARAM = re.compile(r'\s*([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)\s*,?')


def parse_digest_params(value: str) -> dict[str, str]:
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() != "digest":
        raise HandshakeError(f"not a Digest header: {value[:40]!r}")
    out = {}
    for m in _PARAM.finditer(rest):
        v = m.group(2)
        if v.startswith('"'):
            v = v[1:-1].replace('\\"', '"')
        out[m.group(1).lower()] = v
    return out


# ---------------------------------------------------------------- server


class Outcome(Enum):
    NOT_FOUND = "not-found"  # 404 (or 400: malformed request), close
    CHALLENGE = "challenge"  # 401 (request 1, or bad credentials), close
    UPGRADE = "upgrade"  # 101, frames follow


@dataclass
class ServerHandshake:
    cluster: str = DEFAULT_CLUSTER
    username: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD
    realm: str = REALM
    version: str = VERSION
    #: per process by default: a restart makes every earlier nonce stale (no replay across it)
    secret: bytes = b""
    #: the node's wall clock (seconds): nonces are issued and aged on it, so a clock-skew
    #: fault moves them as it moves the rest of the node
    clock: Callable[[], float] = time.time
    #: nonce -> nonce-counts already accepted with it (pruned as nonces expire; bounded by
    #: MAX_LIVE_NONCES nonces of MAX_COUNTS_PER_NONCE counts each)
    _used: dict[str, set[int]] = field(default_factory=dict, repr=False)
    #: nonces issued at or before this time are stale: raised when the oldest tracked nonce
    #: is dropped to make room, so a dropped nonce can never be replayed, only refreshed
    _floor: int = field(default=-1, repr=False)

    def __post_init__(self) -> None:
        if not self.secret:
            self.secret = os.urandom(32)

    def make_nonce(self, now: float | None = None) -> str:
        """``hex(issued_s).random.HMAC``: unique per challenge (two clients challenged in the
        same second get different nonces, so their nonce-counts never collide)."""
        body = f"{int(self.clock() if now is None else now):x}.{os.urandom(8).hex()}"
        mac = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()[:32]
        return f"{body}.{mac}"

    def _issued(self, nonce: str) -> int | None:
        """The nonce's issue time if this server made it, else None."""
        body, _, mac = nonce.rpartition(".")
        good = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()[:32]
        if not hmac.compare_digest(mac.encode(), good.encode()):
            return None
        try:
            return int(body.partition(".")[0], 16)
        except ValueError:
            return None

    def nonce_ok(self, nonce: str, now: float | None = None) -> bool:
        """Made by this server and inside its validity period."""
        issued = self._issued(nonce)
        t = self.clock() if now is None else now
        return (issued is not None and issued > self._floor
                and issued - NONCE_FUTURE_S <= t <= issued + NONCE_TTL_S)

    def _prune(self, now: float) -> None:
        for n in [n for n in self._used if not self.nonce_ok(n, now)]:
            del self._used[n]

    def _remember(self, nonce: str, nc: int) -> None:
        """Record an accepted (nonce, count) within the bounds: a nonce used for too many
        counts, or the oldest nonce when too many are live, turns stale (its client is
        challenged afresh), so memory stays bounded and nothing becomes replayable."""
        counts = self._used.setdefault(nonce, set())
        counts.add(nc)
        if len(counts) >= MAX_COUNTS_PER_NONCE:
            self._retire(nonce)
        while len(self._used) > MAX_LIVE_NONCES:
            self._retire(min(self._used, key=lambda n: self._issued(n) or 0))

    def _retire(self, nonce: str) -> None:
        self._floor = max(self._floor, self._issued(nonce) or self._floor)
        for n in [n for n in self._used if (self._issued(n) or 0) <= self._floor]:
            del self._used[n]

    def _challenge(self, stale: bool = False) -> bytes:
        nonce = self.make_nonce()
        opaque = hashlib.sha256(self.realm.encode()).hexdigest()[:16]
        h = (
            f'Digest realm="{self.realm}", qop="auth", nonce="{nonce}", '
            f'opaque="{opaque}", algorithm=MD5' + (", stale=true" if stale else "")
        )
        return (
            "HTTP/1.1 401 Unauthorized\r\n"
            f"WWW-Authenticate: {h}\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n"
        ).encode()

    def respond(self, head: bytes, now: float | None = None) -> tuple[bytes, Outcome]:
        """Answer one request head: (response bytes, what the runtime does next)."""
        try:
            req = parse_head(head)
            method, path, _proto = req.start.split(" ", 2)
        except (HandshakeError, ValueError):
            return _bad_request(), Outcome.NOT_FOUND
        expected = path_for(self.cluster, self.version)
        if method != "GET" or path != expected:
            return (
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                Outcome.NOT_FOUND,
            )
        auth = req.headers.get("authorization")
        if not auth:
            return self._challenge(), Outcome.CHALLENGE
        if not upgrade_headers_ok(req):
            return _bad_request(), Outcome.NOT_FOUND
        try:
            p = parse_digest_params(auth)
        except HandshakeError:
            return self._challenge(), Outcome.CHALLENGE  # Basic and other schemes: Digest only
        if p.get("qop") != "auth":
            return self._challenge(), Outcome.CHALLENGE
        if not all(p.get(k) for k in ("nonce", "nc", "cnonce", "response")) or not _NC.match(p["nc"]):
            return _bad_request(), Outcome.NOT_FOUND
        t = self.clock() if now is None else now
        if not self.nonce_ok(p["nonce"], t):
            return self._challenge(stale=True), Outcome.CHALLENGE
        if p.get("username") != self.username or p.get("realm") != self.realm or p.get("uri") != path:
            return self._challenge(), Outcome.CHALLENGE
        ha1 = _md5(f"{self.username}:{self.realm}:{self.password}")
        ha2 = _md5(f"GET:{path}")
        want = _md5(f"{ha1}:{p['nonce']}:{p['nc']}:{p['cnonce']}:auth:{ha2}")
        if not hmac.compare_digest(want.encode(), p["response"].encode()):
            return self._challenge(), Outcome.CHALLENGE
        nc = int(p["nc"], 16)
        if nc in self._used.get(p["nonce"], ()):  # a replayed request 2
            return self._challenge(), Outcome.CHALLENGE
        self._prune(t)
        self._remember(p["nonce"], nc)
        return (
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            Outcome.UPGRADE,
        )


def upgrade_headers_ok(req: HttpHead) -> bool:
    """Request 2's ``Connection`` names ``Upgrade`` and its ``Upgrade`` is ``websocket``."""
    conn = {t.strip().lower() for t in req.headers.get("connection", "").split(",")}
    return "upgrade" in conn and req.headers.get("upgrade", "").strip().lower() == "websocket"


def _bad_request() -> bytes:
    return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


# ---------------------------------------------------------------- client


@dataclass
class Challenge:
    realm: str
    nonce: str
    opaque: str | None
    qop: str | None
    obtained: float
    nc: int = 0


@dataclass
class CredentialCache:
    """Digest challenges per server ("host:port"), kept ``ttl`` seconds (>= 1 h)."""

    ttl: float = CACHE_TTL_S
    #: the node's wall clock (seconds): a challenge ages on it, so clock skew moves it too
    clock: Callable[[], float] = time.time
    _items: dict[str, Challenge] = field(default_factory=dict)

    def get(self, server: str, now: float | None = None) -> Challenge | None:
        c = self._items.get(server)
        t = self.clock() if now is None else now
        if c is None or t - c.obtained > self.ttl:
            self._items.pop(server, None)
            return None
        return c

    def put(self, server: str, c: Challenge) -> None:
        self._items[server] = c

    def drop(self, server: str) -> None:
        self._items.pop(server, None)


DEFAULT_CACHE = CredentialCache()


def parse_challenge(resp: HttpHead, now: float | None = None) -> Challenge:
    h = resp.headers.get("www-authenticate")
    if not h:
        raise HandshakeError("401 without WWW-Authenticate", 401)
    p = parse_digest_params(h)
    if "nonce" not in p or "realm" not in p:
        raise HandshakeError("Digest challenge without nonce/realm", 401)
    qop = p.get("qop")
    if qop is None or "auth" not in [q.strip() for q in qop.split(",")]:
        raise HandshakeError("Digest challenge without qop=auth: refusing RFC 2069 digest", 401)
    qop = "auth"
    return Challenge(p["realm"], p["nonce"], p.get("opaque"), qop, time.time() if now is None else now)


@dataclass
class ClientHandshake:
    host: str
    port: int
    cluster: str = DEFAULT_CLUSTER
    username: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD
    version: str = VERSION
    cache: CredentialCache = field(default_factory=lambda: DEFAULT_CACHE)

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def path(self) -> str:
        return path_for(self.cluster, self.version)

    def request1(self) -> bytes:
        return (
            f"GET {self.path} HTTP/1.1\r\nHost: {self.server}\r\n"
            "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
        ).encode()

    def cached(self) -> Challenge | None:
        return self.cache.get(self.server)

    def handle_response1(self, head: bytes) -> Challenge:
        """Response 1 must be a 401 challenge; cache it and return it."""
        resp = parse_head(head)
        if resp.status != 401:
            raise HandshakeError(f"request 1 answered {resp.start!r}", resp.status)
        ch = parse_challenge(resp, self.cache.clock())
        self.cache.put(self.server, ch)
        return ch

    def request2(self, ch: Challenge) -> bytes:
        ch.nc += 1
        nc = f"{ch.nc:08x}"
        # the client nonce's job is to be unpredictable, not to carry time: the OS's
        # randomness, never the seeded rng a run replays (docs/garlicfarm.md)
        cnonce = os.urandom(8).hex()
        ha1 = _md5(f"{self.username}:{ch.realm}:{self.password}")
        ha2 = _md5(f"GET:{self.path}")
        if ch.qop == "auth":
            resp = _md5(f"{ha1}:{ch.nonce}:{nc}:{cnonce}:auth:{ha2}")
            extra = f', qop=auth, nc={nc}, cnonce="{cnonce}"'
        else:
            resp = _md5(f"{ha1}:{ch.nonce}:{ha2}")
            extra = ""
        opaque = f', opaque="{ch.opaque}"' if ch.opaque else ""
        auth = (
            f'Digest username="{self.username}", realm="{ch.realm}", nonce="{ch.nonce}", '
            f'uri="{self.path}", algorithm=MD5, response="{resp}"{opaque}{extra}'
        )
        return (
            f"GET {self.path} HTTP/1.1\r\nHost: {self.server}\r\nCache-Control: no-cache\r\n"
            f"Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nAuthorization: {auth}\r\n\r\n"
        ).encode()

    def handle_response2(self, head: bytes) -> bool:
        """True on 101. On 401 the cached challenge is replaced by the new one (if any)
        and False is returned: reconnect and send request 2 again (once)."""
        resp = parse_head(head)
        if resp.status == 101:
            return True
        if resp.status == 401:
            self.cache.drop(self.server)
            try:
                self.cache.put(self.server, parse_challenge(resp))
            except HandshakeError as e:  # retried without a cached challenge: say why
                log.warning("unusable digest challenge from %s: %s", self.server, e)
            return False
        raise HandshakeError(f"request 2 answered {resp.start!r}", resp.status)
