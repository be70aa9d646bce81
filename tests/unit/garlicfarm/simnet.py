"""A tiny in-memory network for driving several RaftCores in unit tests."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from nodes.garlicfarm import core as C
from nodes.garlicfarm.codec import LogEntry, Request, Response, decode, encode


@dataclass
class Node:
    core: C.RaftCore
    timers: dict[str, float] = field(default_factory=dict)
    persisted: dict = field(default_factory=lambda: {"term": 0, "vote": None, "log": {}})
    applied: list[tuple[int, LogEntry]] = field(default_factory=list)
    installed: list = field(default_factory=list)
    events: list = field(default_factory=list)
    up: bool = True


class Net:
    def __init__(self, ids, seed=1, bugs=frozenset(), bootstrap=None, opts=None):
        self.now = 0.0
        self.queue: deque = deque()
        self.replies: dict = {}
        self.cut: set[tuple[int, int]] = set()
        self.nodes: dict[int, Node] = {}
        boot = bootstrap if bootstrap is not None else {i: f"tcp://127.0.0.1:{9000 + i}" for i in ids}
        for i in ids:
            self.add(i, boot, seed, bugs, opts)

    def add(self, i, boot, seed=1, bugs=frozenset(), opts=None):
        core = C.RaftCore(i, boot, C.StoredState(), random.Random(seed * 100 + i), opts, bugs)
        self.nodes[i] = Node(core)
        self.run(i, core.start(self.now))

    def run(self, i, effects):
        n = self.nodes[i]
        for e in effects:
            if isinstance(e, C.SetTimer):
                n.timers[e.name] = e.at
            elif isinstance(e, C.PersistState):
                n.persisted["term"], n.persisted["vote"] = e.term, e.voted_for
            elif isinstance(e, C.PersistAppend):
                for idx, ent in e.entries:
                    n.persisted["log"][idx] = ent
            elif isinstance(e, C.PersistTruncate):
                for k in [k for k in n.persisted["log"] if k >= e.from_index]:
                    del n.persisted["log"][k]
            elif isinstance(e, C.Apply):
                n.applied.append((e.index, e.entry))
            elif isinstance(e, C.InstallState):
                n.installed.append(e)
            elif isinstance(e, C.Emit):
                n.events.append((e.type, e.fields))
            elif isinstance(e, C.Send):
                # round-trip through the codec on every hop
                self.queue.append(("req", i, e.to, decode(encode(e.msg))))
            elif isinstance(e, C.Reply):
                if isinstance(e.token, tuple) and e.token[0] == "peer":
                    _, frm = e.token
                    if e.msg is not None:
                        self.queue.append(("resp", i, frm, decode(encode(e.msg))))
                else:
                    self.replies[e.token] = e.msg

    def deliver_one(self) -> bool:
        if not self.queue:
            return False
        kind, frm, to, msg = self.queue.popleft()
        if to not in self.nodes or not self.nodes[to].up or (frm, to) in self.cut or not self.nodes[frm].up:
            return True
        core = self.nodes[to].core
        if kind == "req":
            assert isinstance(msg, Request)
            self.run(to, core.on_request(msg, ("peer", frm), self.now))
        else:
            assert isinstance(msg, Response)
            self.run(to, core.on_response(msg, self.now))
        return True

    def step(self, dt=0.01):
        while self.deliver_one():
            pass
        self.now += dt
        for i, n in self.nodes.items():
            if not n.up:
                continue
            for name, at in list(n.timers.items()):
                if at <= self.now:
                    del n.timers[name]
                    self.run(i, n.core.on_timer(name, self.now))
        while self.deliver_one():
            pass

    def run_for(self, seconds):
        end = self.now + seconds
        while self.now < end:
            self.step()

    def leaders(self):
        return [i for i, n in self.nodes.items() if n.up and n.core.role == C.Role.LEADER]

    def wait_leader(self, limit=10.0):
        end = self.now + limit
        while self.now < end:
            self.step()
            ls = self.leaders()
            if len(ls) == 1:
                return ls[0]
        raise AssertionError(f"no single leader: {self.leaders()}")

    def partition(self, *groups):
        self.cut = set()
        for g in groups:
            for h in groups:
                if g is not h:
                    self.cut |= {(a, b) for a in g for b in h}

    def heal(self):
        self.cut = set()


def restart(net: Net, i: int, bugs=frozenset()) -> None:
    """Crash node i and restart it from what it persisted (term, vote, log)."""
    old = net.nodes[i]
    log = old.persisted["log"]
    entries = [log[k] for k in sorted(log)]
    assert sorted(log) == list(range(1, len(entries) + 1))
    stored = C.StoredState(old.persisted["term"], old.persisted["vote"], C.Snapshot(), entries)
    core = C.RaftCore(i, old.core.bootstrap, stored, random.Random(len(old.events)), old.core.opt, bugs)
    node = Node(core, persisted=old.persisted, events=old.events)
    node.applied_before = old.applied  # type: ignore[attr-defined]
    net.nodes[i] = node
    net.queue = deque(m for m in net.queue if m[2] != i)
    net.run(i, core.start(net.now))
