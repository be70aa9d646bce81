"""The SWIM membership checker: convergence, accuracy, completeness, detection and
dissemination figures, from node journals, final views and the history's nemesis ops.

``check(test, history, observations) -> Result`` with the four children below and the six
of ``checkers.membership_lifecycle`` (gossip-accuracy, leave, detection, refutation,
connectivity, cost):

* ``convergence``: in the final views (taken after heal + quiet period), every live member's
  view holds exactly the live members as ``alive`` (with a peer capacity: only live members,
  at most ``capacity`` of them, and every live member is in some other live member's view).
* ``accuracy``: no live, reachable member declared dead. A death a node declared itself
  (journal ``dead`` with ``local: true``) is a false positive unless, within the
  ``grace`` window before it, the member or the declaring node was crashed, paused or gone,
  or a partition separated the two (`Timeline.separated`: a one-way cut of the declaring node's
  link that a third member's relay goes around excuses nothing), or a latency fault slowed the
  link between them (per pair: a cut or a slow link elsewhere excuses nothing). Loss is *not* an excuse: surviving loss is what indirect probes are for. Reported
  as false positives per member-hour, and false suspicions likewise.
* ``completeness``: every member crashed long enough (``window``) is declared dead (or
  left) by every survivor that was healthy throughout; the time each took.
* ``dissemination``: time to first detection of a crash (first ``suspect``/``dead`` by
  anyone) in protocol periods (the SWIM paper expects e/(e-1) = 1.58), time until every
  survivor has it dead, and how many periods a join takes to reach everyone.

Each leaf fills ``Result.examined`` and is ``unknown`` when it had nothing to judge (no final
view, no journal on the time axis, joins or deaths none of which could be measured). A leaf
whose kind of event never happened (``completeness`` with no crash, ``dissemination`` with no
join through a seed and no death, no leave, no suspicion) is *not exercised*
(:func:`checkers.result.not_exercised`): compose leaves it out beside exercised siblings, so
correct no-kill runs (heavy loss, ten quiet minutes) are judged on accuracy and stay valid.

Thresholds come from ``test["options"]`` (all optional; unset ones only report):
``swim_max_fp_per_member_hour`` (default 0), ``swim_max_false_suspicions_per_member_hour``,
``swim_max_first_detection_periods``, ``swim_max_all_dead_s``,
``swim_max_dissemination_periods`` (the slowest join), ``swim_grace_s``, ``swim_completeness_window_s``.

Time alignment (docs/swim.md): node events carry ``mono`` (the node's CLOCK_MONOTONIC, the
same clock system-wide on Linux); the workload's ``clock-sync`` op records the harness's
``mono`` at a known history time, so ``history_s = mono - offset``. Without it, ``t`` is used
with ``test["started_wall"]`` if present, else the earliest ``start`` event is taken as 0 and
the result notes it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from checkers.observations import evidence_gaps, gone_nodes
from checkers.options import option
from checkers.result import NOT_EXERCISED, Anomaly, Result, compose, not_exercised
from vocabulary.history import pairs

E_RATIO = math.e / (math.e - 1)
JOURNAL_TYPES = ("start", "join-ok", "joined", "alive", "suspect", "dead", "left")
Interval = tuple[float, float]
Op = dict[str, Any]


@dataclass
class Timeline:
    """What the nemesis and the clients really did, per node, on the history's time axis."""

    end: float
    crashed: dict[str, list[Interval]] = field(default_factory=dict)
    paused: dict[str, list[Interval]] = field(default_factory=dict)
    left: dict[str, list[Interval]] = field(default_factory=dict)
    cut: dict[str, list[Interval]] = field(default_factory=dict)
    slowed: list[Interval] = field(default_factory=list)
    kills: list[tuple[str, float, float]] = field(default_factory=list)  # node, down, up
    #: the node pairs a partition separated, and when
    cut_pairs: list[tuple[frozenset[str], float, float]] = field(default_factory=list)
    #: each partition's directed flows cut (src, dst), and when
    cut_flows: list[tuple[frozenset[tuple[str, str]], float, float]] = field(
        default_factory=list)
    nodes: list[str] = field(default_factory=list)
    #: each latency fault's span and the node pairs it slowed (None: every pair)
    slow_links: list[tuple[float, float, frozenset[frozenset[str]] | None]] = field(
        default_factory=list)

    def troubled(self, node: str, a: float, b: float) -> bool:
        """Was ``node`` crashed, paused, gone or cut at any time in [a, b]?"""
        for d in (self.crashed, self.paused, self.left, self.cut):
            if any(s <= b and e >= a for s, e in d.get(node, [])):
                return True
        return False

    def slowed_in(self, a: float, b: float) -> bool:
        return any(s <= b and e >= a for s, e in self.slowed)

    def down(self, node: str, a: float, b: float) -> bool:
        """Was ``node`` crashed, paused or gone (not merely cut) at any time in [a, b]?"""
        return any(s <= b and e >= a for d in (self.crashed, self.paused, self.left)
                   for s, e in d.get(node, []))

    def separated(self, x: str, y: str, a: float, b: float) -> bool:
        """Could a partition at any time in [a, b] have failed ``x``'s probe of ``y``? It
        could when ``y``'s answer to ``x`` was cut (a relayed probe is answered directly), or
        ``x -> y`` was cut and no third member relayed both ways between them (SWIM's
        indirect probes exist for exactly that). A one-way cut ``x -> y`` alone excuses
        ``y``'s verdict on ``x``, not ``x``'s on ``y``."""
        for flows, s, e in self.cut_flows:
            if s > b or e < a:
                continue
            if (y, x) in flows:
                return True
            if (x, y) in flows and not any(
                    not {(x, k), (k, x), (k, y), (y, k)} & flows
                    for k in self.nodes if k not in (x, y)):
                return True
        return False

    def slowed_between(self, x: str, y: str, a: float, b: float) -> bool:
        """Was a latency fault on the link between ``x`` and ``y`` at any time in [a, b]?"""
        pair = frozenset((x, y))
        return any(s <= b and e >= a and (links is None or pair in links)
                   for s, e, links in self.slow_links)


def _names(v: Any) -> list[str]:
    if isinstance(v, dict):
        v = v.get("nodes", v.get("node"))
    if isinstance(v, str):
        return [v]
    return [str(x) for x in v] if isinstance(v, list) else []


def build_timeline(history: list[Op], nodes: list[str]) -> Timeline:
    """Fault and leave intervals from nemesis completions and client leave/join ops."""
    end = max((o.get("time", 0) for o in history), default=0) / 1e9
    tl = Timeline(end=end, nodes=list(nodes))
    open_: dict[tuple[str, str], float] = {}
    cut_since: dict[str, float] = {}
    pairs_since: dict[frozenset[str], float] = {}
    flows_since: list[tuple[frozenset[tuple[str, str]], float]] = []
    slow_since: float | None = None
    slow_pairs: frozenset[frozenset[str]] | None = None

    def close(kind: str, node: str, t: float, into: dict[str, list[Interval]]) -> None:
        s = open_.pop((kind, node), None)
        if s is not None:
            into.setdefault(node, []).append((s, t))
            if kind == "crashed":
                tl.kills.append((node, s, t))

    def close_cuts(t: float) -> None:
        for n, s in list(cut_since.items()):
            tl.cut.setdefault(n, []).append((s, t))
        cut_since.clear()
        tl.cut_pairs.extend((p, s, t) for p, s in pairs_since.items())
        pairs_since.clear()
        tl.cut_flows.extend((f, s, t) for f, s in flows_since)
        flows_since.clear()

    def close_slow(t: float) -> None:
        nonlocal slow_since
        if slow_since is not None:
            tl.slowed.append((slow_since, t))
            tl.slow_links.append((slow_since, t, slow_pairs))
            slow_since = None

    done = sorted((p for p in pairs(history) if p.complete is not None),
                  key=attrgetter("done_at"))
    for p in done:  # in completion order: a fault is in force from its invocation on
        o, start = p.complete, p.invoke.get("time", 0) / 1e9
        t = o.get("time", 0) / 1e9
        f = o.get("f")
        if o.get("process") != "nemesis":
            if o.get("type") == "ok" and f in ("leave", "join"):
                n = str(o.get("value", {}).get("node") if isinstance(o.get("value"), dict)
                        else o.get("value"))
                if f == "leave":
                    open_[("left", n)] = start
                else:
                    close("left", n, t, tl.left)
            continue
        v = o.get("value") if isinstance(o.get("value"), dict) else {}
        if f == "kill":
            for n in _names(v):
                open_[("crashed", n)] = start
        elif f == "restart":
            for n in _names(v):
                close("crashed", n, t, tl.crashed)
        elif f == "pause":
            for n in _names(v):
                open_[("paused", n)] = start
        elif f == "resume":
            for n in _names(v):
                close("paused", n, t, tl.paused)
        elif f == "start-partition":
            close_cuts(t)
            for a, b in v.get("cut", []):
                cut_since.setdefault(str(a), start)
                cut_since.setdefault(str(b), start)
                pairs_since.setdefault(frozenset((str(a), str(b))), start)
            flows_since.append((frozenset((str(a), str(b)) for a, b in v.get("cut", [])), start))
        elif f == "stop-partition":
            close_cuts(t)
        elif f == "start-latency":
            close_slow(start)
            slow_since = start
            links = v.get("flows", v.get("links"))  # the applied links, else the asked ones
            slow_pairs = None if links is None else frozenset(
                frozenset((str(a), str(b))) for a, b in links)
        elif f == "stop-latency":
            close_slow(t)
        elif f == "heal-all":
            close_cuts(t)
            close_slow(t)
            for n in _names(v.get("resumed", [])):
                close("paused", n, t, tl.paused)
            for n in _names(v.get("restarted", [])):
                close("crashed", n, t, tl.crashed)
    for kind, n in list(open_):  # still open at the end
        into = {"crashed": tl.crashed, "paused": tl.paused, "left": tl.left}[kind]
        close(kind, n, math.inf, into)
    close_cuts(math.inf)
    close_slow(math.inf)
    return tl


@dataclass
class Aligned:
    """Node events on the history's time axis, with the member named by node name."""

    events: dict[str, list[dict[str, Any]]]
    method: str
    end: float | None = None  # the final-state snapshot, on the history's axis


def align(test: dict[str, Any], history: list[Op], observations: dict[str, Any],
          names: dict[int, str]) -> Aligned:
    nodes = observations.get("nodes", {})
    mono_off: float | None = None
    syncs = sorted((p for p in pairs(history) if p.invoke.get("f") == "clock-sync"
                    and p.outcome == "ok" and isinstance(p.complete["value"], dict)),
                   key=attrgetter("done_at"))
    if syncs:  # the first: the node's monotonic clock read at the midpoint of the call
        inv, done = syncs[0].invoke, syncs[0].complete
        mono_off = float(done["value"]["mono"]) - (inv["time"] + done["time"]) / 2e9
    method = "clock-sync"
    wall_off: float | None = None
    if mono_off is None:
        if test.get("started_wall") is not None:
            wall_off, method = float(test["started_wall"]), "test.started_wall"
        else:
            starts = [e["t"] for n in nodes.values() for e in n.get("events", [])
                      if e.get("type") == "start" and "t" in e]
            wall_off, method = (min(starts) if starts else 0.0), "approximate: first start = 0"
    # events after the final-state snapshot are the harness tearing the group down (nodes
    # stopped one by one are "detected" by the rest): not part of the run
    cutoffs = [float(n["state"]["mono"]) for n in nodes.values()
               if isinstance(n.get("state"), dict) and "mono" in n["state"]]
    cutoff = max(cutoffs) if cutoffs and mono_off is not None else math.inf
    out: dict[str, list[dict[str, Any]]] = {}
    for name, n in nodes.items():
        evs = []
        for e in n.get("events", []):
            if float(e.get("mono", -math.inf)) > cutoff:
                continue
            if mono_off is not None and "mono" in e:
                ht = float(e["mono"]) - mono_off
            elif wall_off is not None and "t" in e:
                ht = float(e["t"]) - wall_off
            else:
                continue
            ev = {**e, "ht": ht}
            if "member" in e:
                ev["member_name"] = names.get(int(e["member"]), str(e["member"]))
            evs.append(ev)
        out[name] = evs
    end = cutoff - mono_off if mono_off is not None and cutoff != math.inf else None
    return Aligned(out, method, end)


def _stats(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    return {"n": len(xs), "mean": round(statistics.fmean(s), 4), "min": round(s[0], 4),
            "p50": round(s[len(s) // 2], 4), "max": round(s[-1], 4)}


# ------------------------------------------------------------------------ the four checks


def _judged(r: Result, examined: dict[str, int], needs: dict[str, str],
            idle: str = "") -> Result:
    """Attach what ``r`` examined; a pass that lacked a needed count (``needs``: key -> why it
    matters, in words) proved nothing, so it becomes "unknown" with those reasons. ``idle``
    (the evidence was there, but the run had nothing of this leaf's kind) makes it
    :func:`not_exercised` with that reason: unknown, left out beside exercised siblings."""
    r.examined = examined
    why = [reason for key, reason in needs.items() if not examined.get(key)]
    if r.valid is True and why:
        r.valid, r.note = "unknown", "nothing to judge: " + "; ".join(why)
        r.stats["vacuous"] = True
    elif r.valid is True and idle:
        return not_exercised(r.checker, idle, r.stats, examined)
    return r


def _journals(al: Aligned) -> int:
    """Nodes with at least one journal event on the history's time axis."""
    return sum(1 for evs in al.events.values() if evs)


def check_convergence(states: dict[str, dict[str, Any] | None], nodes: list[str],
                      ever_started: set[str], gone: Collection[str] = ()) -> Result:
    """Every live member's final view holds exactly the other live members as alive. A node
    with no final state is neither required nor forbidden, unless it was killed for good
    (``gone``): that is no gap, and the others must have it dead or left, not alive."""
    anomalies: list[Anomaly] = []
    missing = [n for n in nodes if states.get(n) is None and n in ever_started and n not in gone]
    live = {n for n in nodes if states.get(n) is not None and not states[n].get("left")}
    views: dict[str, set[str]] = {}
    for o in sorted(live):
        st = states[o] or {}
        alive = {m.get("name") for m in st.get("members", []) if m.get("state") == "alive"}
        alive -= set(missing)  # a node we could not ask: neither required nor forbidden
        views[o] = alive
        want = live - {o}
        cap = int(st.get("capacity") or 0)
        if cap <= 0 or cap >= len(want):
            if alive != want:
                anomalies.append(Anomaly("view-mismatch", (
                    f"{o}'s final view differs from the live members: missing "
                    f"{sorted(want - alive)}, wrongly alive {sorted(alive - want)}"),
                    {"node": o, "missing": sorted(want - alive), "extra": sorted(alive - want),
                     "view": st.get("members")}))
        else:
            if alive - want:
                anomalies.append(Anomaly("view-mismatch", (
                    f"{o} holds non-live members as alive: {sorted(alive - want)}"),
                    {"node": o, "extra": sorted(alive - want)}))
            if len(alive) > cap:
                anomalies.append(Anomaly("over-capacity", (
                    f"{o} tracks {len(alive)} members, over its capacity {cap}"),
                    {"node": o, "capacity": cap, "view": sorted(alive)}))
    for n in sorted(live):
        if len(live) > 1 and not any(n in views[o] for o in live if o != n):
            anomalies.append(Anomaly("orphan", f"no live member tracks {n}: it is not in the group",
                                     {"node": n}))
    valid: Any = not anomalies
    note = ""
    if valid and missing:
        valid, note = "unknown", f"no final state from {missing}"
    r = Result("convergence", valid, anomalies[:20], {
        "live": sorted(live), "view_sizes": {o: len(v) for o, v in views.items()},
        "violations": len(anomalies)}, note=note)
    return _judged(r, {"final_views": sum(1 for n in nodes if states.get(n) is not None),
                       "live": len(live)},
                   {"final_views": "no node's final view was captured",
                    "live": "no live member at the end"})


def check_accuracy(al: Aligned, tl: Timeline, nodes: list[str], grace: float,
                   max_fp_rate: float | None, max_fs_rate: float | None) -> Result:
    fps: list[Anomaly] = []
    false_suspicions = 0
    deaths = suspicions = 0
    for o in nodes:
        for e in al.events.get(o, []):
            if e.get("type") not in ("dead", "suspect") or not e.get("local"):
                continue
            suspicions += int(e["type"] == "suspect")
            m, t = e.get("member_name"), e["ht"]
            # per pair: a cut or a slow link excuses only verdicts across it
            excused = (tl.down(m, t - grace, t) or tl.down(o, t - grace, t)
                       or tl.separated(o, m, t - grace, t)
                       or tl.slowed_between(o, m, t - grace, t))
            if e["type"] == "dead":
                deaths += 1
                if not excused:
                    fps.append(Anomaly("false-positive", (
                        f"{o} declared live, reachable {m} dead at {t:.3f}s (gen {e.get('gen')}); "
                        f"no crash, pause or leave of either, nor cut or latency between them, within {grace:.1f}s"),
                        {"node": o, "member": m, "time_s": round(t, 3), "event": e}))
            elif not excused:
                false_suspicions += 1
    hours = max(tl.end, 1e-9) / 3600 * max(len(nodes), 1)
    fp_rate = len(fps) / hours
    fs_rate = false_suspicions / hours
    valid = True
    notes = []
    if max_fp_rate is not None and fp_rate > max_fp_rate:
        valid = False
        notes.append(f"{len(fps)} false positives = {fp_rate:.1f}/member-hour > {max_fp_rate}")
    if max_fs_rate is not None and fs_rate > max_fs_rate:
        valid = False
        notes.append(f"{false_suspicions} false suspicions = {fs_rate:.1f}/member-hour > "
                     f"{max_fs_rate}")
    r = Result("accuracy", valid, fps[:20], {
        "false_positives": len(fps), "fp_per_member_hour": round(fp_rate, 3),
        "false_suspicions": false_suspicions, "false_suspicions_per_member_hour":
        round(fs_rate, 3), "local_death_declarations": deaths, "grace_s": grace,
        "member_hours": round(hours, 4)}, note="; ".join(notes))
    # no suspicion at all is the ideal outcome, not a gap: only the journals are needed
    return _judged(r, {"journals": _journals(al), "suspicions": suspicions, "deaths": deaths},
                   {"journals": "no node journal on the run's time axis"})


def _first(evs: Iterable[dict[str, Any]], member: str, types: tuple[str, ...], a: float,
           b: float) -> float | None:
    ts = [e["ht"] for e in evs if e.get("type") in types and e.get("member_name") == member
          and a <= e["ht"] <= b]
    return min(ts) if ts else None


def _tracked(evs: list[dict[str, Any]], member: str, t: float) -> bool:
    """Did this node hold ``member`` in its view (alive or suspect) at time ``t``?"""
    last = None
    for e in evs:
        if e["ht"] > t:
            break
        if e.get("member_name") == member and e.get("type") in (
                "joined", "alive", "suspect", "dead", "left", "evicted", "dropped"):
            last = e["type"]
    # "evicted" (made room, capacity) and "dropped" (it no longer tracks us) leave the view
    return last in ("joined", "alive", "suspect")


def check_completeness(al: Aligned, tl: Timeline, nodes: list[str], window: float,
                       period: float, max_first_periods: float | None,
                       max_all_dead_s: float | None, capacity: int = 0) -> Result:
    """With a peer capacity, only the members that tracked the victim must declare it."""
    anomalies: list[Anomaly] = []
    firsts: list[float] = []
    whole: list[float] = []
    all_dead: list[float] = []
    per_observer: list[float] = []
    judged = skipped = 0
    for m, down, up in tl.kills:
        up_eff = min(up, tl.end)
        fd = min((t for o in nodes if o != m for t in [
            _first(al.events.get(o, []), m, ("suspect", "dead"), down, up_eff)] if t is not None),
            default=None)
        if fd is not None:
            firsts.append((fd - down) / period)
        acc = min((t for o in nodes if o != m for t in [_first(
            [e for e in al.events.get(o, []) if e.get("local")], m, ("suspect",), down, up_eff)]
            if t is not None), default=None)
        if acc is not None:
            # the paper's count: whole protocol periods the accuser began after the crash,
            # up to the one whose probe failed (the partial period of the crash not counted)
            whole.append(float(math.floor((acc - down) / period + 1e-9)))
        if up_eff - down < window:
            skipped += 1
            continue
        judged += 1
        observers = [o for o in nodes if o != m and not tl.troubled(o, down, up_eff)
                     and (capacity <= 0 or _tracked(al.events.get(o, []), m, down))]
        times = []
        for o in observers:
            t = _first(al.events.get(o, []), m, ("dead", "left"), down, up_eff)
            if t is None:
                anomalies.append(Anomaly("undetected-crash", (
                    f"{o} never declared crashed {m} dead during its {up_eff - down:.1f}s down "
                    f"time (from {down:.3f}s)"), {"node": o, "member": m, "down_s": round(down, 3),
                                                  "up_s": round(up_eff, 3)}))
            else:
                times.append(t - down)
        per_observer += times
        if times and len(times) == len(observers):
            all_dead.append(max(times))
    valid = not anomalies
    notes = []
    mean_first = statistics.fmean(whole) if whole else None
    if max_first_periods is not None and mean_first is not None and mean_first > max_first_periods:
        valid = False
        notes.append(f"mean first detection {mean_first:.2f} periods > {max_first_periods}")
    if max_all_dead_s is not None and all_dead and statistics.fmean(all_dead) > max_all_dead_s:
        valid = False
        notes.append(f"mean time until all survivors mark dead {statistics.fmean(all_dead):.2f}s"
                     f" > {max_all_dead_s}")
    r = Result("completeness", valid, anomalies[:20], {
        "crashes": len(tl.kills), "judged": judged, "too_short": skipped,
        "first_detection_periods": _stats(whole), "first_detection_since_crash_periods":
        _stats(firsts), "expected_first_detection_periods":
        round(E_RATIO, 3), "all_survivors_dead_s": _stats(all_dead),
        "per_observer_dead_s": _stats(per_observer), "window_s": window},
        note="; ".join(notes))
    # no crash long enough to judge: not exercised (correct no-kill runs, heavy loss or ten
    # quiet minutes, are judged by accuracy; compose leaves this leaf out beside it)
    idle = ("no node crashed" if not tl.kills else
            f"{skipped} crash(es) shorter than the {window:.1f}s window, none judged")
    return _judged(r, {"journals": _journals(al), "crashes": len(tl.kills), "judged": judged,
                       "detected": len(firsts)},
                   {"journals": "no node journal on the run's time axis"},
                   "" if judged else idle)


def _death_episodes(al: Aligned, nodes: list[str]) -> list[tuple[str, float]]:
    """(member, first local verdict) per death of each member: one per generation it was
    declared dead at, so a death across a partition does not hide a later one."""
    first: dict[tuple[str, int], float] = {}
    for o in nodes:
        for e in al.events.get(o, []):
            if e.get("type") == "dead" and e.get("local") and e.get("member_name") in nodes:
                key = (e["member_name"], int(e.get("gen") or 0))
                first[key] = min(first.get(key, math.inf), e["ht"])
    return sorted(((m, t) for (m, _g), t in first.items()), key=lambda x: (x[0], x[1]))


def _joiner_troubled(tl: Timeline, j: str, t0: float, window: float, period: float) -> bool:
    """``tl.troubled`` for joiner ``j`` whose ``join-ok`` is at ``t0``, except the left span
    this join ends: it closes at the ``join`` op's completion, which the harness may record
    after the node's own ``join-ok`` (the JoinAck over loopback UDP beats the HTTP answer on
    a loaded machine), and would leave the rejoin unjudged."""
    left = [(s, e) for s, e in tl.left.get(j, []) if not s <= t0 <= e <= t0 + period]
    return tl.troubled(j, t0, t0 + window) if left == tl.left.get(j, []) else \
        dataclasses.replace(tl, left={**tl.left, j: left}).troubled(j, t0, t0 + window)


def check_dissemination(al: Aligned, tl: Timeline, nodes: list[str], window: float,
                        period: float, max_periods: float | None, capacity: int) -> Result:
    """Joins are measured only where joiner and observers stayed healthy for ``window``."""
    joins: list[float] = []
    deaths: list[float] = []
    incomplete = 0
    #: each join measured (None: it never reached every member), so a reader sees which
    #: join, at which generation, set the verdict (a sim replay's rejoin, say)
    judged: list[dict[str, Any]] = []
    candidates = 0  # joins through a seed and death episodes, measurable or not
    for j in nodes:
        for e in al.events.get(j, []):
            if e.get("type") != "join-ok" or e.get("seed") is None:
                continue
            candidates += 1
            t0, gen = e["ht"], e.get("gen", 0)
            if _joiner_troubled(tl, j, t0, window, period):
                continue
            # observers already in the group when j joined (a later starter learns j from
            # its own JoinAck: that measures its start-up, not dissemination)
            others = [o for o in nodes if o != j and not tl.troubled(o, t0, t0 + window)
                      and any(x.get("type") == "join-ok" and x["ht"] < t0
                              for x in al.events.get(o, []))]
            seen = []
            for o in others:
                ts = [x["ht"] for x in al.events.get(o, []) if x.get("type") in ("joined", "alive")
                      and x.get("member_name") == j and (x.get("gen") or 0) >= gen
                      and x["ht"] >= t0 - period]
                if ts:
                    seen.append(min(ts))
            if others and len(seen) == len(others):
                joins.append(max(0.0, max(seen) - t0) / period)
                judged.append({"node": j, "gen": gen, "at_s": round(t0, 3),
                               "periods": round(joins[-1], 2)})
            elif others:
                incomplete += 1
                judged.append({"node": j, "gen": gen, "at_s": round(t0, 3), "periods": None})
    for m, t0 in _death_episodes(al, nodes):
        candidates += 1
        per = []
        for o in nodes:
            if o == m or tl.troubled(o, t0, t0):
                continue
            t = _first(al.events.get(o, []), m, ("dead",), t0, math.inf)
            if t is not None:
                per.append(t - t0)
        if per:
            deaths.append(max(per) / period)
    valid: Any = True
    note = ""
    if max_periods is not None and joins and max(joins) > max_periods:
        valid, note = False, (f"the slowest join took {max(joins):.1f} periods to reach "
                              f"everyone > {max_periods}")
    if max_periods is not None and capacity <= 0 and incomplete:
        valid = False
        note = (note + "; " if note else "") + f"{incomplete} join(s) never reached every member"
    r = Result("dissemination", valid, [], {
        "join_periods": _stats(joins), "joins_not_everywhere": incomplete,
        "joins_judged": judged[:20], "death_spread_periods": _stats(deaths)}, note=note)
    spreads = len(joins) + incomplete + len(deaths)
    # no join through a seed and no death at all: nothing of this leaf's kind happened (not
    # exercised); some, but none measurable (troubled joiner or observers): plain unknown
    return _judged(r, {"journals": _journals(al), "joins": len(joins) + incomplete,
                       "deaths": len(deaths), "spreads": spreads},
                   {"journals": "no node journal on the run's time axis",
                    **({"spreads": f"{candidates} join(s) or death(s), none seen spreading "
                                   "among healthy members: dissemination not measured"}
                       if candidates else {})},
                   "" if candidates else "no join through a seed and no death to spread")


def _natural(name: str) -> tuple[str, int, str]:
    """``n2`` before ``n10``: the order nodes are numbered in, not the order of their names."""
    m = re.fullmatch(r"(\D*)(\d+)(.*)", name)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (name, 0, "")


def member_names(nodes: list[str], obs_nodes: dict[str, Any]) -> dict[int, str]:
    """Member id -> node name: what the nodes themselves say (each final state's ``num_id``
    and the names in its view) first, else the test's node list in its order (ids 1..n)."""
    names = {i + 1: n for i, n in enumerate(nodes)}
    for name, n in obs_nodes.items():
        st = n.get("state") if isinstance(n.get("state"), dict) else {}
        if st.get("num_id") is not None:
            names[int(st["num_id"])] = str(name)
        for m in st.get("members", []):
            if m.get("id") is not None and m.get("name"):
                names[int(m["id"])] = str(m["name"])
    return names


def check(test: dict[str, Any], history: list[Op], observations: dict[str, Any]
                     ) -> Result:
    """The composed SWIM membership verdict (see the module docstring)."""
    from checkers import membership_lifecycle as lc  # its leaves build on this module's

    obs_nodes = observations.get("nodes", {})
    nodes = [str(n) for n in (test.get("nodes") or sorted(obs_nodes, key=_natural))]
    names = member_names(nodes, obs_nodes)
    node_opts = next((e.get("options") or {} for n in obs_nodes.values()
                      for e in n.get("events", []) if e.get("type") == "start"), {})
    period = float(option(test, "period_s", node_opts.get("period_s", 1.0)))
    mult = float(option(test, "suspicion_mult", node_opts.get("suspicion_mult", 4.0)))
    susp = mult * max(1.0, math.log10(max(len(nodes), 1))) * period
    grace = float(option(test, "swim_grace_s", susp + 3 * period))
    window = float(option(test, "swim_completeness_window_s", susp + 10 * period))
    tl = build_timeline(history, nodes)
    al = align(test, history, observations, names)
    if al.end is not None:
        tl.end = max(tl.end, al.end)
    states = {n: (obs_nodes.get(n) or {}).get("state") for n in nodes}
    started = {n for n in nodes if (obs_nodes.get(n) or {}).get("events")}
    gone = gone_nodes(observations)
    capacity = int(option(test, "capacity", node_opts.get("capacity", 0)) or 0)
    results = [
        check_convergence(states, nodes, started, gone),
        check_accuracy(al, tl, nodes, grace, option(test, "swim_max_fp_per_member_hour", 0.0),
                       option(test, "swim_max_false_suspicions_per_member_hour")),
        check_completeness(al, tl, nodes, window, period,
                           option(test, "swim_max_first_detection_periods"),
                           option(test, "swim_max_all_dead_s"), capacity),
        check_dissemination(al, tl, nodes, window, period,
                            option(test, "swim_max_dissemination_periods"), capacity),
        lc.check_gossip_accuracy(al, tl, nodes, grace),
        lc.check_leave(al, tl, nodes, grace, window),
        lc.check_detection(al, tl, nodes, susp, period),
        lc.check_refutation(al, tl, nodes, grace, window),
        lc.check_connectivity(states, nodes),
        lc.check_cost(states, nodes, option(test, "swim_max_msgs_per_member_period"),
                      option(test, "swim_max_bytes_per_member_period")),
    ]
    gaps = evidence_gaps(observations, event_types=JOURNAL_TYPES)
    if gaps:
        for r in results[1:-2]:  # the journal-based checks: no silent pass on torn evidence
            if r.valid is True or r.stats.pop(NOT_EXERCISED, None):  # nor "none" on them
                r.valid, r.note = "unknown", "journal gaps: " + "; ".join(gaps[:5])
    top = compose("membership", results)
    top.stats = {**top.stats, "alignment": al.method, "period_s": period, "suspicion_timeout_s": round(susp, 3),
                 "nodes": len(nodes), "duration_s": round(tl.end, 3)}
    bad = [r.checker for r in results if r.valid is False]
    if bad:
        top.note = "invalid: " + ", ".join(bad)
    return top
