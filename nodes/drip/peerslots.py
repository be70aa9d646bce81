"""How many connections a node opens to each peer, and how many outcome questions it has on
their way to one peer at once.

Why (issue 26, session 44): aiohttp opens one connection per concurrent request and keeps it
in its pool until it has been idle ``keepalive_timeout`` (15 s); its ``limit`` counts only the
connections in use, so the pool keeps each peer's high-water mark. Outcome questions are sent
one request per lock and peer (`DripCore._ask_outcome`), all at once when a peer comes back
(`_reask`): after a long attack had left ~100 locks no one can end, each return of a peer
opened ~100 TLS connections to it, each holding ~128-256 KiB of TLS buffers. The hostile
bench's nodes ended with 128-192 idle connections each (+90-130 MiB RSS, never given back).
So the pool is capped per peer (`PEER_CONNS`: excess requests wait for a connection), and the
outcome questions to one peer take at most `OUTCOME_PER_PEER` of them, so heartbeats and
sync requests do not queue behind a burst of questions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

#: connections to one peer at most (aiohttp ``limit_per_host``): the vote path uses one
#: (``peer_pipeline``), heartbeats, sync and outcome questions the rest
PEER_CONNS = 16
#: outcome questions on their way to one peer at once; the rest wait their turn
OUTCOME_PER_PEER = 4


@dataclass
class PeerSlots:
    """One semaphore per peer (peers are configured or agreed members: a bounded set)."""

    per_peer: int = OUTCOME_PER_PEER
    _sems: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def slot(self, peer: str) -> asyncio.Semaphore:
        sem = self._sems.get(peer)
        if sem is None:
            sem = self._sems[peer] = asyncio.Semaphore(self.per_peer)
        return sem
