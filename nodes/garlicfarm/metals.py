"""The Meta LeaseSet application (proposal 150, "Application Layer").

Each server periodically posts its status as an Application entry (UTF-8 JSON):
``{"cluster", "date" (ms since epoch), "id" (Raft id), "config": {...},
"meta": {"destination", "lastPublishedLS"?, "lastPublishedTime", "publishConfig":
"off"|"on"|"auto", "publishing": bool}, "router": {"uptime", "lastPublishedRI"?, ...},
"destinations": [...]}``.

Best-publisher rule (deterministic over the committed log, so every server agrees at the
same index): take each server's latest status; drop ``publishConfig == "off"`` and statuses
older than ``WINDOW_MS`` before the newest ``date`` in that set (log dates only, never the
local clock); rank ``publishConfig "on"`` over ``"auto"``, then longer ``router.uptime``,
then the lower id. The publisher is NOT necessarily the Raft leader.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

WINDOW_MS = 30_000


def is_status(d: Any) -> bool:
    return isinstance(d, dict) and {"cluster", "date", "id"} <= d.keys() and "kv" not in d


def make_status(cluster: str, sid: int, date_ms: int, uptime_ms: int, publishing: bool,
                publish_config: str = "auto") -> dict[str, Any]:
    dest = base64.b64encode(hashlib.sha256(f"{cluster}-metals".encode()).digest()).decode()
    return {
        "cluster": cluster, "date": date_ms, "id": sid, "config": {},
        "meta": {"destination": dest, "lastPublishedTime": 0, "publishConfig": publish_config,
                 "publishing": publishing},
        "router": {"uptime": uptime_ms},
        "destinations": [],
    }


def best_publisher(statuses: dict[int, dict[str, Any]]) -> int | None:
    cands = [s for s in statuses.values() if (s.get("meta") or {}).get("publishConfig", "auto") != "off"]
    if not cands:
        return None
    newest = max(int(s.get("date", 0)) for s in cands)
    fresh = [s for s in cands if newest - int(s.get("date", 0)) <= WINDOW_MS]

    def rank(s: dict[str, Any]) -> tuple:
        on = (s.get("meta") or {}).get("publishConfig") == "on"
        up = int((s.get("router") or {}).get("uptime", 0))
        return (0 if on else 1, -up, int(s["id"]))

    return int(min(fresh, key=rank)["id"])


class MetaLS:
    def __init__(self) -> None:
        self.statuses: dict[int, dict[str, Any]] = {}
        self.publisher: int | None = None
        self.as_of_index = 0

    def apply(self, index: int, status: dict[str, Any]) -> None:
        sid = int(status["id"])
        prev = self.statuses.get(sid)
        if prev is None or int(status.get("date", 0)) >= int(prev.get("date", 0)):
            self.statuses[sid] = status
        self.publisher = best_publisher(self.statuses)
        self.as_of_index = index

    def state(self) -> dict[str, Any]:
        return {"publisher": self.publisher, "as_of_index": self.as_of_index,
                "servers": sorted(self.statuses)}

    def snapshot(self) -> dict[str, Any]:
        return {"statuses": {str(k): v for k, v in self.statuses.items()}, "as_of_index": self.as_of_index}

    def restore(self, snap: dict[str, Any]) -> None:
        self.statuses = {int(k): v for k, v in snap.get("statuses", {}).items()}
        self.as_of_index = int(snap.get("as_of_index", 0))
        self.publisher = best_publisher(self.statuses)
