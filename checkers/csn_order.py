"""The ANTACID (ARS) ordering checker: one CSN order, SSN order, whole groups, no loss.

Reads (docs/antacid.md, "Checker evidence") each server's journal ``start``, ``commit``
(the primary), ``apply`` (a replica) and ``zone-transfer`` events, each server's final
``ReadZone`` state (``{"last_csn", "docs": {name: {"content", "csn"}}}``) and the history's
``submit`` ops (value ``{"server", "incarn", "ssn", "csn", "error"}``) and ``read`` ops (ok
value: a ``ReadZone`` answer).

Properties, each a child result, judged per zone (``zone_views``: ARS orders nothing
across zones; a run of one zone is one view):

* ``csn-order``: every CSN names one GlobalSubmitID on every server, and each server took CSNs
  one by one with no gap (a zone transfer or a restart moves its starting point);
* ``ssn-order``: on every server, each submission server's SSNs were applied increasing;
* ``group-atomic``: no server applied part of a group (a document a pull left out must be
  rewritten by a later CSN the server applied: 4.1.3's collapse), and no read (history reads
  and final states) shows one document of a group without the rest;
* ``acked-present``: a submission the client was told committed (``csn`` > 0) is on every
  server after the heal, under that CSN;
* ``no-double-commit``: no GlobalSubmitID committed (or applied) under two CSNs;
* ``convergence``: every server with a final state holds the same documents at the same CSN;
* ``availability``: the primary was up at the end and every submission got an outcome (a
  submission the client stopped waiting for counts as one when its GlobalSubmitID was
  committed later, ``committed_late``; one never answered because the nemesis killed its
  submission server meanwhile is the kill's, ``lost_with_server``; one never given a
  GlobalSubmitID that provably did not commit was never taken, ``never_taken``: see
  ``_never_taken``); when not, ``unknown``
  with the reason. Unavailability is never an inconsistency: a submission
  without an outcome is not required anywhere.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.observations import evidence_gaps, node_observations, where
from checkers.result import Anomaly, Result, verdict, worst
from vocabulary.faults import nemesis_pairs
from vocabulary.history import pairs

NAME = "csn-order"

Event = dict[str, Any]
Gsid = tuple[str, int, int]

#: submission outcomes that mean "could not reach the primary", not a refusal on the merits:
#: 210001 propagation failed, 212001 reorder timeout
UNAVAILABLE_CODES = (210001, 212001)


def _events(obs: dict[str, Any], *types: str) -> list[Event]:
    return [e for e in obs.get("events") or [] if isinstance(e, dict) and e.get("type") in types]


def _gsid(ev: Event) -> Gsid | None:
    if ev.get("server") is None or ev.get("ssn") is None:
        return None
    return (str(ev["server"]), int(ev.get("incarn") or 0), int(ev["ssn"]))


def _show(g: Gsid | None) -> str:
    return "none" if g is None else f"{g[0]}#{g[1]} SSN {g[2]}"


def _states(nodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: o["state"] for n, o in nodes.items()
            if isinstance(o.get("state"), dict) and isinstance(o["state"].get("docs"), dict)}


def reachable_csn(nodes: dict[str, dict[str, Any]]) -> dict[str, int] | None:
    """With nodes killed for good (``gone``): per node with a final state, the highest CSN it
    can still get, its own or a live ancestor's (``upstreams`` in the final states, gone
    nodes cut out). ARS has no failover, so a replica whose every path up ran through a gone
    node keeps what it had: it is not required to reach more. None when no node is gone."""
    if not any(o.get("gone") for o in nodes.values()):
        return None
    states = _states(nodes)
    out: dict[str, int] = {}
    for n in states:
        seen, todo, best = {n}, [n], 0
        while todo:
            cur = todo.pop()
            best = max(best, int(states[cur].get("last_csn") or 0))
            for up in states[cur].get("upstreams") or []:
                if up in states and up not in seen:
                    seen.add(up)
                    todo.append(up)
        out[n] = best
    return out


def _commits(nodes: dict[str, dict[str, Any]]) -> dict[int, Event]:
    """CSN -> the first ``commit`` (else ``apply``) event naming it: what that group held."""
    out: dict[int, Event] = {}
    for etype in ("commit", "apply"):
        for obs in nodes.values():
            for ev in _events(obs, etype):
                out.setdefault(int(ev["csn"]), ev)
    return out


def check_csn_order(nodes: dict[str, dict[str, Any]]) -> tuple[list[Anomaly], int]:
    """One GlobalSubmitID per CSN everywhere; each server's CSNs gap-free."""
    out: list[Anomaly] = []
    owner: dict[int, tuple[str, Event]] = {}
    n = 0
    for name, obs in sorted(nodes.items()):
        prev: int | None = None
        for ev in _events(obs, "start", "commit", "apply", "zone-transfer"):
            if ev["type"] == "start":
                prev = int(ev.get("last_csn") or 0)
                continue
            csn = int(ev["csn"])
            if ev["type"] == "zone-transfer":
                prev = csn
                continue
            n += 1
            want = max(prev or 0, 1) + 1
            if prev is not None and csn != want:
                out.append(Anomaly("csn-gap", f"{name} took CSN {csn} after {want - 1} "
                                   f"(expected {want})", where(name, ev, want=want, got=csn)))
            prev = csn
            seen = owner.get(csn)
            if seen is None:
                owner[csn] = (name, ev)
            elif _gsid(seen[1]) != _gsid(ev):
                out.append(Anomaly("csn-conflict", f"CSN {csn} is {_show(_gsid(seen[1]))} on "
                                   f"{seen[0]} but {_show(_gsid(ev))} on {name}",
                                   {"first": where(seen[0], seen[1]), "second": where(name, ev)}))
    return out, n


def check_ssn_order(nodes: dict[str, dict[str, Any]]) -> tuple[list[Anomaly], int]:
    """Per server, per submission server (host:port, incarnation): SSNs increase."""
    out: list[Anomaly] = []
    n = 0
    for name, obs in sorted(nodes.items()):
        last: dict[tuple[str, int], int] = {}
        for ev in _events(obs, "commit", "apply"):
            g = _gsid(ev)
            if g is None:
                continue
            n += 1
            key = (g[0], g[1])
            if g[2] <= last.get(key, 0):
                out.append(Anomaly("ssn-order", f"{name} applied {_show(g)} at CSN {ev['csn']} "
                                   f"after SSN {last[key]} of that server",
                                   where(name, ev, after_ssn=last[key])))
            last[key] = max(last.get(key, 0), g[2])
    return out, n


def _read_atomic(who: str, value: dict[str, Any], commits: dict[int, Event],
                 witness: dict[str, Any]) -> list[Anomaly]:
    """A read showing a document at CSN c holds every document group c wrote (at c or later)
    unless a later CSN up to the read's ``last_csn`` deleted it."""
    docs = value.get("docs") or {}
    last = int(value.get("last_csn") or 0)
    out = []
    for csn in sorted({int(d.get("csn") or 0) for d in docs.values() if isinstance(d, dict)}):
        group = commits.get(csn)
        if group is None:
            continue
        deleted = {x for c, ev in commits.items() if csn < c <= last
                   for x in ev.get("deleted") or []}
        missing = [x for x in group.get("docs") or []
                   if x not in deleted and int((docs.get(x) or {}).get("csn") or 0) < csn]
        if missing:
            out.append(Anomaly("half-applied", f"{who} shows CSN {csn} without "
                               f"{', '.join(missing[:5])} of the same group",
                               {**witness, "csn": csn, "missing": missing}))
    return out


def check_group_atomic(nodes: dict[str, dict[str, Any]], history: list[dict[str, Any]]
                       ) -> tuple[list[Anomaly], int, int]:
    """Whole groups applied and read (see the module docstring)."""
    commits = {c: ev for c, ev in _commits(nodes).items()}
    primary_commits = {int(ev["csn"]): ev for obs in nodes.values() for ev in _events(obs, "commit")}
    out: list[Anomaly] = []
    groups = 0
    for name, obs in sorted(nodes.items()):
        applied = _events(obs, "apply")
        for i, ev in enumerate(applied):
            full = primary_commits.get(int(ev["csn"]))
            if full is None:
                continue
            groups += 1
            later = {x for e in applied[i + 1:] for x in (*(e.get("docs") or []),
                                                          *(e.get("deleted") or []))}
            got = {*(ev.get("docs") or []), *(ev.get("deleted") or [])}
            lost = [x for x in (*(full.get("docs") or []), *(full.get("deleted") or []))
                    if x not in got and x not in later]
            if lost:
                out.append(Anomaly("partial-group", f"{name} applied CSN {ev['csn']} without "
                                   f"{', '.join(lost[:5])}, and no later CSN rewrote them",
                                   where(name, ev, missing=lost)))
    reads = 0
    for op in history:
        if op.get("f") == "read" and op.get("type") == "ok" and isinstance(op.get("value"), dict):
            reads += 1
            out += _read_atomic(f"read by {op.get('process')}", op["value"], commits,
                                {"op": op.get("index"), "node": op.get("node")})
    for name, st in sorted(_states(nodes).items()):
        reads += 1
        out += _read_atomic(f"{name}'s final state", st, commits, {"node": name})
    return out, groups, reads


def _acked(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for op in history if op.get("f") == "submit" and op.get("type") == "ok"
            and isinstance(op.get("value"), dict) and int(op["value"].get("csn") or 0) > 0]


def check_acked(nodes: dict[str, dict[str, Any]], history: list[dict[str, Any]]
                ) -> list[Anomaly]:
    """Every submission told "committed at CSN c" is under c everywhere at the end."""
    owner = {c: _gsid(ev) for c, ev in _commits(nodes).items()}
    states = _states(nodes)
    can = reachable_csn(nodes)
    out = []
    for op in _acked(history):
        v = op["value"]
        csn, g = int(v["csn"]), _gsid(v)
        if csn in owner and g is not None and owner[csn] != g:
            out.append(Anomaly("acked-wrong-csn", f"{_show(g)} was told CSN {csn}, which the "
                               f"servers hold as {_show(owner[csn])}", {"op": op.get("index")}))
        short = sorted(n for n, st in states.items() if int(st.get("last_csn") or 0) < csn
                       and (can is None or can[n] >= csn))  # cut off by a gone node: excused
        if short:
            out.append(Anomaly("acked-lost", f"{_show(g)} was told committed at CSN {csn}, but "
                               f"{', '.join(short)} end below it",
                               {"op": op.get("index"), "nodes": short, "csn": csn}))
    return out


def check_double_commit(nodes: dict[str, dict[str, Any]]) -> tuple[list[Anomaly], int]:
    """No GlobalSubmitID under two CSNs, in anyone's journal."""
    at: dict[Gsid, dict[int, str]] = defaultdict(dict)
    n = 0
    for name, obs in sorted(nodes.items()):
        for ev in _events(obs, "commit", "apply"):
            g = _gsid(ev)
            if g is not None:
                n += ev["type"] == "commit"
                at[g].setdefault(int(ev["csn"]), name)
    out = [Anomaly("committed-twice", f"{_show(g)} committed as CSNs {sorted(cs)}",
                   {"gsid": list(g), "csns": {str(c): w for c, w in cs.items()}})
           for g, cs in at.items() if len(cs) > 1]
    return out, n


def check_convergence(nodes: dict[str, dict[str, Any]]) -> list[Anomaly]:
    states = _states(nodes)
    if not states:
        return []
    want_name = max(states, key=lambda n: int(states[n].get("last_csn") or 0))
    want = states[want_name]
    can = reachable_csn(nodes)
    out = []
    for name, st in sorted(states.items()):
        if name == want_name:
            continue
        if can is not None and can[name] < int(want.get("last_csn") or 0):
            continue  # cut off from the rest by a node gone for good: it keeps what it had
        if st.get("last_csn") != want.get("last_csn") or st["docs"] != want["docs"]:
            diff = sorted(k for k in {*st["docs"], *want["docs"]}
                          if st["docs"].get(k) != want["docs"].get(k))
            out.append(Anomaly("diverged", f"{name} ends at CSN {st.get('last_csn')} and "
                               f"{want_name} at {want.get('last_csn')}; differing documents: "
                               f"{', '.join(diff[:5]) or 'none'}",
                               {"node": name, "versus": want_name, "docs": diff[:20]}))
    return out


def _primary(test: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> str | None:
    if test.get("primary"):
        return str(test["primary"])
    return next((n for n, o in sorted(nodes.items())
                 if any(e.get("primary") for e in _events(o, "start"))), None)


def _lost_with_server(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``info`` submits with no GlobalSubmitID (the server never answered) whose submission
    server the nemesis killed while they were in flight: whether the server took them died
    with it, and no server promised anything, so they are the kill's doing, not the
    protocol's unavailability. A server that merely never answers is not excused."""
    kills = [(inv.get("time", 0), done.get("time", 0), set((done.get("value") or {})
                                                          .get("nodes") or []))
             for inv, done in nemesis_pairs(history)
             if done is not None and inv.get("f") == "kill" and not done.get("error")]
    out = []
    for pr in pairs(op for op in history if op.get("f") == "submit"):
        done = pr.complete
        if done is None or done.get("type") != "info" or _gsid(done.get("value") or {}):
            continue
        start, end = pr.invoke.get("time", 0), done.get("time", 0)
        if any(done.get("node") in names and k0 <= end and k1 >= start
               for k0, k1, names in kills):
            out.append(done)
    return out


def _never_taken(history: list[dict[str, Any]], nodes: dict[str, dict[str, Any]],
                 primary: str | None, exclude: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``info`` submits with no GlobalSubmitID (no answer to SubmitUpdate) that provably did
    not commit: the primary's journal is here and every GlobalSubmitID committed anywhere is
    one some submit in the history was given. The spec binds a server only once it returns
    the GlobalSubmitID (4.2.1: the answer says it holds the group durably), so such a
    submission was never promised and, as it did not commit, it has a definite outcome: not
    committed (as ``AntacidNotSent``'s ``fail``). A commit no history submit names could be
    one of them, so then they all stay unjudged."""
    if primary is None or not _events(nodes.get(primary) or {}, "start"):
        return []  # no primary journal: commits it made may be missing from the evidence
    known = {_gsid(op.get("value") or {}) for op in history if op.get("f") == "submit"}
    committed = {_gsid(ev) for ev in _commits(nodes).values()} - {None}
    if committed - known:
        return []
    return [op for op in history
            if op.get("f") == "submit" and op.get("type") == "info"
            and not _gsid(op.get("value") or {}) and op not in exclude]


def check_availability(test: dict[str, Any], nodes: dict[str, dict[str, Any]],
                       history: list[dict[str, Any]]) -> Result:
    """Unavailability (the primary down, submissions without an outcome) is ``unknown`` with
    the reason: the run did not exercise commitment for those, it did not break it."""
    reasons, stats, subs = _availability(test, nodes, history)
    return verdict("availability", [], stats, reasons, examined={"submissions": subs},
                   needs=("submissions",))


def _availability(test: dict[str, Any], nodes: dict[str, dict[str, Any]],
                  history: list[dict[str, Any]]) -> tuple[list[str], dict[str, int], int]:
    """`check_availability`'s reasons, stats and number of submissions."""
    subs = [op for op in history if op.get("f") == "submit" and op.get("type") in ("ok", "fail",
                                                                                     "info")]
    # an ``info`` submit (no notification within the client's wait) whose GlobalSubmitID the
    # primary committed after all has its outcome: it committed late (a fault healed, the
    # retries got through), so it is not left unjudged
    committed = {_gsid(ev) for ev in _commits(nodes).values()} - {None}
    late = [op for op in subs if op["type"] == "info" and _gsid(op.get("value") or {}) in committed]
    lost = _lost_with_server(history)
    primary = _primary(test, nodes)
    untaken = _never_taken(history, nodes, primary, lost)
    stuck = [op for op in subs if (op["type"] == "info" and op not in late and op not in lost
                                   and op not in untaken) or (
        op["type"] == "fail" and (op.get("value") or {}).get("error") in UNAVAILABLE_CODES)]
    reasons = []
    if primary is None:
        reasons.append("no primary known (no test['primary'], no start event with primary)")
    elif primary in nodes and nodes[primary].get("gone"):
        reasons.append(f"primary {primary} was killed for good: ARS has no failover, so no "
                       "submission after that could commit")
    elif primary in nodes and not isinstance(nodes[primary].get("state"), dict):
        reasons.append(f"primary {primary} was down at the end (no final state)")
    if stuck:
        reasons.append(f"{len(stuck)} of {len(subs)} submissions got no commit outcome "
                       "(primary unreachable or reorder timeout): not judged")
    return reasons, {"unresolved": len(stuck), "committed_late": len(late),
                     "lost_with_server": len(lost), "never_taken": len(untaken)}, len(subs)


def _zone_of_op(op: dict[str, Any]) -> str | None:
    v = op.get("value")
    return v.get("zone") if isinstance(v, dict) else None


def zone_views(test: dict[str, Any], nodes: dict[str, dict[str, Any]],
               history: list[dict[str, Any]]
               ) -> dict[str | None, tuple[dict[str, Any], dict[str, dict[str, Any]],
                                           list[dict[str, Any]]]]:
    """Each zone's (test, nodes, history): ARS orders nothing across zones (3.1.2), so every
    property is judged per zone. Events, final states (``state["zones"][zone]``) and
    ``submit``/``read`` ops name their zone; other events and ops (the nemesis's) belong to
    every zone. A run of one zone (or none named) is one view, as it always was; with
    several, ``test["primaries"]`` (zone -> node) or the ``start`` events name each
    primary."""
    zones: set[str] = set()
    for obs in nodes.values():
        zones |= {e["zone"] for e in obs.get("events") or []
                  if isinstance(e, dict) and e.get("zone")}
        st = obs.get("state")
        if isinstance(st, dict) and isinstance(st.get("zones"), dict):
            zones |= set(st["zones"])
    zones |= {z for op in history if (z := _zone_of_op(op))}
    if len(zones) <= 1:
        return {next(iter(zones), None): (test, nodes, history)}
    views: dict[str | None, Any] = {}
    for z in sorted(zones):
        zn: dict[str, dict[str, Any]] = {}
        for name, obs in nodes.items():
            st = obs.get("state")
            if isinstance(st, dict):
                held = st.get("zones") if isinstance(st.get("zones"), dict) else {
                    st.get("zone"): st}
                if z not in held:
                    continue  # this node does not serve zone z
                st = held[z]
            zn[name] = {**obs, "state": st, "events": [
                e for e in obs.get("events") or []
                if not isinstance(e, dict) or e.get("zone") in (None, z)]}
        zh = [op for op in history if op.get("f") not in ("submit", "read")
              or _zone_of_op(op) == z]
        zt = {k: v for k, v in test.items() if k != "primary"}
        primary = (test.get("primaries") or {}).get(z)
        if primary:
            zt["primary"] = primary
        views[z] = (zt, zn, zh)
    return views


def _in_zone(z: str | None, anomalies: list[Anomaly]) -> list[Anomaly]:
    if z is None:
        return anomalies
    return [Anomaly(a.kind, f"zone {z}: {a.message}", {**a.witness, "zone": z})
            for a in anomalies]


def check(test: dict[str, Any], history: list[dict[str, Any]],
          observations: dict[str, Any]) -> Result:
    """The composed ANTACID verdict (see the module docstring), each zone judged apart."""
    nodes = node_observations(observations)
    journal_gaps = evidence_gaps(observations, event_types=("commit", "apply", "start"))
    state_gaps = evidence_gaps(observations, state=True)
    both = sorted(set(journal_gaps + state_gaps))
    names = ("csn-order", "ssn-order", "group-atomic", "acked-present", "no-double-commit",
             "convergence")
    found: dict[str, list[Anomaly]] = {k: [] for k in names}
    n = {"groups": 0, "ssn_groups": 0, "groups_compared": 0, "reads": 0, "acked": 0,
         "commits": 0, "nodes_with_state": len(_states(nodes))}
    reasons: list[str] = []
    avail: dict[str, int] = {"unresolved": 0, "committed_late": 0, "lost_with_server": 0,
                             "never_taken": 0}
    subs = 0
    views = zone_views(test, nodes, history)
    for zone, (zt, zn, zh) in views.items():
        z = zone if len(views) > 1 else None  # named in anomalies and reasons
        order, groups = check_csn_order(zn)
        ssn, ssn_n = check_ssn_order(zn)
        atomic, compared, reads = check_group_atomic(zn, zh)
        double, commits = check_double_commit(zn)
        for k, anomalies in (("csn-order", order), ("ssn-order", ssn), ("group-atomic", atomic),
                             ("acked-present", check_acked(zn, zh)),
                             ("no-double-commit", double),
                             ("convergence", check_convergence(zn))):
            found[k] += _in_zone(z, anomalies)
        for k, v in (("groups", groups), ("ssn_groups", ssn_n), ("groups_compared", compared),
                     ("reads", reads), ("acked", len(_acked(zh))), ("commits", commits)):
            n[k] += v
        zr, zs, zsubs = _availability(zt, zn, zh)
        reasons += [r if z is None else f"zone {z}: {r}" for r in zr]
        avail = {k: avail[k] + zs[k] for k in avail}
        subs += zsubs
    zones = [z for z in views if z is not None]

    def leaf(name: str, gaps: list[str], *needs: str, seen: tuple[str, ...] = ()) -> Result:
        return verdict(name, found[name], {}, gaps, examined={k: n[k] for k in (*needs, *seen)},
                       needs=needs)

    children = [
        leaf("csn-order", journal_gaps, "groups"),
        leaf("ssn-order", journal_gaps, "ssn_groups"),
        leaf("group-atomic", both, "reads", seen=("groups_compared",)),
        leaf("acked-present", state_gaps, "acked", "nodes_with_state"),
        leaf("no-double-commit", journal_gaps, "commits"),
        leaf("convergence", state_gaps, "nodes_with_state"),
        verdict("availability", [], avail, reasons, examined={"submissions": subs},
                needs=("submissions",)),
    ]
    v = worst(c.valid for c in children)
    bad = [c.checker for c in children if c.valid is False]
    return Result(NAME, v, [], {"zones": zones} if len(zones) > 1 else {}, children,
                  note=f"violated: {', '.join(bad)}" if bad else "")
