"""What a run's nodes left behind, as the ``observations`` the checkers read.

A run dir holds ``nodes/<node>/events.jsonl`` (the node's journal, docs/contracts.md section 3)
and ``nodes/<node>/state.json`` (its final ``GET /admin/state``, absent or ``null`` when the
node could not be reached), and ``nodes/<node>/gone.json`` for a node the nemesis killed for
good (left down through the final heal). :func:`load_observations` turns that into::

    {"nodes": {"n1": {"events": [...], "state": {...} | None, "missing": [Gap, ...],
                      "gone": True (only for a node killed for good)}},
     "run_dir": "/path"}

A node gone for good has no final state by design: that is no gap, and the checks judge the
surviving nodes (its journal, up to its kill, is still read).

Damaged or absent evidence is *recorded*, never dropped silently: every gap becomes a
``missing`` entry ``{"what": "state" | "journal" | "event", "type": <event type or None>,
"detail": str}``, and :func:`evidence_gaps` lets a checker ask whether the evidence it depends
on is whole. A checker that found no violation but had gaps answers ``"unknown"``
(:func:`verdict`). Observations built in memory may omit ``missing``; a ``None`` state still
counts as a gap.

The accessors below (journal events by type, final logs) are shared by ``checkers.raft`` and
``checkers.append_log`` so that both read the contract the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.result import ANOMALY_LIMIT, cap, verdict  # noqa: F401  (re-exported)

JOURNAL_FILE = "events.jsonl"
STATE_FILE = "state.json"
GONE_FILE = "gone.json"
_TYPE_RE = re.compile(rb'"type"\s*:\s*"([A-Za-z_-]+)"')

Gap = dict[str, Any]
Event = dict[str, Any]


# --------------------------------------------------------------------------- loading


def load_observations(run_dir: str | Path, node_command: str | None = None) -> dict[str, Any]:
    """Read every node's journal and final state under ``run_dir/nodes``. ``node_command``:
    the run's ``--node-command`` (test.json), when the nodes were the user's implementation."""
    root = Path(run_dir)
    nodes_dir = root / "nodes"
    nodes: dict[str, Any] = {}
    if nodes_dir.is_dir():
        for d in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
            nodes[d.name] = load_node(d, node_command)
    return {"nodes": nodes, "run_dir": str(root)}


def load_node(node_dir: Path, node_command: str | None = None) -> dict[str, Any]:
    """One node's observation: its journal events, its final state and the gaps in both. A
    node started by ``node_command`` owes the harness no journal: a missing one says so, so an
    ``unknown`` names the cause rather than looking like a crash."""
    events, missing = read_journal(node_dir / JOURNAL_FILE)
    if node_command:
        for gap in missing:
            if gap["what"] == "journal":
                gap["detail"] += (f": an implementation started by --node-command "
                                  f"({node_command}) that writes no journal cannot be judged "
                                  "by the checks that read one")
    state, state_gaps = read_state(node_dir / STATE_FILE)
    gone = (node_dir / GONE_FILE).is_file()
    return {"events": events, "state": state, **({"gone": True} if gone else {}),
            "missing": missing + reported_gaps(events) + ([] if gone else state_gaps)}


def reported_gaps(events: list[Event]) -> list[Gap]:
    """Gaps the node itself reported (docs/contracts.md section 3): a torn journal tail it cut
    on restart (``journal-repaired``: the lost event's type when the fragment showed it), and
    an error that may have cost evidence (``node-error`` with ``evidence: true``)."""
    out: list[Gap] = []
    for ev in events:
        if ev.get("type") == "journal-repaired":
            out.append({"what": "event", "type": ev.get("fragment_type"),
                        "detail": f"the node cut a torn journal tail of {ev.get('bytes')} bytes "
                                  f"on restart (seq {ev.get('seq')})"})
        elif ev.get("type") == "node-error" and ev.get("evidence"):
            out.append({"what": "event", "type": None,
                        "detail": f"node error at seq {ev.get('seq')}: {ev.get('where')}: "
                                  f"{ev.get('error')}"})
    return out


def read_journal(path: Path) -> tuple[list[Event], list[Gap]]:
    """Parse a JSON-lines journal, salvaging what a crash mid-write left readable.

    A kill during a write leaves a torn line; a restarted node may then append its next event
    to that same line. Whole events found after the tear are kept; the torn fragment becomes a
    gap that names its event type when the fragment still shows it.
    """
    if not path.is_file():
        return [], [{"what": "journal", "type": None, "detail": f"no {path.name}"}]
    events: list[Event] = []
    gaps: list[Gap] = []
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        ev = _parse_event(line)
        if ev is not None:
            events.append(ev)
            continue
        salvaged, fragment = _salvage(line)
        gaps.append({"what": "event", "type": _sniff_type(fragment),
                     "detail": f"{path.name} line {lineno}: unreadable (torn write?): "
                               f"{fragment[:80].decode('utf-8', 'replace')!r}"})
        if salvaged is not None:
            events.append(salvaged)
    return events, gaps


def read_state(path: Path) -> tuple[dict[str, Any] | None, list[Gap]]:
    """The node's final state dump, or ``None`` with the reason as a gap."""
    if not path.is_file():
        return None, [{"what": "state", "type": None,
                       "detail": f"no {path.name} (node unreachable at the end of the run?)"}]
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return None, [{"what": "state", "type": None, "detail": f"{path.name} unreadable: {e}"}]
    if not isinstance(state, dict):
        return None, [{"what": "state", "type": None,
                       "detail": f"{path.name} holds {type(state).__name__}, not a state object "
                                 "(node unreachable at the end of the run?)"}]
    return state, []


def _parse_event(line: bytes) -> Event | None:
    try:
        ev = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return ev if isinstance(ev, dict) and "type" in ev else None


def _salvage(line: bytes) -> tuple[Event | None, bytes]:
    """Split ``<torn fragment><whole event>`` at the last point where a whole event parses."""
    pos = line.find(b'{"', 1)
    while pos > 0:
        ev = _parse_event(line[pos:])
        if ev is not None:
            return ev, line[:pos]
        pos = line.find(b'{"', pos + 1)
    return None, line


def _sniff_type(fragment: bytes) -> str | None:
    m = _TYPE_RE.search(fragment)
    return m.group(1).decode() if m else None


# --------------------------------------------------------------------------- evidence


def node_observations(observations: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-node part of ``observations`` (empty when the harness recorded none)."""
    nodes = observations.get("nodes") if isinstance(observations, dict) else None
    return nodes if isinstance(nodes, dict) else {}


def gone_nodes(observations: dict[str, Any]) -> list[str]:
    """The nodes the nemesis killed for good (no final state by design)."""
    return sorted(n for n, o in node_observations(observations).items() if o.get("gone"))


def evidence_gaps(observations: dict[str, Any], *, state: bool = False,
                  event_types: Collection[str] = ()) -> list[str]:
    """Human-readable gaps in the evidence a check depends on.

    ``state``: the check needs every node's final state. ``event_types``: it needs every
    journal event of these types; a torn event whose type is unknown counts against every check
    that reads the journal.
    """
    nodes = node_observations(observations)
    if not nodes:
        return ["no node observations recorded"]
    out: list[str] = []
    for name, obs in sorted(nodes.items()):
        missing: list[Gap] = list(obs.get("missing") or [])
        if state and obs.get("state") is None and not obs.get("gone"):
            why = [g["detail"] for g in missing if g.get("what") == "state"]
            out.append(f"{name}: no final state" + (f" ({why[0]})" if why else ""))
        if not event_types:
            continue
        if obs.get("events") is None and not any(g.get("what") == "journal" for g in missing):
            out.append(f"{name}: no journal")
        for g in missing:
            if g.get("what") == "journal":
                out.append(f"{name}: {g.get('detail', 'no journal')}")
            elif g.get("what") == "event" and g.get("type") in (None, *event_types):
                out.append(f"{name}: {g.get('detail', 'unreadable event')}")
    return out


def events_of(observations: dict[str, Any], etype: str, required: Iterable[str] = ()
              ) -> tuple[list[tuple[str, int, Event]], list[str]]:
    """Journal events of one type as ``(node, position in journal, event)``, plus gaps.

    An event of the right type that lacks a ``required`` field is a gap, not a silent skip.
    """
    req = tuple(required)
    found: list[tuple[str, int, Event]] = []
    bad: list[str] = []
    for name, obs in sorted(node_observations(observations).items()):
        for pos, ev in enumerate(obs.get("events") or []):
            if not isinstance(ev, dict) or ev.get("type") != etype:
                continue
            lacking = [k for k in req if ev.get(k) is None]
            if lacking:
                bad.append(f"{name}: {etype} event seq={ev.get('seq')} lacks {', '.join(lacking)}")
            else:
                found.append((name, pos, ev))
    return found, bad


def where(node: str, ev: Event, **extra: Any) -> dict[str, Any]:
    """A witness line for one journal event: node, seq and the node's own (skewable) time."""
    return {"node": node, "seq": ev.get("seq"), "t": ev.get("t"), **extra}


# --------------------------------------------------------------------------- final logs


@dataclass(frozen=True)
class LogEntry:
    index: int
    term: int
    digest: str | None
    kind: str | None = None
    data: Any = None

    def brief(self) -> dict[str, Any]:
        return {"index": self.index, "term": self.term, "digest": self.digest,
                "kind": self.kind, "data": self.data}


@dataclass(frozen=True)
class FinalLog:
    """One node's final log as ``/admin/state`` reported it (docs/contracts.md section 4)."""

    node: str
    num_id: int | None
    role: str | None
    term: int
    commit_index: int
    snapshot_index: int
    snapshot_term: int | None
    entries: dict[int, LogEntry] = field(default_factory=dict)

    @property
    def last_index(self) -> int:
        return max(self.entries, default=self.snapshot_index)

    def compacted(self, index: int) -> bool:
        return index <= self.snapshot_index

    def span(self) -> dict[str, int]:
        """Where this log starts and ends, for witnesses."""
        return {"snapshot_index": self.snapshot_index, "last_index": self.last_index,
                "commit_index": self.commit_index}


def final_log(node: str, state: dict[str, Any]) -> FinalLog:
    """Parse a state dump's log; fields the contract marks optional default to empty."""
    snap = state.get("snapshot") or {}
    entries: dict[int, LogEntry] = {}
    for e in state.get("log") or []:
        if not isinstance(e, dict) or e.get("index") is None:
            continue
        entries[int(e["index"])] = LogEntry(int(e["index"]), int(e.get("term") or 0),
                                            e.get("digest"), e.get("kind"), e.get("data"))
    return FinalLog(node=node, num_id=state.get("num_id"), role=state.get("role"),
                    term=int(state.get("term") or 0),
                    commit_index=int(state.get("commit_index") or 0),
                    snapshot_index=int(snap.get("last_index") or 0),
                    snapshot_term=snap.get("last_term"), entries=entries)


def final_logs(observations: dict[str, Any]) -> dict[str, FinalLog]:
    """Final logs of every node whose state was captured."""
    return {name: final_log(name, obs["state"])
            for name, obs in sorted(node_observations(observations).items())
            if isinstance(obs.get("state"), dict)}
