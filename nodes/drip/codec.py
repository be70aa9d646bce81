"""DRiP wire format: HTTP requests <-> typed messages, exactly as the spec lays them out.

No I/O here. Every malformed input raises :class:`CodecError`, which carries the HTTP status
the server answers with and a message saying what was wrong; it never crashes the node.

Header rules (spec section 4.3):

* ``DRiP-Node-ID``: the initiator's id, never changed by a forwarder.
* ``DRiP-Node-Counter``: an unsigned 64-bit decimal (``0 .. 2**64-1``), no sign, no spaces.
* ``DRiP-Node-Counter-reset``: ``true`` or ``false`` (case-insensitive), required wherever the
  counter is.
* ``DRiP-Transaction-Type``: ``update`` or ``sync``. The spec says an initiator MUST set it, but
  its own ``/voting`` and ``/commit`` examples omit it: a receiver takes a missing one as
  ``update`` (we always send it).
* ``DRiP-Sync-Complete``: ``true`` or ``false``; required on sync transactions.

Paths (ours where the spec is silent are marked): ``POST /node/{id}/active|inactive``,
``GET /state``, ``POST /voting``, ``POST /voting/peernode/{id}/response/{yes|no}`` (also taken
as ``POST /node/{id}/response/{yes|no}``, the form of the spec's 4.5.1.2 example),
``POST /commit`` (update and sync), ``PUT|POST /sync/node/{id}``, ``POST /heartbeat/node/{id}``,
and ``POST /abort`` (ours: the spec has no abort message).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from nodes.common import fastjson
from nodes.common.fastinit import fast_frozen_init

H_NODE = "DRiP-Node-ID"
H_COUNTER = "DRiP-Node-Counter"
H_RESET = "DRiP-Node-Counter-reset"
H_TTYPE = "DRiP-Transaction-Type"
H_BUDGET = "DRiP-Vote-Budget-Ms"  # ours; absent from the spec, ignored by those who do not know it
H_SYNC_COMPLETE = "DRiP-Sync-Complete"
H_AUTH = "Authorization"
#: ours: the key of a lane's frames, carried by its signed upgrade (`LaneOpen`)
H_LANE_KEY = "DRiP-Lane-Key"

U64_MAX = 2**64 - 1
#: the highest version a node takes: SQLite's INTEGER holds 2**63-1, and the next commit of the
#: key adds one, so 2**63-1 itself is refused too (docs/drip.md "Limits and refusals")
MAX_VERSION = 2**63 - 2
_DIGITS = re.compile(r"[0-9]{1,20}")
_BUDGET = re.compile(r"[0-9]{1,9}")  # ASCII digits only: str.isdigit() takes "²" and "١"
_NODE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: a lane key: 32 bytes as 64 lowercase hex digits (one spelling, so one signed digest)
LANE_KEY_BYTES = 32
_LANE_KEY = re.compile(r"[0-9a-f]{64}")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_KEY = 256
#: a requester's sync id (`SyncRequest.sync_id`)
MAX_SYNC_ID = 64
#: nesting of a request body's JSON (arrays and objects); deeper is refused, never recursed into
MAX_DEPTH = 32
#: node ids in one list of a body (heartbeat members, vote voters and no-voters, statements)
MAX_MEMBERS = 256
#: default bound of one value, its JSON encoding in bytes (option ``max_value_bytes``)
MAX_VALUE_BYTES = 1024 * 1024
STATES = ("active", "inactive", "sync")


class CodecError(ValueError):
    """A request that does not follow the wire format; ``status`` is what to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@fast_frozen_init
@dataclass(frozen=True)
class Limits:
    """The bounds a node puts on what it decodes; ``max_budget_ms`` None: no cap (tests)."""

    max_value_bytes: int = MAX_VALUE_BYTES
    max_budget_ms: int | None = None
    #: the highest version taken (a commit's, a sync item's); only the planted
    #: ``no-version-bound`` raises it (to SQLite's largest, one past the bound)
    max_version: int = MAX_VERSION


DEFAULT_LIMITS = Limits()


def node_limits(max_value_bytes: int, vote_timeout_s: float, bugs: Collection[str]) -> Limits:
    """A node's bounds: the vote budget capped at its vote timeout, and the version bound
    unless the planted ``no-version-bound`` lifts it (to SQLite's largest, past the bound).
    One place for the server and the simulator."""
    return Limits(max_value_bytes, int(vote_timeout_s * 1000),
                  2**63 - 1 if "no-version-bound" in bugs else MAX_VERSION)


#: ranges in a sync request's summary (``sync.MAX_RANGES``)
MAX_SUMMARY = 4096
_DIGEST = re.compile(r"[0-9a-f]{32}")


def _summary(have: Any, after: str | None) -> tuple[tuple[str, str], ...]:
    """A sync request's ``have``: ``[[last key, 32 hex digest], ...]`` with increasing keys
    after ``after``, at most MAX_SUMMARY of them (absent: nothing held, all is sent)."""
    if have is None:
        return ()
    ok = isinstance(have, list) and len(have) <= MAX_SUMMARY
    out: list[tuple[str, str]] = []
    lo = after
    for r in have if ok else ():
        if not (isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)
                and 0 < len(r[0]) <= MAX_KEY and isinstance(r[1], str)
                and _DIGEST.fullmatch(r[1]) and (lo is None or r[0] > lo)):
            ok = False
            break
        out.append((r[0], r[1]))
        lo = r[0]
    if not ok:
        raise CodecError(f"sync request body.have: expected at most {MAX_SUMMARY} [key, digest] "
                         "pairs, keys increasing after 'after', digests 32 lowercase hex digits")
    return tuple(out)


# --------------------------------------------------------------------------- headers


def parse_node_id(v: str | None, what: str = H_NODE) -> str:
    if v is None or v == "":
        raise CodecError(f"missing {what} header")
    if type(v) is not str or not _NODE_ID.fullmatch(v):  # a JSON body's list: refused too
        raise CodecError(f"{what}: {v!r} is not a node id (1-64 of A-Z a-z 0-9 . _ -)")
    return v


def parse_lane_key(v: str | None) -> str:
    """A lane upgrade's ``DRiP-Lane-Key``: 64 lowercase hex digits (32 random bytes)."""
    if v is None or v == "":
        raise CodecError(f"missing {H_LANE_KEY} header: a lane's upgrade carries the key of "
                         "its frames")
    if not _LANE_KEY.fullmatch(v):
        raise CodecError(f"{H_LANE_KEY}: not {2 * LANE_KEY_BYTES} lowercase hex digits "
                         f"({LANE_KEY_BYTES} bytes)")
    return v


def parse_counter(v: str | None) -> int:
    """An unsigned 64-bit counter in plain decimal."""
    if v is None:
        raise CodecError(f"missing {H_COUNTER} header")
    if not _DIGITS.fullmatch(v):
        raise CodecError(f"{H_COUNTER}: {v!r} is not an unsigned decimal integer")
    n = int(v)
    if n > U64_MAX:
        raise CodecError(f"{H_COUNTER}: {v} exceeds the unsigned 64-bit maximum {U64_MAX}")
    return n


def parse_reset(v: str | None, counter: int) -> bool:
    """The reset flag; true only with counter 0, the wrap-around `next_counter` makes (a reset
    at any other counter would wipe the receiver's duplicate history of that initiator)."""
    reset = parse_bool(v, H_RESET)
    if reset and counter != 0:
        raise CodecError(f"{H_RESET}: true only at the wrap-around to counter 0, "
                         f"not at {counter}")
    return reset


def parse_budget(v: str | None, limits: Limits) -> int | None:
    if v is None:
        return None
    if not _BUDGET.fullmatch(v):
        raise CodecError(f"{H_BUDGET}: {v!r} must be a whole number of milliseconds "
                         "(1-9 ASCII digits)")
    n = int(v)
    if limits.max_budget_ms is not None and n > limits.max_budget_ms:
        raise CodecError(f"{H_BUDGET}: {n} exceeds this node's vote timeout "
                         f"{limits.max_budget_ms} ms")
    return n


def parse_bool(v: str | None, name: str) -> bool:
    if v is None:
        raise CodecError(f"missing {name} header (must be true or false)")
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise CodecError(f"{name}: {v!r} must be true or false")
    return low == "true"


def fmt_bool(b: bool) -> str:
    return "true" if b else "false"


def parse_ttype(v: str | None) -> str:
    if v is None:
        return "update"  # the spec's examples send none; see the module docstring
    if v not in ("update", "sync"):
        raise CodecError(f"{H_TTYPE}: {v!r} must be update or sync")
    return v


def next_counter(counter: int) -> tuple[int, bool]:
    """The counter for the next propagation and its reset flag: wraps to 0 past 2**64-1."""
    if counter >= U64_MAX:
        return 0, True
    return counter + 1, False


# --------------------------------------------------------------------------- bodies


@fast_frozen_init
@dataclass(frozen=True)
class Update:
    """One key-value change. ``uid`` is unique per update (the harness's op id)."""

    uid: str
    key: str
    value: Any
    owner: str | None = None
    #: bytes of the value's compact JSON when known (measured once, by `from_json`): a
    #: node's outgoing queue sizes batches with it instead of encoding every value again
    value_bytes: int | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.uid, "key": self.key, "value": self.value, "owner": self.owner}

    def json_size(self) -> int:
        """Bytes of the value's compact JSON as the wire carries it (`fastjson.dumps`: UTF-8;
        ``json.dumps`` took ~3 us a copy and counted a non-ASCII character as its escape)."""
        if self.value_bytes is not None:
            return self.value_bytes
        return len(fastjson.dumps(self.value))

    @classmethod
    def from_json(cls, d: Any, limits: Limits = DEFAULT_LIMITS) -> Update:
        if not isinstance(d, dict):
            raise CodecError("body: expected a JSON object {id, key, value, owner?}")
        uid, key = d.get("id"), d.get("key")
        if not isinstance(uid, str) or not 0 < len(uid) <= 200:
            raise CodecError("body.id: expected a non-empty string (<= 200 chars)")
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
            raise CodecError(f"body.key: expected a non-empty string (<= {MAX_KEY} chars)")
        if "value" not in d:
            raise CodecError("body.value: missing")
        owner = d.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise CodecError("body.owner: expected a string or null")
        size = len(fastjson.dumps(d["value"]))  # as `json_size`
        if size > limits.max_value_bytes:
            raise CodecError(f"body.value: {size} bytes of JSON exceeds this node's maximum "
                             f"value size {limits.max_value_bytes} (option max_value_bytes)")
        return cls(uid, key, d["value"], owner, size)


@fast_frozen_init
@dataclass(frozen=True)
class Item:
    """A stored key as sync transfers it: value plus the version that orders commits."""

    key: str
    value: Any
    version: int
    uid: str
    owner: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "version": self.version, "id": self.uid,
                "owner": self.owner}

    @classmethod
    def from_json(cls, d: Any, limits: Limits = DEFAULT_LIMITS) -> Item:
        u = Update.from_json(d, limits)
        return cls(u.key, u.value, _int(d, "version", "item", limits.max_version), u.uid,
                   u.owner)


def _int(d: dict[str, Any], k: str, where: str = "body", top: int = MAX_VERSION) -> int:
    v = d.get(k)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise CodecError(f"{where}.{k}: expected a non-negative integer")
    if v > top:
        raise CodecError(f"{where}.{k}: {v} exceeds the maximum {top}")
    return v


def _ids(d: dict[str, Any], k: str) -> tuple[str, ...]:
    v = d.get(k, [])
    if not isinstance(v, list):
        raise CodecError(f"body.{k}: expected a list of node ids")
    if len(v) > MAX_MEMBERS:
        raise CodecError(f"body.{k}: {len(v)} node ids, more than the maximum {MAX_MEMBERS}")
    return tuple(sorted({parse_node_id(x, f"body.{k}") for x in v}))


def _statements(d: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    raw = d.get("statements", {})
    if isinstance(raw, dict) and len(raw) > MAX_MEMBERS:
        raise CodecError(f"vote response body.statements: more than {MAX_MEMBERS}")
    if not isinstance(raw, dict) or not all(isinstance(v, str) and len(v) <= 4096
                                            for v in raw.values()):
        raise CodecError("vote response body.statements: expected {node id: signed statement}")
    return tuple(sorted((parse_node_id(k, "body.statements key"), v) for k, v in raw.items()))


def statement_digest(*words: Any) -> str:
    """SHA-256 (hex) of a signed statement's words as compact JSON: the one form of every
    statement a node signs about an update rather than a request (a vote, an outcome)."""
    return hashlib.sha256(fastjson.canonical(list(words))).hexdigest()


def vote_digest(uid: str, initiator: str, counter: int) -> str:
    """What a voter's statement signs: "I vote yes on update ``uid`` of ``initiator`` at
    ``counter``"."""
    return statement_digest("vote-yes", uid, initiator, counter)


def decode_json(raw: bytes) -> Any:
    """A body's JSON, refused (`CodecError`) when malformed, nested deeper than `MAX_DEPTH`, or
    holding a lone surrogate (which SQLite and UTF-8 cannot store) in any string."""
    try:
        d = fastjson.loads(raw) if raw else None
    except RecursionError:
        raise CodecError(f"body: JSON nested deeper than {MAX_DEPTH}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CodecError(f"body is not valid JSON: {e}") from None
    _check_tree(d, _may_hold_surrogates(raw) if raw else True,
                raw.count(b"[") + raw.count(b"{") >= MAX_DEPTH if raw else True)
    return d


def _may_hold_surrogates(raw: bytes) -> bool:
    """False only when no string parsed from ``raw`` can hold a lone surrogate: UTF-8 (json
    takes UTF-16/32 when the first bytes hold a NUL or a BOM) with no ``\\u`` escape and no
    0xED byte (the UTF-8 lead byte of U+D800-U+DFFF, which json decodes with surrogatepass)."""
    # a one-byte search is a memchr (0.2 us for 9 KB), the two-byte one 7 us: look for a
    # backslash first, as most bodies have none (tokens and ids are base64 and hex)
    return b"\\" in raw and b"\\u" in raw or b"\xed" in raw or b"\x00" in raw[:4] \
        or raw[:2] in (b"\xff\xfe", b"\xfe\xff")


#: what JSON nests (the parsers give exactly these)
_CONTAINERS = (dict, list)


def _check_tree(d: Any, strings: bool = True, deep: bool = True) -> None:
    """Depth and surrogates of a parsed body, walked without recursion. ``strings`` False: no
    string can hold a surrogate (`_may_hold_surrogates`); ``deep`` False: the raw body has
    fewer brackets than MAX_DEPTH. Each skips work that was most of a batch's decoding."""
    if not strings and not deep:
        return
    if not strings:  # depth alone: level by level, containers only (5x the walk's speed)
        level = [d] if isinstance(d, _CONTAINERS) else []
        depth = 0
        while level:
            if depth >= MAX_DEPTH:
                raise CodecError(f"body: JSON nested deeper than {MAX_DEPTH}")
            level = [y for x in level for y in (x.values() if isinstance(x, dict) else x)
                     if isinstance(y, _CONTAINERS)]
            depth += 1
        return
    todo: list[tuple[Any, int]] = [(d, 0)]
    while todo:
        x, depth = todo.pop()
        if isinstance(x, str):
            if strings and _SURROGATE.search(x):
                raise CodecError("body: a string holds a lone surrogate (not valid Unicode)")
        elif isinstance(x, dict | list):
            if depth >= MAX_DEPTH:
                raise CodecError(f"body: JSON nested deeper than {MAX_DEPTH}")
            items = [*x.keys(), *x.values()] if isinstance(x, dict) else x
            todo.extend((y, depth + 1) for y in items)


# --------------------------------------------------------------------------- messages


@fast_frozen_init
@dataclass(frozen=True)
class Voting:
    """POST /voting: the initiator asks (through forwarders) whether the update may commit."""

    initiator: str
    counter: int
    reset: bool
    update: Update
    auth: str | None = field(default=None, compare=False)
    #: ours (header DRiP-Vote-Budget-Ms, optional): how long the sender will still wait for
    #: this subtree's answer, so a forwarder answers in time even when a link below it hangs
    budget_ms: int | None = None


@fast_frozen_init
@dataclass(frozen=True)
class VoteResponse:
    """POST /voting/peernode/{responder}/response/{yes|no} back to whoever asked.

    Ours (the spec leaves it open): the body aggregates the responder's whole forwarding
    subtree: ``voters`` (every node that voted yes in it), the highest stored ``version`` of the
    key there, and ``duplicate`` when the responder had already seen the request.

    The spec's example has no body at all: then ``uid`` is None, the vote is the responder's
    alone, and the core applies it only where it is unambiguous (one open vote waits on that
    responder).
    """

    responder: str
    yes: bool
    initiator: str | None
    counter: int | None
    uid: str | None
    voters: tuple[str, ...] = ()
    no_voters: tuple[str, ...] = ()
    version: int = 0
    duplicate: bool = False
    #: ours: each yes voter's own signed statement, ``(voter, jwt)`` sorted, so that a relay
    #: cannot invent a yes; a voter without a valid one is not counted (docs/drip.md)
    statements: tuple[tuple[str, str], ...] = ()


@fast_frozen_init
@dataclass(frozen=True)
class Commit:
    """POST /commit with DRiP-Transaction-Type: update."""

    initiator: str
    counter: int
    reset: bool
    update: Update
    version: int
    auth: str | None = field(default=None, compare=False)


@fast_frozen_init
@dataclass(frozen=True)
class Abort:
    """POST /abort (our extension; the spec has no abort message): the initiator decided not to
    commit ``uid``, so voters may let go of its key at once instead of after their lock TTL.
    Flooded like a vote request, deduplicated by (initiator, counter); best effort."""

    initiator: str
    counter: int
    reset: bool
    uid: str
    key: str
    auth: str | None = field(default=None, compare=False)


@fast_frozen_init
@dataclass(frozen=True)
class OutcomeQuery:
    """POST /outcome (ours, not in the spec): a voter whose lock ran out of time asks a peer
    what became of update ``uid`` of ``initiator`` instead of releasing the key blind (a
    commit may have been decided and lost with its initiator). Answered ``{"outcome":
    "committed" | "aborted" | "undecided" | "unknown"}`` (docs/drip.md "Locks end on an
    outcome"). ``counter`` is the voting round's (the initiator's counter on the ``/voting``
    that took the lock; None when unknown, as for a lock read back after a restart): an
    ``aborted`` proof must be of that round, not of an earlier attempt of the same id."""

    sender: str
    uid: str
    initiator: str
    counter: int | None = None


@fast_frozen_init
@dataclass(frozen=True)
class SyncBatch:
    """POST /commit with DRiP-Transaction-Type: sync: part of a full store transfer."""

    source: str
    counter: int
    reset: bool
    complete: bool
    sync_id: str
    items: tuple[Item, ...]


@fast_frozen_init
@dataclass(frozen=True)
class Heartbeat:
    """POST /heartbeat/node/{sender}; body (ours): sender's state, known members, sync owed."""

    sender: str
    state: str
    members: tuple[str, ...] = ()
    sync_owed: bool = False
    #: the sender's own counter (ours; signed with the body): lets a receiver that missed
    #: more than its counter window of the sender's messages catch up (`Seen.rebase`)
    counter: int | None = None


@fast_frozen_init
@dataclass(frozen=True)
class NodeNotice:
    """POST /node/{sender}/active|inactive."""

    sender: str
    active: bool


@fast_frozen_init
@dataclass(frozen=True)
class SyncRequest:
    """PUT /sync/node/{requester}: please send me your whole store, or (body ours,
    ``{"after": key}``) the part after ``after`` to resume a sync that stopped there."""

    requester: str
    after: str | None = None
    #: ours: a random id the requester chose; the source's batches carry it as their sync id,
    #: so a batch forged in the source's name (its key stolen) cannot pass as this sync's
    sync_id: str | None = None
    #: ours: what the requester holds after ``after`` (`nodes.drip.sync.summarize`): ranges
    #: ``(last key, digest)`` the source skips where it holds the same (docs/drip.md "Sync")
    summary: tuple[tuple[str, str], ...] = ()


@fast_frozen_init
@dataclass(frozen=True)
class StateQuery:
    """GET /state (spec 4.2.3): which state is the peer in? Answered ``{"state"}``, or 503
    when inactive (the spec's "no response")."""

    sender: str


@fast_frozen_init
@dataclass(frozen=True)
class Batch:
    """POST /batch (ours, not in the spec): several vote-path messages from one hop to one
    peer in one request, each judged and answered on its own (answers in order).

    The batch's JWT (issued by ``sender``, the TLS peer) binds the whole body, so it vouches
    for the sender's own messages in it (vote responses). A flooded item (Voting, Commit,
    Abort) still carries its initiator's own token in ``auth``, because a relay forwards it
    alone to its own peers and they must check it came from the initiator."""

    sender: str
    items: tuple[Message, ...]


@dataclass(frozen=True)
class LaneOpen:
    """GET /lane (ours, not in the spec): the WebSocket upgrade that opens a lane for the
    sender's batches to this node (`nodes.drip.lane`). Signed like any request made on the
    sender's own behalf (its token binds method, path, ``DRiP-Node-ID`` and ``DRiP-Lane-Key``;
    its ``jti`` is taken once); the server handles it, never the core.

    ``key``: the lane's frame key (hex, `parse_lane_key`), made by the sender for this lane
    alone. Its frames are MAC'd under it instead of each carrying a token, so the upgrade's
    token binding it is what makes them the sender's (docs/drip.md "Lane frames under a
    per-lane key"). A secret: kept out of the repr (journals, errors)."""

    sender: str
    key: str = field(repr=False)


Message = (Voting | VoteResponse | Commit | Abort | SyncBatch | Heartbeat | NodeNotice
           | SyncRequest | StateQuery | OutcomeQuery | Batch | LaneOpen)

#: what a Batch may carry: the commit/vote path; anything else travels alone
BATCHED = (Voting, VoteResponse, Commit, Abort)
MAX_BATCH = 256


@fast_frozen_init
@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None  # JSON-able, or None for no body

    def body_bytes(self) -> bytes:
        return b"" if self.body is None else fastjson.dumps(self.body)


def _prop_headers(node: str, counter: int, reset: bool, ttype: str) -> dict[str, str]:
    return {H_NODE: node, H_COUNTER: str(counter), H_RESET: fmt_bool(reset), H_TTYPE: ttype}


def encode(msg: Message) -> HttpRequest:
    """The HTTP request for a message (Authorization is the runtime's job)."""
    if isinstance(msg, Voting):
        h = _prop_headers(msg.initiator, msg.counter, msg.reset, "update")
        if msg.budget_ms is not None:
            h[H_BUDGET] = str(msg.budget_ms)
        return HttpRequest("POST", "/voting", h, msg.update.to_json())
    if isinstance(msg, VoteResponse):
        path = f"/voting/peernode/{msg.responder}/response/{'yes' if msg.yes else 'no'}"
        if msg.uid is None:
            return HttpRequest("POST", path, {H_NODE: msg.responder})
        return HttpRequest(
            "POST", path, {H_NODE: msg.responder},
            {"initiator": msg.initiator, "counter": msg.counter, "id": msg.uid,
             "voters": list(msg.voters), "no_voters": list(msg.no_voters),
             "statements": dict(msg.statements),
             "version": msg.version, "duplicate": msg.duplicate})
    if isinstance(msg, Commit):
        return HttpRequest("POST", "/commit",
                           _prop_headers(msg.initiator, msg.counter, msg.reset, "update"),
                           {**msg.update.to_json(), "version": msg.version})
    if isinstance(msg, Abort):
        return HttpRequest("POST", "/abort",
                           _prop_headers(msg.initiator, msg.counter, msg.reset, "update"),
                           {"id": msg.uid, "key": msg.key})
    if isinstance(msg, SyncBatch):
        h = _prop_headers(msg.source, msg.counter, msg.reset, "sync")
        h[H_SYNC_COMPLETE] = fmt_bool(msg.complete)
        return HttpRequest("POST", "/commit", h,
                           {"sync_id": msg.sync_id, "items": [i.to_json() for i in msg.items]})
    if isinstance(msg, Heartbeat):
        return HttpRequest("POST", f"/heartbeat/node/{msg.sender}", {H_NODE: msg.sender},
                           {"state": msg.state, "members": list(msg.members),
                            "sync_owed": msg.sync_owed,
                            **({} if msg.counter is None else {"counter": msg.counter})})
    if isinstance(msg, NodeNotice):
        return HttpRequest("POST", f"/node/{msg.sender}/{'active' if msg.active else 'inactive'}",
                           {H_NODE: msg.sender})
    if isinstance(msg, SyncRequest):
        body: dict[str, Any] = {k: v for k, v in (("after", msg.after),
                                                  ("sync_id", msg.sync_id)) if v is not None}
        if msg.summary:
            body["have"] = [list(r) for r in msg.summary]
        return HttpRequest("PUT", f"/sync/node/{msg.requester}", {H_NODE: msg.requester},
                           body or None)
    if isinstance(msg, StateQuery):
        return HttpRequest("GET", "/state", {H_NODE: msg.sender})
    if isinstance(msg, OutcomeQuery):
        ask: dict[str, Any] = {"id": msg.uid, "initiator": msg.initiator}
        if msg.counter is not None:
            ask["counter"] = msg.counter
        return HttpRequest("POST", "/outcome", {H_NODE: msg.sender}, ask)
    if isinstance(msg, Batch):
        items = []
        for m in msg.items:
            r = encode(m)
            it: dict[str, Any] = {"method": r.method, "path": r.path, "headers": r.headers,
                                  "body": r.body}
            if isinstance(m, FLOODED) and m.auth:
                it["auth"] = m.auth
            items.append(it)
        return HttpRequest("POST", "/batch", {H_NODE: msg.sender}, {"items": items})
    if isinstance(msg, LaneOpen):
        return HttpRequest("GET", "/lane", {H_NODE: msg.sender, H_LANE_KEY: msg.key})
    raise TypeError(f"not a DRiP message: {msg!r}")


#: messages whose initiator's token travels unchanged through forwarders (spec 4.4): a node
#: may see one token once per path, so their replays are the core's duplicates, not refusals
FLOODED = (Voting, Commit, Abort)


def signed_digest(msg: Message) -> str:
    """SHA-256 (hex) of what a request's JWT vouches for: method, path, the propagation headers
    (node id, counter, reset, transaction type) and the body, in a canonical form computed from the
    decoded message, so that forwarders that re-encode it (or encode JSON another way) keep
    the digest. The vote budget header is left out: forwarders lower it on purpose.
    A Batch is the exception (`batch_digest`): no one forwards it, so its token binds the
    bytes of the body the hop sent."""
    req = encode(msg)
    if isinstance(msg, Batch):
        return batch_digest(msg.sender, req.body_bytes())
    headers = sorted((k.lower(), v) for k, v in req.headers.items()
                     if k not in (H_BUDGET, H_AUTH))
    view = [req.method, req.path, headers, req.body]
    return hashlib.sha256(fastjson.canonical(view)).hexdigest()


def batch_digest(sender: str, body: bytes) -> str:
    """What a `Batch`'s token binds: ``POST /batch``, the hop's ``DRiP-Node-ID`` and the
    SHA-256 of the exact body bytes. A batch is per link (a relay unpacks it and sends each
    item on in a batch of its own), so nothing re-encodes it on the way and no canonical form
    is needed; the receiver hashes what it read instead of encoding the decoded batch again,
    and the sender what it sends. The items' own tokens (flooded ones) keep `signed_digest`."""
    view = ["POST", "/batch", [[H_NODE.lower(), sender]], hashlib.sha256(body).hexdigest()]
    return hashlib.sha256(fastjson.canonical(view)).hexdigest()


def _path_id(path_id: str, sender: str) -> None:
    parse_node_id(path_id, "path node id")
    if path_id != sender:
        raise CodecError(f"path names node {path_id!r} but {H_NODE} is {sender!r}")


#: `decode`'s ``doc`` when the body is still bytes
_UNREAD: Any = object()


def _doc(body: bytes, doc: Any) -> Any:
    return decode_json(body) if doc is _UNREAD else doc


def decode(method: str, path: str, headers: Any, body: bytes,
           auth: str | None = None, limits: Limits = DEFAULT_LIMITS, *,
           doc: Any = _UNREAD) -> Message:
    """Parse one request.

    ``headers`` is any case-insensitive mapping (aiohttp's CIMultiDict). ``doc``: the body
    already parsed and checked (a batch item's, part of the batch's JSON), instead of ``body``.
    """
    parts = [p for p in path.split("/") if p]
    sender = parse_node_id(headers.get(H_NODE))
    if method == "POST" and parts == ["batch"]:
        return _decode_batch(sender, _doc(body, doc), limits)
    if method == "GET" and parts == ["state"]:
        return StateQuery(sender)
    if method == "GET" and parts == ["lane"]:
        return LaneOpen(sender, parse_lane_key(headers.get(H_LANE_KEY)))
    if method == "POST" and parts == ["voting"]:
        ttype = parse_ttype(headers.get(H_TTYPE))
        if ttype != "update":
            raise CodecError(f"/voting carries updates only, not {H_TTYPE}: {ttype}")
        budget = parse_budget(headers.get(H_BUDGET), limits)
        counter = parse_counter(headers.get(H_COUNTER))
        return Voting(sender, counter, parse_reset(headers.get(H_RESET), counter),
                      Update.from_json(_doc(body, doc), limits), auth, budget)
    if method == "POST" and parts[-2:-1] == ["response"] and (
            (len(parts) == 5 and parts[:2] == ["voting", "peernode"])
            or (len(parts) == 4 and parts[0] == "node")):
        _path_id(parts[-3], sender)
        if parts[-1] not in ("yes", "no"):
            raise CodecError(f"vote response must be yes or no, got {parts[-1]!r}")
        d = _doc(body, doc)
        if d is None:  # the spec's example: the vote alone
            return VoteResponse(sender, parts[-1] == "yes", None, None, None)
        if not isinstance(d, dict):
            raise CodecError("vote response body: expected a JSON object")
        uid = d.get("id")
        if not isinstance(uid, str) or not uid:
            raise CodecError("vote response body.id: expected the update id")
        dup = d.get("duplicate", False)
        if not isinstance(dup, bool):
            raise CodecError("vote response body.duplicate: expected a boolean")
        return VoteResponse(sender, parts[-1] == "yes", parse_node_id(d.get("initiator"),
                            "body.initiator"), _int(d, "counter", top=U64_MAX), uid, _ids(d, "voters"),
                            _ids(d, "no_voters"), _int(d, "version") if "version" in d else 0,
                            dup, _statements(d))
    if method == "POST" and parts == ["outcome"]:
        d = _doc(body, doc)
        uid = d.get("id") if isinstance(d, dict) else None
        if not isinstance(uid, str) or not uid or len(uid) > MAX_KEY:
            raise CodecError(f"outcome body: expected {{id, initiator}} (an update id of 1 to "
                             f"{MAX_KEY} chars and a node id)")
        return OutcomeQuery(sender, uid, parse_node_id(d.get("initiator"), "body.initiator"),
                            _int(d, "counter", top=U64_MAX) if "counter" in d else None)
    if method == "POST" and parts == ["abort"]:
        d = _doc(body, doc)
        if not isinstance(d, dict):
            raise CodecError("abort body: expected a JSON object {id, key}")
        uid, key = d.get("id"), d.get("key")
        if not isinstance(uid, str) or not uid or not isinstance(key, str) or not key:
            raise CodecError("abort body: expected non-empty strings id and key")
        counter = parse_counter(headers.get(H_COUNTER))
        return Abort(sender, counter, parse_reset(headers.get(H_RESET), counter), uid, key, auth)
    if method == "POST" and parts == ["commit"]:
        ttype = parse_ttype(headers.get(H_TTYPE))
        counter = parse_counter(headers.get(H_COUNTER))
        reset = parse_reset(headers.get(H_RESET), counter)
        d = _doc(body, doc)
        if ttype == "update":
            if not isinstance(d, dict):
                raise CodecError("commit body: expected a JSON object")
            return Commit(sender, counter, reset, Update.from_json(d, limits),
                          _int(d, "version", top=limits.max_version), auth)
        complete = parse_bool(headers.get(H_SYNC_COMPLETE), H_SYNC_COMPLETE)
        if not isinstance(d, dict) or not isinstance(d.get("items"), list):
            raise CodecError("sync body: expected {sync_id, items: [...]}")
        sid = d.get("sync_id")
        if not isinstance(sid, str) or not sid:
            raise CodecError("sync body.sync_id: expected a non-empty string")
        return SyncBatch(sender, counter, reset, complete, sid,
                         tuple(Item.from_json(i, limits) for i in d["items"]))
    if method == "POST" and len(parts) == 3 and parts[:2] == ["heartbeat", "node"]:
        _path_id(parts[2], sender)
        d = _doc(body, doc) or {}
        if not isinstance(d, dict):
            raise CodecError("heartbeat body: expected a JSON object")
        st = d.get("state", "active")
        if st not in STATES:
            raise CodecError(f"heartbeat body.state: {st!r} is not one of {STATES}")
        owed = d.get("sync_owed", False)
        if not isinstance(owed, bool):
            raise CodecError("heartbeat body.sync_owed: expected a boolean")
        hc = d.get("counter")
        if hc is not None and (type(hc) is not int or not 0 <= hc <= U64_MAX):
            raise CodecError(f"heartbeat body.counter: expected an integer 0..{U64_MAX}")
        return Heartbeat(sender, st, _ids(d, "members"), owed, hc)
    if method == "POST" and len(parts) == 3 and parts[0] == "node" \
            and parts[2] in ("active", "inactive"):
        _path_id(parts[1], sender)
        return NodeNotice(sender, parts[2] == "active")
    if method in ("PUT", "POST") and len(parts) == 3 and parts[:2] == ["sync", "node"]:
        _path_id(parts[2], sender)
        d = decode_json(body) if body else {}
        after = d.get("after") if isinstance(d, dict) else None
        sid = d.get("sync_id") if isinstance(d, dict) else None
        if not isinstance(d, dict) or not (after is None or isinstance(after, str)
                                           and 0 < len(after) <= MAX_KEY) \
                or not (sid is None or isinstance(sid, str) and 0 < len(sid) <= MAX_SYNC_ID):
            raise CodecError('sync request body: expected nothing or {"after": key, '
                             f'"sync_id": id}} (a key of 1 to {MAX_KEY} chars, an id of 1 to '
                             f"{MAX_SYNC_ID})")
        return SyncRequest(sender, after, sid, _summary(d.get("have"), after))
    raise CodecError(f"no DRiP endpoint {method} {path}", status=404)


class _Headers(dict[str, str]):
    """A batch item's headers, looked up case-insensitively like HTTP's."""

    def get(self, k: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(k.lower(), default)


def _item_headers(it: Any) -> _Headers | None:
    """A batch item's headers with lowered names, or None when the item is not ``{method,
    path, headers: {str: str}, ...}``: checked and lowered in one pass (a check pass and a
    lowering pass cost twice the CPU, ~1.3 us an item)."""
    if not isinstance(it, dict) or not isinstance(it.get("method"), str) \
            or not isinstance(it.get("path"), str) or not isinstance(it.get("headers"), dict):
        return None
    h = _Headers()
    for k, v in it["headers"].items():
        if not (isinstance(k, str) and isinstance(v, str)):
            return None
        h[k.lower()] = v
    return h


def _is_batch_path(path: str) -> bool:
    """Whether ``path``'s only non-empty segment is ``batch`` (``decode`` routes it to
    `Batch`): slashes around it, and nothing else."""
    return path.strip("/") == "batch"


def _decode_batch(sender: str, d: Any, limits: Limits) -> Batch:
    if not isinstance(d, dict) or not isinstance(d.get("items"), list) or not d["items"]:
        raise CodecError("batch body: expected {items: [{method, path, headers, body, auth?}]}")
    if len(d["items"]) > MAX_BATCH:
        raise CodecError(f"batch of {len(d['items'])} items: at most {MAX_BATCH}; send the "
                         "rest in another batch")
    out: list[Message] = []
    for i, it in enumerate(d["items"]):
        h = _item_headers(it)
        if h is None:
            raise CodecError(f"batch item {i}: expected {{method, path, headers: {{str: str}}, "
                             "body, auth?}")
        auth = it.get("auth")
        if auth is not None and not isinstance(auth, str):
            raise CodecError(f"batch item {i}.auth: expected a JWT string")
        if _is_batch_path(it["path"]):  # no nesting, no recursion
            raise CodecError(f"batch item {i}: Batch cannot be batched; send it alone")
        try:
            m = decode(it["method"], it["path"], h, b"", auth, limits, doc=it.get("body"))
        except CodecError as e:
            raise CodecError(f"batch item {i}: {e}", e.status) from e
        if not isinstance(m, BATCHED):
            raise CodecError(f"batch item {i}: {type(m).__name__} cannot be batched; "
                             "send it alone")
        out.append(m)
    return Batch(sender, tuple(out))
