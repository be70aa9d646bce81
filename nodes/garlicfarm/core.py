"""The Garlic Farm node as one sans-IO core (docs/contracts.md, section 0a): Raft, the
applications over its log, and everything a server does with them.

It follows `nodes.common.core.Core`. What it owns, so the runtime and the simulator drive
the same protocol:

* **Raft** (`nodes.garlicfarm.raft.Raft`) and the **applications** (`nodes.garlicfarm.apps`):
  committed entries are applied and journaled here; past ``snapshot_threshold`` applied
  entries the log is compacted into a snapshot of the applications.
* **Client ops** (`Kv` commands): the leader proposes the op; a follower forwards it to the
  leader as a raw-wire ClientRequest on a `Call` of its own and answers once it has applied
  the index the leader named. The answer is the HTTP body: ``ok``/``fail`` from the KV
  machine, ``fail no-leader`` (certainly not appended), ``info indeterminate`` (maybe).
* **Meta LS publisher**: every ``meta_interval`` (jittered by the seeded rng) a member
  proposes its status, dated by the node's skewable calendar clock ``wall(now)``.
* **Join** (``join``): the establishment sequence, a probe (empty ClientRequest) to each
  seed in turn, then AddServerRequest to the leader it names, until a configuration holds
  this node. **Leave** (`Leave` command): RemoveServerRequest to the leader.

Addresses of peer messages (``Send.to`` and ``on_message``'s ``peer``):

* an ``int``: a server's replication link; requests go out on it, its responses come back
  with that id;
* an `Inbound`: a connection a request arrived on; it is answered with
  ``Send(inbound, Response)``, or ``Send(inbound, None)`` to close it unanswered (outcome
  unknown);
* a `Call`: one request on a connection of its own (forwarding, join, leave), so a request
  that waits for a commit does not hold up replication; the runtime answers with
  ``on_message(call, Response | CallFailed)``.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer, node_error
from nodes.garlicfarm import metals
from nodes.garlicfarm.apps import Apps
from nodes.garlicfarm.codec import (
    NO_LEADER,
    ClusterServer,
    LogEntry,
    MsgType,
    Request,
    Response,
    ValueType,
    encode_cluster_server,
)
from nodes.garlicfarm.raft import Apply, InstallState, Options, Raft, Role, StoredState

#: the node's bug modes (off by default; docs/garlicfarm.md): commit-without-majority,
#: unsafe-config-change, sync-loop and no-term-bound (Raft), local-reads (here), ack-before-fsync and
#: forget-vote (storage). Here so a suite learns them without loading the asyncio runtime.
BUGS = ("ack-before-fsync", "commit-without-majority", "local-reads", "forget-vote",
        "unsafe-config-change", "sync-loop", "no-term-bound")

#: how long a join probe or AddServerRequest may take, and how long a node waits to appear
#: in a configuration after the leader accepted it, before trying the next seed
JOIN_CALL_S, JOIN_WAIT_S, JOIN_ROUND_S = 3.0, 5.0, 0.5
LEAVE_CALL_S = 5.0
#: pauses before routing a client op again: no leader known / the leader refused it
RETRY_S, REFUSED_RETRY_S = 0.05, 0.02


#: effect types `_absorb` passes on unchanged (none is an Apply, InstallState or Reply)
_PASS_THROUGH = frozenset({Send, SetTimer, Emit, Persist})


@dataclass(frozen=True)
class Inbound:
    """A connection a request arrived on (a peer's link, a forwarded or raw-wire client)."""

    conn: Hashable


@dataclass(frozen=True)
class Call:
    """One request to server ``to`` on a connection of its own; ``key`` says what the answer
    is for; the runtime gives up after ``timeout`` seconds."""

    to: int
    key: Hashable
    timeout: float


@dataclass(frozen=True)
class CallFailed:
    """A `Call` got no answer. ``maybe``: it may have reached the server (it timed out or
    the connection broke after sending) rather than certainly not (refused, unreachable)."""

    maybe: bool
    error: str


@dataclass(frozen=True)
class Kv:
    """A KV op from a client (``f``: read, write or cas); ``rid`` names it in the log."""

    f: str
    key: str
    rid: str
    value: Any = None
    old: Any = None
    new: Any = None

    def entry(self) -> bytes:
        op: dict[str, Any] = {"kv": self.f, "key": self.key, "rid": self.rid}
        if self.f == "write":
            op["value"] = self.value
        elif self.f == "cas":
            op["old"], op["new"] = self.old, self.new
        return json.dumps(op).encode()


@dataclass(frozen=True)
class Leave:
    """Leave the cluster (the disconnect sequence); answered ``(http status, body)``."""


@dataclass(frozen=True)
class NodeOptions:
    """What the node does around Raft (config ``options``, docs/garlicfarm.md)."""

    raft: Options = field(default_factory=Options)
    request_timeout: float = 5.0
    meta_interval: float = 2.0  # 0: no Meta LS publisher
    publish_config: str = "auto"
    snapshot_threshold: int = 1000
    cluster: str = "garlicfarm"
    join: bool = False
    advertise: str = ""


@dataclass
class _Op:
    """A client op (or the publisher's status, ``token`` None) until it is answered."""

    token: Any
    value: bytes
    rid: str | None
    deadline: float
    stage: str = "route"  # route -> proposed (leader) | forwarded -> applying
    index: int = 0


@dataclass(frozen=True)
class _OpRef:
    """Raft's reply token for a proposal made for op ``n``."""

    n: int


class GarlicFarmCore:
    def __init__(self, me: int, bootstrap: dict[int, str], stored: StoredState,
                 rng: random.Random, options: NodeOptions | None = None,
                 bugs: frozenset[str] = frozenset(), seeds: tuple[int, ...] = (),
                 wall: Callable[[float], float] | None = None) -> None:
        """``seeds``: the servers this node has addresses for in its own config (whom a
        joiner asks); ``wall(now)``: the calendar clock in seconds."""
        self.me = me
        self.opt = options or NodeOptions()
        self.bugs = bugs
        self.seeds = tuple(sorted(seeds))
        self.rng = rng
        self.wall = wall or (lambda now: now)
        self.raft = Raft(me, bootstrap, stored, rng, self.opt.raft, bugs)
        self.apps = Apps()
        self._restored = self.apps.restore(stored.snapshot.data) if stored.snapshot.data else []
        self.ops: dict[int, _Op] = {}
        self._ids = itertools.count()
        self._status_op: int | None = None
        self._leaves: dict[int, Any] = {}
        self.started = 0.0
        self._join_round: list[int] = []
        self._join_attempt = 0
        self._join_target: int | None = None

    @property
    def member(self) -> bool:
        return self.me in self.raft.servers

    # ------------------------------------------------------------ the four inputs

    def start(self, now: float) -> list[Effect]:
        self.started = now
        out: list[Effect] = list(self._restored)
        out += self._absorb(self.raft.start(now), now)
        if self.opt.meta_interval > 0:
            out.append(self._next_status(now))
        if self.opt.join:
            out.append(SetTimer("join", now))
        return out

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        tm = type(msg)  # the two common cases first, by exact type (the chain below is slower)
        if tm is Response and type(peer) is int:
            return self._absorb(self.raft.on_response(msg, now), now)
        if tm is Request and type(peer) is Inbound:
            return self._absorb(self.raft.on_request(msg, peer, now), now)
        if isinstance(peer, Inbound) and isinstance(msg, Request):
            return self._absorb(self.raft.on_request(msg, peer, now), now)
        if isinstance(peer, Call) and isinstance(msg, Response | CallFailed):
            return self._on_call_answer(peer, msg, now)
        if isinstance(peer, int) and isinstance(msg, Response):
            return self._absorb(self.raft.on_response(msg, now), now)
        return [node_error("unexpected peer message", f"{type(msg).__name__} from {peer!r}",
                           evidence=False)]

    def on_timer(self, name: Hashable, now: float) -> list[Effect]:
        if name in ("election", "heartbeat"):
            return self._absorb(self.raft.on_timer(name, now), now)
        if name == "metals":
            return self._publish_status(now)
        if name == "join":
            return self._join_step(now)
        if isinstance(name, tuple) and name[0] in ("retry", "deadline"):
            op = self.ops.get(name[1])
            if op is None:
                return []
            if name[0] == "retry":
                return self._route(name[1], op, now) if op.stage == "route" else []
            return self._expire(name[1], op, now)
        return []

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        if isinstance(cmd, Kv):
            if cmd.f == "read" and "local-reads" in self.bugs:
                return [Reply(token, {"type": "ok", "value": self.apps.kv.data.get(cmd.key)})]
            return self._submit(token, cmd.entry(), cmd.rid, now)
        if isinstance(cmd, Leave):
            return self._leave(token, now)
        raise TypeError(f"not a Garlic Farm command: {cmd!r}")

    # ------------------------------------------------------------ Raft's effects

    def _absorb(self, effects: list[Any], now: float) -> list[Effect]:
        """Turn Raft's effects into the node's: apply what committed, answer inbound
        connections and the ops waiting on a proposal, journal what Raft survived."""
        out: list[Effect] = []
        applied = False
        for e in effects:
            te = type(e)
            if te in _PASS_THROUGH:  # most effects: no isinstance chain for them
                out.append(e)
            elif te is Reply and type(e.token) is Inbound:  # a follower's answer, by exact type
                out.append(Send(e.token, e.value))
            elif isinstance(e, Apply):
                out += self.apps.apply(e.index, e.entry)
                applied = True
            elif isinstance(e, InstallState):
                out += self.apps.restore(e.data)
                applied = True
            elif isinstance(e, Reply) and isinstance(e.token, Inbound):
                out.append(Send(e.token, e.value))
            elif isinstance(e, Reply) and isinstance(e.token, _OpRef):
                out += self._proposal_answer(e.token.n, e.value, now)
            else:
                out.append(e)
        if self.raft.errors:
            out += [node_error(where, err, evidence=True) for where, err in self.raft.take_errors()]
        if applied:
            out += self._answer_applied()
            out += self._maybe_compact(now)
        return out

    def _maybe_compact(self, now: float) -> list[Effect]:
        r = self.raft
        if r.applied - r.snap.last_index < self.opt.snapshot_threshold:
            return []
        return self._absorb(r.compact(r.applied, self.apps.snapshot()), now)

    # ------------------------------------------------------------ client ops

    def _submit(self, token: Any, value: bytes, rid: str | None, now: float) -> list[Effect]:
        n = next(self._ids)
        self.ops[n] = op = _Op(token, value, rid, now + self.opt.request_timeout)
        return [SetTimer(("deadline", n), op.deadline)] + self._route(n, op, now)

    def _route(self, n: int, op: _Op, now: float) -> list[Effect]:
        r = self.raft
        if r.role == Role.LEADER:
            op.stage = "proposed"
            return self._absorb(r.propose(op.value, _OpRef(n), now), now)
        leader = r.leader
        if leader is not None and leader != self.me and self._addressable(leader):
            op.stage = "forwarded"
            req = Request(MsgType.CLIENT_REQUEST, self.me, leader, r.term,
                          entries=(LogEntry(0, ValueType.APPLICATION, op.value),))
            return [Send(Call(leader, ("fwd", n), max(0.05, op.deadline - now)), req)]
        op.stage = "route"
        return [SetTimer(("retry", n), now + RETRY_S)]

    def _addressable(self, sid: int) -> bool:
        return sid in self.seeds or bool(self.raft.endpoint_of(sid))

    def _proposal_answer(self, n: int, resp: Response | None, now: float) -> list[Effect]:
        op = self.ops.get(n)
        if op is None or op.stage not in ("proposed", "forwarded"):
            return []  # answered already (its deadline passed)
        if resp is None:
            return self._finish(n, {"type": "info", "error": "indeterminate",
                                    "detail": "leadership lost before commit"})
        if not resp.accepted:
            retry = REFUSED_RETRY_S if op.stage == "forwarded" else RETRY_S
            op.stage = "route"
            return [SetTimer(("retry", n), now + retry)]
        op.stage, op.index = "applying", resp.next_index - 1
        op.deadline = now + max(0.5, self.opt.request_timeout)
        return [SetTimer(("deadline", n), op.deadline)] + self._answer_applied()

    def _answer_applied(self) -> list[Effect]:
        out: list[Effect] = []
        for n, op in list(self.ops.items()):
            if op.stage == "applying" and op.index <= self.raft.applied:
                res = self.apps.kv.results.get(op.rid) if op.rid is not None else None
                body = ({**res, "index": op.index} if res is not None else
                        {"type": "info", "error": "result-unknown", "index": op.index})
                out += self._finish(n, body)
        return out

    def _expire(self, n: int, op: _Op, now: float) -> list[Effect]:
        if now < op.deadline:
            return []
        if op.stage == "route":
            return self._finish(n, {"type": "fail", "error": "no-leader",
                                    "detail": "no leader reachable before the deadline"})
        what = "apply" if op.stage == "applying" else "commit"
        return self._finish(n, {"type": "info", "error": "indeterminate",
                                "detail": f"timeout waiting for {what}"})

    def _finish(self, n: int, body: dict[str, Any]) -> list[Effect]:
        op = self.ops.pop(n)
        if n == self._status_op:
            self._status_op = None
        return [] if op.token is None else [Reply(op.token, body)]

    # ------------------------------------------------------------ answers to calls

    def _on_call_answer(self, call: Call, msg: Response | CallFailed, now: float) -> list[Effect]:
        kind = call.key[0] if isinstance(call.key, tuple) else call.key
        if kind == "fwd":
            n = call.key[1]
            if isinstance(msg, Response):
                return self._proposal_answer(n, msg, now)
            op = self.ops.get(n)
            if op is None or op.stage != "forwarded":
                return []
            if msg.maybe:
                return self._finish(n, {"type": "info", "error": "indeterminate",
                                        "detail": msg.error})
            op.stage = "route"
            return [SetTimer(("retry", n), now + RETRY_S)]
        if kind == "join":
            return self._join_answer(call, msg, now)
        if kind == "leave":
            token = self._leaves.pop(call.key[1], None)
            if token is None:
                return []
            if isinstance(msg, CallFailed):
                return [Reply(token, (503, {"ok": False, "error": msg.error}))]
            leader = None if msg.destination == NO_LEADER else msg.destination
            return [Reply(token, (200, {"ok": msg.accepted, "leader": leader}))]
        return []

    # ------------------------------------------------------------ Meta LS publisher

    def _next_status(self, now: float) -> SetTimer:
        return SetTimer("metals", now + self.opt.meta_interval * (0.75 + 0.5 * self.rng.random()))

    def _publish_status(self, now: float) -> list[Effect]:
        out: list[Effect] = [self._next_status(now)]
        if not self.member or self._status_op is not None:
            return out
        st = metals.make_status(self.opt.cluster, self.me, int(self.wall(now) * 1000),
                                int((now - self.started) * 1000),
                                self.apps.metals.publisher == self.me, self.opt.publish_config)
        self._status_op = n = next(self._ids)
        self.ops[n] = op = _Op(None, json.dumps(st).encode(), None,
                               now + self.opt.request_timeout)
        return out + [SetTimer(("deadline", n), op.deadline)] + self._route(n, op, now)

    # ------------------------------------------------------------ join and leave

    def _join_step(self, now: float) -> list[Effect]:
        """Try the next seed (the timer fires after a round, a refused try, or the wait for
        a configuration that an accepted AddServerRequest should bring)."""
        if self.member:
            return []
        if not self._join_round:
            self._join_round = list(self.seeds)
            if not self._join_round:
                return [SetTimer("join", now + JOIN_ROUND_S)]
        sid = self._join_round.pop(0)
        self._join_attempt += 1
        self._join_target = None
        probe = Request(MsgType.CLIENT_REQUEST, self.me, sid, 0)
        return [Send(Call(sid, ("join", self._join_attempt, "probe", sid), JOIN_CALL_S), probe)]

    def _join_next(self, now: float) -> list[Effect]:
        if self.member:
            return []
        if self._join_round:
            return self._join_step(now)
        return [SetTimer("join", now + JOIN_ROUND_S)]

    def _join_answer(self, call: Call, msg: Response | CallFailed, now: float) -> list[Effect]:
        _, attempt, stage, sid = call.key
        if attempt != self._join_attempt or self.member:
            return []
        if isinstance(msg, CallFailed):
            return self._join_next(now)
        if stage == "probe":
            if msg.accepted:
                target = sid
            elif msg.destination != sid and msg.destination in self.seeds:
                target = msg.destination
            else:
                return self._join_next(now)
            ent = LogEntry(0, ValueType.CLUSTER_SERVER,
                           encode_cluster_server(ClusterServer(self.me, self.opt.advertise)))
            add = Request(MsgType.ADD_SERVER_REQUEST, self.me, target, 0, entries=(ent,))
            return [Send(Call(target, ("join", attempt, "add", target), JOIN_CALL_S), add)]
        out: list[Effect] = [Emit("join-request", {"leader": sid, "accepted": msg.accepted})]
        if msg.accepted:
            return out + [SetTimer("join", now + JOIN_WAIT_S)]
        return out + self._join_next(now)

    def _leave(self, token: Any, now: float) -> list[Effect]:
        leader = self.raft.leader
        if leader is None or leader == self.me:
            return [Reply(token, (409, {"ok": False,
                                        "error": "this node is the leader or no leader known"}))]
        if not self._addressable(leader):
            return [Reply(token, (409, {"ok": False, "error": f"no address for leader {leader}"}))]
        n = next(self._ids)
        self._leaves[n] = token
        ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(self.me)))
        req = Request(MsgType.REMOVE_SERVER_REQUEST, self.me, leader, self.raft.term,
                      entries=(ent,))
        return [Send(Call(leader, ("leave", n), LEAVE_CALL_S), req)]

