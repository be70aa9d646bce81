"""Garlic Farm's hostile messages: its own wire messages with extreme field values, unknown or
forged senders, a replay and cut or garbage bytes, for the simulator's ``hostile`` step
(harness/sim/gf_search.py) and the real ``hostile`` fault (hostile_driver.py sends them).

Each is ``(kind, link, data)``: ``link`` says how it reaches the target, ``("request", sid)``
on a replication link from server ``sid`` (what the target's core sees as an `Inbound`
request), ``("response", sid)`` as an answer from ``sid``. Real links are TLS and the Digest
handshake (``options.tls``, on by default), so only a member's credentials, or a cluster run
with ``tls: false``, carry these into a server: the extreme-value kinds model a faulty or
compromised member's bytes, not a stranger's (the real fault sends the OUTSIDER kinds without
credentials as well, and the server must refuse those at the door). Forged acceptances at the current term (a vote
granted, an append acknowledged) are not sent: Raft tolerates crashes, not lies, and such a
message is indistinguishable from a member's true answer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from nodes.garlicfarm import codec as c
from nodes.garlicfarm.codec import MsgType, Request, Response

MAX_U64 = 2**64 - 1
#: a server id no configuration holds
STRANGER = 0xDEAD
#: what each kind is, by the group ``a % 3`` of the hostile step picks: 1 what any sender can
#: make (cut or garbage bytes, unknown sender ids); 2 extreme values on a member's link
OUTSIDER = frozenset({"truncated", "garbage", "stranger-vote", "stranger-append"})
Hostile = tuple[str, tuple[str, int], bytes]


def messages(rng: random.Random, target: int, members: Sequence[int]) -> Iterator[Hostile]:
    """One burst at server ``target``, forged from a random other member of ``members``."""
    via = rng.choice([m for m in members if m != target] or [target + 1])

    def req(kind: str, r: Request, sid: int = via) -> Hostile:
        return (kind, ("request", sid), c.encode(r))

    vote = Request(MsgType.REQUEST_VOTE_REQUEST, via, target, MAX_U64, MAX_U64, MAX_U64)
    yield req("vote-max-term", vote)
    yield req("replay", vote)
    yield req("append-max-term", Request(MsgType.APPEND_ENTRIES_REQUEST, via, target, MAX_U64,
                                         MAX_U64, MAX_U64, MAX_U64))
    yield req("append-stale-huge-commit", Request(MsgType.APPEND_ENTRIES_REQUEST, via, target,
                                                  0, 0, 0, MAX_U64))
    yield req("vote-random-term", Request(MsgType.REQUEST_VOTE_REQUEST, via, target,
                                          rng.randrange(2**32, MAX_U64), 0, 0))
    yield ("response-stale-max-next", ("response", via), c.encode(Response(
        MsgType.APPEND_ENTRIES_RESPONSE, via, target, 0, MAX_U64, True)))
    yield req("stranger-vote", Request(MsgType.REQUEST_VOTE_REQUEST, STRANGER, target, 1), via)
    yield req("stranger-append", Request(MsgType.APPEND_ENTRIES_REQUEST, STRANGER, target, 1),
              via)
    whole = c.encode(Request(MsgType.APPEND_ENTRIES_REQUEST, via, target, 1, 0, 0, 0))
    yield ("truncated", ("request", via), whole[:rng.randrange(1, len(whole))])
    yield ("garbage", ("request", via), rng.randbytes(rng.randrange(1, 120)))
