"""A tiny deterministic network for DripCore unit tests: delivers effects between cores."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from nodes.drip import codec
from nodes.drip.core import (
    ClientDone,
    CoreConfig,
    DripCore,
    Effect,
    Emit,
    Send,
    SendSeq,
    SetTimer,
    Unavailable,
)
from nodes.drip.store import Store


class Sim:
    def __init__(self, edges: list[tuple[str, str]], bugs: frozenset[str] = frozenset(),
                 root: Path | None = None, cfg: CoreConfig | None = None) -> None:
        ids = sorted({a for e in edges for a in e})
        self.ids = ids
        self.edges = edges
        self.root = root
        self.bugs = bugs
        self.cfg = cfg or CoreConfig(bugs=bugs)
        self.now = 0.0
        self.cores: dict[str, DripCore] = {}
        self.events: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        self.done: dict[str, ClientDone] = {}
        self.timers: list[tuple[float, str, tuple[Any, ...]]] = []
        self.queue: deque[tuple[str, str, codec.Message]] = deque()
        self.cut: set[tuple[str, str]] = set()
        #: links that swallow requests without an error (a black hole): the sender only
        #: learns by its own timers
        self.hang: set[tuple[str, str]] = set()
        self.down: set[str] = set()
        for i in ids:
            self.boot(i)

    def peers(self, n: str) -> list[str]:
        return sorted({b for a, b in self.edges if a == n} | {a for a, b in self.edges if b == n})

    def boot(self, n: str) -> None:
        path = ":memory:" if self.root is None else str(self.root / f"{n}.sqlite3")
        c = DripCore(n, self.peers(n), Store(path), self.cfg, mesh_members=self.ids)
        self.cores[n] = c
        self.down.discard(n)
        self.perform(n, c.on_start(self.now))

    def restart(self, n: str) -> None:
        """kill -9 and start again: the core's memory is gone, its store is kept."""
        store = self.cores[n].store
        store.fresh = False
        self.queue = type(self.queue)(q for q in self.queue if n not in (q[0], q[1]))
        self.timers = [t for t in self.timers if t[1] != n]
        c = DripCore(n, self.peers(n), store, self.cfg, mesh_members=self.ids)
        self.cores[n] = c
        self.down.discard(n)
        self.perform(n, c.on_start(self.now))

    def perform(self, n: str, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Emit):
                self.events[n].append({"type": e.type, **e.fields})
            elif isinstance(e, Send):
                self.queue.append((n, e.to, e.msg))
            elif isinstance(e, SendSeq):
                for m in e.msgs:
                    self.queue.append((n, e.to, m))
                if e.owed_gen is not None and (n, e.to) not in self.cut and e.to not in self.down:
                    self.cores[n].on_sync_served(e.to, e.owed_gen)
            elif isinstance(e, SetTimer):
                self.timers.append((e.at, n, e.name))
            elif isinstance(e, ClientDone):
                self.done[e.uid] = e

    def deliver_one(self) -> bool:
        if not self.queue:
            return False
        src, dst, msg = self.queue.popleft()
        if (src, dst) in self.hang:
            return True
        c = self.cores[dst]
        if (src, dst) in self.cut or dst in self.down or src in self.down:
            if src not in self.down:
                self.perform(src, self.cores[src].on_send_failed(dst, msg, self.now))
            return True
        # round-trip through the wire format, as the server does
        req = codec.encode(msg)
        msg = codec.decode(req.method, req.path, req.headers, req.body_bytes(), None)
        try:
            eff = c.receive(src, msg, self.now)
        except Unavailable:
            self.perform(src, self.cores[src].on_send_failed(dst, msg, self.now))
            return True
        self.perform(dst, eff)
        return True

    def flush_outboxes(self) -> None:
        """Deliver queued commits (what the server's outbox loop does)."""
        for n, c in self.cores.items():
            if n in self.down:
                continue
            for p in c.peers:
                if not c.peer_up.get(p) or (n, p) in self.cut or p in self.down:
                    continue
                for seq, payload in c.store.outbox_peek(p, 1000):
                    from nodes.drip.core import commit_from_payload
                    m = commit_from_payload(payload)
                    try:
                        self.perform(p, self.cores[p].on_commit(n, m, self.now))
                    except Unavailable:
                        break
                    c.store.outbox_delete(seq)

    def run(self, until: float | None = None, steps: int = 100_000) -> None:
        """Deliver everything; fire timers up to ``until``."""
        for _ in range(steps):
            if self.deliver_one():
                continue
            self.flush_outboxes()
            if self.queue:
                continue
            due = sorted(t for t in self.timers if until is None or t[0] <= until)
            if not due:
                break
            t = due[0]
            self.timers.remove(t)
            self.now = max(self.now, t[0])
            if t[1] not in self.down:
                self.perform(t[1], self.cores[t[1]].on_timer(t[2], self.now))
        if until is not None:
            self.now = max(self.now, until)

    def heartbeat_round(self) -> None:
        """Every live node heartbeats every peer; cut links and dead nodes fail."""
        for n, c in self.cores.items():
            if n in self.down:
                continue
            res: dict[str, dict[str, Any] | None] = {}
            for p in c.peers:
                if (n, p) in self.cut or (p, n) in self.cut or p in self.down:
                    res[p] = None
                    continue
                reply, eff = self.cores[p].on_heartbeat(n, c.heartbeat_for(p), self.now)
                self.perform(p, eff)
                res[p] = reply
            self.perform(n, c.on_heartbeat_round(res, self.now))

    def update(self, n: str, key: str, value: Any, uid: str) -> None:
        self.perform(n, self.cores[n].client_update(codec.Update(uid, key, value), self.now))

    def value(self, n: str, key: str) -> Any:
        it = self.cores[n].store.get(key)
        return None if it is None else it.value

    def observations(self) -> dict[str, Any]:
        nodes = {}
        for n, evs in self.events.items():
            nodes[n] = {"events": [{"seq": i, "t": 0.0, **e} for i, e in enumerate(evs)],
                        "state": None if n in self.down else self.cores[n].snapshot(),
                        "missing": []}
        return {"nodes": nodes, "run_dir": "sim"}
