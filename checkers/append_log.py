"""The raw-wire append workload: acknowledged appends are durable, unique and in order.

Clients send ``f: "append"`` ops with a unique string; the leader commits an app entry whose
payload is ``{"op": "append", "v": s}`` and may report its index (docs/contracts.md section 1).
The checker reads the final committed log (the node with the highest ``commit_index``, its
compacted prefix recovered from apply events where the journals allow) and proves:

- every ``ok`` append is in it exactly once (``lost-append``, ``duplicate-append``);
- no value appears twice, and none appears that no client sent (``phantom-append``);
- ``fail`` appends are not in it (``failed-append-present``); ``info`` appends may or may not;
- real time is respected: an append that completed ``ok`` before another was invoked sits at a
  lower index (``realtime-reorder``);
- an index the leader reported holds that value (``wrong-index``).

An acknowledged append the evidence cannot place (compacted out of reach, only in an uncommitted
tail, a node's state missing) is counted ``unknown``, never passed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.observations import (
    FinalLog,
    LogEntry,
    events_of,
    evidence_gaps,
    final_logs,
    verdict,
)
from checkers.result import Anomaly, Result
from vocabulary.faults import is_nemesis
from vocabulary.history import pairs

NAME = "append-log"


@dataclass
class AppendOp:
    """One client append: its invocation and how it ended (``info`` if it never did)."""

    value: str
    process: Any
    node: str | None
    invoke_index: int | None
    invoke_time: int
    outcome: str = "info"
    complete_index: int | None = None
    complete_time: int | None = None
    reported_index: int | None = None

    def brief(self) -> dict[str, Any]:
        return {"value": self.value, "type": self.outcome, "process": self.process,
                "node": self.node, "invoke": {"index": self.invoke_index, "time": self.invoke_time},
                "complete": {"index": self.complete_index, "time": self.complete_time},
                "reported_index": self.reported_index}


def append_ops(history: list[dict[str, Any]]) -> list[AppendOp]:
    """Pair each append invocation with its process's next completion."""
    ops: list[AppendOp] = []
    for p in pairs(history):
        op = p.invoke
        if op.get("f") != "append" or is_nemesis(op):
            continue
        rec = AppendOp(str(op.get("value")), op.get("process"), op.get("node"),
                       op.get("index", p.at), int(op.get("time") or 0))
        ops.append(rec)
        if p.complete is not None:
            done = p.complete
            rec.outcome = done["type"]
            rec.complete_index = done.get("index", p.done_at)
            rec.complete_time = int(done.get("time") or 0)
            if done["type"] == "ok":
                rec.reported_index = _reported_index(done.get("value"))
    return ops


def _reported_index(value: Any) -> int | None:
    if isinstance(value, dict) and isinstance(value.get("index"), int):
        return value["index"]
    return None


def append_value(entry: LogEntry) -> str | None:
    """The appended string an entry carries, or None for any other entry."""
    if entry.kind not in (None, "app"):
        return None
    data = entry.data
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    if isinstance(data, dict) and data.get("op") == "append" and "v" in data:
        return str(data["v"])
    return None


# --------------------------------------------------------------------------- the committed view


@dataclass
class CommittedView:
    """What the final committed log says, index by index, and where it is blind."""

    node: str | None = None
    commit_index: int = 0
    #: how many nodes left a final log to read
    nodes: int = 0
    #: index -> appended value, or None for a non-append entry
    entries: dict[int, str | None] = field(default_factory=dict)
    #: committed indexes whose entry no evidence recovers (compacted, no apply event)
    dark: set[int] = field(default_factory=set)
    #: value -> [(node, index)] in any node's log outside this committed view
    elsewhere: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def positions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = defaultdict(list)
        for index, v in sorted(self.entries.items()):
            if v is not None:
                out[v].append(index)
        return out


def committed_view(observations: dict[str, Any]) -> CommittedView:
    """The committed log of the most advanced node (ties: the longer log)."""
    logs = final_logs(observations)
    if not logs:
        return CommittedView()
    top = max(logs.values(), key=lambda log: (log.commit_index, log.last_index, log.node))
    view = CommittedView(top.node, top.commit_index, len(logs))
    recovered = _recover_from_applies(observations)
    for index in range(1, top.commit_index + 1):
        entry = top.entries.get(index) or recovered.get(index)
        if entry is None:
            view.dark.add(index)
        else:
            view.entries[index] = append_value(entry)
    view.elsewhere = _elsewhere(logs, top)
    return view


def _recover_from_applies(observations: dict[str, Any]) -> dict[int, LogEntry]:
    """Entries the journals applied, where every node that applied an index agrees on it."""
    applies, _ = events_of(observations, "apply", ("index", "digest"))
    by_index: dict[int, dict[str, LogEntry]] = defaultdict(dict)
    for _, _, ev in applies:
        index = int(ev["index"])
        by_index[index][ev["digest"]] = LogEntry(index, int(ev.get("term") or 0), ev["digest"],
                                                 ev.get("kind"), ev.get("data"))
    return {i: next(iter(d.values())) for i, d in by_index.items() if len(d) == 1}


def _elsewhere(logs: dict[str, FinalLog], top: FinalLog) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for node, log in logs.items():
        for index, entry in log.entries.items():
            if node == top.node and index <= top.commit_index:
                continue
            v = append_value(entry)
            if v is not None:
                out[v].append((node, index))
    return out


# --------------------------------------------------------------------------- the checker


def check(test: dict[str, Any], history: list[dict[str, Any]],
                   observations: dict[str, Any]) -> Result:
    """Acknowledged appends are in the final committed log once, in real-time order."""
    ops = append_ops(history)
    view = committed_view(observations)
    positions = view.positions()
    state_gaps = evidence_gaps(observations, state=True)
    tally: dict[str, int] = defaultdict(int)
    anomalies: list[Anomaly] = []
    for op in ops:
        anomalies += _judge(op, view, positions, bool(state_gaps), tally)
    anomalies += _duplicates(positions, ops)
    anomalies += _phantoms(positions, ops)
    anomalies += _reorders(ops, positions)
    gaps = state_gaps if tally["unknown"] or view.node is None else []
    stats = {"appends": len(ops), **{k: tally[k] for k in
             ("acknowledged", "found", "lost", "unknown", "failed", "info", "info_found")},
             "duplicated": sum(1 for idx in positions.values() if len(idx) > 1),
             "view_node": view.node, "view_commit_index": view.commit_index,
             "committed_appends": sum(len(idx) for idx in positions.values()),
             "dark_indexes": len(view.dark)}
    note = (f"{tally['unknown']} acknowledged appends could not be placed"
            if tally["unknown"] else "")
    if view.node is None:
        note = "no node's final state: nothing to check the appends against"
    examined = {"appends": len(ops), "acknowledged": tally["acknowledged"],
                "nodes_with_log": view.nodes, "committed_entries": len(view.entries)}
    return verdict(NAME, anomalies, stats, gaps, note, examined=examined,
                   needs=("acknowledged", "committed_entries"))


def _judge(op: AppendOp, view: CommittedView, positions: dict[str, list[int]],
           state_missing: bool, tally: dict[str, int]) -> list[Anomaly]:
    """Classify one op into the tally; anomalies for what its outcome forbids."""
    where = positions.get(op.value, [])
    if op.outcome == "fail":
        tally["failed"] += 1
        return [_failed_present(op, where)] if where else []
    if op.outcome == "info":
        tally["info"] += 1
        tally["info_found"] += bool(where)
        return []
    tally["acknowledged"] += 1
    if where:
        tally["found"] += 1
        return _wrong_index(op, where, view)
    if op.value in view.elsewhere or view.dark or state_missing or view.node is None:
        tally["unknown"] += 1
        return []
    tally["lost"] += 1
    return [_lost(op, view)]


def _failed_present(op: AppendOp, where: list[int]) -> Anomaly:
    return Anomaly("failed-append-present",
                   f"append {op.value!r} failed but is committed at index {where[0]}",
                   {"op": op.brief(), "indexes": where})


def _wrong_index(op: AppendOp, where: list[int], view: CommittedView) -> list[Anomaly]:
    r = op.reported_index
    if r is None or r in where:
        return []
    at = "(compacted, unknown)" if r in view.dark else view.entries.get(r, "(beyond the log)")
    return [Anomaly("wrong-index",
                    f"append {op.value!r} was acknowledged at index {r} but sits at {where}",
                    {"op": op.brief(), "reported_index": r, "actual_indexes": where,
                     "at_reported_index": at, "view_node": view.node})]


def _lost(op: AppendOp, view: CommittedView) -> Anomaly:
    r = op.reported_index
    witness: dict[str, Any] = {"op": op.brief(), "view_node": view.node,
                               "view_commit_index": view.commit_index}
    if r is not None:
        witness["at_reported_index"] = view.entries.get(r, "(beyond the committed log)")
    return Anomaly("lost-append",
                   f"append {op.value!r} was acknowledged (process {op.process}, via "
                   f"{op.node}) but is in no node's log; {view.node} has committed up to "
                   f"{view.commit_index}", witness)


def _duplicates(positions: dict[str, list[int]], ops: list[AppendOp]) -> list[Anomaly]:
    by_value = {op.value: op for op in ops}
    return [Anomaly("duplicate-append", f"{v!r} is committed {len(idx)} times, at {idx}",
                    {"value": v, "indexes": idx,
                     "op": by_value[v].brief() if v in by_value else None})
            for v, idx in positions.items() if len(idx) > 1]


def _phantoms(positions: dict[str, list[int]], ops: list[AppendOp]) -> list[Anomaly]:
    sent = {op.value for op in ops}
    return [Anomaly("phantom-append", f"{v!r} is committed at {idx} but no client appended it",
                    {"value": v, "indexes": idx})
            for v, idx in positions.items() if v not in sent]


def _reorders(ops: list[AppendOp], positions: dict[str, list[int]]) -> list[Anomaly]:
    """A committed append invoked after an ok append completed must sit after it.

    Sweep: ok ops by completion time, later ops by invocation time; keep the highest-index ok
    op completed so far and compare. One anomaly per out-of-order later op, naming the earlier
    op that proves it.
    """
    placed = [(op, positions[op.value][0]) for op in ops if positions.get(op.value)]
    done = sorted(((op, i) for op, i in placed
                   if op.outcome == "ok" and op.complete_time is not None),
                  key=lambda p: p[0].complete_time or 0)
    out: list[Anomaly] = []
    best: tuple[AppendOp, int] | None = None
    k = 0
    for op, index in sorted(placed, key=lambda p: p[0].invoke_time):
        while k < len(done) and (done[k][0].complete_time or 0) < op.invoke_time:
            if best is None or done[k][1] > best[1]:
                best = done[k]
            k += 1
        if best is not None and best[1] > index:
            before, bi = best
            out.append(Anomaly(
                "realtime-reorder",
                f"{before.value!r} completed before {op.value!r} was invoked, yet sits at "
                f"index {bi} > {index}",
                {"earlier": before.brief(), "earlier_index": bi,
                 "later": op.brief(), "later_index": index}))
    return out
