"""DRiP as a search target: what each schedule step does to a four-node mesh (`DripSim`,
the ring ``n1 n2 n3 n4`` with the chord ``n2 n4``), and how a run is judged (`checkers.twopc`,
as a real run is, plus liveness: after the last heal an update at ``n1`` must commit).

Kinds (node ``b`` of ``n1..n4``, edge ``a`` of the five): ``cut`` (cut edge ``a``), ``heal``,
``crash``, ``restart``, ``pause``/``resume``, ``loss`` and ``dup`` (rate ``a``/10), ``delay``
(latency 1 + 50·``a`` ms, jitter 10·``b`` ms: past the request timeout an answer is late,
which is what the late-vote bug modes need) and ``update`` (a client update at node ``b`` of
key ``k`` + ``a`` mod 2); then the shapes a busy mesh meets, each in one step: ``race`` (two
updates of that key, at node ``b`` and at the node opposite, in one millisecond: two
initiators contend for one key), ``stall`` (node ``b`` paused and resumed ``a`` + 1
seconds later while the schedule goes on: its votes arrive after the vote timeout; while a
vote is open elsewhere, paused the moment ``b`` takes it (at most 0.1 s on), and with none
open the next node first starts an update (``k`` + ``a`` mod 2) for it to take: a voter
that hangs between taking a request and answering it, which is what the late-vote bug modes
need; the last heal waits for a stall or an isolate to end),
``rejoin`` (node ``b`` restarted and, in the same millisecond, an update at the next node:
the request reaches a node still syncing) and ``isolate`` (every link of node ``b`` cut, and
healed ``a`` + 1 seconds later, when an update starts at the next node: a node that found
itself alone meets a request before its next heartbeat; with ``a`` >= 2, 1 s in, the link
to its first peer (`first_peer`) comes back first and a client's update reaches it: the
heartbeat round under way when it was cut off fails 2 s in, so it goes inactive with its own
vote open, the yes votes come in over that one link, and the request to a peer still cut off
ends 3 s in, when a node that did not abort its votes on going inactive decides and applies
while inactive: the shape ``inactive-takes-part`` needs, which took 3 to 168 schedules
before, as two isolates that overlapped). A bug mode is switched on in every
node. Clock skew only when asked (``--skew``); when asked (``--members``) ``decommission``:
node ``b`` removed from the membership, as an operator does (``POST /admin/members``
``{remove: [b]}`` at the next running member, the real cluster's ``decommission`` op): the
node itself is left as it is (a crash or an isolate before it makes it the one "crashed for
good or isolated"); a removal that would leave fewer than two members or the rest unlinked
(the mesh's links are fixed) is not asked. A removed node is left out of what the settle
waits for and out of the final update; the 2PC checker judges each decision against the
membership in force (the journals' ``members`` events). ``add`` (also ``--members``, at most
`MAX_ADDED`): member ``b`` asked to add a fresh node (n5, n6) with its address entry, as the
real ``add-member`` op does; once that commits the node boots with a fresh data directory and
``join``, its peers the members then, and syncs before it votes. When asked (``--hostile``)
``hostile``: one burst of `nodes.drip.hostile`'s requests (the real ``hostile`` fault's
builders, ``1 + 2·a`` requests per flood kind) at node ``b`` as from its first peer, a
compromised member, each through ``b``'s real pre-core checks (`nodes.drip.admit.Gate`) and
then its core (`DripSim.hostile_burst`). Drawn only for the bug mode
``release-expired-locks`` (`Target.needs`): ``sever``, an update at node ``b`` of key ``k`` + ``a`` mod 2, and
at once every link out of ``b`` cut one way for 4 + ``a`` seconds: its vote requests left, the
answers come in, it decides, and nothing it sends after (its commit) arrives, as when an
initiator dies between its decision and its sends; 3.5 s on (past a voter lock's TTL) the
next node updates the same key; with ``a`` even, the next running member is asked at once to
remove ``b`` (a ``decommission``, as an operator removes a node it takes for dead: the seed-11
chaos run). A voter lock that outlives its TTL is dangerous only when the rest can go on
without the initiator, and a separate ``decommission`` step of the same node in the window
was too rare a draw (nothing in 295 schedules). The compromised member's own yes on a vote the
target waits on (``vote-response-relayed-voters``: a key holder's lie no node can refuse) is
sent only for the bug modes in `LIES_FOR`, as the correct-node chaos test leaves it out; for
them a ``hostile`` step first starts an update at ``b`` (the lie lands only on an open vote
that waits on the member: a separate ``update`` step just before it was too rare a draw, and
the search found ``trust-relayed-voters`` in none of 5 seeds in 60 s).

A run settles until it is quiet instead of for a fixed time (a DRiP run is the costliest of
the targets: every hop is an HTTP request in JSON): after the last heal, until every node is
up and active (at most `SETTLE_S`); then the final update, until it is decided (at most
`SETTLE_S`); then `TAIL_S` more for what follows a decision (late votes, lock expiry).
"""

from __future__ import annotations

import json
from typing import Any

from checkers import twopc
from harness.sim.drip import DripSim
from harness.sim.play import capped, play
from harness.sim.search import Outcome, Step, Target, bug_name, bugs_by_node, witness_of
from harness.spec import node_bugs

#: bug modes only hostile traffic shows (issue 26's checks planted back): their search always
#: draws ``hostile`` (`Target.needs`)
HOSTILE_BUGS = ("trust-relayed-voters", "ignore-counter-window", "apply-unvoted-commits",
                "learn-heartbeat-members", "apply-unsolicited-sync", "no-version-bound")
#: the modes whose hostile bursts include the compromised member's own lying yes
#: (`hostile.HostileDrip.key_holder_lies`): a correct mesh cannot refuse a key holder's word
LIES_FOR = ("trust-relayed-voters",)
EDGES = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1"), ("n2", "n4")]
NODES = ["n1", "n2", "n3", "n4"]
IDS = (1, 2, 3, 4)  # NODES as server numbers, for ``--bug NAME@1,3``
KINDS = ("cut", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "update", "race", "stall", "rejoin", "isolate")
BUGS = ("retake-duplicate-votes", "skip-sync", "commit-partial-vote", "forget-in-progress",
        "syncing-votes-no", "act-on-late-votes", "commit-after-abort", "inactive-takes-part",
        *HOSTILE_BUGS, "release-expired-locks")
#: a ``stall`` waits at most this long for an open vote to reach its node, looking every
#: `POLL_S` (well inside one hop: a relay answers a few milliseconds after it takes a vote)
STALL_WAIT_S = 0.1
POLL_S = 0.0005
SETTLE_S = 30.0  # the most a settle waits: request timeouts, syncs and retries many times
STEP_S = 0.5  # how often a settle looks whether it may stop
#: the optional kinds ``harness sim run --members`` draws (appended after the others, so the
#: schedules a seed draws without it stay what they were)
MEMBER_KINDS = ("decommission", "add")  # the CLI's --members, in this order
#: the most nodes an ``add`` brings in (n5, n6): each is one more voter of every update
MAX_ADDED = 2
#: after the final update's decision: more than a vote timeout and a lock's lifetime
#: (`CoreConfig`: 2 s, 3 s), so what a late vote or an expired lock does is still seen
TAIL_S = 5.0
#: a ``sever``'s second update, past a voter lock's TTL (`CoreConfig.lock_ttl_s`, 3 s)
SEVER_UPDATE_S = 3.5
#: an ``isolate`` of 3 s or more gives back one link (and an update at its node) this far in:
#: inside the heartbeat round that fails (`CoreConfig.peer_timeout_s`, 2 s), so the node goes
#: inactive with that update's vote open
ISOLATE_ONE_BACK_S = 1.0


class _Run:
    def __init__(self, seed: int, bugs: tuple[str, ...]) -> None:
        self.sim = DripSim(EDGES, seed=seed, jitter=0.002, **mixed(bugs))
        self.lies = any(bug_name(b) in LIES_FOR for b in bugs)
        self.updates: list[tuple[str, str, int, str]] = []  # node, key, value, uid
        #: when the last ``stall`` or ``isolate`` ends (the last heal waits for it)
        self.busy_until = 0.0
        self.removals: list[tuple[str, str]] = []  # (node removed, uid of its request)
        self.adds: list[tuple[str, str]] = []  # (node added, uid of its request)
        #: every node of the run, the joined ones too: what the last heal brings back
        self.ids = list(NODES)

    def update(self, n: str, key: str) -> str:
        uid = f"u{len(self.updates)}"
        self.updates.append((n, key, len(self.updates), uid))
        self.sim.update(n, key, len(self.updates) - 1, uid)
        return uid

    def step(self, s: Step) -> None:
        kind, dt, a, b = s
        sim = self.sim
        sim.run_for(dt / 1000)
        n = NODES[b % len(NODES)]
        nxt = NODES[(b + 1) % len(NODES)]
        if kind == "cut":
            sim.cut(*EDGES[a % len(EDGES)])
        elif kind == "update" and sim.running(n):
            self.update(n, f"k{a % 2}")
        elif kind == "race":
            for m in (n, NODES[(b + 2) % len(NODES)]):
                if sim.running(m):
                    self.update(m, f"k{a % 2}")
        elif kind == "stall":
            self.busy_until = max(self.busy_until, sim.now + STALL_WAIT_S + a + 1)
            if sim.running(n) and sim.running(nxt) and not self._open_votes():
                self.update(nxt, f"k{a % 2}")  # nothing to stall in: the next node starts one
            self._stall(n, a + 1, 0.0)
        elif kind == "rejoin":
            sim.restart(n)
            if sim.running(nxt):
                self.update(nxt, f"k{a % 2}")
        elif kind == "decommission":
            self._decommission(n, b)
        elif kind == "add":
            self._add(n)
        elif kind == "hostile":
            if self.lies and sim.running(n):  # a lie needs a vote of n's open: n starts one
                self.update(n, f"k{a % 2}")
            self._hostile(n, 1 + 2 * a, 0.0)
        elif kind == "sever":
            self._sever(n, nxt, f"k{a % 2}", 4.0 + a)
            if a % 2 == 0:  # the operator removes the initiator it takes for dead
                self._decommission(n, b)
        elif kind == "isolate":
            links = [e for e in EDGES if n in e]
            for e in links:
                sim.cut(*e)
            if a >= 2:  # cut off past a failing heartbeat round: one link back first
                sim.at(sim.now + ISOLATE_ONE_BACK_S,
                       lambda: self._one_link_back(n, links, f"k{a % 2}"))
            sim.at(sim.now + a + 1, lambda: self._rejoin_links(links, nxt, a))
            self.busy_until = max(self.busy_until, sim.now + a + 1)
        else:
            sim.fault_step(kind, n, a, b, delay=(0.001, 0.05, 0.01))

    def members(self) -> list[str]:
        """The nodes not removed by a committed ``decommission`` (an undecided one counts
        as not removed: the settle then waits for that node too)."""
        out = {n for n, uid in self.removals if self.sim.committed(uid)}
        return [n for n in self.ids if n not in out]

    def _decommission(self, n: str, b: int) -> None:
        """Ask the next running member after ``n`` to remove ``n``, unless that would leave
        fewer than two members or the rest unlinked (no careful operator does either)."""
        rest = [m for m in self.members() if m != n]
        if n not in self.members() or len(rest) < 2 or not linked(rest, self.sim.edges):
            return
        at = next((NODES[(b + k) % len(NODES)] for k in range(1, len(NODES))
                   if NODES[(b + k) % len(NODES)] in rest
                   and self.sim.running(NODES[(b + k) % len(NODES)])), None)
        if at is None:
            return
        uid = f"m{len(self.removals)}"
        self.removals.append((n, uid))
        self.sim.members(at, uid, remove=[n])

    def _add(self, n: str) -> None:
        """``add``: ask member ``n`` to add a fresh node with its address entry (as the real
        ``add-member`` op does); once that commits, boot the node with a fresh data directory,
        ``join``, its peers the members then (its own config lists them)."""
        if len(self.adds) >= MAX_ADDED or n not in self.members() or not self.sim.running(n):
            return
        new, uid = f"n{len(NODES) + len(self.adds) + 1}", f"a{len(self.adds)}"
        self.adds.append((new, uid))
        self.sim.members(n, uid, add=[new],
                         addresses={new: {"peer": f"127.0.0.1:{7100 + len(self.ids) + 1}"}})
        self._join_when_added(new, uid)

    def _join_when_added(self, new: str, uid: str) -> None:
        a = self.sim.outcome(uid)
        if a is None:
            self.sim.at(self.sim.now + POLL_S * 100, lambda: self._join_when_added(new, uid))
        elif a.status == 200:
            self.ids.append(new)
            self.sim.join(new, [m for m in self.members() if m != new])

    def _stall(self, n: str, for_s: float, waited: float) -> None:
        """``stall``: pause ``n`` for ``for_s``; while a vote is open at another node and has
        not reached ``n``, first wait (up to `STALL_WAIT_S`) until ``n`` takes it, so the
        stall catches ``n`` between taking a request and answering it: a participant that
        hangs mid-vote, the fault 2PC's timeouts are for."""
        sim = self.sim
        if not sim.running(n):
            return
        mid_vote = any(not t.decided and t.upstream is not None
                       for t in sim.core(n).tallies.values())
        elsewhere = any(not t.decided for m in NODES if m != n and sim.running(m)
                        for t in sim.core(m).tallies.values())
        if not mid_vote and elsewhere and waited < STALL_WAIT_S:
            sim.at(sim.now + POLL_S, lambda: self._stall(n, for_s, waited + POLL_S))
            return
        sim.pause(n)
        sim.at(sim.now + for_s, lambda: sim.resume(n))

    def _open_votes(self) -> bool:
        """A vote is open (undecided) at some running node."""
        return any(not t.decided for m in self.ids if self.sim.running(m)
                   for t in self.sim.core(m).tallies.values())

    def _hostile(self, n: str, flood: int, waited: float) -> None:
        """``hostile``: a burst at ``n``. An attacker that lies with its member's key strikes
        while that member holds a lock: while a vote is open and the member (``n``'s first
        peer) holds none, it waits (up to `STALL_WAIT_S`), as the real driver reads the
        member's locks before each burst and sends its yes for them."""
        sim = self.sim
        peers = sim.peers(n)
        member = peers[0] if peers else None
        if self.lies and member is not None and sim.running(member) \
                and not sim.core(member).d.locks and waited < STALL_WAIT_S \
                and any(not t.decided for m in self.ids if sim.running(m)
                        for t in sim.core(m).tallies.values()):
            sim.at(sim.now + POLL_S, lambda: self._hostile(n, flood, waited + POLL_S))
            return
        sim.hostile_burst(n, flood, self.lies)

    def _sever(self, n: str, nxt: str, key: str, for_s: float) -> None:
        """``sever`` (see the module's docstring)."""
        sim = self.sim
        if not sim.running(n):
            return
        self.update(n, key)
        out = {(n, p) for p in sim.peers(n)}  # checked at send: its vote requests have left
        sim.net.cut |= out
        sim.trace.append((sim.now, "sever", n, for_s))

        def back() -> None:
            sim.net.cut -= out
            sim.trace.append((sim.now, "unsever", n))

        def later() -> None:
            if sim.running(nxt):
                self.update(nxt, key)

        sim.at(sim.now + SEVER_UPDATE_S, later)
        sim.at(sim.now + for_s, back)
        self.busy_until = max(self.busy_until, sim.now + for_s)

    def _one_link_back(self, n: str, links: list[tuple[str, str]], key: str) -> None:
        """An ``isolate`` of 3 s or more, 1 s in: the link to ``n``'s first peer comes back
        and a client's update reaches ``n`` (see the module's docstring)."""
        sim = self.sim
        if not sim.running(n):  # crashed meanwhile: its links come back with the rest
            return
        peer = first_peer(n)
        self._uncut([e for e in links if peer in e])
        self.update(n, key)

    def _rejoin_links(self, links: list[tuple[str, str]], n: str, a: int) -> None:
        """``isolate``'s end: its links back (only those) and an update at ``n``."""
        self._uncut(links)
        if self.sim.running(n):
            self.update(n, f"k{a % 2}")

    def _uncut(self, links: list[tuple[str, str]]) -> None:
        """``links`` back, both ways, and said in the trace."""
        self.sim.net.cut -= {(x, y) for x, y in links} | {(y, x) for x, y in links}
        self.sim.trace.append((self.sim.now, "uncut", [list(e) for e in links]))

    def play_out(self) -> None:
        """After the last step: a ``stall`` or ``isolate`` still on lasts as long as it said
        (the last heal would end it early, and a stalled voter's late answer is what the
        late-vote bug modes need)."""
        if self.busy_until > self.sim.now:
            self.sim.run_until(self.busy_until)

    def quiet(self) -> bool:
        """Every node up, running and active (no sync under way), and each sees all its peers
        up: a node still counting a peer as down leaves it out of a vote (which then aborts,
        rightly: "no vote from" it), so an update sent before the next heartbeat round would
        judge how fast views heal, not whether the mesh recovers."""
        return all(self.sim.running(n) and self.sim.core(n).state == "active"
                   and all(self.sim.core(n).peer_up.get(p) for p in self.sim.core(n).peers
                           if p in self.sim.core(n).members)
                   for n in self.members()) and self._changes_settled()

    def _changes_settled(self) -> bool:
        """Every membership request decided, and every node an ``add`` committed booted: a
        final update racing a change's commit aborts, rightly ("no vote from" the new node),
        which judges the race, not whether the mesh recovers (found by a 10-minute search,
        seed 12, `--members --skew`)."""
        sim = self.sim
        return (all(sim.outcome(uid) is not None for _, uid in self.adds + self.removals)
                and all(n in self.ids for n, uid in self.adds if sim.committed(uid)))

    def progress(self) -> dict[str, Any] | None:
        """Liveness: once the mesh is quiet after the last heal, an update at n1 (or the
        first member left, after a ``decommission``) commits. None: it did."""
        sim = self.sim
        end = sim.now + SETTLE_S
        sim.run_for(STEP_S)
        while not self.quiet() and sim.now < end:
            sim.run_for(STEP_S)
        at = self.members()[0]
        final = self.update(at, "final")
        end = sim.now + SETTLE_S
        while sim.outcome(final) is None and sim.now < end:
            sim.run_for(STEP_S)
        sim.run_for(TAIL_S)
        if sim.committed(final):
            return self.told()
        a = sim.outcome(final)
        return {"kind": "no-progress-after-heal",
                "message": f"an update at {at} once the mesh was quiet after the last heal (or "
                           f"{SETTLE_S:g} s after it) did not commit in {SETTLE_S + TAIL_S:g} s "
                           f"(answer {None if a is None else (a.status, a.body)})",
                "witness": {"t": sim.now}}

    def told(self) -> dict[str, Any] | None:
        """A node removed by a committed ``decommission`` is running again after the heal:
        it must have learned it left (``"left": true``, docs/drip.md), or it waits for updates
        forever. None: every one did."""
        untold = [n for n in self.ids if n not in self.members() and self.sim.running(n)
                  and not self.sim.core(n).snapshot().get("left")]
        if not untold:
            return None
        return {"kind": "removed-node-not-told",
                "message": f"{', '.join(untold)} decommissioned, running after the heal, "
                           f"{SETTLE_S + TAIL_S:g} s on still does not say it left",
                "witness": {"t": self.sim.now, "nodes": untold}}

    def history(self) -> list[dict[str, Any]]:
        """invoke/complete pairs of every update, as `checkers.twopc` reads a run."""
        h: list[dict[str, Any]] = []
        for p, (node, key, value, uid) in enumerate(self.updates):
            h.append({"index": len(h), "process": p, "type": "invoke", "f": "update",
                      "value": [key, value, uid], "node": node})
        for p, (node, key, value, uid) in enumerate(self.updates):
            d = self.sim.outcome(uid)
            t = "info" if d is None else ("ok" if d.status == 200 else "fail")
            h.append({"index": len(h), "process": p, "type": t, "f": "update",
                      "value": [key, value, uid], "node": node,
                      **({"error": d.body.get("error")} if d and d.status != 200 else {})})
        return h


def first_peer(n: str) -> str:
    """``n``'s first peer by name on the mesh's fixed links: the link an ``isolate`` of 3 s
    or more gives back first (`harness.sim.realrun` gives back the same)."""
    return min(x for e in EDGES if n in e for x in e if x != n)


def linked(ids: list[str], edges: list[tuple[str, str]]) -> bool:
    """The mesh's links (``edges``) among ``ids`` alone connect them all."""
    seen, todo = {ids[0]}, [ids[0]]
    while todo:
        x = todo.pop()
        for a, b in edges:
            for y in ((b,) if a == x else (a,) if b == x else ()):
                if y in ids and y not in seen:
                    seen.add(y)
                    todo.append(y)
    return seen == set(ids)


def mixed(bugs: tuple[str, ...]) -> dict[str, Any]:
    """`DripSim`'s bug arguments: ``NAME`` on every node, ``NAME@1,3`` on n1 and n3 only (a
    mixed cluster, parsed as a real run parses it); a node an ``add`` brings in (n5, n6) runs
    only the modes named for every node. A uniform cluster's arguments are as before, so its
    runs stay byte for byte."""
    per = bugs_by_node(bugs, IDS)
    if len(set(per.values())) == 1:
        return {"bugs": per[IDS[0]]}
    n = len(IDS)
    return {"bugs": node_bugs(bugs, 0, n),  # server 0: no NAME@SERVERS names it
            "bugs_of": {f"n{i}": frozenset(node_bugs(bugs, i, n)) for i in IDS}}


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a fresh mesh, heal, settle, update once more, and judge it."""
    r = _Run(seed, bugs)
    sim = r.sim
    stuck = play(sim, schedule, r.step, ids=r.ids, latency=0.001, settle=r.progress,
                 finish=r.play_out)
    witness: list[dict[str, Any]] = [] if stuck is None else [stuck]
    history = r.history()
    if not capped(stuck):
        witness += witness_of(twopc.check({}, history, sim.observations()))
    tail = json.dumps([history, witness], sort_keys=True, default=str).encode()
    return Outcome(not witness, witness, lambda: sim.trace_bytes() + tail, history, sim.now)


TARGET = Target("drip", KINDS, BUGS, run, per_node=IDS,
                optional=("skew", *MEMBER_KINDS, "hostile", "sever"),
                needs={**{b: ("hostile",) for b in HOSTILE_BUGS},
                       "release-expired-locks": ("sever", *MEMBER_KINDS[:1])})
