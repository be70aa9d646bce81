"""Garlic Farm as a search target: what each schedule step does to a 5-server `GfSim`, and
how its run is judged (the suite's Raft checkers on the journals, plus liveness after heal).

Kinds: ``partition`` (shape ``a``: 0 isolate server ``b``; 1 two/three split; 2 bridge, where
``b`` sees both halves that cannot see each other; 3 one-way cut into ``b``), ``heal``,
``crash``, ``restart``, ``pause``/``resume`` (server ``b`` counted from the leader) (SIGSTOP/SIGCONT), ``loss`` and ``dup`` (rate
``a``/10), ``delay`` (latency 1 + 20·``a`` ms, jitter 10·``b`` ms: jitter reorders),
``write`` (a client entry to the leader), ``add``/``remove`` (a membership change of server
``a`` sent to the leader; with none, sent the moment the next one is elected: a change that
meets a new leader is where Raft's membership rules matter), and when asked (``--hostile``) ``hostile``: one burst of
`nodes.garlicfarm.hostile`'s messages at server ``b`` (``a % 3``: 0 all, 1 what any sender can
make, 2 extreme values on a member's link). Every server keeps its records durable at once (the core persists
before it sends), so a crash loses exactly what was in memory; clock skew only when asked
(``--skew``, `Simulation.SKEWS`: the core reads no clock for a safety decision).
"""

from __future__ import annotations

import json
import random
from typing import Any

from checkers.raft import (
    committed_not_lost,
    election_safety,
    membership_safety,
    state_machine_safety,
    vote_safety,
)
from checkers.result import Result
from harness.sim.garlicfarm import GfSim, app_entry
from harness.sim.play import play
from harness.sim.search import (
    STORM_MSGS_PER_S,
    Outcome,
    Step,
    Target,
    bugs_by_node,
    witness_of,
)
from nodes.garlicfarm import hostile
from nodes.garlicfarm.codec import (
    ClusterServer,
    CodecError,
    LogEntry,
    MsgType,
    Request,
    ValueType,
    encode_cluster_server,
)
from nodes.garlicfarm.core import Inbound, NodeOptions

IDS = (1, 2, 3, 4, 5)
KINDS = ("partition", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "write", "add", "remove")
BUGS = ("unsafe-config-change", "commit-without-majority", "forget-vote", "sync-loop",
        "ack-before-fsync", "no-term-bound")
#: bug mode -> the optional kinds only it needs: ``no-term-bound`` is seen only by a hostile
#: member's out-of-range term
NEEDS = {"no-term-bound": ("hostile",)}
CHECKS = (election_safety, vote_safety, state_machine_safety, committed_not_lost,
          membership_safety)
#: an ``add``/``remove`` with no leader waits for one this long (several elections: the
#: longest election timeout is 0.6 s), looking every `POLL_S` (within one network delay of
#: the election, so before the new leader's first entry can commit)
LEADER_WAIT_S = 2.0
POLL_S = 0.0005
SETTLE_S = 3.0  # after the last heal: five times the longest election timeout (0.6 s)


def _server_req(kind: str, sid: int) -> Request:
    t = MsgType.ADD_SERVER_REQUEST if kind == "add" else MsgType.REMOVE_SERVER_REQUEST
    ent = LogEntry(0, ValueType.CLUSTER_SERVER,
                   encode_cluster_server(ClusterServer(sid, f"tcp://127.0.0.1:{9000 + sid}")))
    return Request(t, sid, 0, 0, entries=(ent,))


def _write(v: Any) -> Request:
    return Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=(app_entry(v),))


class _Run:
    def __init__(self, seed: int, bugs: tuple[str, ...]) -> None:
        per = bugs_by_node(bugs, IDS)
        uniform = len(set(per.values())) == 1
        self.sim = GfSim(IDS, seed=seed, bugs=per[IDS[0]] if uniform else (),
                         opts=NodeOptions(meta_interval=0), bugs_of=None if uniform else per)
        self.ops: list[dict[str, Any]] = []
        self.writes = 0

    def _leader(self) -> int | None:
        ls = self.sim.leaders()
        return ls[0] if ls else None

    def _pick(self, b: int) -> int:
        """Server ``b`` counted from the current leader (0: the leader, when there is one), so
        that faults aimed at the leader are as likely as they matter, and shrink to 0."""
        lead = set(self.sim.leaders())
        order = sorted(IDS, key=lambda j: (j not in lead, j))
        return order[b % len(order)]

    def _request(self, kind: str, req: Request, value: Any, waited: float = 0.0) -> None:
        lead = self._leader()
        if lead is None and kind != "write" and waited < LEADER_WAIT_S:
            # an administrator's change waits for the next leader, as JRaft's client retries:
            # it then reaches a leader in the moment after its election, the one moment a
            # leader may not yet start a change (no entry of its term committed)
            self.sim.at(self.sim.now + POLL_S,
                        lambda: self._request(kind, req, value, waited + POLL_S))
            return
        if lead is None:
            self.ops.append({"t": round(self.sim.now, 6), "f": kind, "value": value,
                             "type": "fail", "error": "no leader"})
            return
        token = self.sim.client_request(lead, req)
        self.ops.append({"t": round(self.sim.now, 6), "f": kind, "value": value, "node": lead,
                         "token": token})

    def step(self, s: Step) -> None:
        kind, dt, a, b = s
        sim = self.sim
        sim.run_for(dt / 1000)
        i = self._pick(b)
        if kind == "partition":
            others = [j for j in IDS if j != i]
            if a % 4 == 0:
                sim.partition([i], others)
            elif a % 4 == 1:
                sim.partition(IDS[:2], IDS[2:]) if b % 2 else sim.partition(IDS[:3], IDS[3:])
            elif a % 4 == 2:
                half = (len(others) + 1) // 2
                left, right = others[:half], others[half:]
                sim.partition(left, right)  # i keeps both sides
                sim.trace.append((sim.now, "bridge", i))
            else:
                j = IDS[a % len(IDS)]
                if j != i:
                    sim.net.cut_one_way(j, i)
                    sim.trace.append((sim.now, "cut-one-way", j, i))
        elif kind == "write":
            self.writes += 1
            self._request("write", _write(self.writes), self.writes)
        elif kind == "hostile":
            self.hostile(i, a)
        elif kind in ("add", "remove"):
            self._request(kind, _server_req(kind, IDS[a % len(IDS)]), IDS[a % len(IDS)])
        else:
            sim.fault_step(kind, i, a, b, delay=(0.001, 0.02, 0.01))

    def hostile(self, i: int, a: int) -> int:
        """One burst of hostile messages at server ``i`` through the network (seeded by the
        run's seed and the time: a replay sends the same bytes); how many were sent."""
        sim = self.sim
        rng = random.Random(f"{sim.seed}:hostile:{sim.now!r}:{i}")
        sent = 0
        for kind, (how, sid), data in hostile.messages(rng, i, IDS):
            outsider = kind in hostile.OUTSIDER
            if (a % 3 == 1 and not outsider) or (a % 3 == 2 and outsider):
                continue
            seen_as = Inbound(("link", sid)) if how == "request" else sid
            sim.trace.append((sim.now, "hostile", i, kind))
            sent += sim.inject(0, i, seen_as, data)
        return sent

    def progress(self) -> dict[str, Any] | None:
        """Liveness: after the last heal, a write is committed by a leader. None: it was."""
        sim = self.sim
        sim.run_for(SETTLE_S)
        lead = self._leader()
        if lead is None:
            return {"kind": "no-leader-after-heal", "message":
                    f"no leader {SETTLE_S:g} s after the last heal", "witness": {"t": sim.now}}
        token = sim.client_request(lead, _write("final"))
        sent = sim.sent
        sim.run_for(SETTLE_S)
        rate = (sim.sent - sent) / SETTLE_S
        if rate > STORM_MSGS_PER_S:
            return {"kind": "message-storm", "message":
                    f"{rate:.0f} messages per simulated second after the last heal (more than "
                    f"{STORM_MSGS_PER_S}): a retry loop at network speed",
                    "witness": {"leader": lead, "t": sim.now}}
        resp = sim.replies.get(token)
        self.ops.append({"t": round(sim.now, 6), "f": "write", "value": "final", "node": lead,
                         "token": token, "accepted": getattr(resp, "accepted", None)})
        if resp is None or not resp.accepted:
            return {"kind": "no-progress-after-heal", "message":
                    f"leader {lead} did not commit a write within {SETTLE_S:g} s after the "
                    f"last heal", "witness": {"leader": lead, "t": sim.now}}
        return None

    def observations(self) -> dict[str, Any]:
        nodes: dict[str, Any] = {f"n{i}": {"events": [], "state": None} for i in IDS}
        for seq, e in enumerate(self.sim.events):
            nodes[f"n{e.node}"]["events"].append({"seq": seq, "t": e.t, "type": e.type,
                                                  **e.fields})
        return {"nodes": nodes}

    def replies(self) -> None:
        for op in self.ops:
            if "token" in op and "accepted" not in op:
                r = self.sim.replies.get(op["token"])
                op["accepted"] = getattr(r, "accepted", None)


def fresh_leader_steps(schedule: list[Step], seed: int, bugs: tuple[str, ...]
                       ) -> dict[int, bool]:
    """The ``add``/``remove`` steps (by index) whose request, as this schedule plays, met no
    leader or one that had committed no entry of its own term yet: what a real run must
    reproduce (harness/sim/realrun.py); each with whether that leader (or none) came after
    the step before (the real request must then be watching from that step's time on, real
    elections not coming when the simulated ones did). Played up to the last such step."""
    r = _Run(seed, bugs)
    r.sim.wait_leader()
    last = max((i for i, s in enumerate(schedule) if s[0] in ("add", "remove")), default=-1)
    out: dict[int, bool] = {}
    before: set[int] = set(r.sim.leaders())
    for i, (kind, dt, a, b) in enumerate(schedule[:last + 1]):
        r.sim.run_for(dt / 1000)
        now = set(r.sim.leaders())
        if kind in ("add", "remove"):
            lead = r._leader()
            raft = None if lead is None else r.sim.nodes[lead].core.raft  # type: ignore[union-attr]
            if raft is None or raft.term_at(raft.commit) != raft.term:
                out[i] = lead is None or bool(now - before)
        r.step((kind, 0, a, b))
        before = set(r.sim.leaders())
    return out


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a fresh 5-server cluster and judge it."""
    r = _Run(seed, bugs)
    stuck = play(r.sim, schedule, r.step, ids=IDS, latency=0.001, settle=r.progress,
                 before=r.sim.wait_leader, node_errors=(CodecError,))
    r.replies()
    obs = r.observations()
    witness: list[dict[str, Any]] = []
    for chk in CHECKS:
        res: Result = chk({}, [], obs)
        witness += witness_of(res)
    if stuck:
        witness.append(stuck)
    tail = json.dumps(r.ops, sort_keys=True).encode()  # the trace: serialized when asked
    return Outcome(not witness, witness, lambda: r.sim.trace_bytes() + tail, r.ops, r.sim.now)


TARGET = Target("garlicfarm", KINDS, BUGS, run, optional=("hostile", "skew"),
                per_node=IDS, needs=NEEDS)
