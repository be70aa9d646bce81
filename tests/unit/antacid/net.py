"""A hand-driven ARS network for core tests: effects in, messages delivered one at a time,
each through the real XML encoding (so every exchange is schema-checked both ways)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from nodes.antacid import messages as m
from nodes.antacid.core import ArsCore, ArsOptions, CallFailed, NotifyDest
from nodes.antacid.state import Durable, Topology
from nodes.common.effects import Persist, Reply, Send

TOPO = Topology("blocks:z", "p", {"p": ("p.test", 5001), "r1": ("r1.test", 5002),
                                  "r2": ("r2.test", 5003)},
                {"r1": ("p",), "r2": ("r1",)})


@dataclass
class Net:
    topology: Topology = TOPO
    cores: dict[str, ArsCore] = field(default_factory=dict)
    records: dict[str, list[Any]] = field(default_factory=dict)
    queue: deque[tuple[str, Any, Any]] = field(default_factory=deque)
    replies: list[Any] = field(default_factory=list)
    notified: list[m.SubmittedUpdateResultNotification] = field(default_factory=list)
    cut: set[frozenset[str]] = field(default_factory=set)
    options: ArsOptions = field(default_factory=ArsOptions)
    now: float = 0.0

    def __post_init__(self) -> None:
        for i, node in enumerate(self.topology.servers):
            self.boot(node, 100 + i)

    def boot(self, node: str, incarn: int) -> None:
        self.cores[node] = ArsCore(node, self.topology,
                                   Durable.restore(self.records.get(node, []), incarn),
                                   self.options)
        self.take(node, self.cores[node].start(self.now))

    def take(self, node: str, effects: list[Any]) -> None:
        for e in effects:
            if isinstance(e, Persist):
                self.records.setdefault(node, []).append(e.record)
            elif isinstance(e, Reply):
                self.replies.append(e.value)
            elif isinstance(e, Send):
                self.queue.append((node, e.to, m.parse(m.encode(e.msg))))

    def submit(self, node: str, *docs: tuple[Any, ...], notify: bool = True) -> Any:
        """``docs``: (name, content, action) or (name, content, action, csn) each."""
        group = m.UpdateGroup(tuple(m.DatumAndOp(*d) for d in docs))
        cmd = m.SubmitUpdate(group, "client.test" if notify else None, 7000 if notify else None)
        cmd = m.parse(m.encode(m.ArsRequest(1, cmd))).body  # type: ignore[union-attr]
        self.take(node, self.cores[node].on_command(cmd, "t", self.now))
        return self.replies[-1]

    def step(self) -> bool:
        if not self.queue:
            return False
        src, dst, msg = self.queue.popleft()
        if isinstance(dst, NotifyDest):
            self.notified.append(msg.body)
            self.take(src, self.cores[src].on_message(dst, m.ArsResponse(msg.req_num), self.now))
        elif frozenset((src, dst)) in self.cut:
            if isinstance(msg, m.ArsRequest):
                self.take(src, self.cores[src].on_message(dst, CallFailed(msg.req_num), self.now))
        else:
            self.take(dst, self.cores[dst].on_message(src, msg, self.now))
        return True

    def run(self, limit: int = 500) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError("the network did not go quiet")

    def timer(self, node: str, name: Any) -> None:
        self.take(node, self.cores[node].on_timer(name, self.now))

    def docs(self, node: str) -> dict[str, tuple[str, int]]:
        return dict(self.cores[node].durable.docs)
