"""Hand-made Garlic Farm observations for the checker tests (docs/contracts.md section 4)."""

from __future__ import annotations

import hashlib
from typing import Any


def digest(index: int, term: int, payload: str = "") -> str:
    """A stand-in for the node's digest: same (index, term, payload) -> same digest."""
    return hashlib.sha256(f"{index}:{term}:{payload}".encode()).hexdigest()[:16]


def entry(index: int, term: int, payload: str = "", data: Any = None,
          kind: str = "app") -> dict[str, Any]:
    return {"index": index, "term": term, "kind": kind, "digest": digest(index, term, payload),
            "data": data}


def append_entry(index: int, term: int, v: str) -> dict[str, Any]:
    return entry(index, term, v, {"op": "append", "v": v})


def state(num_id: int, log: list[dict[str, Any]], commit_index: int | None = None,
          term: int | None = None, role: str = "follower", snapshot: tuple[int, int] = (0, 0),
          voted_for: int | None = None, metals: dict[str, Any] | None = None) -> dict[str, Any]:
    last = max((e["index"] for e in log), default=snapshot[0])
    return {"id": f"n{num_id}", "num_id": num_id, "role": role,
            "term": term if term is not None else max((e["term"] for e in log), default=1),
            "voted_for": voted_for, "leader": None,
            "commit_index": last if commit_index is None else commit_index,
            "last_applied": last if commit_index is None else commit_index,
            "snapshot": {"last_index": snapshot[0], "last_term": snapshot[1]},
            "log": [dict(e) for e in log], "servers": [1, 2, 3], "kv": {},
            "metals": metals, "bugs": []}


def node(events: list[dict[str, Any]], st: dict[str, Any] | None,
         missing: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Number the events (seq, t) as a node's journal would."""
    evs = [{"seq": i, "t": 1000.0 + i, **e} for i, e in enumerate(events)]
    return {"events": evs, "state": st, "missing": missing or []}


def ev(type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, **fields}


def commits_and_applies(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in log:
        out.append(ev("commit", index=e["index"], term=e["term"], digest=e["digest"]))
        out.append(ev("apply", index=e["index"], term=e["term"], digest=e["digest"],
                      kind=e["kind"], data=e["data"]))
    return out


def healthy_cluster(n: int = 3, length: int = 5) -> dict[str, Any]:
    """n nodes, one leader per term, identical committed logs: every check passes."""
    log = [entry(i, 1 if i < 3 else 2, f"x{i}") for i in range(1, length + 1)]
    nodes = {}
    for k in range(1, n + 1):
        role_events = [ev("start", term=0, voted_for=None, last_index=0),
                       ev("role", role="follower", term=1, leader=None)]
        if k == 1:
            role_events += [ev("role", role="candidate", term=1, leader=None),
                            ev("role", role="leader", term=1, leader=1),
                            ev("leader-log", term=1, last_index=0, snapshot_index=0, runs=[])]
        else:
            role_events += [ev("vote", term=1, candidate=1, granted=True)]
        if k == 2:
            role_events += [ev("role", role="candidate", term=2, leader=None),
                            ev("role", role="leader", term=2, leader=2),
                            ev("leader-log", term=2, last_index=2, snapshot_index=0,
                               runs=[[1, 1]])]
        else:
            role_events += [ev("vote", term=2, candidate=2, granted=True),
                            ev("role", role="follower", term=2, leader=2)]
        nodes[f"n{k}"] = node(role_events + commits_and_applies(log),
                              state(k, log, term=2, role="leader" if k == 2 else "follower",
                                    voted_for=2,
                                    metals={"publisher": 3, "as_of_index": length}))
    return {"nodes": nodes}
