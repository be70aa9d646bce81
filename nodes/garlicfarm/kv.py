"""The key-value application over the Raft log (the linearizability workload's target).

Log value (UTF-8 JSON): ``{"kv": "read"|"write"|"cas", "key": k, "value": v, "old": o,
"new": n, "rid": "<unique request id>"}``. Every op, reads included, goes through the log;
``apply`` is deterministic, so every node computes the same result for a ``rid`` and any
node can answer the client once it has applied the op's index.

Results: ``{"type": "ok", "value": v}`` (read -> current value or null; write/cas -> null)
or ``{"type": "fail", "error": "cas-mismatch", "value": current}``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: results kept per rid, oldest dropped first. The core reads a result right after the step
#: that applied its entry (core._answer_applied), so the newest results of one step's batch are
#: all it needs; a batch is at most one AppendEntries (256 entries) or a restart's catch-up of
#: a compacted log. 20,000 (~7 MB of dicts and rid strings) took a 30-client run ten minutes
#: to fill, which a soak saw as steady growth; 2,000 hold ~0.75 MB.
MAX_RESULTS = 2_000


class KVStateMachine:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.results: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def apply(self, op: dict[str, Any]) -> dict[str, Any]:
        f = op.get("kv")
        key = str(op.get("key"))
        if f == "read":
            res: dict[str, Any] = {"type": "ok", "value": self.data.get(key)}
        elif f == "write":
            self.data[key] = op.get("value")
            res = {"type": "ok", "value": None}
        elif f == "cas":
            cur = self.data.get(key)
            if cur == op.get("old"):
                self.data[key] = op.get("new")
                res = {"type": "ok", "value": None}
            else:
                res = {"type": "fail", "error": "cas-mismatch", "value": cur}
        else:
            res = {"type": "fail", "error": f"unknown kv op {f!r}"}
        rid = op.get("rid")
        if isinstance(rid, str):
            self.results[rid] = res
            while len(self.results) > MAX_RESULTS:
                self.results.popitem(last=False)
        return res

    def snapshot(self) -> dict[str, Any]:
        recent = list(self.results.items())[-1000:]
        return {"data": self.data, "results": recent}

    def restore(self, snap: dict[str, Any]) -> None:
        self.data = dict(snap.get("data", {}))
        self.results = OrderedDict((k, v) for k, v in snap.get("results", []))
