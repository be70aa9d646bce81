"""One membership change an operator asks of a running cluster, retried as an operator tool
would: the attempts made, which member each went to, and the final outcome.

The cluster ops ``add-member`` and ``decommission`` (harness/cluster.py) go through a
member's ``POST /admin/members``. A change refused while a partition holds (409 aborted), at a
member that is not active (503) or without an outcome in time (504, a lost connection) is
tried again at another running member with backoff, until it commits or the run's time limit
is near. A 400 (the request itself is wrong) is never retried. Each attempt is its own
nemesis op in the history; test.json gets every change with its attempts
(``membership_changes``). Why retries are new ops and not a loop inside one: the nemesis is
one process, and a loop would hold back the very heal that lets the change commit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: the first retry waits this long; each next one twice as long, up to BACKOFF_MAX_S
BACKOFF_S = 0.5
BACKOFF_MAX_S = 4.0
#: an attempt is started only with this much of the run left (a vote takes up to its timer)
MIN_ATTEMPT_S = 2.5
#: how long one attempt may wait for its decision (the node answers within vote timeout + 5 s)
ATTEMPT_TIMEOUT_S = 15.0
#: answers worth another try: aborted (a member unreachable), not initiated, no outcome in time
RETRYABLE = frozenset({409, 503, 504})


@dataclass
class Attempt:
    """One ``POST /admin/members``: where, when (seconds since the cluster started), how it
    ended (``committed``, ``aborted``, ``unavailable``, ``unknown``, ``refused``, ``error``, or
    ``in-effect``: a member already shows the change, so it committed earlier)."""

    n: int
    via: str | None
    at_s: float
    outcome: str
    status: int | None = None
    error: str | None = None


@dataclass
class MemberChange:
    """The attempts of one change (``f`` is ``add-member`` or ``decommission``) of ``node``."""

    f: str
    node: str
    attempts: list[Attempt] = field(default_factory=list)
    #: ``committed``, ``refused`` (not retryable), ``gave-up`` (time limit), None while open
    outcome: str | None = None
    #: how the outcome was learned when no attempt's answer said it
    note: str | None = None

    @property
    def uid(self) -> str:
        """The update id of the next attempt: each try is a new update (a used id is
        refused), the first keeps the id earlier runs used."""
        base = f"{'add' if self.f == 'add-member' else 'decommission'}-{self.node}"
        return base if not self.attempts else f"{base}-{len(self.attempts) + 1}"

    def next_via(self, candidates: list[str]) -> str | None:
        """The member to ask next: one not asked yet if any, else the one asked longest ago
        (so a retry goes to another member than the last whenever there is one)."""
        if not candidates:
            return None
        last = {a.via: a.n for a in self.attempts}
        return min(candidates, key=lambda c: (last.get(c, 0), candidates.index(c)))

    def record(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        if attempt.outcome in ("committed", "in-effect"):
            self.outcome = "committed"
        elif not retryable(attempt):
            self.outcome = "refused"

    def retry_in(self, now_s: float, deadline_s: float) -> float | None:
        """Seconds to wait before the next attempt, or None (done, or no time left: then the
        outcome becomes ``gave-up``)."""
        if self.outcome is not None:
            return None
        wait = min(BACKOFF_S * 2 ** (len(self.attempts) - 1), BACKOFF_MAX_S)
        if now_s + wait + MIN_ATTEMPT_S > deadline_s:
            self.outcome = "gave-up"
            return None
        return wait

    def close(self) -> None:
        """The run ended with this change still open."""
        if self.outcome is None:
            self.outcome = "gave-up"

    def to_json(self) -> dict[str, Any]:
        out = {"f": self.f, "node": self.node, "outcome": self.outcome,
               "attempts": [asdict(a) for a in self.attempts]}
        return out if self.note is None else {**out, "note": self.note}


def outcome_of(status: int | None) -> str:
    """An attempt's outcome from the HTTP status it got (None: no answer at all)."""
    return {200: "committed", 409: "aborted", 503: "unavailable", 504: "unknown",
            None: "error"}.get(status, "refused")


def retryable(attempt: Attempt) -> bool:
    return attempt.status is None or attempt.status in RETRYABLE


def in_effect(f: str, node: str, members: list[str] | None) -> bool:
    """Whether a member's agreed membership already shows the change."""
    if members is None:
        return False
    return (node in members) if f == "add-member" else (node not in members)
