"""Raft safety for Garlic Farm, read from node journals and final state dumps.

Each check proves one of the Raft paper's safety properties (figure 3) over the evidence of
docs/contracts.md section 4, and names the nodes, terms, indexes and journal seqs involved
when it fails. Journal times (``t``) are each node's own, possibly skewed, clock: they help a
person line events up, and no check relies on comparing them across nodes.

A check that found nothing wrong but lacked evidence it depends on (a node's final state, a
torn journal line of a type it reads) answers ``"unknown"``, never ``True``; so does one that
had nothing to examine (``Result.examined``: no leader ever elected, no vote, no log entry, no
apply, nothing committed, no Meta LS publisher computed by two nodes at one index).
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from checkers.observations import (
    Event,
    FinalLog,
    LogEntry,
    events_of,
    evidence_gaps,
    final_logs,
    node_observations,
    verdict,
    where,
)
from checkers.result import Anomaly, Checker, Result, compose

Test = dict[str, Any]
History = list[dict[str, Any]]
Obs = dict[str, Any]


# --------------------------------------------------------------------------- election safety


def election_safety(test: Test, history: History, observations: Obs) -> Result:
    """At most one leader per term (Raft's Election Safety).

    Evidence: every ``role`` event with ``role == "leader"``, plus final states that report
    ``role == "leader"``. The same node leading a term twice (e.g. journaled twice) is fine.
    """
    roles, bad = events_of(observations, "role", ("role", "term"))
    gaps = evidence_gaps(observations, event_types=("role",)) + bad
    claims: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for node, _, ev in roles:
        if ev["role"] == "leader":
            claims[int(ev["term"])].setdefault(node, where(node, ev, source="journal"))
    for node, log in final_logs(observations).items():
        if log.role == "leader":
            claims[log.term].setdefault(node, {"node": node, "source": "final state"})
    anomalies = [_two_leaders(term, list(by_node.values()))
                 for term, by_node in sorted(claims.items()) if len(by_node) > 1]
    stats = {"leader_events": sum(1 for _, _, e in roles if e["role"] == "leader"),
             "terms_with_leader": len(claims)}
    # no leader ever elected: nothing to hold to "one per term"
    examined = {"leader_terms": len(claims), "role_events": len(roles)}
    return verdict("election-safety", anomalies, stats, gaps, examined=examined,
                   needs=("leader_terms",))


def _two_leaders(term: int, leaders: list[dict[str, Any]]) -> Anomaly:
    names = ", ".join(w["node"] for w in leaders)
    return Anomaly("two-leaders", f"term {term} had {len(leaders)} leaders: {names}",
                   {"term": term, "leaders": leaders})


# --------------------------------------------------------------------------- vote safety


def vote_safety(test: Test, history: History, observations: Obs) -> Result:
    """No node grants its vote to two candidates in one term.

    Evidence: granted ``vote`` events; a ``role == "candidate"`` event counts as a vote for
    itself when the node's ``num_id`` is known; the final state's ``voted_for`` counts for its
    term. The witness lists restarts between the votes: a node that restarted with
    ``voted_for: null`` and voted again is the "forget-vote" bug.
    """
    votes, bad = events_of(observations, "vote", ("term", "candidate", "granted"))
    cands, bad2 = events_of(observations, "role", ("role", "term"))
    gaps = evidence_gaps(observations, event_types=("vote", "role")) + bad + bad2
    logs = final_logs(observations)
    ballots: dict[tuple[str, int], dict[Any, dict[str, Any]]] = defaultdict(dict)
    for node, pos, ev in votes:
        if ev["granted"] is True:
            ballots[(node, int(ev["term"]))].setdefault(
                ev["candidate"], where(node, ev, candidate=ev["candidate"], pos=pos,
                                       source="vote"))
    for node, pos, ev in cands:
        me = logs[node].num_id if node in logs else None
        if ev["role"] == "candidate" and me is not None:
            ballots[(node, int(ev["term"]))].setdefault(
                me, where(node, ev, candidate=me, pos=pos, source="own candidacy"))
    for node, log in logs.items():
        voted_for = node_observations(observations)[node]["state"].get("voted_for")
        if voted_for is not None:
            ballots[(node, log.term)].setdefault(
                voted_for, {"node": node, "candidate": voted_for, "source": "final state"})
    anomalies = [_double_vote(node, term, list(by_cand.values()), observations)
                 for (node, term), by_cand in sorted(ballots.items()) if len(by_cand) > 1]
    anomalies += _forgotten_votes(observations)
    stats = {"granted_votes": sum(1 for _, _, e in votes if e["granted"] is True),
             "node_terms_voted": len(ballots)}
    # ballots: distinct (node, term, candidate) votes, own candidacies and final votes included
    examined = {"votes": sum(len(by_cand) for by_cand in ballots.values()),
                "vote_events": len(votes)}
    return verdict("vote-safety", anomalies, stats, gaps, examined=examined, needs=("votes",))


def _forgotten_votes(observations: Obs) -> list[Anomaly]:
    """A vote is durable state: a node that restarts in the term it voted in must come back
    with that vote. (The node journals a vote only after it is persisted, so a ``start`` event
    in the same term with another ``voted_for`` means the stored vote was lost.) This is the
    "forget-vote" bug even when no second candidate happened to ask for the vote."""
    out: list[Anomaly] = []
    for node, obs in node_observations(observations).items():
        last: dict[str, Any] | None = None  # the latest granted vote before a restart
        for ev in obs.get("events") or []:
            t = ev.get("type")
            if t == "vote" and ev.get("granted") is True and "term" in ev:
                last = ev
            elif t == "start" and last is not None:
                if ev.get("term") == last["term"] and ev.get("voted_for") != last.get("candidate"):
                    out.append(Anomaly(
                        "vote-forgotten",
                        f"{node} voted for {last.get('candidate')} in term {last['term']} (seq "
                        f"{last.get('seq')}) but restarted in that term with voted_for="
                        f"{ev.get('voted_for')} (seq {ev.get('seq')})",
                        {"node": node, "term": last["term"], "vote": where(node, last),
                         "restart": where(node, ev, voted_for=ev.get("voted_for"))}))
                last = None
    return out


def _double_vote(node: str, term: int, ballots: list[dict[str, Any]], observations: Obs
                 ) -> Anomaly:
    positions = [b["pos"] for b in ballots if "pos" in b]
    restarts: list[dict[str, Any]] = []
    if len(positions) > 1:
        events = node_observations(observations)[node].get("events") or []
        restarts = [where(node, ev, term=ev.get("term"), voted_for=ev.get("voted_for"))
                    for ev in events[min(positions):max(positions)] if ev.get("type") == "start"]
    votes = [{k: v for k, v in b.items() if k != "pos"} for b in ballots]
    cands = ", ".join(str(b["candidate"]) for b in votes)
    why = f" (restarted {len(restarts)}x in between)" if restarts else ""
    return Anomaly("double-vote", f"{node} voted for {cands} in term {term}{why}",
                   {"node": node, "term": term, "votes": votes, "restarts_between": restarts})


# --------------------------------------------------------------------------- log matching


def log_matching(test: Test, history: History, observations: Obs) -> Result:
    """Raft's Log Matching: same index and term means same entry and same prefix.

    Each node's log is its final ``state.log`` with gaps above its snapshot filled from its own
    ``apply`` events (latest wins). Pairs are compared only above both snapshots. A log whose
    terms decrease along the index is malformed and reported too.
    """
    applies, bad = events_of(observations, "apply", ("index", "term", "digest"))
    gaps = evidence_gaps(observations, state=True, event_types=("apply",)) + bad
    logs = _known_logs(observations, applies)
    anomalies = [a for log in logs.values() for a in _term_regressions(log)]
    names = sorted(logs)
    compared = 0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            found, n = _compare_logs(logs[a], logs[b])
            anomalies += found
            compared += n
    stats = {"nodes": len(logs), "pairs": len(names) * (len(names) - 1) // 2,
             "entries_compared": compared}
    examined = {"logs": len(logs), "entries": sum(len(log.entries) for log in logs.values()),
                "entries_compared": compared}
    # every log compacted into its snapshot (entries=0) is a real, checked outcome of a busy
    # run (the nightly kv-latency run ended so): the snapshots' agreement is state-machine-
    # safety's to judge, so only a run with no final log at all has nothing to judge here
    return verdict("log-matching", anomalies, stats, gaps, examined=examined, needs=("logs",))


def _known_logs(observations: Obs, applies: list[tuple[str, int, Event]]
                ) -> dict[str, FinalLog]:
    """Final logs, with holes above the snapshot filled from the node's own apply events."""
    logs = final_logs(observations)
    for node, _, ev in applies:
        if node not in logs:
            logs[node] = FinalLog(node, None, None, 0, 0, 0, None, {})
        log, index = logs[node], int(ev["index"])
        if index > log.snapshot_index and (index not in log.entries
                                           or log.entries[index].kind == "apply-event"):
            log.entries[index] = LogEntry(index, int(ev["term"]), ev["digest"], "apply-event",
                                          ev.get("data"))
    return logs


def _term_regressions(log: FinalLog) -> list[Anomaly]:
    out = []
    prev: LogEntry | None = None
    for index in sorted(log.entries):
        e = log.entries[index]
        if prev is not None and e.term < prev.term:
            out.append(Anomaly(
                "log-term-regression",
                f"{log.node}'s log goes from term {prev.term} at {prev.index} "
                f"down to term {e.term} at {index}",
                {"node": log.node, "before": prev.brief(), "after": e.brief(), **log.span()}))
        prev = e
    return out[:1]


def _compare_logs(a: FinalLog, b: FinalLog) -> tuple[list[Anomaly], int]:
    """Anomalies between two logs (the lowest of each kind) and how many entries were compared."""
    floor = max(a.snapshot_index, b.snapshot_index)
    common = sorted(i for i in a.entries.keys() & b.entries.keys() if i > floor)
    same_term = [i for i in common if a.entries[i].term == b.entries[i].term]
    out: list[Anomaly] = []
    split = next((i for i in same_term if a.entries[i].digest != b.entries[i].digest), None)
    if split is not None:
        out.append(_log_anomaly("log-divergence", a, b, split, None,
                                f"{a.node} and {b.node} hold different entries at index "
                                f"{split} in the same term {a.entries[split].term}"))
    if same_term:
        anchor = max(same_term)
        bad = next((i for i in common
                    if i < anchor and a.entries[i].term != b.entries[i].term), None)
        if bad is not None:
            out.append(_log_anomaly("log-prefix-mismatch", a, b, bad, anchor,
                                    f"{a.node} and {b.node} agree on index {anchor} (term "
                                    f"{a.entries[anchor].term}) but differ earlier at {bad}"))
    return out, len(common)


def _log_anomaly(kind: str, a: FinalLog, b: FinalLog, index: int, anchor: int | None,
                 message: str) -> Anomaly:
    witness: dict[str, Any] = {"index": index, "nodes": [a.node, b.node],
                               a.node: a.entries[index].brief(), b.node: b.entries[index].brief(),
                               "spans": {a.node: a.span(), b.node: b.span()}}
    if anchor is not None:
        witness["anchor"] = {"index": anchor, "term": a.entries[anchor].term,
                             "digest": a.entries[anchor].digest}
    return Anomaly(kind, message, witness)


# --------------------------------------------------------------------------- state machine safety


def state_machine_safety(test: Test, history: History, observations: Obs) -> Result:
    """No two applies of one index carry different digests, on any nodes, across restarts.

    A node re-applying an index after a restart with the same digest is expected; with a
    different one it has changed a committed entry it already exposed to its state machine.
    """
    applies, bad = events_of(observations, "apply", ("index", "digest"))
    gaps = evidence_gaps(observations, event_types=("apply",)) + bad
    by_index: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    per_node: dict[tuple[str, int], int] = defaultdict(int)
    for node, _, ev in applies:
        index = int(ev["index"])
        by_index[index][ev["digest"]].append(
            where(node, ev, term=ev.get("term"), kind=ev.get("kind"), data=ev.get("data")))
        per_node[(node, index)] += 1
    anomalies = [_apply_divergence(index, digests)
                 for index, digests in sorted(by_index.items()) if len(digests) > 1]
    stats = {"apply_events": len(applies), "indexes_applied": len(by_index),
             "reapplied": sum(1 for n in per_node.values() if n > 1),
             "divergent_indexes": len(anomalies)}
    examined = {"applied_indexes": len(by_index), "apply_events": len(applies)}
    return verdict("state-machine-safety", anomalies, stats, gaps, examined=examined,
                   needs=("applied_indexes",))


def _sides(groups: dict[Any, list[dict[str, Any]]], name: Callable[[Any], str] = str,
           after: Callable[[list[dict[str, Any]]], str] = lambda ws: "") -> str:
    """``<value> by <nodes>`` for each side of a split (one index, several values), the text
    of every divergence anomaly."""
    return "; ".join(f"{name(g)} by {', '.join(sorted({w['node'] for w in ws}))}{after(ws)}"
                     for g, ws in groups.items())


def _apply_divergence(index: int, digests: dict[str, list[dict[str, Any]]]) -> Anomaly:
    return Anomaly("apply-divergence", f"index {index} was applied with different digests: "
                   f"{_sides(digests)}", {"index": index, "applies": {d: ws[:5] for d, ws in
                                                               digests.items()}})


# --------------------------------------------------------------------------- committed, not lost


def committed_not_lost(test: Test, history: History, observations: Obs) -> Result:
    """Every entry any node journaled as committed is still there, unchanged, at the end.

    Checked on every node whose final ``commit_index`` reaches the index and on the final
    leader of the highest term (Leader Completeness: it must hold every committed entry).
    "Committed" means journaled by a ``commit`` event, or inside a final state's
    ``commit_index``. Entries compacted into a node's snapshot count as kept, and are
    cross-checked against that node's apply events and snapshot term when those say something. When no node is up to
    date and no final leader exists, an entry found in some log is "unverified" (unknown) and
    one found in no log is lost. Two nodes committing different digests at one index is a
    violation by itself.
    """
    commits, bad = events_of(observations, "commit", ("index", "term", "digest"))
    gaps = evidence_gaps(observations, state=True, event_types=("commit",)) + bad
    logs = final_logs(observations)
    committed: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for node, _, ev in commits:
        committed[int(ev["index"])][ev["digest"]].append(where(node, ev, term=ev["term"]))
    for node, log in logs.items():
        for index, e in log.entries.items():
            if index <= log.commit_index and e.digest is not None:
                committed[index][e.digest].append(
                    {"node": node, "term": e.term, "source": "final state commit_index"})
    anomalies = [_commit_divergence(i, ds) for i, ds in sorted(committed.items()) if len(ds) > 1]
    applied = _applied_digests(observations)
    judge = _Judge(logs, applied)
    for index, digests in sorted(committed.items()):
        for digest, by in _to_judge(digests).items():
            judge.check(index, int(by[0]["term"]), digest, by)
    anomalies += judge.anomalies()
    note = (f"{judge.unverified} committed indexes found but not verified: no node was up to "
            "date and no final leader" if judge.unverified else "")
    stats = {"committed_indexes": len(committed), "checks": judge.checks,
             "compacted": judge.compacted, "unverified": judge.unverified,
             "lost": sum(len(v) for v in judge.lost.values())}
    examined = {"committed_indexes": len(committed), "checks": judge.checks}
    return verdict("committed-not-lost", anomalies, stats, gaps, note, examined=examined,
                   needs=("committed_indexes",))


def _to_judge(digests: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Which committed digests at one index the final logs must hold.

    Journaled commits are the record of what was exposed; a final state's commit_index only
    stands in for them at indexes no journal mentions (they disagree: commit-divergence).
    """
    journaled = {d: ws for d, ws in digests.items() if any("seq" in w for w in ws)}
    return journaled or digests


def _commit_divergence(index: int, digests: dict[str, list[dict[str, Any]]]) -> Anomaly:
    return Anomaly("commit-divergence", f"index {index} was committed with different digests: "
                   f"{_sides(digests)}", {"index": index, "commits": {d: ws[:5] for d, ws in
                                                             digests.items()}})


def _applied_digests(observations: Obs) -> dict[str, dict[int, set[str]]]:
    applies, _ = events_of(observations, "apply", ("index", "digest"))
    out: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for node, _, ev in applies:
        out[node][int(ev["index"])].add(ev["digest"])
    return out


class _Judge:
    """Looks one committed entry up in the final logs that must hold it; groups the losses."""

    def __init__(self, logs: dict[str, FinalLog], applied: dict[str, dict[int, set[str]]]):
        self.logs = logs
        self.applied = applied
        top_term = max((log.term for log in logs.values()), default=0)
        self.leaders = {n for n, log in logs.items() if log.role == "leader" and log.term == top_term}
        #: (node, kind) -> [(index, witness)]
        self.lost: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.checks = self.compacted = self.unverified = 0

    def check(self, index: int, term: int, digest: str, by: list[dict[str, Any]]) -> None:
        bound = [n for n, log in self.logs.items()
                 if log.commit_index >= index or n in self.leaders]
        if not bound:
            self._check_anywhere(index, term, digest, by)
            return
        for node in bound:
            self.checks += 1
            kind, found = self._lookup(self.logs[node], index, term, digest)
            if kind:
                self._lose(node, kind, index, term, digest, by, found)

    def _lookup(self, log: FinalLog, index: int, term: int, digest: str
                ) -> tuple[str | None, Any]:
        """(anomaly kind or None, what the node has at ``index``)."""
        entry = log.entries.get(index)
        if entry is not None:
            return (None, None) if entry.digest == digest else ("committed-entry-overwritten",
                                                                entry.brief())
        if not log.compacted(index):
            return "committed-entry-lost", None
        self.compacted += 1
        seen = self.applied.get(log.node, {}).get(index, set())
        if seen and digest not in seen:
            return "committed-entry-overwritten", {"applied_digests": sorted(seen)}
        if index == log.snapshot_index and log.snapshot_term not in (None, term):
            return "committed-entry-overwritten", {"snapshot_term": log.snapshot_term}
        return None, None

    def _check_anywhere(self, index: int, term: int, digest: str, by: list[dict[str, Any]]
                        ) -> None:
        holders = [log for log in self.logs.values()
                   if (e := log.entries.get(index)) is not None and e.digest == digest
                   or log.compacted(index)]
        if holders:
            self.unverified += 1
        elif self.logs:
            self._lose("(every node)", "committed-entry-lost", index, term, digest, by, None)

    def _lose(self, node: str, kind: str, index: int, term: int, digest: str,
              by: list[dict[str, Any]], found: Any) -> None:
        self.lost[(node, kind)].append({"index": index, "term": term, "digest": digest,
                                        "committed_by": by[:3], "found": found})

    def anomalies(self) -> list[Anomaly]:
        out = []
        for (node, kind), items in sorted(self.lost.items()):
            first = items[0]
            log = self.logs.get(node)
            what = "lost" if kind == "committed-entry-lost" else "overwritten"
            out.append(Anomaly(
                kind,
                f"{node}: {len(items)} committed entries {what}, first index {first['index']} "
                f"(term {first['term']}, digest {first['digest']}, committed by "
                f"{', '.join(sorted({w['node'] for w in first['committed_by']}))})",
                {"node": node, "count": len(items), "indexes": _ranges(i["index"] for i in items),
                 "first": first, **(log.span() if log else {})}))
        return out


def _ranges(indexes: Any) -> list[list[int]]:
    """[[lo, hi], ...] runs of consecutive indexes: short witnesses for long losses."""
    out: list[list[int]] = []
    for i in sorted(indexes):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


# --------------------------------------------------------------------------- metals agreement


def metals_agreement(test: Test, history: History, observations: Obs) -> Result:
    """Nodes that computed the Meta LS2 publisher as of the same log index agree on it.

    The publisher is a deterministic function of the committed log, so two nodes at one
    ``metals.as_of_index`` reporting different publishers have applied different logs (or
    compute the rule differently). Nodes at different indexes are not compared, nor nodes that
    applied no status entry yet (``as_of_index`` 0: nothing computed). Every Garlic Farm node
    posts a status each ``meta_interval_ms`` (the harness sets 1000), so a run in which no two
    nodes computed the publisher as of one index compared nothing: unknown.
    """
    gaps = evidence_gaps(observations, state=True)
    groups: dict[int, dict[str, Any]] = defaultdict(dict)
    without = 0
    for name, obs in sorted(node_observations(observations).items()):
        metals = (obs.get("state") or {}).get("metals")
        if isinstance(metals, dict) and int(metals.get("as_of_index") or 0) > 0:
            groups[int(metals["as_of_index"])][name] = metals.get("publisher")
        elif obs.get("state") is not None:
            without += 1
    anomalies = [_metals_disagreement(index, by_node)
                 for index, by_node in sorted(groups.items())
                 if len({json.dumps(p, sort_keys=True) for p in by_node.values()}) > 1]
    compared = sum(1 for g in groups.values() if len(g) > 1)
    stats = {"nodes_reporting": sum(len(g) for g in groups.values()), "nodes_without": without,
             "indexes": len(groups), "indexes_compared": compared}
    examined = {"nodes_with_status": stats["nodes_reporting"], "indexes_compared": compared}
    return verdict("metals-agreement", anomalies, stats, gaps, examined=examined,
                   needs=("indexes_compared",))


def _metals_disagreement(index: int, by_node: dict[str, Any]) -> Anomaly:
    return Anomaly("metals-disagreement", f"as of index {index} nodes disagree on the "
                   "publisher: " + ", ".join(f"{n}={p}" for n, p in by_node.items()),
                   {"as_of_index": index, "publishers": by_node})


# --------------------------------------------------------------------------- membership safety


def membership_safety(test: Test, history: History, observations: Obs) -> Result:
    """Single-server configuration changes kept Raft safe.

    Evidence: the leader's ``config-change`` events (one per configuration entry it appends,
    with its term, commit index and the term of the entry there, and the index of the
    configuration then in force), every node's ``config`` events (committed configurations
    as applied) and ``commit`` events. Holds when: a change is appended only once the
    previous configuration is committed (one uncommitted change at a time) and once the leader
    has committed an entry of its own term (Ongaro's rule, raft-dev 2015); the committed
    configurations of all nodes form one sequence (one server set per index, each differing
    from the one before by at most one server); and no index is committed with two entries,
    whatever configuration each side was in. A run with no configuration change still
    judges the last rule (under the bootstrap configuration); a run with nothing committed
    has nothing to judge: unknown.
    """
    changes, bad = events_of(observations, "config-change",
                             ("index", "term", "servers", "prev_config_index", "commit",
                              "commit_term"))
    configs, bad2 = events_of(observations, "config", ("index", "servers"))
    commits, bad3 = events_of(observations, "commit", ("index", "digest"))
    gaps = evidence_gaps(observations, event_types=("config-change", "config", "commit"))
    gaps += bad + bad2 + bad3
    anomalies: list[Anomaly] = []
    for node, _, ev in changes:
        w = where(node, ev, index=ev["index"], term=ev["term"], commit=ev["commit"],
                  commit_term=ev["commit_term"], prev_config_index=ev["prev_config_index"])
        if int(ev["prev_config_index"]) > int(ev["commit"]):
            anomalies.append(Anomaly(
                "overlapping-config-change",
                f"{node} appended a configuration at {ev['index']} (term {ev['term']}) while the "
                f"one at {ev['prev_config_index']} was uncommitted (commit {ev['commit']})", w))
        if int(ev["commit_term"]) != int(ev["term"]):
            anomalies.append(Anomaly(
                "config-change-before-term-commit",
                f"{node} appended a configuration at {ev['index']} in term {ev['term']} before "
                f"committing an entry of that term (its commit {ev['commit']} was term "
                f"{ev['commit_term']})", w))
    sequence: dict[int, dict[tuple[int, ...], list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for node, _, ev in configs:
        sequence[int(ev["index"])][tuple(sorted(ev["servers"]))].append(where(node, ev))
    for index, sets in sorted(sequence.items()):
        if len(sets) > 1:
            anomalies.append(Anomaly(
                "config-history-divergence",
                f"index {index} was applied as {len(sets)} different configurations: "
                + _sides(sets, name=lambda k: str(list(k))),
                {"index": index, "configs": {str(list(k)): ws[:5] for k, ws in sets.items()}}))
    agreed = [(i, next(iter(sets))) for i, sets in sorted(sequence.items()) if len(sets) == 1]
    for (i, a), (j, b) in zip(agreed, agreed[1:], strict=False):
        if len(set(a) ^ set(b)) > 1:
            anomalies.append(Anomaly(
                "config-step-too-large",
                f"committed configurations {list(a)} at {i} and {list(b)} at {j} differ by "
                f"{len(set(a) ^ set(b))} servers: two changes were made from one base",
                {"before": {"index": i, "servers": list(a)},
                 "after": {"index": j, "servers": list(b)}}))
    anomalies += _commits_across_configs(observations, commits)
    stats = {"config_changes": len(changes), "committed_configs": len(sequence),
             "commit_events": len(commits)}
    examined = {"committed_indexes": len({int(ev["index"]) for _, _, ev in commits}),
                "config_changes": len(changes), "committed_configs": len(sequence)}
    return verdict("membership-safety", anomalies, stats, gaps, examined=examined,
                   needs=("committed_indexes",))


def _commits_across_configs(observations: Obs, commits: list[tuple[str, int, Event]]
                            ) -> list[Anomaly]:
    """Indexes committed with two digests, each side named with the configuration its node
    had applied last before that commit (None: the bootstrap one)."""
    by_index: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    in_force: dict[tuple[str, int], Any] = {}
    for name, obs in sorted(node_observations(observations).items()):
        current = None
        for pos, ev in enumerate(obs.get("events") or []):
            if not isinstance(ev, dict):
                continue
            if ev.get("type") == "config" and ev.get("servers") is not None:
                current = sorted(ev["servers"])
            in_force[(name, pos)] = current
    for node, pos, ev in commits:
        by_index[int(ev["index"])][ev["digest"]].append(
            where(node, ev, config=in_force.get((node, pos))))
    out = []
    for index, digests in sorted(by_index.items()):
        if len(digests) > 1:
            out.append(Anomaly(
                "commit-divergence-across-configs",
                f"index {index} was committed with {len(digests)} different entries: "
                + _sides(digests, after=lambda ws: f" (config {ws[0]['config']})"),
                {"index": index, "commits": {d: ws[:5] for d, ws in digests.items()}}))
    return out


# --------------------------------------------------------------------------- leader completeness


def leader_completeness(test: Test, history: History, observations: Obs) -> Result:
    """Raft's Leader Completeness, term by term: every entry committed in term T is in the log
    of every leader of a later term, as that leader's ``leader-log`` event (its log on
    election, as term runs) shows.

    An entry's commit term is bounded by the term of the node that journaled its ``commit``
    (the node's last ``role`` event before it; a follower learns a commit in the leader's
    term or later), the lowest over all nodes. A leader holds the entry when the index is in
    its snapshot or its log has the entry's term there (Log Matching, checked by
    log-matching, makes the term enough). No leader-log event, or nothing committed: unknown.
    """
    logs, bad = events_of(observations, "leader-log", ("term", "last_index", "snapshot_index",
                                                       "runs"))
    gaps = evidence_gaps(observations, event_types=("leader-log", "commit", "role")) + bad
    committed: dict[tuple[int, str], dict[str, Any]] = {}
    for name, obs in sorted(node_observations(observations).items()):
        term = None
        for ev in obs.get("events") or []:
            if not isinstance(ev, dict):
                continue
            if ev.get("type") == "role" and ev.get("term") is not None:
                term = int(ev["term"])
            elif (ev.get("type") == "commit" and term is not None
                  and None not in (ev.get("index"), ev.get("term"), ev.get("digest"))):
                key = (int(ev["index"]), ev["digest"])
                c = committed.get(key)
                if c is None or term < c["by_term"]:
                    committed[key] = {"index": key[0], "term": int(ev["term"]),
                                      "digest": ev["digest"], "by_term": term,
                                      "witness": where(name, ev, node_term=term)}
    entries = sorted(committed.values(), key=lambda c: c["index"])
    anomalies: list[Anomaly] = []
    checks = 0
    for node, _, ev in logs:
        held = _TermRuns(ev)
        missing = []
        for c in entries:
            if c["by_term"] >= int(ev["term"]):
                continue
            checks += 1
            if not held.holds(c["index"], c["term"]):
                missing.append(c)
        if missing:
            first = missing[0]
            anomalies.append(Anomaly(
                "leader-missing-committed-entry",
                f"{node} became leader of term {ev['term']} without {len(missing)} entries "
                f"committed by term {first['by_term']}; first index {first['index']} (term "
                f"{first['term']}, committed by {first['witness']['node']})",
                {"leader": where(node, ev, term=ev["term"], last_index=ev["last_index"],
                                 snapshot_index=ev["snapshot_index"]),
                 "count": len(missing), "indexes": _ranges(c["index"] for c in missing),
                 "first": {k: first[k] for k in ("index", "term", "digest", "by_term",
                                                 "witness")}}))
    stats = {"leaders": len(logs), "committed_entries": len(entries), "checks": checks}
    examined = {"leaders": len(logs), "committed_entries": len(entries), "checks": checks}
    return verdict("leader-completeness", anomalies, stats, gaps, examined=examined,
                   needs=("leaders", "committed_entries"))


class _TermRuns:
    """A leader's log on election: ``[first index, term]`` runs above its snapshot."""

    def __init__(self, ev: Event) -> None:
        self.snapshot = int(ev["snapshot_index"])
        self.last = int(ev["last_index"])
        self.starts = [int(r[0]) for r in ev["runs"]]
        self.terms = [int(r[1]) for r in ev["runs"]]

    def holds(self, index: int, term: int) -> bool:
        if index <= self.snapshot:
            return True
        if index > self.last:
            return False
        k = bisect.bisect_right(self.starts, index) - 1
        return k >= 0 and self.terms[k] == term


# --------------------------------------------------------------------------- composition

RAFT_CHECKS: dict[str, Checker] = {
    "election-safety": election_safety,
    "vote-safety": vote_safety,
    "log-matching": log_matching,
    "state-machine-safety": state_machine_safety,
    "committed-not-lost": committed_not_lost,
    "metals-agreement": metals_agreement,
    "membership-safety": membership_safety,
    "leader-completeness": leader_completeness,
}


def check(test: Test, history: History, observations: Obs) -> Result:
    """All Raft safety checks as one checker; validity merges worst-wins."""
    return compose("raft", (chk(test, history, observations) for chk in RAFT_CHECKS.values()))
