"""The SDS ordering checker: causal delivery, one total order, no loss, convergence.

Reads (docs/sds.md) each node's journal ``send`` / ``deliver`` events (``id``, ``lamport``,
``sender``, ``deps``, ``payload``), ``resend`` events (``id``, ``lamport``), repair events, the
final ``/admin/state`` ``log`` (``[{"id", "lamport", "sender", "payload", ...}]`` in log order)
and the history's ``send`` ops (ok value ``{"v": payload, ...}`` or the payload).

Properties, each a child result:

* ``causal-delivery``: no node put a message in its log before every id in its ``deps``;
* ``common-order``: any two ids held by two nodes are in the same order in both final logs;
* ``acked-not-lost``: a send the client saw ``ok`` is in every final log, but for one whose
  every holder was killed for good (``gone``): SDS acknowledges a send once its own node
  logged it, and what only dead nodes ever had can reach nobody. The holders are read from
  the evidence (`holders`: journal ``send``/``deliver``, final logs, the acking node), so a
  send a live node once logged stays owed to everyone (a live holder re-arms or relays it);
  with a live node's journal unread, whether it held it is unknown (a gap, never a pass);
* ``no-duplicates``: no node delivered (or logs) one id twice;
* ``convergence``: every message a node that is live at the end sent is in every final log
  (the run heals and quiesces before the states are taken);
* ``lamport-unique``: one id never carries two Lamport timestamps, anywhere;
* ``log-order``: every final log is sorted by (Lamport, id) and holds each dependency before
  its dependent, the dependencies taken from the origin's ``send`` event (what the sender put
  on the wire), never from the receiver's report;
* ``causal-history``: each ``send`` carries dependencies when its sender's log was not empty,
  all of them already in that log (an empty or invented causal history acknowledges nothing);
* ``lamport-rules``: a node's every ``send`` has a Lamport time greater than every message it
  delivered (or sent) before it: delivery updates the clock;
* ``buffers-drain``: after the heal, every final state's ``incoming_buffer``,
  ``outgoing_buffer`` and ``repair.outgoing`` are empty (leftovers are named); but an entry
  that waits only on ids whose every holder is gone (a repair request nobody live can answer,
  a held message missing them) may stay until the node gives it up as ``lost`` (SDS-R bounds repair
  by ``T_max``; the node's ``lost_after_ms`` in its state): a younger one is excused and
  counted (``entries_waiting_on_gone``), an older one is a failure to give up;
* ``same-set``: every live node ends with the same set of ids; no phantom id (logged but never
  sent, when its sender's journal was read); a message some node lacks at the end (whoever sent
  it, crashed senders too) must be journaled ``lost`` by that node, never silently absent.

A property with no violation but missing evidence (a node's state or journal) is
``unknown``; so is one that had nothing to judge (each leaf's ``examined`` counts what it read:
sends, deliveries, nodes with a final state, log entries, entries two final logs hold in common,
sends acknowledged ``ok``; a count the property needs being zero means it was not tested).

Stats: delivery latency percentiles (ms, from the sender's ``send`` to each ``deliver``, both
on node clocks), repair counts, datagrams per delivered entry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from checkers.observations import evidence_gaps, gone_nodes, node_observations, verdict, where
from checkers.result import Anomaly, Result, worst

NAME = "ordering"

Event = dict[str, Any]


def _entries(obs: dict[str, Any]) -> list[dict[str, Any]] | None:
    st = obs.get("state")
    if not isinstance(st, dict):
        return None
    return [e for e in st.get("log") or [] if isinstance(e, dict) and e.get("id")]


def _journal(obs: dict[str, Any], *types: str) -> list[Event]:
    return [e for e in obs.get("events") or [] if isinstance(e, dict) and e.get("type") in types]


def _short(mid: Any) -> str:
    return str(mid)[:12]


def check_causal(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    out = []
    for name, obs in sorted(nodes.items()):
        have: set[str] = set()
        for ev in _journal(obs, "send", "deliver"):
            missing = [d for d in ev.get("deps") or [] if d not in have]
            if missing:
                out.append(Anomaly(
                    "causal-violation",
                    f"{name} delivered {_short(ev['id'])} (lamport {ev.get('lamport')}, from "
                    f"{ev.get('sender')}) before its dependencies {[_short(d) for d in missing]}",
                    where(name, ev, id=ev["id"], payload=ev.get("payload"),
                          missing_deps=missing)))
            have.add(ev["id"])
    return out


def check_duplicates(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    out = []
    for name, obs in sorted(nodes.items()):
        first: dict[str, Event] = {}
        for ev in _journal(obs, "send", "deliver"):
            if ev["id"] in first:
                out.append(Anomaly(
                    "duplicate-delivery",
                    f"{name} delivered {_short(ev['id'])} twice (seq {first[ev['id']].get('seq')} "
                    f"and {ev.get('seq')})",
                    {"node": name, "id": ev["id"], "first": where(name, first[ev["id"]]),
                     "again": where(name, ev)}))
            else:
                first[ev["id"]] = ev
        entries = _entries(obs) or []
        counts: dict[str, int] = defaultdict(int)
        for e in entries:
            counts[e["id"]] += 1
        for mid, k in counts.items():
            if k > 1:
                out.append(Anomaly("duplicate-in-log", f"{name}'s final log holds "
                                   f"{_short(mid)} {k} times", {"node": name, "id": mid}))
    return out


def check_lamports(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    seen: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for name, obs in sorted(nodes.items()):
        for ev in _journal(obs, "send", "deliver", "resend"):
            if ev.get("lamport") is not None:
                seen[ev["id"]].setdefault(int(ev["lamport"]), where(name, ev, type=ev["type"]))
        for e in _entries(obs) or []:
            if e.get("lamport") is not None:
                seen[e["id"]].setdefault(int(e["lamport"]), {"node": name, "in": "final log"})
    out = []
    for mid, by in seen.items():
        if len(by) > 1:
            out.append(Anomaly(
                "id-with-two-lamports",
                f"message {_short(mid)} carries Lamport timestamps {sorted(by)}",
                {"id": mid, "seen": {str(k): v for k, v in sorted(by.items())}}))
    return out


def _sent_deps(nodes: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Each id's dependencies as its sender put them on the wire (its ``send`` event)."""
    out: dict[str, list[str]] = {}
    for obs in nodes.values():
        for ev in _journal(obs, "send"):
            out.setdefault(ev["id"], list(ev.get("deps") or []))
    return out


def check_log_order(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]]
                    ) -> tuple[list[Anomaly], int]:
    """Adjacent final-log entries out of (Lamport, id) order, and entries logged before a
    dependency of theirs (or without it); returns how many dependencies were placed."""
    deps = _sent_deps(nodes)
    out = []
    placed = 0
    for name, log in sorted(logs.items()):
        keyed = [e for e in log if isinstance(e.get("lamport"), int)]
        bad = [(x, y) for x, y in zip(keyed, keyed[1:], strict=False)
               if (x["lamport"], str(x["id"])) > (y["lamport"], str(y["id"]))]
        if bad:
            x, y = bad[0]
            out.append(Anomaly(
                "log-not-sorted",
                f"{name}'s final log has {_short(x['id'])} (lamport {x['lamport']}) before "
                f"{_short(y['id'])} (lamport {y['lamport']}): not sorted by (Lamport, id) "
                f"({len(bad)} such adjacent pairs)",
                {"node": name, "first": x, "second": y, "pairs": len(bad)}))
        pos = {e["id"]: k for k, e in enumerate(log)}
        late = []
        for k, e in enumerate(log):
            for d in deps.get(e["id"], []):
                placed += 1
                if pos.get(d, len(log)) > k:
                    late.append((e, d))
        if late:
            e, d = late[0]
            out.append(Anomaly(
                "dependency-after-dependent",
                f"{name}'s final log holds {_short(e['id'])} (lamport {e.get('lamport')}) but "
                f"its sender's causal history names {_short(d)}, which is "
                f"{'later' if d in pos else 'absent'} ({len(late)} such dependencies)",
                {"node": name, "id": e["id"], "dependency": d, "count": len(late)}))
    return out, placed


def check_causal_history(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    out = []
    for name, obs in sorted(nodes.items()):
        have: set[str] = set()
        empty, unknown = [], []
        for ev in _journal(obs, "send", "deliver"):
            if ev["type"] == "send":
                deps = list(ev.get("deps") or [])
                if have and not deps:
                    empty.append(ev)
                unknown += [(ev, d) for d in deps if d not in have]
            have.add(ev["id"])
        if empty:
            out.append(Anomaly(
                "empty-causal-history",
                f"{name} sent {len(empty)} messages with no causal history although its log "
                f"was not empty (first {_short(empty[0]['id'])})",
                {**where(name, empty[0]), "id": empty[0]["id"], "count": len(empty)}))
        if unknown:
            ev, d = unknown[0]
            out.append(Anomaly(
                "history-not-in-log",
                f"{name} sent {_short(ev['id'])} naming {_short(d)} in its causal history, an "
                f"id not in its log ({len(unknown)} such entries)",
                {**where(name, ev), "id": ev["id"], "dependency": d}))
    return out


def check_lamport_rules(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    out = []
    for name, obs in sorted(nodes.items()):
        top: tuple[int, str] | None = None  # the highest Lamport time logged so far, and its id
        bad = []
        for ev in _journal(obs, "send", "deliver"):
            lam = ev.get("lamport")
            if not isinstance(lam, int):
                continue
            if ev["type"] == "send" and top is not None and lam <= top[0]:
                bad.append((ev, top))
            if top is None or lam > top[0]:
                top = (lam, ev["id"])
        if bad:
            ev, (lam, mid) = bad[0]
            out.append(Anomaly(
                "lamport-not-updated",
                f"{name} sent {_short(ev['id'])} at Lamport {ev['lamport']} after logging "
                f"{_short(mid)} at Lamport {lam}: delivery did not advance its clock "
                f"({len(bad)} such sends)",
                {**where(name, ev), "id": ev["id"], "lamport": ev["lamport"],
                 "earlier": {"id": mid, "lamport": lam}, "count": len(bad)}))
    return out


BUFFERS = (("incoming_buffer",), ("outgoing_buffer",), ("repair", "outgoing"))


def holders(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]]
            ) -> dict[str, set[str]]:
    """Which nodes held each message id in their log, by the evidence a real run and the
    simulator both leave: a journal ``send`` or ``deliver`` (the id entered that node's log),
    a final log holding it, and its sender as a buffer entry names it (a sender logged what it
    sent). Only a log counts: repair answers and re-arms are served from it, never from an
    incoming buffer."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, obs in nodes.items():
        for ev in _journal(obs, "send", "deliver"):
            out[ev["id"]].add(name)
    for name, log in logs.items():
        for e in log:
            out[e["id"]].add(name)
    for mid, origin in _origins(nodes).items():
        out[mid].add(origin)
    return dict(out)


def unread_journals(nodes: dict[str, dict[str, Any]], gone: Collection[str]) -> list[str]:
    """Nodes not gone whose journal was not read whole: whether they held an id is unknown."""
    def torn(obs: dict[str, Any]) -> bool:
        return obs.get("events") is None or any(
            g.get("what") == "journal" or (g.get("what") == "event"
                                           and g.get("type") in (None, "send", "deliver"))
            for g in obs.get("missing") or [] if isinstance(g, dict))
    return sorted(n for n, obs in nodes.items() if n not in gone and torn(obs))


def only_gone_had(held: Collection[str], gone: Collection[str]) -> bool:
    """Every node that held an item was killed for good: it died with them, so no live node
    can get it, or serve it to another (the one notion behind ``died_with_gone`` and the
    buffers ``buffers-drain`` waits out). No known holder is no evidence: not excused."""
    return bool(held) and set(held) <= set(gone)


def _origins(nodes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each message id's sender, as any journal's ``send`` or any buffer entry names it."""
    out: dict[str, str] = {}
    for name, obs in nodes.items():
        for ev in _journal(obs, "send"):
            out.setdefault(ev["id"], name)
        st = obs.get("state")
        if isinstance(st, dict):
            for e in [*(st.get("incoming_buffer") or []),
                      *((st.get("repair") or {}).get("outgoing") or [])]:
                if isinstance(e, dict) and e.get("id") and e.get("sender"):
                    out.setdefault(str(e["id"]), str(e["sender"]))
    return out


def _waits_on_gone(path: tuple[str, ...], e: Any, limit: Any, unservable: set[str]) -> bool:
    """A buffer entry a correct node keeps until it gives it up (``age_ms`` up to the node's
    ``lost_after_ms`` plus one ``tick_ms``, as its sweep runs at ticks; the spec's bounded
    repair): a repair request for, or a held message missing, only ids whose every holder is
    gone. Older, it should have been journaled ``lost``."""
    if path == ("outgoing_buffer",) or not isinstance(e, dict) or not isinstance(limit, int):
        return False
    age = e.get("age_ms")
    if not isinstance(age, int) or age > limit:
        return False
    wanted = [e.get("id")] if path == ("repair", "outgoing") else e.get("missing") or []
    return bool(wanted) and all(str(i) in unservable for i in wanted)


@dataclass(frozen=True)
class Holding:
    """Who held each message, read once per check and only when some node is gone: every
    excuse below is about gone nodes (`only_gone_had`), so without one nothing is read."""

    gone: frozenset[str] = frozenset()
    #: live nodes whose journal is unread (`unread_journals`): whether they held an id is unknown
    unread: list[str] = field(default_factory=list)
    by_id: dict[str, set[str]] = field(default_factory=dict)  # `holders`
    by_payload: dict[str, set[str]] = field(default_factory=dict)  # `_send_holders`


def holding(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]],
            gone: Collection[str]) -> Holding:
    if not gone:
        return Holding()
    by_id = holders(nodes, logs)
    return Holding(frozenset(gone), unread_journals(nodes, gone), by_id,
                   _send_holders(nodes, logs, by_id))


def check_buffers(nodes: dict[str, dict[str, Any]], h: Holding = Holding()
                  ) -> tuple[list[Anomaly], int, int, list[str]]:
    """Leftovers in each final state's buffers; returns them, how many buffers were read, how
    many entries were excused as waiting, within the node's give-up bound, on ids whose every
    holder is gone (`_waits_on_gone`), and the gaps: such entries while a live node's journal
    is unread (it may have held the ids) are neither excused nor failed."""
    out = []
    gaps: list[str] = []
    read = excused = 0
    unread = h.unread
    unservable = {i for i, held in h.by_id.items() if only_gone_had(held, h.gone)}
    for name, obs in sorted(nodes.items()):
        st = obs.get("state")
        if not isinstance(st, dict):
            continue
        for path in BUFFERS:
            v: Any = st
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            if not isinstance(v, list):
                continue
            read += 1
            limit = st.get("lost_after_ms")
            if isinstance(limit, int) and isinstance(st.get("tick_ms"), int):
                limit += st["tick_ms"]
            waiting = [e for e in v if _waits_on_gone(path, e, limit, unservable)]
            if waiting and unread:
                gaps.append(f"{name}'s {'.'.join(path)}: {len(waiting)} entries wait on ids "
                            f"only gone nodes are known to have held, but the journals of "
                            f"{unread} are unread")
            else:
                excused += len(waiting)
            v = [e for e in v if not any(e is w for w in waiting)]
            if v:
                ids = [str(x.get("id")) if isinstance(x, dict) else str(x) for x in v]
                out.append(Anomaly(
                    "buffer-not-drained",
                    f"{name}'s {'.'.join(path)} still holds {len(v)} entries after the heal "
                    f"(first {[_short(i) for i in ids[:3]]})",
                    {"node": name, "buffer": ".".join(path), "ids": ids[:20], "count": len(v)}))
    return out, read, excused, gaps


def check_same_set(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]]
                   ) -> list[Anomaly]:
    out = []
    sent: dict[str, Event] = {}
    for obs in nodes.values():
        for ev in _journal(obs, "send"):
            sent.setdefault(ev["id"], ev)
    journaled = {n for n, obs in nodes.items() if obs.get("events")}
    held = {n: {e["id"] for e in log} for n, log in logs.items()}
    for name in sorted(logs):
        for e in logs[name]:
            if e["id"] not in sent and e.get("sender") in journaled:
                out.append(Anomaly(
                    "phantom-id", f"{name} logs {_short(e['id'])} from {e.get('sender')}, "
                    f"whose journal never sent it", {"node": name, "entry": e}))
    everywhere = set().union(*held.values()) if held else set()
    for name in sorted(logs):
        lost = {ev.get("id") for ev in _journal(nodes[name], "lost")}
        silent = sorted(everywhere - held[name] - lost)
        if silent:
            out.append(Anomaly(
                "silently-absent",
                f"{name} ends without {len(silent)} ids other live nodes hold, none journaled "
                f"lost (first {[_short(i) for i in silent[:3]]})",
                {"node": name, "ids": silent[:20], "count": len(silent)}))
    return out


def check_common_order(logs: dict[str, list[dict[str, Any]]]) -> tuple[list[Anomaly], int]:
    """Inversions between every two final logs, and how many entries were compared (an id
    held by both logs of a pair counts once per pair): with one log, or none in common,
    nothing was compared and the order was not tested."""
    out = []
    compared = 0
    names = sorted(logs)
    for i, a in enumerate(names):
        pos_b_all = {b: {e["id"]: k for k, e in enumerate(logs[b])} for b in names[i + 1:]}
        for b in names[i + 1:]:
            pos_b = pos_b_all[b]
            common = [e for e in logs[a] if e["id"] in pos_b]
            compared += len(common)
            inversions = 0
            witness = None
            for x, y in zip(common, common[1:], strict=False):
                if pos_b[y["id"]] < pos_b[x["id"]]:
                    inversions += 1
                    if witness is None:
                        witness = (x, y)
            if witness is not None:
                x, y = witness
                out.append(Anomaly(
                    "order-differs",
                    f"{a} logs {_short(x['id'])} (lamport {x.get('lamport')}) before "
                    f"{_short(y['id'])} (lamport {y.get('lamport')}), {b} the other way round "
                    f"({inversions} such adjacent pairs)",
                    {"nodes": [a, b], "first": {"id": x["id"], "lamport": x.get("lamport"),
                                                "payload": x.get("payload")},
                     "second": {"id": y["id"], "lamport": y.get("lamport"),
                                "payload": y.get("payload")},
                     "inversions": inversions}))
    return out, compared


def _ok_sends(history: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each acknowledged send's payload and op: the clients' ok sends, and the one a nemesis
    ``last-send`` made at its node (harness/last_send.py: a node's last words before it is
    killed for good), as a send op of that node."""
    out = []
    for op in history:
        sent = op.get("value", {}).get("sent") if op.get("f") == "last-send" and \
            op.get("type") == "info" and isinstance(op.get("value"), dict) else None
        if isinstance(sent, dict) and sent.get("v") is not None:
            out.append((str(sent["v"]), {"f": "send", "type": "ok", "process": op.get("process"),
                                         "node": op["value"].get("node"), "value": sent,
                                         "index": op.get("index"), "via": "last-send"}))
        elif op.get("f") == "send" and op.get("type") == "ok":
            v = op.get("value")
            payload = v.get("v") if isinstance(v, dict) else v
            if payload is not None:
                out.append((str(payload), op))
    return out


def _send_holders(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]],
                  held: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each sent payload's holders (`holders`, by the id the ok value or a journal gives it)."""
    ids: dict[str, str] = {}
    for obs in nodes.values():
        for ev in _journal(obs, "send"):
            ids.setdefault(str(ev.get("payload")), ev["id"])
    for log in logs.values():
        for e in log:
            ids.setdefault(str(e.get("payload")), e["id"])
    return {p: held.get(i, set()) for p, i in ids.items()}


def _holders_of(op: dict[str, Any], payload: str, by_payload: dict[str, set[str]],
                by_id: dict[str, set[str]]) -> set[str]:
    """The nodes that held an ok send: its node (SDS acknowledges once it logged it) and every
    holder the evidence names, by the op's id when it has one."""
    v = op.get("value")
    mid = v.get("id") if isinstance(v, dict) else None
    known = by_id.get(str(mid)) if mid else None
    return {str(op.get("node")), *(known if known is not None else by_payload.get(payload, ()))}


def died_with_gone(history: list[dict[str, Any]], logs: dict[str, list[dict[str, Any]]],
                   h: Holding) -> set[str]:
    """Payloads of ok sends no final log holds whose every holder was killed for good: they
    died with them, so no live node can get them (not a loss of the others'). Undecidable
    (none) while a live node's journal is unread."""
    if not h.gone or h.unread:
        return set()
    anywhere = {e.get("payload") for log in logs.values() for e in log}
    return {p for p, op in _ok_sends(history) if p not in anywhere
            and only_gone_had(_holders_of(op, p, h.by_payload, h.by_id), h.gone)}


def check_acked(history: list[dict[str, Any]], logs: dict[str, list[dict[str, Any]]],
                h: Holding, excused: set[str]) -> tuple[list[Anomaly], list[str]]:
    """Lost ok sends, and the gaps: a send only gone nodes are known to have held, while a live
    node's journal is unread, may have been held (and lost) by that node: unknown, not excused
    and not failed."""
    held = {n: {e.get("payload") for e in log} for n, log in logs.items()}
    gone, unread = h.gone, h.unread
    out, gaps = [], []
    for payload, op in _ok_sends(history):
        if payload in excused:
            continue
        lacking = sorted(n for n, ps in held.items() if payload not in ps)
        if not lacking:
            continue
        who = _holders_of(op, payload, h.by_payload, h.by_id)
        if unread and only_gone_had(who, gone):
            gaps.append(f"send {payload!r}: every known holder {sorted(who)} is gone, but the "
                        f"journals of {unread} are unread (did they hold it?)")
            continue
        live = sorted(who - set(gone))
        out.append(Anomaly(
            "acked-send-lost",
            f"send {payload!r} was acknowledged (op {op.get('index')} at {op.get('node')}) "
            f"but is missing from the final logs of {lacking}"
            + (f", although live nodes {live} held it" if live and gone else ""),
            {"payload": payload, "op": op, "missing_at": lacking,
             **({"held_by": sorted(who)} if gone else {})}))
    return out, gaps


def check_convergence(nodes: dict[str, dict[str, Any]], logs: dict[str, list[dict[str, Any]]]
                      ) -> list[Anomaly]:
    held = {n: {e["id"] for e in log} for n, log in logs.items()}
    out = []
    for name in sorted(logs):  # live at the end: its state was captured
        for ev in _journal(nodes[name], "send"):
            lacking = sorted(n for n, ids in held.items() if ev["id"] not in ids)
            if lacking:
                out.append(Anomaly(
                    "not-converged",
                    f"{_short(ev['id'])} ({ev.get('payload')!r}) sent by live node {name} is "
                    f"missing from the final logs of {lacking} after heal",
                    {**where(name, ev), "id": ev["id"], "payload": ev.get("payload"),
                     "missing_at": lacking}))
    return out


def _percentiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    s = sorted(xs)

    def p(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))], 2)

    return {"p50": p(0.5), "p90": p(0.9), "p99": p(0.99), "max": round(s[-1], 2)}


def stats(nodes: dict[str, dict[str, Any]], history: list[dict[str, Any]]) -> dict[str, Any]:
    sent_at: dict[str, float] = {}
    delivers: list[tuple[str, float]] = []
    counts: dict[str, int] = defaultdict(int)
    datagrams = 0
    for obs in nodes.values():
        for ev in obs.get("events") or []:
            t = ev.get("type")
            counts[t] += 1
            if t == "send" and not ev.get("recovered"):
                sent_at.setdefault(ev["id"], float(ev.get("t") or 0))
            elif t == "deliver" and not ev.get("recovered"):
                delivers.append((ev["id"], float(ev.get("t") or 0)))
            elif t == "repair-request":
                counts["repair-request-ids"] += len(ev.get("ids") or [])
        st = obs.get("state")
        if isinstance(st, dict):
            datagrams += int((st.get("io") or {}).get("datagrams_sent") or 0)
    lat = [(t - sent_at[i]) * 1000 for i, t in delivers if i in sent_at]
    n_deliver = counts["deliver"]
    return {
        "sends_ok": len(_ok_sends(history)),
        "messages_sent": counts["send"],
        "deliveries": n_deliver,
        "delivery_latency_ms": _percentiles(lat),
        "repairs": {"requests": counts["repair-request"],
                    "requested_ids": counts["repair-request-ids"],
                    "responses": counts["repair-response"]},
        "resends": counts["resend"], "rearms": counts["rearm"], "buffered": counts["buffered"],
        "datagrams_sent": datagrams,
        "datagrams_per_delivered_entry": round(datagrams / n_deliver, 2) if n_deliver else None,
        "note": "datagram counters restart with a node process",
    }


def check(test: dict[str, Any], history: list[dict[str, Any]],
          observations: dict[str, Any]) -> Result:
    """The composed ordering verdict (see the module docstring)."""
    nodes = node_observations(observations)
    logs = {n: e for n, obs in nodes.items() if (e := _entries(obs)) is not None}
    gone = gone_nodes(observations)
    journal_gaps = evidence_gaps(observations, event_types=("send", "deliver"))
    state_gaps = evidence_gaps(observations, state=True)
    both = sorted(set(journal_gaps + state_gaps))
    order, compared = check_common_order(logs)
    log_order, placed = check_log_order(nodes, logs)
    held = holding(nodes, logs, gone)
    died = died_with_gone(history, logs, held)
    buffers, buffers_read, waiting_on_gone, buffer_gaps = check_buffers(nodes, held)
    acked, acked_gaps = check_acked(history, logs, held, died)
    n = {"sends": sum(len(_journal(o, "send")) for o in nodes.values()),
         "deliveries": sum(len(_journal(o, "deliver")) for o in nodes.values()),
         "nodes_with_state": len(logs), "log_entries": sum(len(e) for e in logs.values()),
         "ok_sends": len(_ok_sends(history)), "entries_compared": compared,
         "dependencies_placed": placed, "buffers_read": buffers_read}

    def leaf(name: str, anomalies: list[Anomaly], gaps: list[str], *needs: str,
             seen: tuple[str, ...] = ()) -> Result:
        """One property, with the counts it read; ``needs`` are those it cannot judge without."""
        counts = {k: n[k] for k in (*needs, *seen)}
        return verdict(name, anomalies, {}, gaps, examined=counts, needs=needs)

    children = [
        leaf("causal-delivery", check_causal(nodes), journal_gaps, "deliveries"),
        leaf("common-order", order, state_gaps, "entries_compared",
             seen=("nodes_with_state", "log_entries")),
        leaf("acked-not-lost", acked, state_gaps + acked_gaps, "ok_sends",
             "nodes_with_state"),
        leaf("no-duplicates", check_duplicates(nodes), journal_gaps, "deliveries"),
        leaf("convergence", check_convergence(nodes, logs), both, "sends", "nodes_with_state"),
        leaf("lamport-unique", check_lamports(nodes), journal_gaps, "sends", seen=("deliveries",)),
        leaf("log-order", log_order, both, "log_entries",
             seen=("nodes_with_state", "dependencies_placed")),
        leaf("causal-history", check_causal_history(nodes), journal_gaps, "sends",
             seen=("deliveries",)),
        leaf("lamport-rules", check_lamport_rules(nodes), journal_gaps, "sends", "deliveries"),
        leaf("buffers-drain", buffers, state_gaps + buffer_gaps, "buffers_read", seen=("nodes_with_state",)),
        leaf("same-set", check_same_set(nodes, logs), both, "nodes_with_state", "log_entries",
             seen=("sends",)),
    ]
    if died:
        children[2].stats["ok_sends_died_with_gone"] = len(died)
    if waiting_on_gone:
        children[9].stats["entries_waiting_on_gone"] = waiting_on_gone
    v = worst(c.valid for c in children)
    bad = [c.checker for c in children if c.valid is False]
    return Result(NAME, v, [], stats(nodes, history), children,
                  note=f"violated: {', '.join(bad)}" if bad else "")
