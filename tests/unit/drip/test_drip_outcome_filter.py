"""`DripCore.acts_on`: the runtime drops a peer's answer that the core would do nothing with
(no core pass for it), so the predicate must never say no where `_outcome` acts."""

from __future__ import annotations

import itertools
from typing import Any

from nodes.drip import codec
from nodes.drip.codec import Update
from nodes.drip.core import CoreConfig, DripCore, Inbound, Outcome

VOTING = codec.Voting("n1", 6, False, Update("u1", "k", 1))
REQUESTS: list[Any] = [
    VOTING,
    codec.VoteResponse("n2", True, None, None, None),
    codec.Abort("n2", 7, False, "u1", "k"),
    codec.SyncRequest("n2"),
    codec.Commit("n1", 6, False, Update("u1", "k", 1), 1),
    codec.Heartbeat("n2", "active"),
]
ANSWERS: list[tuple[int, Any]] = [(200, {}), (200, {"ok": True}), (200, {"duplicate": True}),
                                  (200, {"duplicate": False}), (200, None), (0, "reset"),
                                  (409, {"error": "no"}), (503, {"error": "inactive"})]


def _relay() -> DripCore:
    """n2 between n1 and n3, with n1's voting taken and forwarded to n3 (its round open)."""
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig())
    c.start(0)
    c.on_message(Inbound("n1", 1), VOTING, 0)
    return c


def test_an_outcome_the_filter_drops_is_one_the_core_does_nothing_with() -> None:
    dropped = 0
    for req, (status, body) in itertools.product(REQUESTS, ANSWERS):
        o = Outcome(req, status, body)
        if DripCore.acts_on(o):
            continue
        dropped += 1
        assert _relay().on_message("n3", o, 1) == [], (req, status, body)
    assert dropped >= 10  # the filter drops something: else the test would prove nothing


def test_what_the_core_acts_on_is_kept() -> None:
    keep = [Outcome(VOTING, 200, {"duplicate": True}), Outcome(VOTING, 0, "reset"),
            Outcome(VOTING, 409, {"error": "no"}), Outcome(REQUESTS[4], 200, {}),
            Outcome(REQUESTS[4], 0, "reset"), Outcome(codec.SyncRequest("n2"), 503, {})]
    assert all(DripCore.acts_on(o) for o in keep)
    assert _relay().on_message("n3", keep[0], 1) != []  # n3 had it: n2's round moves on
