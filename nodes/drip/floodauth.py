"""Initiator tokens for the flooded messages a node starts (/voting, /commit, /abort), made
when the first copy of a message leaves rather than when it is queued.

Why (issue 23, session 51): every peer's queue holds a copy of each flooded message we start,
and a hop beyond checks its initiator token once per distinct token (its verified-token
cache). Signed when queued, each core pass made its own group token: ~1.45 per committed
update at 8 clients. A link sends one exchange at a time (``peer_pipeline``), so messages of
several passes often wait together; signed when the first of them leaves, every message of
ours still waiting then shares one group token (up to auth.MAX_GROUP): fewer signatures here
and fewer checks at every node beyond. A token is made before its message is sent, never
after, so no copy waits for a signature it would not have waited for before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nodes.drip.auth import MAX_GROUP


@dataclass(eq=False)
class Cell:
    """The token of one flooded message of ours (``digest``: its `codec.signed_digest`),
    shared by every queue that holds a copy."""

    digest: str
    auth: str | None = None


class FloodTokens:
    """The cells of our flooded messages not signed yet, signed together on demand."""

    def __init__(self, sign: Callable[[list[str]], str]) -> None:
        self._sign = sign  # digests -> one Authorization value (a group token) for them all
        self._waiting: list[Cell] = []

    def cell(self, digest: str) -> Cell:
        c = Cell(digest)
        self._waiting.append(c)
        return c

    def settle(self) -> None:
        """Sign every cell still waiting: one group token per auth.MAX_GROUP of them."""
        todo, self._waiting = self._waiting, []
        for at in range(0, len(todo), MAX_GROUP):
            part = todo[at:at + MAX_GROUP]
            tok = self._sign([c.digest for c in part])
            for c in part:
                c.auth = tok

    def waiting(self) -> int:
        return len(self._waiting)
