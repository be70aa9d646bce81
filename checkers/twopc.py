"""2PC safety for DRiP: did every update commit everywhere or nowhere, without conflicts?

Reads the client history (``update`` ops, value ``[key, value, uid]``; ``read`` ops) and the
nodes' journals and final ``/admin/state`` dumps (event types and state shape: docs/drip.md).

Properties, each an anomaly kind:

* validity — ``unknown-update``: a node applied an update nobody invoked;
  ``wrong-value``: it applied a value other than the one invoked.
* vote rule (ours, docs/drip.md "vote routing") — ``commit-without-all-yes``: an initiator
  committed although some mesh member voted no or never voted yes, or before every member's
  yes had reached it (its ``decide`` event lists them as ``missing``).
* atomicity — ``failed-update-visible``: an update the client saw fail (aborted, or refused) was
  applied somewhere; ``aborted-update-applied``: its initiator decided abort, yet some node
  applied it (whatever the client saw, ``info`` included).
* agreement — ``missing-commit``: an update applied on some node (or acknowledged to a client)
  is not reflected in some node's final store (its version of the key is lower).
* durability — ``lost-after-apply``: a node journaled applying an update, yet its final store
  holds an older version of that key (lost across kill -9).
* isolation — ``conflicting-commits``: a node voted yes on an update of key k while its yes
  vote on another update of k was still in progress (not committed, expired or aborted), and
  both committed. A syncing node votes yes to everything by spec 4.6; those votes are exempt.
* convergence — ``divergent-stores``: active nodes ended with different stores.
* sync — ``sync-skipped``: a node restarted with data or came back from inactive and went
  active without completing a sync (spec 4.6 / 4.7); ``syncing-voted-no``: a node voted no
  while syncing (spec 4.6: a syncing node votes yes to every update).
* inactive nodes — ``inactive-participated``: a node voted on or applied an update while its
  own journal said it was inactive (spec 4.7: an inactive node neither applies nor propagates).
* propagation (spec 4.4) — ``propagated-twice``: a node took and passed on one (initiator,
  counter) message twice (two ``vote`` or ``apply`` events from peers with that pair) without a
  counter reset in between. The spec's "a counter <= the saved one is not propagated" is
  relaxed on purpose (nodes/drip/seen.py keeps a window for counters overtaken in flight: a
  commit travels the outbox long after later votes), so only the exact repeat is judged.
* membership — ``membership-disagreement``: two nodes (or one, twice) journaled different
  member sets for one agreed epoch.
* provenance (issue 26, "no commit without its vote round") — ``commit-without-vote``: a node
  applied a peer's commit for an update it journaled no vote on from that update's initiator
  (a commit out of nowhere, or one naming another initiator); ``sync-unsolicited``: a node
  applied sync data from a peer it had not asked for a sync (no ``sync-start`` with that
  source since it last started); ``forged-voters``: a committed decision lists a voter that
  never journaled its own yes on that update (a relay's word taken for it);
  ``ghost-member``: a voter, initiator, sender or member id that is neither configured
  (``test["nodes"]``, else the nodes that left evidence) nor in any agreed membership epoch.
* bounded numbers (issue 26 items 2 and 5) — ``version-out-of-bounds``: a node applied or
  decided a version outside 1..2^63-2 (one such version locks its key: the next overflows);
  ``counter-out-of-window``: a node took a peer's message whose counter is more than the window
  (2^20) ahead of the highest it had taken from that initiator (a vote, an apply, or a
  ``counter-taken``: an abort, a commit of an update applied already, a sync batch; or had been
  told by its signed heartbeat, ``counter-rebase``), or a counter reset while that highest was still more than the
  window short of the wrap-around (one poisoned counter silences the initiator).
* late responses — ``late-vote-acted-on``: an initiator decided an update again after a vote
  response for it came in late (spec 4.5.1: no action for responses after the timeout).

Stale local reads are information (``stats.stale_reads``), not violations: DRiP promises none.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.drip_undone import drop_undone
from checkers.observations import evidence_gaps, node_observations, verdict, where
from checkers.result import Anomaly, Result
from vocabulary.faults import is_nemesis
from vocabulary.history import pairs

EVENT_TYPES = ("start", "state", "vote", "decide", "apply", "release", "sync-done")

Op = dict[str, Any]


@dataclass
class UpdateOp:
    uid: str
    key: str
    value: Any
    invoke: Op
    done: Op | None = None

    def brief(self) -> dict[str, Any]:
        d: dict[str, Any] = {"uid": self.uid, "key": self.key, "value": self.value,
                             "invoke_index": self.invoke.get("index"), "node": self.invoke.get("node"),
                             "process": self.invoke.get("process")}
        if self.done is not None:
            d.update(outcome=self.done.get("type"), done_index=self.done.get("index"),
                     error=self.done.get("error"))
        return d


def _updates(history: list[Op]) -> dict[str, UpdateOp]:
    out: dict[str, UpdateOp] = {}
    for p in pairs(history):
        op, v = p.invoke, p.invoke.get("value")
        if op.get("f") != "update" or is_nemesis(op) or not isinstance(v, list | tuple) \
                or len(v) != 3:
            continue
        u = UpdateOp(str(v[2]), str(v[0]), v[1], op)
        u.done = p.complete
        out[u.uid] = u
    return out


def _final_kv(state: dict[str, Any]) -> dict[str, tuple[int, str, Any]]:
    kv = state.get("kv") or {}
    return {k: (int(v.get("version") or 0), str(v.get("uid")), v.get("value"))
            for k, v in kv.items() if isinstance(v, dict)}


@dataclass
class Evidence:
    """What the journals and final states say, gathered once for every property below."""

    nodes: dict[str, dict[str, Any]]
    members: list[str]
    updates: dict[str, UpdateOp]
    applied: dict[str, list[tuple[str, dict[str, Any]]]]  # uid -> (node, apply event)
    decided: dict[str, tuple[str, dict[str, Any]]]  # uid -> (initiator, decide event)
    votes: dict[str, dict[str, dict[str, Any]]]  # uid -> node -> vote event
    overlaps: list[tuple[str, str, str, dict[str, Any]]]  # (node, held uid, new uid, vote)
    sync_skips: list[Anomaly]
    journal_rules: list[Anomaly]  # per-node timeline rules: inactive, syncing, late votes
    committed: set[str]
    finals: dict[str, dict[str, tuple[int, str, Any]]]  # node -> key -> (version, uid, value)
    version_of: dict[str, tuple[str, int]]  # committed uid -> (key, version)
    #: agreed memberships (docs/drip.md "Membership"): epoch -> members, from ``members``
    #: events; epoch 0 (none agreed) is ``members``
    epochs: dict[int, list[str]] = field(default_factory=dict)
    #: every node's view of each agreed epoch: epoch -> [(node, members, the event saying so)]
    epoch_views: dict[int, list[tuple[str, list[str], dict[str, Any]]]] = field(
        default_factory=dict)
    #: the configured members: ``test["nodes"]``, else the nodes that left evidence
    configured: list[str] = field(default_factory=list)

    def active(self, node: str) -> bool:
        return self.nodes[node]["state"].get("state") == "active"


def gather(test: dict[str, Any], history: list[Op], observations: dict[str, Any]) -> Evidence:
    nodes = node_observations(observations)
    applied: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    decided: dict[str, tuple[str, dict[str, Any]]] = {}
    votes: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    overlaps: list[tuple[str, str, str, dict[str, Any]]] = []
    sync_skips: list[Anomaly] = []
    journal_rules: list[Anomaly] = []
    epochs: dict[int, list[str]] = {}
    views: dict[int, list[tuple[str, list[str], dict[str, Any]]]] = defaultdict(list)
    #: each node's lowest agreed epoch that added or removed it: one an agreed change added
    #: before any removed it or listed it was no epoch-0 member (a node added at run time
    #: leaves evidence, but never was one; the first change may be another's removal)
    added_at: dict[str, int] = {}
    removed_at: dict[str, int] = {}
    for name, obs in sorted(nodes.items()):
        evs = drop_undone(obs.get("events") or [])  # decisions that died undurable
        journal_rules += _timeline_rules(name, evs)
        held: dict[str, set[str]] = defaultdict(set)
        needs_sync: dict[str, Any] | None = None
        for ev in evs:
            t = ev.get("type")
            if t == "apply":
                applied[str(ev.get("uid"))].append((name, ev))
            elif t == "decide":
                decided[str(ev.get("uid"))] = (name, ev)
            elif t == "members" and int(ev.get("epoch") or 0) > 0:
                epochs.setdefault(int(ev["epoch"]), sorted(ev.get("members") or []))
                for n in ev.get("added") or []:
                    added_at[str(n)] = min(added_at.get(str(n), ev["epoch"]), int(ev["epoch"]))
                for n in ev.get("removed") or []:
                    removed_at[str(n)] = min(removed_at.get(str(n), ev["epoch"]),
                                             int(ev["epoch"]))
            if t in ("members", "start") and int(ev.get("epoch") or 0) > 0:
                views[int(ev["epoch"])].append((name, sorted(ev.get("members") or []), ev))
            elif t == "vote":
                uid, key = str(ev.get("uid")), str(ev.get("key"))
                votes[uid].setdefault(name, ev)
                if ev.get("vote") == "yes":
                    if not ev.get("syncing"):
                        overlaps += [(name, h, uid, ev) for h in sorted(held[key]) if h != uid]
                    held[key].add(uid)
            elif t == "release":
                held[str(ev.get("key"))].discard(str(ev.get("uid")))
            elif t == "start":
                if not ev.get("fresh"):
                    needs_sync = ev
                    if ev.get("state") == "active":
                        sync_skips.append(_sync_skipped(name, ev, ev))
                        needs_sync = None
            elif t == "state":
                if ev.get("state") == "inactive":
                    needs_sync = ev
                elif ev.get("state") == "active" and needs_sync is not None:
                    sync_skips.append(_sync_skipped(name, needs_sync, ev))
                    needs_sync = None
            elif t == "sync-done":
                needs_sync = None
    committed = {uid for uid, (_, ev) in decided.items() if ev.get("outcome") == "commit"}
    committed |= set(applied)
    version_of: dict[str, tuple[str, int]] = {}
    for uid, evs in applied.items():
        version_of[uid] = (str(evs[0][1].get("key")), int(evs[0][1].get("version") or 0))
    for uid in committed - set(version_of):
        _, ev = decided[uid]
        version_of[uid] = (str(ev.get("key")), int(ev.get("version") or 0))
    # the mesh members are the nodes that left evidence: without any, nothing was decided
    first_added = {n for n, e in added_at.items() if removed_at.get(n, e) >= e
                   and not any(n in epochs.get(k, ()) for k in range(1, e))}
    return Evidence(nodes, sorted(set(nodes) - first_added), _updates(history),
                    applied, decided, votes, overlaps, sync_skips, journal_rules, committed,
                    {n: _final_kv(o["state"]) for n, o in nodes.items()
                     if isinstance(o.get("state"), dict)}, version_of, epochs, dict(views),
                    [str(n) for n in (test.get("nodes") or sorted(nodes))])


def value_digest(value: Any) -> str:
    """SHA-256 of a value's canonical JSON: what a node journals in place of a large value
    (``value_sha256``; nodes/drip/journalvalue.py ``value_json``, the same encoding)."""
    return hashlib.sha256(json.dumps(value, separators=(",", ":"), sort_keys=True,
                                     ensure_ascii=False).encode()).hexdigest()


def applied_value(ev: dict[str, Any]) -> Any:
    """An event's value as journaled, for messages: the value, or its digest form."""
    if "value_sha256" in ev:
        return {"sha256": ev.get("value_sha256"), "bytes": ev.get("value_bytes")}
    return ev.get("value")


def same_value(ev: dict[str, Any], value: Any) -> bool:
    """Whether an ``apply`` event carries ``value``: equal, or (a large value journaled as a
    digest) the same SHA-256 of its canonical JSON."""
    if "value_sha256" in ev:
        return ev.get("value_sha256") == value_digest(value)
    return bool(ev.get("value") == value)


def _client_value(ev: dict[str, Any], value: Any) -> Any:
    """The client's value in the form the event has (a digest beside a digest)."""
    if "value_sha256" in ev:
        return {"sha256": value_digest(value)}
    return value


def validity(e: Evidence) -> list[Anomaly]:
    out = []
    for uid, evs in sorted(e.applied.items()):
        u = e.updates.get(uid)
        node, ev = evs[0]
        if u is None and ev.get("key") == MEMBERS_KEY:
            continue  # an admin's membership change, not a client's update
        if u is None:
            out.append(Anomaly("unknown-update",
                               f"{node} applied update {uid} that no client invoked",
                               {"applied": where(node, ev, uid=uid, key=ev.get("key"),
                                                 value=applied_value(ev))}))
            continue
        for node, ev in evs:
            if not same_value(ev, u.value) or ev.get("key") != u.key:
                out.append(Anomaly(
                    "wrong-value", f"{node} applied {uid} as {ev.get('key')}={applied_value(ev)!r}, "
                                   f"but the client asked for {u.key}="
                                   f"{_client_value(ev, u.value)!r}",
                    {"op": u.brief(), "applied": where(node, ev)}))
                break
    return out


#: the reserved key of agreed memberships (nodes/drip/core.py MEMBERS_KEY)
MEMBERS_KEY = "drip:members"
#: the bounds the nodes keep (nodes/drip/codec.py MAX_VERSION, nodes/drip/seen.py)
MAX_VERSION = 2**63 - 2
COUNTER_WINDOW = 2**20
MAX_COUNTER = 2**64 - 1


def _required(e: Evidence, uid: str, ev: dict[str, Any]) -> set[str]:
    """Whose yes a decision needed: the members in force at its epoch (as the nodes journaled
    that epoch, not as the initiator says); a membership change needs the staying ones."""
    members = set(e.epochs.get(int(ev.get("epoch") or 0), e.members))
    if ev.get("key") == MEMBERS_KEY and e.applied.get(uid):
        value = e.applied[uid][0][1].get("value")
        if isinstance(value, dict):  # a membership that carries addresses of added members
            value = value.get("members")
        members &= set(value if isinstance(value, list) else [])
    return members


def vote_rule(e: Evidence) -> list[Anomaly]:
    """Commit only on an all-yes aggregate of every member."""
    out = []
    for uid in sorted(e.committed & set(e.decided)):
        node, ev = e.decided[uid]
        if ev.get("outcome") != "commit":
            continue
        votes = e.votes.get(uid, {})
        voted_yes = {n for n, v in votes.items() if v.get("vote") == "yes"}
        said_no = sorted(n for n, v in votes.items() if v.get("vote") == "no")
        absent = sorted(_required(e, uid, ev) - voted_yes)
        # The initiator's own record of whose vote it lacked when it decided: a yes that was
        # cast but never reached it does not make the commit legal.
        unheard = sorted(set(ev.get("missing") or []) - set(absent))
        if said_no or absent or unheard:
            why = "; ".join(w for w in (
                f"{said_no} voted no" if said_no else "",
                f"{absent} never voted yes" if absent else "",
                f"it decided without a vote from {unheard} (their yes never reached it)"
                if unheard else "") if w)
            out.append(Anomaly(
                "commit-without-all-yes",
                f"{node} committed {uid} (key {ev.get('key')}) but {why}",
                {"decide": where(node, ev, voters=ev.get("voters"), missing=ev.get("missing")),
                 "votes": {n: v.get("vote") for n, v in sorted(votes.items())},
                 "op": e.updates[uid].brief() if uid in e.updates else None}))
    return out


def atomicity(e: Evidence) -> list[Anomaly]:
    out = []
    for uid, u in sorted(e.updates.items()):
        if u.done is None or u.done.get("type") != "fail":
            continue
        seen_at = [n for n, _ in e.applied.get(uid, [])]
        seen_at += [n for n, kv in e.finals.items() if kv.get(u.key, (0, ""))[1] == uid
                    and n not in seen_at]
        if seen_at:
            out.append(Anomaly(
                "failed-update-visible",
                f"update {uid} failed for its client ({u.done.get('error')}) but is applied on "
                f"{sorted(seen_at)}", {"op": u.brief(), "nodes": sorted(seen_at)}))
    for uid, (node, ev) in sorted(e.decided.items()):
        u = e.updates.get(uid)
        if ev.get("outcome") != "abort" or uid not in e.applied or \
                (u is not None and u.done is not None and u.done.get("type") == "fail"):
            continue  # a failed client outcome is reported above
        out.append(Anomaly(
            "aborted-update-applied",
            f"{node} decided abort for {uid} ({ev.get('reason')}), yet "
            f"{sorted({n for n, _ in e.applied[uid]})} applied it",
            {"decide": where(node, ev, uid=uid, reason=ev.get("reason")),
             "applied": [where(n, a, version=a.get("version")) for n, a in e.applied[uid]],
             "op": u.brief() if u is not None else None}))
    return out


def agreement(e: Evidence) -> list[Anomaly]:
    """Agreement and durability: what committed is in every active node's final store."""
    out = []
    for uid, u in e.updates.items():
        if u.done is not None and u.done.get("type") == "ok" and uid not in e.version_of:
            out.append(Anomaly("missing-commit",
                               f"update {uid} was acknowledged to its client, but no node "
                               "journaled committing it", {"op": u.brief()}))
    for uid, (key, ver) in sorted(e.version_of.items()):
        behind = {n: kv.get(key, (0, None, None))[:2] for n, kv in e.finals.items()
                  if e.active(n) and kv.get(key, (0, ""))[0] < ver}
        if behind:
            out.append(Anomaly(
                "missing-commit",
                f"update {uid} ({key} v{ver}) committed, but {sorted(behind)} ended with an "
                "older version of the key",
                {"uid": uid, "key": key, "version": ver,
                 "applied_on": sorted(n for n, _ in e.applied.get(uid, [])),
                 "final_versions": {n: list(v) for n, v in sorted(behind.items())},
                 "op": e.updates[uid].brief() if uid in e.updates else None}))
    for uid, evs in sorted(e.applied.items()):
        for n, ev in evs:
            kv = e.finals.get(n)
            key, ver = str(ev.get("key")), int(ev.get("version") or 0)
            if kv is not None and kv.get(key, (0, ""))[0] < ver:
                out.append(Anomaly(
                    "lost-after-apply",
                    f"{n} applied {uid} ({key} v{ver}) but ended with v{kv.get(key, (0,))[0]}",
                    {"applied": where(n, ev, uid=uid), "final": list(kv.get(key, (0, None)))}))
    return out


def isolation(e: Evidence) -> list[Anomaly]:
    out = []
    reported: set[tuple[str, str]] = set()
    for node, a, b, ev in e.overlaps:
        pair = (min(a, b), max(a, b))
        if a in e.committed and b in e.committed and pair not in reported:
            reported.add(pair)
            out.append(Anomaly(
                "conflicting-commits",
                f"{node} voted yes on {b} (key {ev.get('key')}) while its yes vote on {a} was "
                "still in progress, and both committed",
                {"vote": where(node, ev, uid=b, key=ev.get("key")),
                 "ops": [e.updates[x].brief() for x in (a, b) if x in e.updates],
                 "decided": {x: where(*e.decided[x], outcome=e.decided[x][1].get("outcome"))
                             for x in (a, b) if x in e.decided}}))
    # versions of one key are handed out one commit at a time (1 + the highest any voter
    # holds): two commits sharing one were voted on concurrently, without seeing each other
    by_version: dict[tuple[str, int], list[str]] = defaultdict(list)
    for uid in sorted(e.committed):
        if uid in e.version_of:
            by_version[e.version_of[uid]].append(uid)
    for (key, ver), uids in sorted(by_version.items()):
        pair = (uids[0], uids[-1])
        if len(uids) > 1 and pair not in reported:
            reported.add(pair)
            out.append(Anomaly(
                "conflicting-commits",
                f"updates {uids} of key {key} all committed as version {ver}: their votes "
                "never saw each other",
                {"key": key, "version": ver,
                 "ops": [e.updates[x].brief() for x in uids if x in e.updates],
                 "decided": {x: where(*e.decided[x], voters=e.decided[x][1].get("voters"))
                             for x in uids if x in e.decided}}))
    return out


def convergence(e: Evidence) -> list[Anomaly]:
    active = {n: kv for n, kv in e.finals.items() if e.active(n)}
    if len(active) <= 1:
        return []
    keys = sorted(set().union(*(kv.keys() for kv in active.values())))
    diff = [k for k in keys if len({kv.get(k) and kv[k][:2] for kv in active.values()}) > 1]
    if not diff:
        return []
    k = diff[0]
    return [Anomaly(
        "divergent-stores",
        f"active nodes ended with different stores ({len(diff)} keys differ; first {k!r})",
        {"key": k, "per_node": {n: list(kv[k]) if k in kv else None
                                for n, kv in sorted(active.items())},
         "differing_keys": diff[:20]})]


def membership_agreement(e: Evidence) -> list[Anomaly]:
    """Every node that took membership epoch E holds the same member set for E: the all-yes
    rule of each decision at E is judged against that one set."""
    out = []
    for epoch, views in sorted(e.epoch_views.items()):
        sets = {tuple(m) for _, m, _ in views}
        if len(sets) < 2:
            continue
        out.append(Anomaly(
            "membership-disagreement",
            f"nodes hold {len(sets)} different member sets for epoch {epoch}: "
            + "; ".join(f"{sorted({n for n, m, _ in views if tuple(m) == s})} {list(s)}"
                        for s in sorted(sets)),
            {"epoch": epoch, "views": [where(n, ev, members=m) for n, m, ev in views]}))
    return out


def _asked(events: list[dict[str, Any]]) -> dict[int, set[str]]:
    """Per ``apply`` event (by position): the sync sources this node had asked (a
    ``sync-start`` since its last ``start``). A source stays asked after ``sync-abandoned``
    (a batch may still be in flight), not after its ``sync-done`` (the last batch came)."""
    asked: set[str] = set()
    out: dict[int, set[str]] = {}
    for i, ev in enumerate(events):
        t = ev.get("type")
        if t == "start":
            asked = set()
        elif t == "sync-start":
            asked.add(str(ev.get("source")))
        elif t == "sync-done":
            asked.discard(str(ev.get("source")))
        elif t == "apply":
            out[i] = set(asked)
    return out


def provenance(e: Evidence) -> list[Anomaly]:
    """Applied data came from a vote round this node took part in, or a sync it asked for."""
    out: list[Anomaly] = []
    for node, obs in sorted(e.nodes.items()):
        events = obs.get("events") or []
        asked = _asked(events)
        for i, ev in enumerate(events):
            if ev.get("type") != "apply" or ev.get("from") is None:
                continue  # the initiator's own apply has no sender
            uid, src = str(ev.get("uid")), str(ev.get("from"))
            if ev.get("via") == "sync":
                if src not in asked.get(i, set()):
                    out.append(Anomaly(
                        "sync-unsolicited",
                        f"{node} applied {uid} (key {ev.get('key')}) from a sync batch of {src}, "
                        "but had asked no sync of it",
                        {"applied": where(node, ev, uid=uid, key=ev.get("key"), source=src),
                         "asked": sorted(asked.get(i, set()))}))
                continue
            if ev.get("via") != "update" or ev.get("key") == MEMBERS_KEY:
                continue  # a joining node takes the membership that adds it without a vote
            dec = e.decided.get(uid)
            if dec is not None and dec[1].get("required") is not None \
                    and node not in dec[1]["required"]:
                continue  # its yes was not needed: it was not a member when this was decided
            mine = e.votes.get(uid, {}).get(node)
            init = ev.get("initiator")
            if mine is not None and (mine.get("initiator") is None or init is None
                                     or mine.get("initiator") == init):
                continue
            why = ("no vote on it at all" if mine is None else
                   f"a vote for it from initiator {mine.get('initiator')}, "
                   f"but the commit names {init}")
            out.append(Anomaly(
                "commit-without-vote",
                f"{node} applied {uid} (key {ev.get('key')}) committed by {init} via {src}, "
                f"with {why} in its journal",
                {"applied": where(node, ev, uid=uid, key=ev.get("key"), initiator=init,
                                  source=src),
                 "vote": mine and where(node, mine, initiator=mine.get("initiator"))}))
    for uid, (node, ev) in sorted(e.decided.items()):
        if ev.get("outcome") != "commit":
            continue
        votes = e.votes.get(uid, {})
        forged = sorted(v for v in ev.get("voters") or [] if v in e.nodes
                        and (votes.get(v) or {}).get("vote") != "yes")
        if forged:
            out.append(Anomaly(
                "forged-voters",
                f"{node} decided {uid} (key {ev.get('key')}) as unanimous, listing {forged} as "
                "yes voters, but none of them journaled its own yes on it",
                {"decide": where(node, ev, voters=ev.get("voters")),
                 "votes": {n: votes[n].get("vote") if n in votes else None for n in forged}}))
    return out + _ghosts(e)


#: event fields that name members
_ID_FIELDS = {"decide": ("voters", "no_voters", "required", "missing"),
              "vote": ("initiator", "from"), "apply": ("initiator", "from"),
              "members": ("members",)}


def _ghosts(e: Evidence) -> list[Anomaly]:
    known = set(e.configured) | {n for m in e.epochs.values() for n in m}
    out: list[Anomaly] = []
    for node, obs in sorted(e.nodes.items()):
        seen: set[str] = set()
        for ev in obs.get("events") or []:
            for f in _ID_FIELDS.get(str(ev.get("type")), ()):
                v = ev.get(f)
                ids = [v] if isinstance(v, str) else v if isinstance(v, list) else []
                ghosts = sorted({str(x) for x in ids} - known - seen)
                if ghosts:
                    seen |= set(ghosts)
                    out.append(Anomaly(
                        "ghost-member",
                        f"{node} journaled {ghosts} as {ev.get('type')} {f}, a member the "
                        f"configuration never had (configured or agreed: {sorted(known)})",
                        {"event": where(node, ev, type=ev.get("type"), uid=ev.get("uid"),
                                        field=f, ids=ghosts)}))
    return out


#: the properties, in the order their anomalies are listed
PROPERTIES = (validity, vote_rule, atomicity, agreement, isolation, convergence,
              membership_agreement, provenance)


def check(test: dict[str, Any], history: list[Op], observations: dict[str, Any]) -> Result:
    e = gather(test, history, observations)
    anomalies = list(e.sync_skips) + list(e.journal_rules)
    for prop in PROPERTIES:
        anomalies += prop(e)
    updates = e.updates
    stats: dict[str, Any] = {
        "updates_invoked": len(updates), "committed": len(e.committed),
        "ok": sum(1 for u in updates.values() if u.done and u.done.get("type") == "ok"),
        "failed": sum(1 for u in updates.values() if u.done and u.done.get("type") == "fail"),
        "indeterminate": sum(1 for u in updates.values()
                             if u.done is None or u.done.get("type") == "info")}
    not_active = sorted(n for n, o in e.nodes.items()
                        if isinstance(o.get("state"), dict) and o["state"].get("state") != "active")
    # information, not a violation: DRiP promises no fresh local reads
    stats["stale_reads"] = _stale_reads(history, updates, e.version_of)
    stats["not_active_at_end"] = not_active
    gaps = evidence_gaps(observations, state=True, event_types=EVENT_TYPES)
    gaps += [f"{n}: ended {e.nodes[n]['state'].get('state')}, not active: excluded from agreement"
             for n in not_active]
    # a run in which nothing was invoked or nothing committed proves nothing about 2PC safety
    examined = {"updates": len(updates), "commits": len(e.committed),
                "votes": sum(len(by_node) for by_node in e.votes.values()),
                "decisions": len(e.decided), "nodes_with_state": len(e.finals)}
    return verdict("2pc", anomalies, stats, gaps, examined=examined, needs=("updates", "commits"))


def _timeline_rules(node: str, events: list[dict[str, Any]]) -> list[Anomaly]:
    """Rules read off one node's own journal in order: what its state allowed it to do."""
    out: list[Anomaly] = []
    state, state_ev = "active", None
    decided: set[str] = set()
    late_after: dict[str, dict[str, Any]] = {}  # uid -> a late vote that came after its decide
    taken: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)  # initiator -> counter -> ev
    highest: dict[str, tuple[int, dict[str, Any]]] = {}  # initiator -> highest counter taken
    for ev in events:
        t, uid = ev.get("type"), str(ev.get("uid"))
        if _propagated(ev):
            out += _propagated_twice(node, ev, taken[str(ev.get("initiator"))])
            out += _counter_window(node, ev, highest)
        elif t == "counter-taken":  # an abort, a repeated commit, a sync batch: no vote
            out += _counter_window(node, ev, highest)
        elif t == "counter-rebase" and isinstance(ev.get("counter"), int):
            highest[str(ev.get("peer"))] = (ev["counter"], ev)
        if (t == "apply" or (t == "decide" and ev.get("outcome") == "commit")) \
                and ev.get("version") is not None and not (
                isinstance(ev["version"], int) and 1 <= ev["version"] <= MAX_VERSION):
            out.append(Anomaly(
                "version-out-of-bounds",
                f"{node} {'applied' if t == 'apply' else 'decided'} {uid} (key {ev.get('key')}) "
                f"at version {ev.get('version')}, outside 1..{MAX_VERSION}: the next update of "
                "that key cannot get a higher one",
                {t: where(node, ev, uid=uid, key=ev.get("key"), version=ev.get("version"),
                          source=ev.get("from"))}))
        if t in ("start", "state") and ev.get("state"):
            state, state_ev = str(ev.get("state")), ev
        elif t in ("vote", "apply") and state == "inactive":
            out.append(Anomaly(
                "inactive-participated",
                f"{node} {'voted on' if t == 'vote' else 'applied'} {uid} while inactive "
                f"(since seq {state_ev and state_ev.get('seq')}): spec 4.7",
                {t: where(node, ev, uid=uid, key=ev.get("key"), source=ev.get("from")),
                 "inactive": state_ev and where(node, state_ev, reason=state_ev.get("reason"))}))
        if t == "vote" and ev.get("syncing") and ev.get("vote") == "no":
            out.append(Anomaly(
                "syncing-voted-no",
                f"{node} voted no on {uid} while syncing ({ev.get('reason')}): spec 4.6 says "
                "a syncing node votes yes",
                {"vote": where(node, ev, uid=uid, key=ev.get("key"), reason=ev.get("reason"))}))
        elif t == "late-vote" and uid in decided:
            late_after.setdefault(uid, ev)
        elif t == "decide":
            if uid in late_after:
                late = late_after.pop(uid)
                out.append(Anomaly(
                    "late-vote-acted-on",
                    f"{node} decided {uid} again ({ev.get('outcome')}) after a late "
                    f"{late.get('vote')} from {late.get('from')}: spec 4.5.1",
                    {"late_vote": where(node, late, source=late.get("from"),
                                        vote=late.get("vote")),
                     "decide": where(node, ev, uid=uid, outcome=ev.get("outcome"))}))
            decided.add(uid)
    return out


def _propagated(ev: dict[str, Any]) -> bool:
    """A peer's vote request or commit that this node took (and so passed on, spec 4.4)."""
    return ev.get("from") is not None and ev.get("counter") is not None and (
        ev.get("type") == "vote" or (ev.get("type") == "apply" and ev.get("via") == "update"))


def _counter_window(node: str, ev: dict[str, Any],
                    highest: dict[str, tuple[int, dict[str, Any]]]) -> list[Anomaly]:
    """A taken counter beyond the window of the highest taken (or rebased to) before, or a
    reset far from the wrap-around; the first counter of an initiator sets the mark."""
    init, c = str(ev.get("initiator")), ev.get("counter")
    if not isinstance(c, int):
        return []
    prev = highest.get(init)
    reset = bool(ev.get("reset"))
    if prev is not None:
        ahead = c + MAX_COUNTER + 1 - prev[0] if reset else c - prev[0]
        if ahead > COUNTER_WINDOW:
            what = f"a reset to {c}" if reset else f"counter {c}"
            return [Anomaly(
                "counter-out-of-window",
                f"{node} took {what} from {init} ({ev.get('type')} of {ev.get('uid')}), more than "
                f"{COUNTER_WINDOW} ahead of the highest it had taken, {prev[0]}: one such "
                "counter makes the initiator's real ones duplicates (spec 4.4, issue 26 item 5)",
                {"taken": where(node, ev, type=ev.get("type"), uid=ev.get("uid"), counter=c,
                                reset=reset, source=ev.get("from")),
                 "highest": where(node, prev[1], counter=prev[0]), "initiator": init})]
    if prev is None or reset or c > prev[0]:
        highest[init] = (c, ev)
    return []


def _propagated_twice(node: str, ev: dict[str, Any], seen: dict[Any, dict[str, Any]]
                      ) -> list[Anomaly]:
    if ev.get("reset"):
        seen.clear()  # the initiator's counter started over: earlier values mean nothing now
    first = seen.setdefault(ev.get("counter"), ev)
    if first is ev:
        return []
    return [Anomaly(
        "propagated-twice",
        f"{node} took {ev.get('initiator')}'s message with counter {ev.get('counter')} twice "
        f"({first.get('type')} of {first.get('uid')}, then {ev.get('type')} of {ev.get('uid')}) "
        "without a counter reset: spec 4.4 says a counter already seen is not propagated",
        {"first": where(node, first, type=first.get("type"), uid=first.get("uid"),
                        source=first.get("from")),
         "again": where(node, ev, type=ev.get("type"), uid=ev.get("uid"), source=ev.get("from")),
         "initiator": ev.get("initiator"), "counter": ev.get("counter")})]


def _sync_skipped(node: str, cause: dict[str, Any], ev: dict[str, Any]) -> Anomaly:
    what = "restarted with data" if cause.get("type") == "start" else "became inactive"
    return Anomaly("sync-skipped",
                   f"{node} {what} (seq {cause.get('seq')}) and went active at seq {ev.get('seq')} "
                   "without completing a sync (spec 4.6/4.7)",
                   {"cause": where(node, cause, type=cause.get("type")),
                    "active": where(node, ev, reason=ev.get("reason"))})


def _stale_reads(history: list[Op], updates: dict[str, UpdateOp],
                 version_of: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """Reads that returned a version older than an update acknowledged before they began."""
    acked: list[tuple[int, str, int]] = []  # (index of ok, key, version)
    for uid, u in updates.items():
        if u.done is not None and u.done.get("type") == "ok" and uid in version_of:
            acked.append((int(u.done.get("index", 0)), u.key, version_of[uid][1]))
    acked.sort()
    count, total, example = 0, 0, None
    for p in pairs(history):
        inv, v = p.invoke, p.complete and p.complete.get("value")
        if inv.get("f") != "read" or p.outcome != "ok" or not isinstance(v, list) or len(v) < 3:
            continue
        total += 1
        before = [ver for idx, k, ver in acked if idx < int(inv.get("index", 0)) and k == v[0]]
        if before and int(v[2] or 0) < max(before):
            count += 1
            example = example or {"read": p.complete, "newest_acknowledged_version": max(before)}
    return {"reads": total, "stale": count, "example": example}
