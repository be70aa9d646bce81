"""What an ARS server keeps: the topology it was configured with and its durable state,
folded from the ``Persist("ars", record)`` records the core emits (the same fold runs live and
on restart, so a restarted core is the core that crashed, less its in-memory bookkeeping:
requests in flight, push flags, negotiated encodings).

Records: ``("incarn", n)``, ``("ssn", n)`` (last SSN assigned), ``("pending", gsid, Pending)``,
``("done", gsid)``, ``("ssn-seen", server, ssn)`` (the primary serialized it without a
commit), ``("commit", Committed)``, ``("zone", csn, data)`` (a full zone transfer),
``("truncate", csn)``; the primary's reorder queue ``("held", gsid, peer, group)`` (group None:
a spent SSN kept as a placeholder, or a FailedUpdateSubmission) and ``("unheld", gsid)``, and
the result notifications it owes downstream servers ``("owed", peer, notification)`` and
``("paid", peer, gsid)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodes.antacid import messages as m


@dataclass(frozen=True)
class Topology:
    """One zone's replication DAG: ``upstream[node]`` in preference order (4.1.6.1)."""

    zone: str
    primary: str
    servers: Mapping[str, tuple[str, int]]
    upstream: Mapping[str, tuple[str, ...]]

    def __post_init__(self) -> None:
        if self.primary not in self.servers:
            raise ValueError(f"primary {self.primary!r} is not among the servers")
        if self.upstream.get(self.primary):
            raise ValueError("the zone primary has no upstream servers: remove them")
        for node, ups in self.upstream.items():
            for u in (node, *ups):
                if u not in self.servers:
                    raise ValueError(f"{u!r} in the topology is not among the servers")
        for node in self.servers:
            if node != self.primary and not self.upstream.get(node):
                raise ValueError(f"{node!r} has no upstream server: give it one")
            self._acyclic(node, ())

    def _acyclic(self, node: str, path: tuple[str, ...]) -> None:
        if node in path:
            raise ValueError(f"the topology has a cycle: {' -> '.join((*path, node))}")
        for u in self.upstream.get(node, ()):
            self._acyclic(u, (*path, node))

    def server_id(self, node: str, incarn: int) -> m.ServerId:
        host, port = self.servers[node]
        return m.ServerId(host, port, incarn)

    def downstream_of(self, node: str) -> tuple[str, ...]:
        return tuple(sorted(d for d, ups in self.upstream.items() if node in ups))

    def in_zone(self, name: str) -> bool:
        return name == self.zone or name.startswith(self.zone.rstrip(".") + ".")


@dataclass(frozen=True)
class Committed:
    """One committed UpdateGroup in the log."""

    csn: int
    gsid: m.GlobalSubmitID | None
    data: tuple[m.DatumAndOp, ...]


@dataclass
class Pending:
    """A submission this server answers for until its result is passed on: ``from_peer``
    (the downstream server it came from) or ``notify`` (the client's destination)."""

    group: m.UpdateGroup | None
    notify: Any
    from_peer: str | None
    state: str  # propagating | propagated | awaiting | notifying
    csn: int | None = None
    error: m.ArsError | None = None
    rounds: int = 0
    tries: int = 0


@dataclass
class Durable:
    incarn: int = 1
    fresh_incarn: bool = True
    last_ssn: int = 0
    last_csn: int = 0
    truncated_through: int = 0
    docs: dict[str, tuple[str, int]] = field(default_factory=dict)
    log: list[Committed] = field(default_factory=list)
    pending: dict[m.GlobalSubmitID, Pending] = field(default_factory=dict)
    committed_ssn: dict[m.ServerId, int] = field(default_factory=dict)
    #: the primary's submissions held for reordering (4.2.2.3): (the downstream server it
    #: came from or None, the group or None)
    held: dict[m.GlobalSubmitID, tuple[str | None, m.UpdateGroup | None]] = field(
        default_factory=dict)
    #: result notifications sent to a downstream server and not yet acknowledged
    owed: dict[tuple[str, m.GlobalSubmitID], m.SubmittedUpdateResultNotification] = field(
        default_factory=dict)
    pull_turn: int = -1

    @classmethod
    def restore(cls, records: Iterable[tuple[Any, ...]], new_incarn: int) -> Durable:
        """Fold ``records``; a server with no incarnation record takes ``new_incarn`` (from
        the time-of-day clock, greater than any earlier one, 3.1.1)."""
        d = cls(incarn=new_incarn)
        for r in records:
            d.apply(r)
        return d

    def apply(self, r: tuple[Any, ...]) -> None:
        match r:
            case ("incarn", n):
                self.incarn, self.fresh_incarn = n, False
            case ("ssn", n):
                self.last_ssn = max(self.last_ssn, n)
            case ("pending", gsid, p):
                self.pending[gsid] = p
            case ("done", gsid):
                self.pending.pop(gsid, None)
            case ("ssn-seen", server, ssn):
                self.committed_ssn[server] = max(self.committed_ssn.get(server, 0), ssn)
            case ("commit", Committed() as e):
                for d in e.data:
                    if d.action == "delete":
                        self.docs.pop(d.name, None)  # downstream ignores missing deletes
                    else:
                        self.docs[d.name] = (d.content, e.csn)
                self.log.append(e)
                self.last_csn = e.csn
                if e.gsid is not None:
                    self.apply(("ssn-seen", e.gsid.server, e.gsid.ssn))
            case ("held", gsid, peer, group):
                self.held[gsid] = (peer, group)
            case ("unheld", gsid):
                self.held.pop(gsid, None)
            case ("owed", peer, note):
                self.owed[(peer, note.gsid)] = note
            case ("paid", peer, gsid):
                self.owed.pop((peer, gsid), None)
            case ("zone", csn, data):
                self.docs = {d.name: (d.content, d.csn or 1) for d in data}
                self.log = []
                self.last_csn = self.truncated_through = csn
            case ("truncate", through):
                self.log = [e for e in self.log if e.csn > through]
                self.truncated_through = max(self.truncated_through, through)
            case _:
                raise ValueError(f"unknown ANTACID record {r!r}")
