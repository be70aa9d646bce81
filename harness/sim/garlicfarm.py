"""Garlic Farm on the simulator: how a `GarlicFarmCore` is rebuilt from its durable Raft
records, how its three kinds of peer address travel, and the views the tests read.

Addresses (nodes.garlicfarm.core): a request on a replication link (``Send(sid, req)``)
reaches ``sid`` from an `Inbound` whose answer goes back to the sender as a response from
``sid``; a `Call` reaches its server the same way and its answer comes back to the `Call`,
or a `CallFailed` does: at once (one network delay) when the server is down, as a refused
connection is, and after the call's timeout when no answer came. A raw-wire client's
request (``client_request``) is answered into ``replies``, as a command's answer is.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable
from typing import Any

from harness.sim.driver import Simulation, Wire
from nodes.common.effects import Persist
from nodes.garlicfarm import codec
from nodes.garlicfarm.codec import LogEntry, Request, ValueType
from nodes.garlicfarm.core import Call, CallFailed, GarlicFarmCore, Inbound, NodeOptions
from nodes.garlicfarm.raft import (
    PersistAppend,
    PersistRemoved,
    PersistSnapshot,
    PersistState,
    PersistTruncate,
    Raft,
    Role,
    Snapshot,
    StoredState,
)

_LEADER = Role.LEADER
WIRE = Wire(codec.encode, codec.decode, immutable=True)  # frozen messages of tuples and bytes


def stored_state(durable: Iterable[Persist], bugs: frozenset[str] = frozenset()) -> StoredState:
    """What `nodes.garlicfarm.storage.RaftStorage.load` would hand a restarted node, from
    the records the node made durable (``forget-vote`` stores no vote, as storage does)."""
    term, vote, snap, removed = 0, None, Snapshot(), False
    log: dict[int, LogEntry] = {}
    for p in durable:
        r = p.record
        if isinstance(r, PersistState):
            term, vote = r.term, None if "forget-vote" in bugs else r.voted_for
        elif isinstance(r, PersistRemoved):
            removed = r.removed
        elif isinstance(r, PersistAppend):
            log.update(r.entries)
        elif isinstance(r, PersistTruncate):
            log = {i: e for i, e in log.items() if i < r.from_index}
        elif isinstance(r, PersistSnapshot):
            snap = Snapshot(r.last_index, r.last_term, r.config, r.data)
            log = dict(r.remaining)
    entries, i = [], snap.last_index + 1
    while i in log:
        entries.append(log[i])
        i += 1
    return StoredState(term, vote, snap, entries, removed)


class GfSim(Simulation):
    """Servers ``ids``, all in the bootstrap configuration unless ``bootstrap`` says other."""

    def __init__(self, ids: Iterable[int], seed: int = 1, bugs: Iterable[str] = (),
                 bootstrap: dict[int, str] | None = None, opts: NodeOptions | None = None,
                 latency: float = 0.001, jitter: float = 0.0, loss: float = 0.0,
                 bugs_of: dict[int, frozenset[str]] | None = None) -> None:
        ids = list(ids)
        self.bugs = frozenset(bugs)
        self.opts = opts or NodeOptions(meta_interval=0)
        boot = bootstrap if bootstrap is not None else {i: f"tcp://127.0.0.1:{9000 + i}" for i in ids}
        self.bootstrap_of: dict[int, dict[int, str]] = {i: boot for i in ids}
        #: per-server bug modes (a mixed cluster), over ``bugs`` for the servers it names
        self.bugs_of: dict[int, frozenset[str]] = dict(bugs_of or {})
        self._calls: dict[tuple[int, Call], int] = {}  # outstanding call -> caller's boot
        self._clients = itertools.count()
        self._links: dict[int, Inbound] = {}

        def make(i: int, durable: list[Persist], _boot: int, rng: random.Random) -> GarlicFarmCore:
            bugs = self.bugs_of.get(i, self.bugs)
            return GarlicFarmCore(i, self.bootstrap_of[i], stored_state(durable, bugs), rng,
                                  self.opts, bugs, seeds=tuple(j for j in ids if j != i),
                                  wall=lambda now, i=i: 1.8e9 + self.wall(i, now))

        super().__init__(ids, make, seed=seed, wire=WIRE, latency=latency, jitter=jitter,
                         loss=loss)
        self.boot_all()
        self.run_until(0.0)

    # ---- members
    def add(self, i: int, bootstrap: dict[int, str], bugs: Iterable[str] | None = None) -> None:
        """Start server ``i`` later with its own bootstrap configuration ({} for a joiner)."""
        self.add_node(i)
        self.bootstrap_of[i] = bootstrap
        if bugs is not None:
            self.bugs_of[i] = frozenset(bugs)
        self.boot(i)
        self.run_until(self.now)

    def restart_with(self, i: int, bugs: Iterable[str]) -> None:
        self.bugs_of[i] = frozenset(bugs)
        self.restart(i)
        self.run_until(self.now)

    #: the ``ack-before-fsync`` buffer's flush period here (the server's ``deferred_flush_ms``,
    #: 60 s by default, shortened so a search's few simulated seconds see both outcomes)
    DEFERRED_FLUSH_S = 1.0

    def buffers(self, n: Any, p: Persist) -> float | None:
        """``ack-before-fsync`` keeps log records (append, truncate) in a user-space buffer,
        as `nodes.garlicfarm.storage` does; term and vote are still fsynced first."""
        bugs = self.bugs_of.get(n.id, self.bugs)
        if "ack-before-fsync" in bugs and isinstance(p.record, PersistAppend | PersistTruncate):
            return self.DEFERRED_FLUSH_S
        return None

    # ---- addresses
    def route(self, src: Any, to: Any, msg: Any) -> list[tuple[Any, Any]]:
        if type(to) is int:  # a replication link: most sends
            if to in self.nodes and to != src:
                link = self._links.get(src)
                if link is None:
                    link = self._links[src] = Inbound(("link", src))  # one per server: frozen
                return [(to, link)]
            return []
        if isinstance(to, Inbound):
            kind, *rest = to.conn
            if kind == "client":
                self.replies[rest[0]] = msg
                return []
            if msg is None:
                return []  # closed unanswered: a call times out, a link's request is lost
            if kind == "link":
                return [(rest[0], src)]
            caller, call = rest
            if self._calls.pop((caller, call), None) is None:
                return []  # the caller gave up on it already
            return [(caller, call)]
        if isinstance(to, Call):
            if to.to not in self.nodes:
                self._fail_later(src, to, False, f"no address for server {to.to}", 0.0)
                return []
            self._calls[(src, to)] = self.nodes[src].boot
            self._fail_later(src, to, True, "timeout", to.timeout)
            return [(to.to, Inbound(("call", src, to)))]
        if to in self.nodes and to != src:
            return [(to, Inbound(("link", src)))]
        return []

    def lost(self, dst: Any, seen_as: Any, raw: Any) -> None:
        if isinstance(seen_as, Inbound) and seen_as.conn[0] == "call":
            _, caller, call = seen_as.conn
            self._fail_later(caller, call, False, f"connection to {dst} refused",
                             self.net.latency)

    def _fail_later(self, caller: int, call: Call, maybe: bool, error: str, after: float) -> None:
        boot = self.nodes[caller].boot
        key = (caller, call)
        self._calls.setdefault(key, boot)
        self._answer_later(caller, boot, after,
                           lambda c, now: c.on_message(call, CallFailed(maybe, error), now),
                           open_=lambda: self._calls.get(key) == boot,
                           close=lambda: self._calls.pop(key, None))

    # ---- inputs
    def client_request(self, i: int, req: Request) -> int:
        """A raw-wire client's request to server ``i`` (no network between them); its
        answer lands in ``replies[token]`` (None: closed unanswered)."""
        token = next(self._clients) + 1_000_000
        n = self.nodes[i]
        self._input(n, lambda c, now: c.on_message(Inbound(("client", token)), req, now))
        return token

    # ---- views
    def core(self, i: int) -> GarlicFarmCore:
        c = self.nodes[i].core
        assert isinstance(c, GarlicFarmCore), f"server {i} is not running"
        return c

    def raft(self, i: int) -> Raft:
        return self.core(i).raft

    def stored(self, i: int) -> StoredState:
        return stored_state(self.nodes[i].durable, self.bugs_of.get(i, self.bugs))

    def leaders(self) -> list[int]:
        # a search's membership change polls this every half millisecond while it waits for
        # a leader: the role is compared as the member itself (not through `raft`'s checks)
        return [i for i, n in self.nodes.items()
                if n.up and not n.paused and n.core.raft.role is _LEADER]  # type: ignore[union-attr]

    def wait_leader(self, limit: float = 10.0, step: float = 0.01) -> int:
        end = self.now + limit
        while self.now < end:
            self.run_for(step)
            ls = self.leaders()
            if len(ls) == 1:
                return ls[0]
        raise AssertionError(f"no single leader: {self.leaders()}")

    def applied(self, i: int) -> list[tuple[int, Any]]:
        """(index, data) of every application entry server ``i`` applied, no-ops aside."""
        return [(e.fields["index"], e.fields["data"]) for e in self.of("apply")
                if e.node == i and e.fields["kind"] == "app"
                and not (isinstance(e.fields["data"], dict) and "noop" in e.fields["data"])]


def app_entry(v: Any) -> LogEntry:
    return LogEntry(0, ValueType.APPLICATION, json.dumps(v).encode())


__all__ = ["WIRE", "GfSim", "app_entry", "stored_state"]
