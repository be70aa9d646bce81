"""The applications over the committed Raft log: the KV store and the Meta LeaseSet.

Every committed entry is applied here, in index order, and journaled (``commit``, ``apply``
and, for a configuration, ``config``): the events the Raft checkers read. Application
entries are JSON; a KV op (``{"kv": ...}``) goes to `KVStateMachine`, a Meta LS status to
`MetaLS`. Deterministic, so every server computes the same state at the same index, and a
snapshot (``snapshot``/``restore``) carries both.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nodes.common.effects import Emit, node_error
from nodes.garlicfarm import metals
from nodes.garlicfarm.codec import CodecError, LogEntry, ValueType, decode_config
from nodes.garlicfarm.kv import KVStateMachine


def digest(e: LogEntry) -> str:
    """A short fingerprint of an entry: two nodes agree on an index iff their digests do."""
    return hashlib.sha256(e.term.to_bytes(8, "big") + bytes([int(e.vtype)]) + e.value).hexdigest()[:16]


def entry_view(e: LogEntry) -> tuple[str, Any]:
    """(kind, data) as the journal and /admin/state show an entry."""
    if e.vtype == ValueType.APPLICATION:
        try:
            return "app", json.loads(e.value)
        except ValueError:
            return "app", None
    if e.vtype == ValueType.CONFIGURATION:
        try:
            return "config", {"servers": decode_config(e.value).ids()}
        except CodecError:
            return "config", None
    return ValueType(e.vtype).name.lower(), None


class Apps:
    def __init__(self) -> None:
        self.kv = KVStateMachine()
        self.metals = metals.MetaLS()

    def apply(self, index: int, e: LogEntry) -> list[Emit]:
        kind, data = entry_view(e)
        d = digest(e)
        out = [Emit("commit", {"index": index, "term": e.term, "digest": d}),
               Emit("apply", {"index": index, "term": e.term, "digest": d, "kind": kind,
                              "data": data})]
        if kind == "config" and data is not None:
            out.append(Emit("config", {"index": index, "servers": data["servers"]}))
        elif isinstance(data, dict):
            if "kv" in data:
                self.kv.apply(data)
            elif metals.is_status(data):
                try:
                    self.metals.apply(index, data)
                except (KeyError, ValueError, TypeError) as err:  # metals-agreement reads this
                    out.append(node_error(f"Meta LS status at index {index} not applied", err,
                                          evidence=True))
        return out

    def snapshot(self) -> bytes:
        return json.dumps({"kv": self.kv.snapshot(), "metals": self.metals.snapshot()}).encode()

    def restore(self, data: bytes) -> list[Emit]:
        try:
            d = json.loads(data)
            self.kv.restore(d.get("kv", {}))
            self.metals.restore(d.get("metals", {}))
        except (ValueError, AttributeError, TypeError) as err:
            return [node_error("application snapshot unreadable", err, evidence=True)]
        return []
