"""Progress after the last fault heals: every live node reaches what the cluster reached,
within a bound. Safety checkers pass a node that is wedged (a join or snapshot retry loop, a
delivery that never happens); this one does not.

The rule, one for every protocol that spreads *items* to all nodes (``reach``): an item first
seen anywhere at time ``f`` (history seconds) must be held by every live node by
``max(f, heal) + bound``, where ``heal`` is when the last nemesis op completed (the runner's
final ``heal-all``). Only items whose deadline falls before the end of the run (``collect_s``,
when the runner began collecting node states after heal + quiesce + final ops) are judged; a run that ends before ``heal + bound``
judges nothing and is ``unknown`` with that reason, never ``valid``.

Items and "held", per protocol (``PROTOCOLS``):

* Garlic Farm (Raft): item = a committed index (``commit`` events); a node holds index ``i``
  once it applied an index ``>= i`` or installed a snapshot with ``last_index >= i``.
  Bound = 3 x the election timeout's maximum + 4 heartbeats (a new election after the heal,
  with one split vote, then a few AppendEntries rounds to catch the node up). Items see only
  what some node reached, so Raft has a second rule (`served`): with a live majority, of the
  client ops invoked after ``heal + bound`` (at least ``SERVED_MIN``) one must succeed
  (``no-service-after-heal``: a wedge of every node commits nothing and was passed).
* DRiP: item = an applied update (``apply`` event, by ``uid``); a node holds it once it
  applied that uid or a version ``>=`` its version of the same key (a sync carries only each
  key's newest value, so an update overwritten before a node syncs is never applied there
  under its own uid, yet the node is not behind). Bound = 2 x ``heartbeat_s`` +
  2 x ``outbox_retry_s`` + ``relay_margin_s`` (a healed link is seen within a heartbeat and the
  owed commits are resent by the outbox).
* SDS: item = a content message (``send``/``deliver`` event, by ``id``). Bound =
  max(``t_max_ms``, ``resend_possibly_ms``) + 2 x ``sync_interval_ms`` (a missed message is
  learned from a sync's causal history and repaired before T_max).
* ANTACID: item = a CSN (the primary's ``commit`` event); a node holds CSN ``c`` once it
  committed, applied or zone-transferred a CSN ``>= c``. Bound = nodes x ``pull_interval`` +
  2 x ``propagate_retry`` + 1 s (one pull round per hop down the deepest chain).
* SWIM: no items; progress is convergence: the final views (``checkers.membership``'s
  convergence rule) are judged only if the run went on for ``bound`` after the heal. Bound =
  (``suspicion_mult`` + 1) x ``period_s`` (a suspicion times out or is refuted in that time).

``test["options"]["liveness_bound_s"]`` overrides any bound. Live nodes: those whose final
state was collected, minus those that left (``removed`` in Raft, ``left`` in SWIM). A node that
journaled but whose state could not be collected makes the verdict ``unknown`` (it may have
been live); a node that never started, or that the nemesis killed for good (``gone``), is not
required to progress, and an item only gone nodes ever held (an SDS message its sender logged
and died with) is required of no one (``died_with_gone`` in the stats). In SWIM a gone node
must end dead or left in every live view (``checkers.membership.check_convergence``).

Time: journal ``t`` is the node's wall clock, put on the history's axis with
``test["started_wall"]`` (the runner records it). Clock skew is reset by the heal, so the
events judged (after the heal) are on true time; a skewed event from before the heal can only
make a node look *earlier*, which hides a stall but never invents one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkers.csn_order import reachable_csn, zone_views
from checkers.drip_undone import drop_undone
from checkers.membership import check_convergence
from checkers.observations import evidence_gaps, gone_nodes, node_observations
from checkers.options import option
from checkers.result import Anomaly, Result, verdict
from vocabulary.faults import is_nemesis
from vocabulary.history import pairs

NAME = "liveness"
Test = dict[str, Any]
History = list[dict[str, Any]]
Obs = dict[str, Any]
#: an item's first-seen time, and per node the times it held each item
Held = dict[str, dict[Any, float]]


@dataclass(frozen=True)
class Window:
    """When the last fault healed and when the run ended, in history seconds."""

    heal: float
    end: float


def window(test: Test, history: History) -> Window:
    """``heal``: the last nemesis op's time (0 when no fault ran); ``end``: when the runner
    began collecting the nodes' states (``test["collect_s"]``), else the last op's time."""
    times = [float(o.get("time", 0)) / 1e9 for o in history]
    nem = [float(o.get("time", 0)) / 1e9 for o in history if is_nemesis(o)]
    end = max([*times, float(test.get("collect_s") or 0.0)], default=0.0)
    return Window(heal=max(nem, default=0.0), end=end)


def _opt(test: Test, key: str, default: float) -> float:
    return float(option(test, key, default))


def _timed_events(test: Test, observations: Obs) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Each node's journal with ``ht`` (history seconds); the gap reason if not alignable."""
    base = test.get("started_wall")
    out: dict[str, list[dict[str, Any]]] = {}
    for node, obs in node_observations(observations).items():
        evs = obs.get("events") or []
        out[node] = ([{**e, "ht": float(e["t"]) - float(base)} for e in evs if "t" in e]
                     if base is not None else [])
    return out, ("" if base is not None else
                 "test.started_wall is missing: journal times cannot be put on the history's axis")


def live_nodes(observations: Obs) -> list[str]:
    """Nodes whose final state was collected and that did not leave the cluster."""
    return sorted(n for n, o in node_observations(observations).items()
                  if isinstance(o.get("state"), dict)
                  and not o["state"].get("removed") and not o["state"].get("left"))


# --------------------------------------------------------------------------- items per protocol


def prefix_held(first_type: str, key: str, reach_by: dict[str, str]
                ) -> Callable[[dict[str, list[dict[str, Any]]]], Held]:
    """Items numbered in one sequence: first seen at a ``first_type`` event's ``key``; a node
    holds ``i`` from its first event of a type in ``reach_by`` whose field reaches ``>= i``."""
    def held(events: dict[str, list[dict[str, Any]]]) -> Held:
        first: dict[Any, float] = {}
        reach: dict[str, tuple[list[int], list[float]]] = {}
        for node, evs in events.items():
            top, maxes, times = 0, [], []
            for e in sorted(evs, key=lambda e: e["ht"]):
                if e.get("type") == first_type and e.get(key) is not None:
                    i = int(e[key])
                    first[i] = min(first.get(i, e["ht"]), e["ht"])
                field = reach_by.get(str(e.get("type")))
                idx = e.get(field) if field else None
                if idx is not None and int(idx) > top:
                    top = int(idx)
                    maxes.append(top)
                    times.append(e["ht"])
            reach[node] = (maxes, times)
        out: Held = {"": first}
        for node, (maxes, times) in reach.items():
            out[node] = {i: times[k] for i in first
                         if (k := bisect.bisect_left(maxes, i)) < len(maxes)}
        return out
    return held


#: Raft: committed indexes, held from the first ``apply`` (or installed/compacted
#: ``snapshot``) at an index ``>= i``
raft_held = prefix_held("commit", "index", {"apply": "index", "snapshot": "last_index"})


def _keyed(types: tuple[str, ...], key: str) -> Callable[[dict[str, list[dict[str, Any]]]], Held]:
    """Items named by ``key`` in events of ``types``: held from each node's first such event."""
    def held(events: dict[str, list[dict[str, Any]]]) -> Held:
        out: Held = {"": {}}
        for node, evs in events.items():
            mine = out.setdefault(node, {})
            for e in evs:
                if e.get("type") in types and key in e:
                    k, t = e[key], e["ht"]
                    mine[k] = min(mine.get(k, t), t)
                    out[""][k] = min(out[""].get(k, t), t)
        return out
    return held


def drip_held(events: dict[str, list[dict[str, Any]]]) -> Held:
    """Updates by ``uid``; a node also holds every update of a key whose version is at most
    one it applied for that key (the newer value superseded it: DRiP syncs send only it)."""
    events = {n: drop_undone(evs) for n, evs in events.items()}  # undurable decisions
    held = _keyed(("apply",), "uid")(events)
    item_kv: dict[Any, tuple[Any, int]] = {}
    applied: dict[str, list[tuple[Any, int, float]]] = {}
    for node, evs in events.items():
        for e in evs:
            if e.get("type") == "apply" and isinstance(e.get("version"), int) and "key" in e:
                item_kv.setdefault(e.get("uid"), (e["key"], e["version"]))
                applied.setdefault(node, []).append((e["key"], e["version"], e["ht"]))
    for node, rows in applied.items():
        mine = held.setdefault(node, {})
        for uid, (key, version) in item_kv.items():
            later = [t for k, v, t in rows if k == key and v >= version]
            if later:
                mine[uid] = min(mine.get(uid, min(later)), min(later))
    return held


@dataclass(frozen=True)
class Protocol:
    items: str  # what an item is, for messages
    held: Callable[[dict[str, list[dict[str, Any]]]], Held]
    bound: Callable[[Test], float]
    event_types: tuple[str, ...]
    #: a cluster with a live majority must answer clients after the heal (Raft); items alone
    #: miss a wedge of every node, which commits nothing at all (``served``)
    serves_majority: bool = False


def _raft_bound(test: Test) -> float:
    et = option(test, "election_timeout_ms", [300, 600])
    hi = float(et[-1]) if isinstance(et, (list, tuple)) else float(et)
    return 3 * hi / 1000 + 4 * _opt(test, "heartbeat_ms", 75) / 1000


def _drip_bound(test: Test) -> float:
    return (2 * _opt(test, "heartbeat_s", 0.3) + 2 * _opt(test, "outbox_retry_s", 0.5)
            + _opt(test, "relay_margin_s", 0.2))


def _sds_bound(test: Test) -> float:
    return (max(_opt(test, "t_max_ms", 1000), _opt(test, "resend_possibly_ms", 1500))
            + 2 * _opt(test, "sync_interval_ms", 500)) / 1000


_CSN_HELD = prefix_held("commit", "csn", {"commit": "csn", "apply": "csn",
                                          "zone-transfer": "csn"})


def _antacid_held(events: dict[str, list[dict[str, Any]]]) -> Held:
    """Committed CSNs; with several zones (events naming more than one ``zone``) each zone's
    CSNs are their own items, ``"<zone>#<csn>"`` (CSNs are per zone, 3.1.2)."""
    zones = {e.get("zone") for evs in events.values() for e in evs if e.get("zone")}
    if len(zones) <= 1:
        return _CSN_HELD(events)
    out: Held = {"": {}}
    for z in sorted(zones):
        part = _CSN_HELD({n: [e for e in evs if e.get("zone") in (None, z)]
                          for n, evs in events.items()})
        for node, items in part.items():
            out.setdefault(node, {}).update({f"{z}#{i}": t for i, t in items.items()})
    return out


def _antacid_bound(test: Test) -> float:
    n = len(test.get("nodes") or []) or 6
    return (n * _opt(test, "pull_interval", 1.0) + 2 * _opt(test, "propagate_retry", 0.5)
            + 1.0)


def _swim_bound(test: Test) -> float:
    return (_opt(test, "suspicion_mult", 4) + 1) * _opt(test, "period_s", 0.5)


PROTOCOLS: dict[str, Protocol] = {
    "garlicfarm": Protocol("committed index", raft_held, _raft_bound,
                           ("commit", "apply", "snapshot"), serves_majority=True),
    "drip": Protocol("applied update", drip_held, _drip_bound, ("apply",)),
    "sds": Protocol("content message", _keyed(("send", "deliver"), "id"), _sds_bound,
                    ("send", "deliver")),
    "antacid": Protocol("committed CSN", _antacid_held, _antacid_bound, ("commit", "apply")),
}


def bound_of(test: Test, protocol: str) -> float:
    if option(test, "liveness_bound_s") is not None:
        return _opt(test, "liveness_bound_s", 0.0)
    if protocol == "swim":
        return _swim_bound(test)
    return PROTOCOLS[protocol].bound(test)


# --------------------------------------------------------------------------- checks


def reach(test: Test, history: History, observations: Obs, protocol: str) -> Result:
    """Every item the cluster reached is held by every live node within the bound after
    ``max(first seen, last heal)``."""
    p = PROTOCOLS[protocol]
    bound, win = bound_of(test, protocol), window(test, history)
    events, align_gap = _timed_events(test, observations)
    held = p.held(events)
    first = held.pop("")
    live = live_nodes(observations)
    gaps = evidence_gaps(observations, event_types=p.event_types) + (
        [align_gap] if align_gap else []) + [
        f"{n}: no final state, so whether it was live is unknown"
        for n, o in sorted(node_observations(observations).items())
        if o.get("state") is None and o.get("events") and not o.get("gone")]
    anomalies: list[Anomaly] = []
    judged = 0
    # ANTACID with a node killed for good: a replica cut off from every live holder (no
    # failover in ARS) is not required to get CSNs past what it can still reach
    can = reachable_csn(node_observations(observations)) if protocol == "antacid" else None
    can_in: dict[str, dict[str, int] | None] = {}  # per zone, for "<zone>#<csn>" items
    if protocol == "antacid":
        for z, (_, zn, _) in zone_views(test, node_observations(observations), history).items():
            can_in[str(z)] = reachable_csn(zn)
    # an item only nodes killed for good ever held (an SDS message its sender logged and died
    # with, a DRiP update only its dead initiator applied) can reach no live node: the kill's
    # doing, not a stall of the others
    gone = set(gone_nodes(observations))
    died = {i for i in first if gone and all(n in gone for n, got in held.items() if i in got)}
    for item, f in sorted(first.items(), key=lambda kv: kv[1]):
        due = max(f, win.heal) + bound
        if due > win.end or item in died:
            continue
        judged += 1
        for node in live:
            if can is not None and node in can and isinstance(item, int) and item > can[node]:
                continue
            if isinstance(item, str) and "#" in item:
                z, _, c = item.rpartition("#")
                zcan = can_in.get(z)
                if zcan is not None and node in zcan and int(c) > zcan[node]:
                    continue
            got = held.get(node, {}).get(item)
            if got is None or got > due:
                anomalies.append(Anomaly(
                    "no-progress",
                    f"{node} did not get {p.items} {item!r} within {bound:g}s after the heal "
                    f"(first seen at {f:.2f}s, heal {win.heal:.2f}s, due {due:.2f}s, "
                    + ("never got it" if got is None else f"got it at {got:.2f}s") + ")",
                    {"node": node, "item": item, "first_seen": round(f, 3),
                     "heal": round(win.heal, 3), "due": round(due, 3),
                     "got": None if got is None else round(got, 3)}))
    if p.serves_majority:
        anomalies += served(test, history, win, bound, live)
    stuck = sorted({a.witness["node"] for a in anomalies if "node" in a.witness})
    stats = {"bound_s": bound, "heal_s": round(win.heal, 3), "end_s": round(win.end, 3),
             "live_nodes": live, "items_seen": len(first), "stuck_nodes": stuck,
             **({"died_with_gone": len(died)} if died else {})}
    note = ""
    if not judged and win.end - win.heal < bound:
        note = (f"the run ended {win.end - win.heal:.2f}s after the last heal, sooner than the "
                f"{bound:g}s bound: too soon to judge progress")
    return verdict(NAME, anomalies, stats, gaps, note,
                   examined={"items": judged, "live_nodes": len(live)},
                   needs=("items", "live_nodes"))


#: client ops invoked after heal + bound that must all fail before ``served`` says so
SERVED_MIN = 3


def served(test: Test, history: History, win: Window, bound: float,
           live: list[str]) -> list[Anomaly]:
    """With a live majority, some client op that completed after ``heal + bound`` succeeded.
    Items judge only what some node reached, so a wedge of every node (each took a term it
    can never pass, say) reaches nothing and slipped through while every client op failed."""
    nodes = test.get("nodes") or []
    if nodes and 2 * len(live) <= len(nodes):
        return []  # no majority left alive: Raft owes no service
    since = win.heal + bound
    done = [p.outcome for p in pairs(history) if p.outcome and not is_nemesis(p.invoke)
            and p.invoke.get("f") != "clock-sync"
            and since < float(p.invoke.get("time", 0)) / 1e9
            and float(p.complete.get("time", 0)) / 1e9 <= win.end]  # type: ignore[union-attr]
    # a few ops may fail on their own terms (a cas on a stale value); SERVED_MIN all failing
    # is not that
    if len(done) < SERVED_MIN or "ok" in done:
        return []
    kinds = sorted(set(done))
    return [Anomaly("no-service-after-heal",
                    f"no client op invoked after {since:.2f}s (the heal at {win.heal:.2f}s + "
                    f"the {bound:g}s bound) succeeded: {len(done)} completed, all "
                    f"{'/'.join(kinds)}, with {len(live)} of {len(nodes) or len(live)} nodes "
                    f"live", {"since": round(since, 3), "completed": len(done),
                              "types": kinds})]


def convergence(test: Test, history: History, observations: Obs) -> Result:
    """SWIM: the final views converged, judged only when the run lasted ``bound`` past the
    heal (the membership checker judges the same views without asking how long it had)."""
    bound, win = bound_of(test, "swim"), window(test, history)
    nodes = [str(n) for n in (test.get("nodes") or sorted(node_observations(observations)))]
    stats = {"bound_s": bound, "heal_s": round(win.heal, 3), "end_s": round(win.end, 3)}
    if win.end - win.heal < bound:
        return Result(NAME, "unknown", [], stats, examined={"views": 0},
                      note=f"the run ended {win.end - win.heal:.2f}s after the last heal, "
                           f"sooner than the {bound:g}s bound: too soon to judge convergence")
    obs = node_observations(observations)
    states = {n: (obs.get(n) or {}).get("state") for n in nodes}
    started = {n for n in nodes if (obs.get(n) or {}).get("events")}
    r = check_convergence(states, nodes, started, gone_nodes(observations))
    r.checker = NAME
    r.stats = {**r.stats, **stats}
    return r


def check(test: Test, history: History, observations: Obs) -> Result:
    """The liveness leaf for ``test["protocol"]`` (see the module docstring)."""
    protocol = str(test.get("protocol") or "")
    if protocol == "swim":
        return convergence(test, history, observations)
    if protocol not in PROTOCOLS:
        return Result(NAME, "unknown", note=f"no liveness rule for protocol {protocol!r}; "
                      f"known: {sorted([*PROTOCOLS, 'swim'])}")
    return reach(test, history, observations, protocol)
