"""DRiP decisions that died with their initiator before they were durable, for the checkers.

A node journals ``decide`` (commit) and ``apply`` for its own update in the pass that makes the
decision; the records follow in the group commit, and nothing of the decision leaves the node
before that fsync (nodes/drip/server.py). Killed in between, the node restarts with the update
still locked by itself and releases it as never committed (``release`` with ``why: restart``,
nodes/drip/core.py ``start``). That decision was never made as far as the mesh is concerned:
its client got no answer, no other node applied it, the other voters' locks expire. Judging
those two journal lines as a commit gives a false ``missing-commit``/``lost-after-apply`` and a
liveness ``no-progress`` (chaos seed 4, line5 kills during the commit phase).
"""

from __future__ import annotations

from typing import Any


def drop_undone(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One node's journal without the commit ``decide`` and the ``apply`` of each update that
    the node released on restart afterwards (its decision was never durable)."""
    pending: dict[str, list[int]] = {}
    dropped: set[int] = set()
    for i, e in enumerate(events):
        t, uid = e.get("type"), e.get("uid")
        if (t == "decide" and e.get("outcome") == "commit") or t == "apply":
            pending.setdefault(str(uid), []).append(i)
        elif t == "release" and e.get("why") == "restart":
            # the lock outlived the restart, so no commit record of uid was ever durable here
            dropped.update(pending.pop(str(uid), []))
    return [e for i, e in enumerate(events) if i not in dropped] if dropped else events
