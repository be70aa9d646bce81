"""A test is a small declarative object; a protocol says how to run and talk to its nodes.

``TestSpec`` is what a chaos test, the CLI and the bench build; the runner only reads it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from checkers.result import Checker
from faults.hostile import HostileDef
from harness import generators as g
from harness.generators import Generator
from harness.nemesis_generator import Faults, from_schedule

Op = dict[str, Any]


class DefiniteFailure(Exception):
    """Raised by a client when the op certainly did not happen: recorded as ``fail``."""


class Client(Protocol):
    """One client process's connection to one node. ``invoke`` returns the completion
    (``{"type": "ok"|"fail"|"info", "value": ..., "error": ...}``); any exception it raises
    is recorded as ``info`` (indeterminate) unless it is a ``DefiniteFailure``."""

    node: str | None

    async def invoke(self, op: Op) -> Op: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class NodeAddr:
    """How a client reaches a node: through its client->node proxy."""

    node: str
    host: str
    port: int
    admin_url: str
    #: every node's client-proxy address ("host:port"), for clients that follow a leader
    all: dict[str, str] = field(default_factory=dict)
    #: the run's directory, for clients that need run-wide files (a TLS CA under ``tls/``)
    run_dir: str = ""


#: Opens a client for one process: (address of the node it should talk to, process id).
ClientFactory = Callable[[NodeAddr | None, int], Any]


@dataclass
class Workload:
    """What clients do and what is checked: the part of a test a protocol supplies."""

    client: ClientFactory
    generator: Callable[[TestSpec], Generator]
    checkers: dict[str, Checker]
    #: ops run once after heal + quiesce (final reads); None for none
    final_generator: Callable[[TestSpec], Generator] | None = None
    #: which node port client links lead to, when not the protocol's ``client_port``
    client_port: str | None = None


@dataclass
class ProtocolDef:
    """How the harness runs one protocol's nodes (see docs/contracts.md section 2)."""

    name: str
    module: str  # started as: python -m <module> --config CONFIG.json
    workloads: dict[str, Callable[[], Workload]]
    bugs: tuple[str, ...] = ()
    ports: tuple[str, ...] = ("peer", "client", "admin")
    peer_port: str = "peer"  # proxied for node -> node links
    client_port: str = "client"  # proxied for client -> node links
    transport: str = "tcp"  # "tcp" (Toxiproxy) or "udp" (our relay)
    default_options: dict[str, Any] = field(default_factory=dict)
    #: extra node config (beyond contracts.md's) from (spec, node index, run dir path); may
    #: write files there (e.g. TLS material shared by the run under <run dir>/tls)
    node_extra: Callable[[TestSpec, int, Path], dict[str, Any]] | None = None
    #: which node leads, from the nodes' /admin/state dumps (None: no leader notion)
    leader_of: Callable[[dict[str, dict[str, Any] | None]], str | None] | None = None
    #: whether the started nodes have found each other, from their /admin/state dumps: the
    #: workload starts once it holds (`Cluster.wait_settled`), not while the mesh still forms
    #: (None: answering /admin/health is enough)
    settled: Callable[[dict[str, dict[str, Any] | None]], bool] | None = None
    default_workload: str = ""
    #: mesh shapes ``harness run --topology`` offers (node ids -> undirected edges), besides
    #: ``full``, the default everyone has
    topologies: dict[str, Callable[[list[str]], list[tuple[str, str]]]] = field(
        default_factory=dict)
    #: the protocol's messages for the ``hostile`` fault (faults/hostile.py); None: not offered
    hostile: HostileDef | None = None
    #: what the cluster's "add-member" op sends as the new node's address entry, from (its
    #: config, its own "host:port", {member: "host:port" of that member's proxied link into
    #: it}); None: the protocol has no such op
    member_entry: Callable[[dict[str, Any], str, dict[str, str]], dict[str, Any]] | None = None


def bug_name(spec: str) -> str:
    """``forget-vote@1,3`` -> ``forget-vote``: the mode a ``--bug`` value names."""
    return spec.split("@", 1)[0]


def node_bugs(bugs: Iterable[str], server: int, nodes: int) -> list[str]:
    """The bug modes of server ``server`` (1-based: n1 is 1) of ``nodes``: ``NAME`` is on every
    server, ``NAME@1,3`` on servers 1 and 3 only, so a mixed cluster runs a correct node beside
    its bug-mode variant (the same shape as ``harness sim run --bug NAME@1,3``)."""
    out: list[str] = []
    for spec in bugs:
        name, at, where = str(spec).partition("@")
        try:
            on = {int(x) for x in where.split(",")} if at else None
        except ValueError:
            raise ValueError(f"bug {spec!r}: give NAME or NAME@SERVERS with server numbers, "
                             "e.g. forget-vote@1,3") from None
        if on is not None and (not on or not on <= set(range(1, nodes + 1))):
            raise ValueError(f"bug {spec!r}: servers are numbered 1..{nodes} (n1..n{nodes})")
        if on is None or server in on:
            out.append(name)
    return out


def _seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


@dataclass
class TestSpec:
    __test__ = False  # not a pytest test class

    name: str
    protocol: ProtocolDef | None = None
    workload: str | Workload = ""
    nodes: int = 5
    nemesis: Generator | None = None
    nemesis_desc: str = "none"
    #: named faults drawn from ``seed`` when the run starts (instead of a built ``nemesis``)
    faults: Faults | None = None
    time_limit: float = 30.0
    concurrency: int = 5
    seed: int = field(default_factory=_seed)
    backend: str = "local"
    bugs: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    op_timeout: float = 5.0
    quiesce_s: float = 3.0
    #: which nodes peer with which (undirected edges over node ids); None = everyone
    topology: Callable[[list[str]], list[tuple[str, str]]] | None = None
    #: overrides or additions to the workload's checkers
    checkers: dict[str, Checker] = field(default_factory=dict)
    store: str | None = None
    #: the user's implementation in place of the reference node: a command template with
    #: {config} (harness/node_command.py); None runs ``python -m <protocol module>``
    node_command: str | None = None
    #: node -> seconds into the run at which the nemesis kills it for good (never restarted,
    #: not even by the final heal; the checkers judge the run without it), beside any faults
    kill_for_good: dict[str, float] = field(default_factory=dict)
    #: node -> seconds into the run at which it is added as a member (the cluster's
    #: "add-member" op, then "join" starts it): a late node no other config names (options
    #: ``late_nodes`` and ``late_unknown`` follow from it); only protocols with ``member_entry``
    add_member: dict[str, float] = field(default_factory=dict)
    #: node -> seconds into the run at which a running member removes it (the cluster's
    #: "decommission" op): a node killed for good earlier; only protocols with ``member_entry``
    decommission: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.node_command is not None:
            from harness.node_command import parse

            parse(self.node_command)  # a bad template fails here, before anything starts
        if self.faults is not None:
            if self.nemesis is not None:
                raise ValueError("give a spec either faults= or a built nemesis=, not both")
            self.nemesis_desc = self.faults.desc
        node_bugs(self.bugs, 1, self.nodes)  # a NAME@SERVERS naming no server fails here
        self._check_timed("kill_for_good", self.kill_for_good)
        if self.add_member:
            self._late_members()
        for node, at in self.decommission.items():
            if not self.kill_for_good.get(node, at) < at < self.time_limit:
                raise ValueError(f"decommission: {node} at {at:g}s must be killed for good "
                                 f"before, and removed inside the time limit of "
                                 f"{self.time_limit:g}s")

    def _check_timed(self, what: str, plan: dict[str, float]) -> None:
        """A plan of {node: seconds} names this test's nodes at times inside the run."""
        for node, at in plan.items():
            if node not in self.node_ids:
                raise ValueError(f"{what} names {node!r}, which is not one of this test's "
                                 f"nodes {self.node_ids}")
            if not 0 <= at < self.time_limit:
                raise ValueError(f"{what}: {node} at {at:g}s is outside the run's time limit "
                                 f"of {self.time_limit:g}s; give a time in [0, "
                                 f"{self.time_limit:g})")

    def _late_members(self) -> None:
        """Check ``add_member`` and put its nodes in the options that make them late, unknown
        nodes (idempotent: a replayed record already has them)."""
        if self.protocol is None or self.protocol.member_entry is None:
            raise ValueError(f"add_member: protocol {getattr(self.protocol, 'name', None)} has "
                             "no add-member op (ProtocolDef.member_entry)")
        self._check_timed("add_member", self.add_member)
        late = sorted(set(self.options.get("late_nodes", [])) | set(self.add_member))
        self.options = {**self.options, "late_nodes": late, "late_unknown": True}

    def bugs_of(self, node: str) -> list[str]:
        """The bug modes node ``node`` runs (``bugs`` may put a mode on some servers only)."""
        return node_bugs(self.bugs, self.node_ids.index(node) + 1, self.nodes)

    def nemesis_stream(self) -> Generator | None:
        """The nemesis this run plays: ``faults`` drawn from the spec's seed as it is now, or
        the generator it was given, with the ``kill_for_good`` kills and the ``add_member``
        additions (each "add-member", then "join" half a second later) beside it. Faults are
        drawn over the first members only: an added node is no target before it runs."""
        first = [n for n in self.node_ids if n not in self.add_member]
        base = self.faults.build(first, self.seed) if self.faults is not None \
            else self.nemesis
        timed = [(at, node, {"f": "kill", "value": {"node": node, "for_good": True}})
                 for node, at in self.kill_for_good.items()]
        for node, at in self.add_member.items():
            timed += [(at, node, {"f": "add-member", "value": {"node": node}}),
                      (at + 0.5, node, {"f": "join", "value": {"node": node}})]
        timed += [(at, node, {"f": "decommission", "value": {"node": node}})
                  for node, at in self.decommission.items()]
        if not timed:
            return base
        steps, now = [], 0.0
        for at, _, op in sorted(timed, key=lambda t: (t[0], t[1])):
            steps.append((at - now, op))
            now = at
        kills = from_schedule(steps)
        return kills if base is None else g.mix(base, kills)

    @property
    def nemesis_label(self) -> str:
        """What test.json calls the nemesis: the named faults (or ``custom``), plus
        ``kill-for-good`` when nodes are killed for good (so the faults checker asks for a
        kill)."""
        label = ("custom" if self.nemesis is not None and self.nemesis_desc == "none"
                 else self.nemesis_desc)
        if not self.kill_for_good:
            return label
        return "kill-for-good" if label == "none" else f"{label},kill-for-good"

    @property
    def node_ids(self) -> list[str]:
        return [f"n{i + 1}" for i in range(self.nodes)] if self.protocol else []

    def resolved_workload(self) -> Workload:
        if isinstance(self.workload, Workload):
            return self.workload
        if self.protocol is None:
            raise ValueError("a test without a protocol must give a Workload object")
        name = self.workload or self.protocol.default_workload
        try:
            return self.protocol.workloads[name]()
        except KeyError:
            raise ValueError(
                f"protocol {self.protocol.name} has no workload {name!r}; "
                f"choose one of {sorted(self.protocol.workloads)}"
            ) from None

    def describe(self) -> dict[str, Any]:
        """What test.json records: enough to know, and replay, what ran."""
        return {
            "name": self.name,
            "protocol": self.protocol.name if self.protocol else None,
            "workload": self.workload if isinstance(self.workload, str) else "custom",
            "nodes": self.node_ids,
            # a nemesis generator built without a description is still a nemesis
            "nemesis": self.nemesis_label,
            "time_limit": self.time_limit,
            "concurrency": self.concurrency,
            "seed": self.seed,
            "backend": self.backend,
            "bugs": list(self.bugs),
            "options": self.options,
            # what each node's config got: the protocol's defaults under the test's options
            "node_options": {**(self.protocol.default_options if self.protocol else {}),
                             **self.options},
            "op_timeout": self.op_timeout,
            "quiesce_s": self.quiesce_s,
            # the named faults, so that a replay draws the same schedule from the seed
            "faults": (None if self.faults is None else
                       {"kinds": self.faults.kinds, "interval_s": self.faults.interval_s}),
            "topology": [list(e) for e in self.edges()],
            "node_command": self.node_command,
            "kill_for_good": dict(self.kill_for_good),
            "add_member": dict(self.add_member),
            "decommission": dict(self.decommission),
            "store": self.store,
        }

    def edges(self) -> list[tuple[str, str]]:
        ids = self.node_ids
        if self.topology is None:
            return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
        return [tuple(e) for e in self.topology(ids)]  # type: ignore[misc]
