"""The join token: a shared secret that JoinReqs prove knowledge of without carrying it.

The spec's session shows the shape: a JoinReq without credentials gets JoinNak 7115 whose
etag is "a hint for a connection token", and the next JoinReq carries that hint as `token`
and "{some auth}" as `auth`. Ours: the hint names the secret (a digest of it, so members
with different secrets can tell which one a joiner means) and never reveals it; `auth` is
HMAC-SHA256 keyed with the secret over the whole JoinReq as encoded with `auth` empty, so
it binds the joiner's id, generation and gossip. A captured JoinReq replayed later can
only re-announce that same member at that same generation, which the incarnation rules
already treat as old news.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace

from nodes.swim import codec as c


def hint(secret: str) -> str:
    """What a JoinNak's etag and a JoinReq's token say: which secret, not the secret."""
    return "0x" + hashlib.sha256(b"swim join token id\0" + secret.encode()).hexdigest()[:12]


def _mac(secret: str, req: c.JoinReq) -> bytes:
    return hmac.new(secret.encode(), c.encode(replace(req, auth=b"")), hashlib.sha256).digest()


def signed(secret: str, req: c.JoinReq) -> c.JoinReq:
    """``req`` with the token's hint and its proof filled in (unchanged with no secret)."""
    if not secret:
        return req
    req = replace(req, token=hint(secret).encode(), auth=b"")
    return replace(req, auth=_mac(secret, req))


def verified(secret: str, req: c.JoinReq) -> bool:
    """Whether ``req`` proves knowledge of ``secret`` (any request does when there is none)."""
    if not secret:
        return True
    return (hmac.compare_digest(req.token, hint(secret).encode())
            and hmac.compare_digest(req.auth, _mac(secret, req)))
