"""A sim replay file as a real run (``harness run --from FILE``): the schedule's faults as real
nemesis ops at the schedule's times, the same bug modes, the protocol's own workload and
checkers, and whether the real run confirms the simulated finding.

The simulator and the real nemesis do not share every fault, so the mapping says what it did
with each step (``Mapped.notes``), never silently:

- ``partition``: the target's shape as a nemesis partition (isolate, a 2/3 split as explicit
  groups, the bridge shape, a one-way isolation). The simulator's partitions add up until a
  heal; the real nemesis holds one partition at a time, so a later one replaces an earlier one.
- SDS ``gone`` with ``a % 5`` from 1 to 4 (a node that dies broadcasting its last send,
  which reached only the next ``a`` peers): its links to the others cut one way (an explicit
  ``start-partition``, over a partition that is on), a ``last-send`` op (harness/last_send.py:
  one send through the workload's client, waited for until those ``a`` peers hold it), the
  ``kill`` for good, and the cut healed (the partition before it put back); the run's length
  then includes the op's longest wait (`HOLD_TIMEOUT_S`), so the kill is never past the time
  limit; other ``gone`` steps are the plain ``kill`` for good.
- ``crash`` -> ``kill``, ``restart`` -> ``restart`` of every killed node (a restart of a node that
  is up is a kill then a restart), ``pause``/``resume`` -> ``pause``/``resume``. A kill is
  SIGKILL: Garlic Farm's ``ack-before-fsync`` loses its unflushed buffer as the sim's crash
  does, the buffer flushed at the sim's period and a restarted server reached within a
  heartbeat, as the sim's datagrams reach it (`GF_SIM`); servers still crashed when a Garlic
  Farm schedule ends restart then (a ``heal-all`` op: the sim's last heal), not at the time
  limit.
- ``delay`` -> ``start-latency`` (Toxiproxy on TCP, the relay on UDP) with the target's latency
  and jitter; ``loss``/``dup`` -> ``start-loss``/``start-duplicate`` on UDP protocols; on TCP
  (Toxiproxy has no loss of a stream's bytes) they are skipped and said so.
- Client steps (``write``, ``send``, ``update``, ``race``, ``read``...) are left to the
  workload, which issues its own.
- Membership: Garlic Farm's ``remove`` of server ``a`` -> ``remove-server`` of that node
  (harness/gf_remove.py: an administrator's RemoveServer straight to the leader, as the sim's
  request is). When the sim's request met a leader with nothing of its term committed, or
  none (`gf_search.fresh_leader_steps` replays the schedule to know), the op has
  ``next_leader``: it goes to such a leader, or watches every node for the next one and
  sends the moment it is seen, from the step before's time when the sim elected that leader
  since then (real elections do not come when the simulated ones did); and ``hold``: that
  leader's links to the members but the removed one are cut until its change is appended
  (on real TCP links the LeaveCluster waits behind the first entry on the removed member's
  link, so that entry would always commit first; the sim's datagrams may overtake). ``add`` is played the old way (not an operator's
  AddServer to the leader, as ``remove`` is): a fresh server (n6, then n7; at most
  `GF_MAX_ADDED`) in ``options.late_nodes``, its ports reserved with the others', started by
  a ``join`` op at the step's time, whose AddServerRequest goes to the leader it finds (the
  sim's ``add`` names one of its five: a member, which the leader refuses, or one a
  ``remove`` took out: said so). No ``random``/``follower`` pick names a fresh server before
  its ``join`` (`faults.nemesis.Nemesis.unstarted`). A DRiP ``decommission`` of node ``b`` ->
  the cluster's ``decommission`` op.
- ``hostile`` (SWIM, SDS, ANTACID, DRiP, Garlic Farm) -> ``start-hostile`` of one burst (``interval_s``
  `ONE_BURST_S`) at the step's node, ``stop-hostile`` `Profile.hostile_s` later or at the next
  burst (its completion says what was sent). The sim's choice ``a`` of kinds is the real
  burst's ``skip`` where the kinds are named (SWIM: the attacker's own or the forged ones;
  SDS: without truncated and garbage); ANTACID's "only what reaches the core" is not matched,
  said so. DRiP's ``1 + 2a`` requests per flood kind is the run's ``hostile_flood`` (one per
  run: the largest), its lying key holder on for the modes the sim lies for (`LIES_FOR`). The
  real bytes are drawn from the run's seed. Garlic Farm's burst goes to the step's pick
  (``leader``/``follower``, resolved by the nemesis) as a compromised member sends it
  (nodes/garlicfarm/hostile_driver.py: TLS and Digest with the run's credentials); ``a % 3``
  1 leaves out the member-link kinds, 2 the outsider kinds; the outsider kinds also go out
  without credentials, which the sim does not send (said so).
- DRiP (the sim's ring n1..n4 with the chord n2-n4 is the real mesh, `FixedTopology`): ``cut``
  of edge ``a`` adds that link to the cut set (the real partition is the set so far, both
  ways, as one explicit partition); ``isolate`` cuts node ``b``'s links and gives them back
  ``a`` + 1 s later (with ``a`` >= 2 its link to its first peer 1 s in, as the sim's);
  ``stall`` pauses node ``b`` at once and resumes it ``a`` + 1 s later (the sim's wait for a
  vote to reach it is not matched: said so); ``rejoin`` restarts node ``b``; ``sever`` cuts
  every link out of node ``b`` one way for 4 + ``a`` s (over the cuts on) and, with ``a``
  even, decommissions ``b`` at once (not when the sim's guard would not). The updates these
  steps (and a lying ``hostile`` step) start in the sim are left to the workload, said so in
  the step's note.
- ANTACID: the sim's primary ``p`` and replicas ``r1..r3`` are n1..n4, each replica with the
  sim's upstreams in its order (r1 <- p; r2 <- r1, p; r3 <- r2, p) and the sim's pull interval
  and reorder timeout. A file of several zones (``zones``, ``harness sim run --zones``) runs as
  many (test option ``zone_count``): the suite's zone k (``zone<k>.test``) is the sim's, its
  primary node k and its upstreams the sim's (test option ``zone_upstream``).

- SWIM: the real nodes run the sim's timers (1 s periods, ``Profile.options``; the suite's
  default is 0.5 s), so the schedule's times and the sim's bounds, counted in periods, mean
  the same; ``leave``/``rejoin`` are the workload's ops (test option ``swim_plan``, counted
  from the workload's start as the nemesis's schedule is: ``swim_plan_origin``). The sim's
  last heal then its settle's rejoin of every member still out: a ``heal-all`` op at the
  end of the schedule, the joins `SWIM_REJOIN_AFTER_HEAL_S` later, and the run goes on for
  `SWIM_SETTLE_PERIODS` periods after them. A ``gossip-too-slow`` witness sets
  ``swim_max_dissemination_periods`` to the sim's bound or, when lower, half a period under
  the joiner's own-probe floor (`swim_gossip_bound`: 2.5 at 5 members), and the joiner
  rejoins `SWIM_GOSSIP_SAMPLES` times (the dissemination leaf of ``checkers.membership``
  judges each join at that bound).

Node picks: Garlic Farm's target counts ``b`` from the leader (0 is the leader), so ``b % 5 ==
0`` becomes ``"leader"`` and the rest ``"follower"`` (the real run cannot know which follower
the simulation's order meant); the other targets pick member ``b`` by name (server ``k`` of
the sim is ``n<k>``). Bug modes are the file's: ``NAME@1,3`` runs the mode on n1 and n3 only
(`harness.spec.node_bugs`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from faults.schedules import Step as NemesisStep
from faults.schedules import op
from harness.last_send import HOLD_TIMEOUT_S

#: the replay file fields that tell it apart from a run's test.json
MARKS = ("schedule", "trace_sha256")


class Unsupported(ValueError):
    """A usable replay file this real run cannot play as asked (a clock rate off the local
    backend): said before anything starts."""


def is_replay(record: Any) -> bool:
    """A sim replay file (`harness.sim.replayfile`), not a stored run's test.json."""
    return isinstance(record, dict) and all(k in record for k in MARKS) and "faults" not in record


@dataclass(frozen=True)
class Profile:
    """How one search target's schedule reads as real faults."""

    nodes: int
    transport: str  # "tcp": no loss/dup; "udp": the relay has both
    delay: tuple[float, float, float]  # the target's latency base, per-a, jitter per-b (s)
    lead_in_s: float  # simulated time before the schedule (a leader, a formed group)
    leader_relative: bool = False  # b counts from the leader (Garlic Farm's _pick)
    #: the sim's mesh when not everyone talks (undirected edges over n1..)
    edges: tuple[tuple[str, str], ...] | None = None
    #: test options that make the real cluster the sim's (topology, timers)
    options: dict[str, Any] = field(default_factory=dict)
    #: real seconds one ``hostile`` burst is given before its ``stop-hostile`` (None: the
    #: real protocol offers no hostile fault)
    hostile_s: float | None = None


#: SWIM step kinds under which a correct member may suspect without a cut or crash to
#: excuse it: a replay without them holds the real run to no false suspicion
CORRECT_SUSPECTS = {"loss", "dup", "delay", "hostile"}

#: DRiP's sim mesh (harness/sim/drip_search.py EDGES): the ring n1..n4 with the chord n2-n4
DRIP_EDGES = (("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4"))
#: ANTACID's sim DAG (harness/sim/antacid.py topology(): p, r1..r3 as n1..n4) and its
#: ArsOptions; the workload on the sim's contended keys is left at the suite's
ANTACID_SIM = {"upstream": {"n2": ["n1"], "n3": ["n2", "n1"], "n4": ["n3", "n1"]},
               "pull_interval": 0.5, "reorder_timeout": 3.0}

#: Garlic Farm node options that make real servers the sim's: the ``ack-before-fsync``
#: buffer flushed as often as the sim's (`harness.sim.garlicfarm.GfSim.DEFERRED_FLUSH_S`,
#: 1 s; the server's default is 60 s), and a peer that does not answer tried again within a
#: heartbeat (the sim's datagrams reach a restarted server at once; a real link's reconnect
#: backoff grows to 1 s while the peer is down, past the 300-600 ms election timeout, so a
#: restarted follower campaigned before its leader reached it and the new leader's fresh
#: match indexes hid the stale one the sim's leader retries for ever); and for the same reason
#: a request lost to a server that was down resent within 250 ms, not the server's
#: ``rpc_timeout_ms`` (twice the longest election timeout, 1.2 s)
GF_SIM = {"deferred_flush_ms": 1000, "reconnect_max_ms": 100, "rpc_timeout_ms": 250}

PROFILES: dict[str, Profile] = {
    # a Garlic Farm burst is 18 connections, each TLS and a Digest handshake: 2 s
    "garlicfarm": Profile(5, "tcp", (0.001, 0.02, 0.01), 2.0, leader_relative=True,
                          hostile_s=2.0, options=GF_SIM),
    # the sim's timers (`swim_search.OPTS`: 1 s periods, the suite's default is 0.5 s): the
    # schedule's times and the sim's bounds count its periods
    "swim": Profile(5, "udp", (0.002, 0.02, 0.01), 10.0, hostile_s=0.5, options={
        "period_s": 1.0, "probe_timeout_s": 0.5, "suspicion_mult": 4.0, "indirect_k": 3}),
    "sds": Profile(5, "udp", (0.001, 0.02, 0.005), 1.0, hostile_s=0.5),
    # a lead-in of 1 s: the sim's mesh starts with its data; real nodes start empty, so the
    # workload writes something before the first fault
    "drip": Profile(4, "tcp", (0.001, 0.05, 0.01), 1.0, edges=DRIP_EDGES, hostile_s=2.0),
    "antacid": Profile(4, "tcp", (0.001, 0.05, 0.01), 1.0, options=ANTACID_SIM,
                       hostile_s=1.0),
}
#: a burst's ``interval_s``: longer than any run, so one ``start-hostile`` sends one burst
ONE_BURST_S = 3600.0
#: Garlic Farm ``add`` steps played as fresh servers (n6, n7); later ones are skipped
GF_MAX_ADDED = 2
#: Garlic Farm: how long a ``remove-server`` that waits for the next leader watches (the
#: sim's `gf_search.LEADER_WAIT_S`), in simulated seconds, times --sim-scale
GF_LEADER_WAIT_S = 2.0
#: DRiP's real attacker's requests per second: the sim hands a burst over at once
DRIP_HOSTILE_RATE = 500.0
#: SWIM: the members still out at the end join this long after the final heal op (the sim
#: joins them at once; a real heal takes a moment, and a join before it ends is troubled)
SWIM_REJOIN_AFTER_HEAL_S = 1.0
#: SWIM: protocol periods the run goes on after that final join: twice the sim's gossip
#: bound (`swim_search.GOSSIP_PERIODS`, 3.48 at 5), so the dissemination leaf sees every
#: member learn it, correct or slow (the sim settles for 30 s)
SWIM_SETTLE_PERIODS = 7.0
#: SWIM ``gossip-too-slow``: the quiet rejoins a real run judges. A speed finding is a
#: distribution (which member the joiner probes when, which one its seed's single piggyback
#: reaches), and real nodes do not draw as the sim did: with the bug, 22 real rejoins of the
#: seed-4 file took 2.96-4.0 periods (17) or 1.27-1.92 (5; the second of three samples in
#: every three-sample run so far, so samples are not independent), and every one of 6
#: three-sample runs had one past the real bound (`swim_gossip_bound`, 2.5); correct gossip
#: stays far under it (0.35-1.57 periods in 20 real samples)
SWIM_GOSSIP_SAMPLES = 3
#: seconds from one sampled join to the next: the membership checker's window, in which the
#: joiner and its observers must stay untroubled (a leave is trouble), is (suspicion_mult x
#: max(1, log10 n) + 10) periods = 14 s at the sim's timers; 2 s more
SWIM_SAMPLE_GAP_S = 16.0


@dataclass
class Mapped:
    """The nemesis steps a schedule became, its length in real seconds and what was not
    mapped (kind and why), in schedule order."""

    steps: list[NemesisStep]
    duration_s: float
    notes: list[str] = field(default_factory=list)
    #: SWIM: the workload's leave/join ops (test option ``swim_plan``)
    swim_plan: list[list[Any]] = field(default_factory=list)
    #: DRiP: nodes added (`TestSpec.add_member`) and when
    added: dict[str, float] = field(default_factory=dict)
    #: a ``clock-rate`` op is among the steps: the nodes start under libfaketime
    rates: bool = False
    #: Garlic Farm: fresh servers started outside the cluster that join (``join`` op)
    late: list[str] = field(default_factory=list)
    #: test options the hostile steps need (DRiP's flood per burst, its key holder's lie)
    options: dict[str, Any] = field(default_factory=dict)


def profile(protocol: str) -> Profile:
    if protocol not in PROFILES:
        raise ValueError(f"a {protocol} replay file cannot drive a real run yet (mapped: "
                         f"{', '.join(sorted(PROFILES))}); replay it with 'harness sim replay'")
    return PROFILES[protocol]


def _node(p: Profile, b: int) -> str:
    if p.leader_relative:
        return "leader" if b % p.nodes == 0 else "follower"
    return f"n{b % p.nodes + 1}"


def _partition(p: Profile, protocol: str, a: int, b: int) -> dict[str, Any]:
    names = [f"n{i}" for i in range(1, p.nodes + 1)]
    node = _node(p, b)
    if protocol == "garlicfarm":
        shape = a % 4
        if shape == 1:
            cut = 2 if b % 2 else 3
            return {"shape": "explicit", "groups": [names[:cut], names[cut:]]}
        if shape == 2:
            return {"shape": "bridge"}
        return {"shape": "isolate", "node": node, **({"one_way": True} if shape == 3 else {})}
    if a % 2 == 0:
        return {"shape": "isolate", "node": node}
    return {"shape": "explicit", "groups": [names[:2], names[2:]]}


def last_words(p: Profile, node: str, reach: int) -> tuple[list[str], list[str]]:
    """The peers a gone node's last send reached and missed: the ``reach`` after it in name
    order, round from it, as the sim's `harness.sim.sds_search._Run.last_words` picks them."""
    names = [f"n{j}" for j in range(1, p.nodes + 1)]
    i = names.index(node)
    peers = names[i + 1:] + names[:i]
    return peers[:reach], peers[reach:]


def _flows(p: Profile, shape: dict[str, Any] | None) -> set[tuple[str, str]]:
    """The directed flows a `_partition` shape (isolate, or explicit groups) cuts."""
    if shape is None:
        return set()
    names = [f"n{j}" for j in range(1, p.nodes + 1)]
    groups = shape.get("groups") or [[shape["node"]], [m for m in names if m != shape["node"]]]
    return {(x, y) for g in groups for h in groups if g is not h for x in g for y in h}


def hostile_kinds(protocol: str, a: int) -> tuple[list[str], str | None]:
    """The message kinds the real burst leaves out to send what the sim's ``hostile`` step
    with choice ``a`` sent, and what of that choice the real generator cannot match (None:
    all of it matched)."""
    if protocol == "swim" and a % 3:
        from nodes.swim.hostile import INTENT as SWIM_KINDS

        forged = a % 3 == 2  # 1: the attacker's own datagrams; 2: those forged from a member
        return sorted(k for k in SWIM_KINDS if k.startswith("member-") != forged), None
    if protocol == "sds" and a % 2:  # only what decodes: the core's checks, not the codec's
        return ["garbage", "truncated"], None
    if protocol == "garlicfarm":
        from nodes.garlicfarm.hostile import OUTSIDER, messages

        kinds = {k for k, _, _ in messages(random.Random(0), 1, (1, 2))}
        extra = ("the real burst also sends the kinds any sender can make on two connections "
                 "without credentials (a wrong Digest password, plain TCP), refused before "
                 "its core")
        if a % 3 == 1:  # what any sender can make, on a member's link
            return sorted(kinds - OUTSIDER), extra
        if a % 3 == 2:  # extreme values on a member's link
            return sorted(OUTSIDER), None
        return [], extra
    if protocol == "antacid" and a % 2:
        return [], ("the sim sent only the exchanges that reach the core (decided per "
                    "message as its BEEP session reads it); the real burst sends every kind")
    return [], None


def nemesis_steps(rec: dict[str, Any], scale: float = 1.0) -> Mapped:
    """The real nemesis schedule of replay file ``rec``: each step's wait (``scale`` times the
    simulated one; the lead-in first) then its ops."""
    from harness.sim.drip_search import (
        ISOLATE_ONE_BACK_S,
        LIES_FOR,
        SEVER_UPDATE_S,
        first_peer,
        linked,
    )
    from harness.sim.drip_search import MAX_ADDED as DRIP_MAX_ADDED
    from harness.sim.driver import Simulation
    from harness.sim.swim_search import CUT_S as SWIM_CUT_S

    SKEWS = Simulation.SKEWS
    protocol = rec["protocol"]
    p = profile(protocol)
    timed: list[tuple[float, int, dict[str, Any]]] = []  # (at, order, op): later ends sort in
    notes: list[str] = []
    now = p.lead_in_s * scale
    active: set[str] = set()  # link faults on, so the next one of a kind replaces it
    killed = 0
    down: set[str] = set()  # named profiles: nodes killed and not restarted
    cut: set[tuple[str, str]] = set()  # DRiP: the links cut so far (the sim's cuts add up)
    gone: set[str] = set()  # killed for good: no later step touches them
    part_on: list[dict[str, Any]] = []  # the partition shape on (a gone's cut keeps it)
    clocks: dict[str, tuple[float, float]] = {}  # node -> (rate, calendar offset) skewed
    flows: set[tuple[str, str]] = set()  # SWIM: directed flows cut (partitions and cuts)
    one_way: list[tuple[float, tuple[str, str]]] = []  # SWIM: (end, flow) of each cut on
    left: set[str] = set()  # SWIM: members that left and have not joined again
    plan: list[list[Any]] = []  # SWIM: the workload's leave/join ops ([at_s, f, node])
    added: dict[str, float] = {}  # DRiP: node -> when its add-member op runs
    late: list[str] = []  # Garlic Farm: fresh servers that join
    removed: dict[int, int] = {}  # Garlic Farm: server -> the step whose remove took it out
    burst_end: list[float] = []  # the open hostile burst's stop-hostile, due then
    floods: set[int] = set()  # DRiP: the sim's requests per flood kind of each burst
    #: DRiP: the sim's attacker lies with its member's key only for these bug modes
    lies = any(str(x).split("@")[0] in LIES_FOR for x in rec.get("bug") or [])

    def emit(o: dict[str, Any], at: float | None = None) -> None:
        timed.append((now if at is None else at, len(timed), o))

    def partition_of(links: set[tuple[str, str]]) -> dict[str, Any]:
        return op("start-partition", {"shape": "explicit", "cut": sorted(map(list, {
            f for x, y in links for f in ((x, y), (y, x))} | severed))})

    def give_back(until: float) -> None:
        """DRiP ``isolate`` and ``sever`` ends due by ``until``: those links back (a sever's
        one way), later cuts kept."""
        nonlocal cut
        for end, links, one_way in sorted([(e, x, False) for e, x in ends] + [
                (e, x, True) for e, x in sever_ends], key=lambda e: e[0]):
            if end <= until:
                if one_way:
                    sever_ends.remove((end, links))
                    severed.difference_update(links)
                else:
                    ends.remove((end, links))
                    cut -= links
                emit(partition_of(cut) if cut or severed else op("stop-partition"), at=end)

    def uncut(until: float) -> None:
        """SWIM ``cut`` ends due by ``until``: that flow back (the sim discards it even
        where a partition also cut it), the rest kept."""
        for end, flow in sorted(one_way):
            if end <= until:
                one_way.remove((end, flow))
                flows.discard(flow)
                emit(op("start-partition", {"shape": "explicit", "cut": sorted(
                    map(list, flows))}) if flows else op("stop-partition"), at=end)

    def end_burst(until: float, at: float | None = None) -> None:
        """The open hostile burst stopped when due by ``until`` (at ``at`` when given: a
        next burst stops it early, as one runs at a time)."""
        if burst_end and (at is not None or burst_end[0] <= until):
            emit(op("stop-hostile"), at=burst_end[0] if at is None else at)
            burst_end.clear()

    ends: list[tuple[float, frozenset[tuple[str, str]]]] = []
    severed: set[tuple[str, str]] = set()  # DRiP: the flows a ``sever`` cuts one way, on
    sever_ends: list[tuple[float, frozenset[tuple[str, str]]]] = []  # (end, flows) of each
    decommissioned: set[str] = set()  # DRiP: the nodes a decommission op removes
    busy = 0.0  # DRiP: when the last stall, isolate or sever ends (the sim plays it out)
    gf_waited = fresh_leader_changes(rec) if protocol == "garlicfarm" else {}
    step_at = [now]  # the time of each step so far (the lead-in's end first)
    for i, (kind, dt, a, b) in enumerate(rec["schedule"]):
        now += dt / 1000 * scale
        step_at.append(now)
        node = _node(p, b)
        give_back(now)
        uncut(now)
        end_burst(now)
        if node in gone and kind not in ("decommission", "heal", "partition", "delay", "loss",
                                         "dup", "cut", "isolate", "add", "remove"):
            notes.append(f"step {i} {kind}: skipped, {node} is gone for good")
            continue
        if kind == "gone":  # the sim's kill_for_good: the nemesis's own kill for good
            if protocol == "sds" and a % p.nodes and node not in down:
                reach, missed = last_words(p, node, a % p.nodes)
                held = part_on[0] if part_on else None  # a partition on stays on after
                cuts = _flows(p, held)
                emit(op("start-partition", {"shape": "explicit", "cut": sorted(
                    map(list, cuts | {(node, m) for m in missed}))}))
                # what the partition cuts off does not get it, in the sim either
                reach = [m for m in reach if (node, m) not in cuts]
                emit(op("last-send", {"node": node, "reach": reach}))
                emit(op("kill", {"node": node, "for_good": True}))
                emit(op("start-partition", held) if held else op("stop-partition"))
                notes.append(f"step {i} gone: {node} dies broadcasting its last send: its "
                             f"links to {missed} cut, one send there through the workload's "
                             f"client, held by {reach}, then killed for good and the cut "
                             f"healed")
            else:
                emit(op("kill", {"node": node, "for_good": True}))
            if not p.leader_relative:
                gone.add(node)
                down.discard(node)
            continue
        if kind == "skew":  # rate: libfaketime under the node; calendar: its clock offset
            rate, step = SKEWS[a % len(SKEWS)]
            was_rate, was_off = clocks.get(node, (1.0, 0.0))
            if rate != was_rate:
                emit(op("clock-rate", {"node": node, "rate": rate}))
            if step:
                emit(op("clock-skew", {"node": node, "offset_s": was_off + step}))
            clocks[node] = (rate, was_off + step)
            continue
        if protocol == "swim" and kind in ("cut", "partition", "heal") and \
                (kind == "cut" or one_way):
            if kind == "heal":
                flows.clear()
                one_way.clear()
                emit(op("stop-partition"))
                continue
            if kind == "cut":  # member b's link to another (a % 4 picks it), one way
                names = [f"n{j}" for j in range(1, p.nodes + 1)]
                flow = (node, names[(b + 1 + a % (p.nodes - 1)) % p.nodes])
                flows.add(flow)
                one_way.append((now + SWIM_CUT_S * scale, flow))
            else:
                shape = _partition(p, protocol, a, b)
                groups = shape.get("groups") or [[node], [m for m in (
                    f"n{j}" for j in range(1, p.nodes + 1)) if m != node]]
                flows.update((x, y) for g in groups for h in groups if g is not h
                             for x in g for y in h)
            emit(op("start-partition", {"shape": "explicit", "cut": sorted(map(list, flows))}))
            continue
        if protocol == "swim" and kind in ("leave", "rejoin"):
            if node not in down and (node in left) == (kind == "rejoin"):
                plan.append([round(now, 3), "leave" if kind == "leave" else "join", node])
                (left.add if kind == "leave" else left.discard)(node)
            continue
        if protocol == "drip" and kind == "add":
            new = f"n{p.nodes + len(added) + 1}"
            if len(added) < DRIP_MAX_ADDED and node not in down:
                added[new] = round(now, 3)
                notes.append(f"step {i} add: {new} added through a running member (the "
                             f"cluster's add-member op, not {node}'s own), started 0.5 s later")
            else:
                notes.append(f"step {i} add: skipped, as in the sim ({node} is down, or "
                             f"{DRIP_MAX_ADDED} nodes were added already)")
            continue
        if protocol == "drip" and kind in ("cut", "isolate", "heal"):
            if kind == "heal":
                cut.clear()
                severed.clear()
                sever_ends.clear()
                ends.clear()  # the sim's later give-back of a healed link changes nothing
                emit(op("stop-partition"))
                continue
            links = frozenset({DRIP_EDGES[a % len(DRIP_EDGES)]} if kind == "cut" else
                              {e for e in DRIP_EDGES if node in e})
            cut |= links
            emit(partition_of(cut))
            if kind == "isolate":
                busy = max(busy, now + (a + 1) * scale)
            if kind == "isolate" and a >= 2 and node not in down:  # one link back first
                first = frozenset(e for e in links if first_peer(node) in e)
                ends.append((now + ISOLATE_ONE_BACK_S * scale, first))
                ends.append((now + (a + 1) * scale, links - first))
                notes.append(f"step {i} isolate: {node}'s links cut for {(a + 1) * scale:g} s, "
                             f"its link to {first_peer(node)} back "
                             f"{ISOLATE_ONE_BACK_S * scale:g} s in; the updates the sim starts "
                             f"at {node} then and at the next node at the end are left to the "
                             "workload")
            elif kind == "isolate":  # its own links back a + 1 s later (a later cut stays)
                ends.append((now + (a + 1) * scale, links))
                notes.append(f"step {i} isolate: {node}'s links cut for {(a + 1) * scale:g} s; "
                             "the update the sim starts then is left to the workload")
        elif kind == "partition":
            part_on[:] = [_partition(p, protocol, a, b)]
            emit(op("start-partition", part_on[0]))
        elif kind == "heal":
            part_on.clear()
            emit(op("stop-partition"))
        elif kind == "crash":
            if p.leader_relative:
                emit(op("kill", {"node": node}))
                killed += 1
            elif node not in down:
                emit(op("kill", {"node": node}))
                down.add(node)
        elif (kind == "restart" or (kind == "rejoin" and protocol == "drip")) \
                and not p.leader_relative:
            if node not in down and protocol == "antacid":
                continue  # the sim restarts only a server that is down
            if node not in down:
                emit(op("kill", {"node": node}))
            emit(op("restart", {"node": node}))
            down.discard(node)
        elif kind == "restart":
            if not killed:
                emit(op("kill", {"node": node}))
            emit(op("restart"))
            killed = 0
        elif kind == "pause":
            emit(op("pause", {"node": node}))
        elif kind == "stall":
            if node in down:
                notes.append(f"step {i} stall: skipped, {node} is down (the sim stalls only a "
                             "running node, and then starts no update)")
                continue
            emit(op("pause", {"node": node}))
            emit(op("resume", {"node": node}), at=now + (a + 1) * scale)
            busy = max(busy, now + (a + 1) * scale)
            if protocol == "drip":
                notes.append(f"step {i} stall: {node} paused at once for {(a + 1) * scale:g} "
                             f"s; not matched: the sim pauses it the moment an open vote "
                             f"reaches it (at most 0.1 s on), and with no vote open first "
                             f"starts an update at {_node(p, b + 1)} for it to take (the "
                             "workload's own updates stand in)")
        elif kind == "sever" and protocol == "drip":
            flows = frozenset((node, m) for e in DRIP_EDGES if node in e for m in e
                              if m != node)
            if node in down:
                notes.append(f"step {i} sever: skipped the cut, {node} is down (as in the sim)")
            else:
                severed.update(flows)
                sever_ends.append((now + (4 + a) * scale, flows))
                busy = max(busy, now + (4 + a) * scale)
                emit(partition_of(cut))
                notes.append(f"step {i} sever: every link out of {node} cut one way for "
                             f"{(4 + a) * scale:g} s; not matched: the sim cuts the moment its "
                             f"own update's vote requests have left, and {SEVER_UPDATE_S:g} s "
                             f"on updates the same key at {_node(p, b + 1)} (the workload's "
                             "own updates stand in)")
            rest = [f"n{k}" for k in range(1, p.nodes + 1)
                    if f"n{k}" not in decommissioned | {node}]
            if a % 2 == 0 and (node in decommissioned or len(rest) < 2
                               or not linked(rest, DRIP_EDGES)):
                notes.append(f"step {i} sever: no decommission of {node}, as in the sim (it "
                             "was removed already, or the rest would be fewer than two or "
                             "unlinked)")
            elif a % 2 == 0:  # the operator removes the initiator it takes for dead
                decommissioned.add(node)
                emit(op("decommission", {"node": node}))
                notes.append(f"step {i} sever: {node} decommissioned at once (the cluster's "
                             "decommission op, which asks another running member, as the sim "
                             "asks the next one)")
        elif kind == "resume":
            emit(op("resume", None if p.leader_relative else {"node": node}))
        elif kind == "delay":
            lat = p.delay[0] + p.delay[1] * a
            jit = p.delay[2] * b
            if "latency" in active:
                emit(op("stop-latency"))
            emit(op("start-latency", {"ms": max(1, round(lat * 1000)),
                                      "jitter_ms": round(jit * 1000)}))
            active.add("latency")
        elif kind in ("loss", "dup"):
            name = "loss" if kind == "loss" else "duplicate"
            if p.transport != "udp":
                notes.append(f"step {i} {kind}: skipped, a TCP stream loses no bytes through "
                             "Toxiproxy")
                continue
            if name in active:
                emit(op(f"stop-{name}"))
                active.discard(name)
            if a:
                emit(op(f"start-{name}", {"p": a / 10}))
                active.add(name)
        elif kind == "remove" and protocol == "garlicfarm":
            waited = i in gf_waited
            # a leader the sim elected since the step before: the real op watches from
            # that step's time on (after its ops), real elections not coming when the sim's did
            emit(op("remove-server", {"node": f"n{a % p.nodes + 1}", "next_leader": waited,
                                      "hold": waited,
                                      "wait_s": round(GF_LEADER_WAIT_S * scale + now - (
                                          step_at[i] if gf_waited.get(i) else now), 3)}),
                 at=step_at[i] if gf_waited.get(i) else None)
            removed.setdefault(a % p.nodes + 1, i)
            if waited:
                notes.append(f"step {i} remove: the sim's request met a leader in the moment "
                             "after its election (nothing of its term committed, or none yet): "
                             "the real op sends the RemoveServer to such a leader, or watches "
                             "every node for the next one and sends it the moment it is seen, "
                             "its links to the members but the removed one cut until its "
                             "change is appended (a real LeaveCluster waits behind the first "
                             "entry on the removed member's link, so that entry would commit "
                             "first)")
        elif kind == "decommission" and protocol == "drip":
            decommissioned.add(node)
            emit(op("decommission", {"node": node}))
        elif kind == "add" and protocol == "garlicfarm":
            sid = a % p.nodes + 1
            if len(late) >= GF_MAX_ADDED:
                notes.append(f"step {i} add: skipped, {GF_MAX_ADDED} fresh servers were added "
                             "already")
                continue
            new = f"n{p.nodes + len(late) + 1}"
            late.append(new)
            emit(op("join", {"node": new}))
            back = removed.pop(sid, None)
            meant = f"adds back server {sid}, removed at step {back}" if back is not None \
                else f"asks to add server {sid}, a member (refused)"
            notes.append(f"step {i} add: played the old way, not as a remove is (an "
                         f"operator's request to the leader): a fresh server {new} is started "
                         f"outside the cluster and joins (its own AddServerRequest goes to the "
                         f"leader it finds, retried until a configuration holds it); not "
                         f"matched: the sim's step {meant}")
        elif kind in ("add", "remove", "leave", "rejoin"):
            notes.append(f"step {i} {kind}: skipped, the real nemesis has no membership op for "
                         f"{protocol} yet")
        elif kind == "hostile":
            if p.hostile_s is None:
                notes.append(f"step {i} hostile: skipped, the real {protocol} offers no "
                             "hostile fault; replay it with 'harness sim replay'")
                continue
            end_burst(now, at=now)
            skip, unmatched = hostile_kinds(protocol, a)
            # Garlic Farm's "leader"/"follower" is a pick the nemesis resolves at the op
            emit(op("start-hostile", {"nodes": node if p.leader_relative else [node],
                                      "interval_s": ONE_BURST_S,
                                      **({"skip": skip} if skip else {})}))
            burst_end.append(now + p.hostile_s)
            said = (f"step {i} hostile: one burst of the real generator's messages at {node}, "
                    f"stopped {p.hostile_s:g} s later or at the next burst; its bytes are "
                    "drawn from the run's seed, not the sim's")
            if protocol == "drip":
                floods.add(1 + 2 * a)
                said += (f"; the sim's {1 + 2 * a} requests per flood kind (a real run has "
                         "one hostile_flood: the largest of its steps')")
                if lies:
                    unmatched = ("the sim's lying key holder waits for a lock it holds; the "
                                 "real one sends its yes for the locks it reads before the "
                                 f"burst; the update the sim starts at {node} first (for the "
                                 "lie to land on) is left to the workload")
            notes.append(said + (f"; not matched: {unmatched}" if unmatched else ""))
        else:
            notes.append(f"step {i} {kind}: left to the workload, which sends its own requests")
        if kind == "rejoin" and protocol == "drip":
            notes.append(f"step {i} rejoin: {node} restarted; the update the sim starts at once "
                         "is left to the workload")
    if protocol == "drip" and busy > now:  # a stall, isolate or sever lasts its time, as
        now = busy  # the sim plays it out before its last heal (drip_search._Run.play_out)
        give_back(now)
    if protocol == "garlicfarm" and killed:
        # the sim's last heal restarts every crashed server the moment the schedule ends; the
        # run's own final heal comes only at its time limit, a second or more later
        emit(op("heal-all"))
        notes.append("end: the servers still crashed restart as the schedule ends (the sim's "
                     "last heal), not at the time limit")
    if one_way:  # a cut still on lasts its time, as the sim plays it out
        now = max(now, max(end for end, _ in one_way))
        uncut(now)
    if burst_end:  # the last burst is given its time, and says what it sent
        now = max(now, burst_end[0])
        end_burst(now)
    slow = slow_joiner(rec) if protocol == "swim" else None
    if protocol == "swim" and (left or slow):
        # the sim's last heal, then its settle: every member still out joins again once the
        # faults are gone (a join under a fault still on is not a quiet rejoin), and the run
        # lasts long enough for its gossip to reach everyone
        emit(op("heal-all"))
        at = now + SWIM_REJOIN_AFTER_HEAL_S
        plan += [[round(at, 3), "join", n] for n in sorted(left)]
        if slow is not None:  # the slow rejoin, sampled again until there are enough
            plan += gossip_samples(slow, at, sampled=slow in left)
            at = max(t for t, f, n in plan if n == slow)
            notes.append(f"gossip-too-slow: {slow} rejoins in a quiet stretch "
                         f"{SWIM_GOSSIP_SAMPLES} times at the end (a speed finding: real "
                         "nodes draw whom they probe and gossip to apart from the sim; each "
                         "rejoin is judged)")
        now = at + SWIM_SETTLE_PERIODS * p.options["period_s"]
    out: list[NemesisStep] = []
    last = 0.0
    # an end due after the last step is the run's final heal's, as in the sim
    for at, _, o in sorted((t for t in timed if t[0] <= now), key=lambda t: (t[0], t[1])):
        out.append((round(at - last, 3), o))
        last = at
    options: dict[str, Any] = {}
    if floods:  # one flood size per run: the largest the sim's steps used
        options = {"hostile_flood": max(floods), "hostile_rate": DRIP_HOSTILE_RATE,
                   "hostile_key_holder_lies": lies}
    # a last-send may wait for its peers: the run lasts long enough for the kill after it
    hold = HOLD_TIMEOUT_S if any(o["f"] == "last-send" for _, o in out) else 0.0
    # a remove-server may watch for the next leader that long, then ask once more
    hold += max((float(o["value"]["wait_s"]) + 1.0 for _, o in out
                 if o["f"] == "remove-server"), default=0.0)
    return Mapped(out, now + hold, notes, plan, added, rates=any(
        o["f"] == "clock-rate" for _, _, o in timed), late=late, options=options)


def fresh_leader_changes(rec: dict[str, Any]) -> dict[int, bool]:
    """The Garlic Farm ``add``/``remove`` steps (by index) whose sim request met a leader
    that had committed no entry of its term yet, or found none and waited for the next:
    the moment Raft's rule is about (`gf_search.fresh_leader_steps` replays the schedule);
    each with whether that leader came since the step before."""
    from harness.sim.gf_search import fresh_leader_steps

    return fresh_leader_steps(rec["schedule"], int(rec["seed"]), tuple(rec.get("bug") or []))


def swim_gossip_bound(n: int, sim_bound: float) -> float:
    """The real run's bound (periods) for a join to reach all ``n`` members: the sim's, or
    half a period under the joiner's own-probe floor when that is lower. Real members probe
    the stalest member each period, so a joiner's own probes reach the ``n - 2`` members
    besides its seed in ``n - 2`` periods (``n - 1`` when one goes to the seed) with no
    gossip at all: a bound at or past ``n - 2`` cannot tell gossip from none. At 5 members the
    sim's 3.48 is past that floor (3): the bug's real rejoins took 2.96-4.0 periods in 17 of
    22 samples, correct gossip 0.35-1.57 in 20 (2.25 at most in 300 sim rejoins): 2.5. From 7
    members on the sim's bound is the lower one."""
    return round(min(sim_bound, n - 2 - 0.5), 2)


def slow_joiner(rec: dict[str, Any]) -> str | None:
    """The member whose quiet rejoin the sim found too slow (a ``gossip-too-slow`` witness),
    if any."""
    for w in rec.get("witness") or []:
        if w.get("kind") == "gossip-too-slow":
            return str((w.get("witness") or {}).get("joiner") or "") or None
    return None


def gossip_samples(node: str, first: float, sampled: bool) -> list[list[Any]]:
    """``swim_plan`` ops that make ``node`` rejoin in a quiet stretch `SWIM_GOSSIP_SAMPLES`
    times from ``first`` on (``sampled``: its rejoin at ``first`` is the first of them):
    each leave comes `SWIM_SAMPLE_GAP_S` after the join before it, so no sample's
    measurement window holds the next one's leave."""
    out: list[list[Any]] = []
    join = first if sampled else None
    for _ in range(SWIM_GOSSIP_SAMPLES - int(sampled)):
        leave = first if join is None else join + SWIM_SAMPLE_GAP_S - SWIM_REJOIN_AFTER_HEAL_S
        join = leave + SWIM_REJOIN_AFTER_HEAL_S
        out += [[round(leave, 3), "leave", node], [round(join, 3), "join", node]]
    return out


def verdict_line(result: Any, witness: list[dict[str, Any]]) -> str:
    """Whether the real run (its `checkers.result.Result`) confirms the simulated finding: it
    does when the real run fails; the failing checkers of both are named so a reader sees
    whether they failed the same way."""
    kinds = ", ".join(sorted({f"{w.get('checker')}/{w.get('kind')}" for w in witness})) \
        or "(none recorded)"
    failed = ", ".join(sorted({path for path, leaf in result.leaves() if leaf.valid is False}))
    if result.valid is False:
        return (f"CONFIRMED on real processes: the real run failed ({failed}); simulated "
                f"witness: {kinds}")
    if result.valid is True:
        return (f"NOT confirmed: the real run passed every checker (simulated witness: {kinds}); "
                "real timings may not reproduce the interleaving: rerun it, or stretch the "
                "waits with --sim-scale")
    return f"NOT confirmed: the real run's verdict is unknown (simulated witness: {kinds})"


def antacid_zones(zones: int) -> dict[str, Any]:
    """Test options that make the suite's zones the sim's ``zones`` zones (zone 1 is
    ``ANTACID_SIM``'s): ``zone_count`` and each later zone's upstreams over n1..n4."""
    from harness.sim.antacid import zone_topologies

    if zones == 1:
        return {}
    topos = list(zone_topologies(zones).values())
    node = {s: f"n{i}" for i, s in enumerate(topos[0].servers, 1)}
    return {"zone_count": zones, "zone_upstream": {
        f"zone{k}.test": {node[r]: [node[u] for u in ups] for r, ups in t.upstream.items()}
        for k, t in enumerate(topos[1:], 2)}}


def spec_for(rec: dict[str, Any], proto: Any, *, scale: float = 1.0, seed: int | None = None,
             time_limit: float | None = None, name: str | None = None, store: str | None = None,
             backend: str = "local", quiesce_s: float = 3.0) -> tuple[Any, Mapped]:
    """The TestSpec of a real run that plays replay file ``rec`` on ``proto``'s reference nodes
    (its default workload and checkers, the file's bug modes and seed), and the mapping."""
    from harness.nemesis_generator import from_schedule
    from harness.replay import FixedTopology
    from harness.spec import TestSpec

    if scale <= 0:
        raise ValueError(f"--sim-scale must be positive, got {scale}")
    p = profile(rec["protocol"])
    mapped = nemesis_steps(rec, scale)
    if mapped.rates and backend != "local":
        raise Unsupported(f"its schedule runs a node's clock at another rate (a 'skew' step), "
                         f"which only the local backend can do (it starts each node under "
                         f"libfaketime), not --backend {backend}; run it with --backend local")
    options: dict[str, Any] = {**p.options, **mapped.options}
    if mapped.late:  # fresh servers, started by their "join" op (harness/suites/garlicfarm.py)
        options["late_nodes"] = list(mapped.late)
    if mapped.swim_plan:
        # the plan on the nemesis's axis: both count from the workload's start
        options["swim_plan"] = mapped.swim_plan
        options["swim_plan_origin"] = "workload"
    if mapped.rates:
        options["clock_rate"] = True
    if rec["protocol"] == "swim" and not {s[0] for s in rec["schedule"]} & CORRECT_SUSPECTS:
        # the sim's accuracy check: no suspicion a relay goes around, while nothing else
        # excuses one (loss, latency: they may)
        options["swim_max_false_suspicions_per_member_hour"] = 0
    if rec["protocol"] == "swim" and any(w.get("kind") == "gossip-too-slow"
                                         for w in rec.get("witness") or []):
        # the sim's dissemination bound, under the real nodes' own-probe floor, judged by
        # the real checker's dissemination leaf on every join (each sampled rejoin)
        from harness.sim.swim_search import GOSSIP_PERIODS
        options["swim_max_dissemination_periods"] = swim_gossip_bound(p.nodes, GOSSIP_PERIODS)
    edges = p.edges
    if edges is not None and mapped.added:  # an added node peers with every member then
        first = [f"n{i}" for i in range(1, p.nodes + 1)]
        edges = edges + tuple((m, new) for j, new in enumerate(mapped.added)
                              for m in first + list(mapped.added)[:j])
    spec = TestSpec(
        name=name or f"{proto.name}-sim-replay", protocol=proto,
        nodes=p.nodes + len(mapped.added) + len(mapped.late), add_member=dict(mapped.added),
        nemesis=from_schedule(mapped.steps) if mapped.steps else None,
        time_limit=time_limit if time_limit is not None else round(mapped.duration_s + 1.0, 3),
        concurrency=p.nodes, seed=int(rec["seed"]) if seed is None else seed, backend=backend,
        bugs=list(rec.get("bug") or []), store=store, quiesce_s=quiesce_s,
        topology=None if edges is None else FixedTopology(  # type: ignore[arg-type]
            tuple(sorted(tuple(sorted(e)) for e in edges))),
        options={**options, **(antacid_zones(int(rec.get("zones", 1)))
                                 if rec["protocol"] == "antacid" else {})})
    if mapped.steps:  # none: a run without faults, which the faults checker does not judge
        spec.nemesis_desc = f"sim replay ({len(mapped.steps)} ops)"
    return spec, mapped
