"""The SWIM membership leaves that close the four first checks' blind spots (issue 25):
deaths spread by gossip, the leave lifecycle, detection of every long crash and pause,
a connected final graph, refutation of a false suspicion, and the cost of dissemination.

Each takes what ``checkers.membership.check`` has already built (aligned journals, the fault
timeline, final states) and returns one named leaf. Like ``completeness``, a leaf whose
evidence is missing (no journal, no final state) is ``unknown`` with the reason, while a run
that simply never exercised the rule (no leave, no long fault) is *not exercised*
(:func:`checkers.result.not_exercised`, the journals it read counted): compose leaves it out
beside exercised siblings, so correct fault-free runs stay valid.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from checkers.membership import Aligned, Timeline, _journals, _judged, _tracked
from checkers.result import Anomaly, Result

#: kinds of trouble of the *member* that excuse others' verdicts about it (its own leave is
#: judged by check_leave)
_DOWN = ("crashed", "paused", "cut")


def _down(tl: Timeline, node: str, a: float, b: float) -> bool:
    """Was ``node`` crashed, paused or cut at any time in [a, b]?"""
    return any(s <= b and e >= a for d in (tl.crashed, tl.paused, tl.cut)
               for s, e in d.get(node, []))


def check_gossip_accuracy(al: Aligned, tl: Timeline, nodes: list[str], grace: float) -> Result:
    """A death heard by gossip is only as good as the local verdict it came from: one about a
    member healthy within ``grace`` before it, with no member's own verdict at that generation
    behind it, is a forged death, and one below a generation the hearer already held is a
    stale one, whatever the faults (``accuracy`` judges local verdicts only)."""
    local: dict[tuple[str, int], float] = {}
    for o in nodes:
        for e in al.events.get(o, []):
            if e.get("type") == "dead" and e.get("local"):
                key = (e.get("member_name"), int(e.get("gen") or 0))
                local[key] = min(local.get(key, math.inf), e["ht"])
    anomalies: list[Anomaly] = []
    heard = 0
    for o in nodes:
        for e in al.events.get(o, []):
            if e.get("type") != "dead" or e.get("local"):
                continue
            heard += 1
            m, t, g = e.get("member_name"), e["ht"], int(e.get("gen") or 0)
            # a refused claim (refused-generation: a forged generation) was never held
            newer = max((int(v.get("gen") or 0) for v in al.events.get(o, [])
                         if v["ht"] < t and v.get("member_name") == m
                         and not str(v.get("type", "")).startswith("refused")), default=-1)
            if newer > g:  # whatever the faults, a death below a generation it held is stale
                anomalies.append(Anomaly("stale-gossip-death", (
                    f"{o} took {m} as dead at {t:.3f}s from gossip by {e.get('by')} at gen {g}, "
                    f"below the gen {newer} it already held: a stale or forged death"),
                    {"node": o, "member": m, "time_s": round(t, 3), "gen": g, "held": newer,
                     "by": e.get("by")}))
                continue
            if tl.troubled(m, t - grace, t) or tl.troubled(o, t - grace, t):
                continue
            if local.get((m, g), math.inf) <= t + 0.1:
                continue  # a real verdict behind it: accuracy judges that one
            anomalies.append(Anomaly("unfounded-gossip-death", (
                f"{o} took healthy {m} as dead at {t:.3f}s (gen {g}) from gossip by "
                f"{e.get('by')}; no member declared it dead itself at that generation and it "
                f"was not crashed, paused, gone or cut within {grace:.1f}s"),
                {"node": o, "member": m, "time_s": round(t, 3), "gen": g, "by": e.get("by")}))
    r = Result("gossip-accuracy", not anomalies, anomalies[:20],
               {"gossip_deaths": heard, "violations": len(anomalies), "grace_s": grace})
    return _judged(r, {"journals": _journals(al), "gossip_deaths": heard},
                   {"journals": "no node journal on the run's time axis"},
                   "" if heard else "no death was heard by gossip: nothing spread to judge")


def check_leave(al: Aligned, tl: Timeline, nodes: list[str], grace: float,
                window: float) -> Result:
    """After a successful Leave every member that tracked the leaver records it ``left``:
    its first verdict about the leaver must not be ``dead`` (unless a fault separated them),
    and a healthy member must record it within ``window``."""
    anomalies: list[Anomaly] = []
    judged = 0
    for x, spans in sorted(tl.left.items()):
        for s, e in spans:
            end = min(e, tl.end)
            judged += 1
            for o in nodes:
                if o == x:
                    continue
                evs = al.events.get(o, [])
                if not _tracked(evs, x, s):
                    continue
                first = next((v for v in evs if s <= v["ht"] <= end
                              and v.get("member_name") == x
                              and v.get("type") in ("dead", "left")), None)
                if first is not None and first["type"] == "dead":
                    t = first["ht"]
                    if _down(tl, o, s - grace, t) or _down(tl, x, s - grace, t):
                        continue
                    anomalies.append(Anomaly("dead-not-left", (
                        f"{o} declared {x} dead at {t:.3f}s after its Leave succeeded at "
                        f"{s:.3f}s, never recording it left"),
                        {"node": o, "member": x, "leave_s": round(s, 3), "dead_s": round(t, 3)}))
                elif first is None and end - s >= window and not _down(tl, o, s - grace, end):
                    anomalies.append(Anomaly("leave-not-recorded", (
                        f"{o} still held {x} {end - s:.1f}s after its Leave at {s:.3f}s"),
                        {"node": o, "member": x, "leave_s": round(s, 3)}))
    r = Result("leave", not anomalies, anomalies[:20], {"leaves": judged,
                                                        "violations": len(anomalies)})
    return _judged(r, {"journals": _journals(al), "leaves": judged},
                   {"journals": "no node journal on the run's time axis"},
                   "" if judged else "no node left")


def check_detection(al: Aligned, tl: Timeline, nodes: list[str], susp: float,
                    period: float) -> Result:
    """Every crash and every pause at least ``susp`` long is noticed: some other member
    journals the node suspect or dead while it is down (or within a period of its return).
    ``completeness`` judges only crashes long enough to be declared dead everywhere."""
    outages = [("crash", m, a, b) for m, a, b in tl.kills]
    outages += [("pause", m, a, b) for m, spans in tl.paused.items() for a, b in spans]
    anomalies: list[Anomaly] = []
    judged = 0
    for kind, m, a, b in sorted(outages, key=lambda x: (x[2], x[1])):
        b = min(b, tl.end)
        if b - a < susp:
            continue
        judged += 1
        seen = any(v.get("member_name") == m and v.get("type") in ("suspect", "dead")
                   and a <= v["ht"] <= b + period
                   for o in nodes if o != m for v in al.events.get(o, []))
        if not seen:
            anomalies.append(Anomaly(f"undetected-{kind}", (
                f"no member suspected {m} during its {b - a:.1f}s {kind} from {a:.3f}s "
                f"(suspicion timeout {susp:.1f}s)"),
                {"member": m, "kind": kind, "from_s": round(a, 3), "to_s": round(b, 3)}))
    r = Result("detection", not anomalies, anomalies[:20],
               {"outages": judged, "undetected": len(anomalies), "suspicion_timeout_s": susp})
    return _judged(r, {"journals": _journals(al), "outages": judged},
                   {"journals": "no node journal on the run's time axis"},
                   "" if judged else
                   f"no crash or pause lasted the {susp:.1f}s suspicion timeout")


def check_connectivity(states: dict[str, dict[str, Any] | None], nodes: list[str]) -> Result:
    """The final views as a graph (an edge where one live member holds another alive) must be
    connected: with a peer capacity each view is partial, and two disjoint groups each
    internally consistent are not one group."""
    live = [n for n in nodes if states.get(n) is not None and not states[n].get("left")]
    g = nx.Graph()
    g.add_nodes_from(live)
    for o in live:
        for m in (states[o] or {}).get("members", []):
            if m.get("state") == "alive" and m.get("name") in live and m.get("name") != o:
                g.add_edge(o, m["name"])
    parts = [sorted(c) for c in nx.connected_components(g)] if live else []
    anomalies = [] if len(parts) <= 1 else [Anomaly("disconnected", (
        f"the live members' final views form {len(parts)} separate groups: {parts}"),
        {"components": parts})]
    r = Result("connectivity", not anomalies, anomalies,
               {"live": len(live), "components": len(parts), "edges": g.number_of_edges()})
    return _judged(r, {"final_views": sum(1 for n in nodes if states.get(n) is not None),
                       "live": len(live)},
                   {"final_views": "no node's final view was captured",
                    "live": "no live member at the end"})


def check_refutation(al: Aligned, tl: Timeline, nodes: list[str], grace: float,
                     bound: float) -> Result:
    """A live member suspected by another refutes: within ``bound`` it raises its generation
    above the suspected one (its own ``refute``, or anyone journaling it alive above it).
    Suspicions of a member down, gone or cut within ``grace`` of them are not judged."""
    anomalies: list[Anomaly] = []
    judged = 0
    seen: set[tuple[str, int]] = set()
    for o in nodes:
        for e in al.events.get(o, []):
            if e.get("type") != "suspect":
                continue
            m, t, g = e.get("member_name"), e["ht"], int(e.get("gen") or 0)
            if m not in nodes or (m, g) in seen:
                continue
            until = min(t + bound, tl.end)
            if tl.troubled(m, t - grace, until) or until - t < bound:
                continue
            seen.add((m, g))
            judged += 1
            own = any(v.get("type") == "refute" and int(v.get("gen") or 0) > g
                      and t - grace <= v["ht"] <= until for v in al.events.get(m, []))
            heard = any(v.get("member_name") == m and v.get("type") in ("alive", "joined")
                        and int(v.get("gen") or 0) > g and t <= v["ht"] <= until
                        for n in nodes for v in al.events.get(n, []))
            if not (own or heard):
                anomalies.append(Anomaly("unrefuted-suspicion", (
                    f"live {m}, suspected by {o} at {t:.3f}s (gen {g}), did not refute "
                    f"within {bound:.1f}s"), {"node": o, "member": m, "time_s": round(t, 3),
                                              "gen": g}))
    r = Result("refutation", not anomalies, anomalies[:20],
               {"suspicions": judged, "unrefuted": len(anomalies), "bound_s": bound})
    return _judged(r, {"journals": _journals(al), "suspicions": judged},
                   {"journals": "no node journal on the run's time axis"},
                   "" if judged else "no live member was suspected")


def check_cost(states: dict[str, dict[str, Any] | None], nodes: list[str],
               max_msgs: float | None, max_bytes: float | None) -> Result:
    """Datagrams and bytes each member sent per protocol period (its own counters in the final
    state): SWIM's cost per member is constant, whatever the group size."""
    per: dict[str, dict[str, float]] = {}
    for n in nodes:
        st = states.get(n) or {}
        stats, periods = st.get("stats") or {}, int(st.get("period") or 0)
        if periods <= 0 or "datagrams_out" not in stats:
            continue
        per[n] = {"msgs": stats["datagrams_out"] / periods,
                  "bytes": stats.get("bytes_out", 0) / periods}
    anomalies = []
    for n, f in sorted(per.items()):
        for key, cap, unit in (("msgs", max_msgs, "datagrams"), ("bytes", max_bytes, "bytes")):
            if cap is not None and f[key] > cap:
                anomalies.append(Anomaly("dissemination-cost", (
                    f"{n} sent {f[key]:.1f} {unit} per period > {cap}"),
                    {"node": n, unit + "_per_period": round(f[key], 2), "max": cap}))
    msgs = [f["msgs"] for f in per.values()]
    byts = [f["bytes"] for f in per.values()]
    r = Result("cost", not anomalies, anomalies[:20], {
        "max_msgs_per_period": round(max(msgs), 2) if msgs else None,
        "max_bytes_per_period": round(max(byts), 1) if byts else None,
        "limits": {"msgs": max_msgs, "bytes": max_bytes}},
        note="" if max_msgs is not None or max_bytes is not None else "no limit set: reported")
    return _judged(r, {"members_with_counters": len(per)},
                   {"members_with_counters": "no member's final state reported its send "
                                             "counters and period"})
