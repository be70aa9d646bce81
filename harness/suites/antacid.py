"""How the harness runs ANTACID (ARS over BEEP): ``PROTOCOL`` and the ``updates`` workload.

ANTACID is a ``transport="tcp"`` protocol: every node -> node BEEP session and every client
session goes through its Toxiproxy link, so partitions, latency and resets act on each link.

Zone topology (``harness run --topology chain|tree|diamond``, which also makes only those
links; else test option ``topology``, default ``chain``, over a full mesh; or test option
``upstream``, each replica's upstreams in preference order, given whole): node ``n1`` is the zone primary;
``chain`` n1 <- n2 <- n3 ...; ``tree`` a binary tree rooted at n1; ``diamond`` layers of two
(n1 <- {n2, n3} <- {n4, n5} ...), each node listing every node of the layer above as an
upstream in preference order (rotated per node, so the load spreads). Built with networkx as
a DAG whose edges point down; each node's config gets ``options.primary`` and
``options.upstream``.

Zones (test option ``zone_count``, default 1): zone k (``zone.test``, ``zone2.test``, ...)
has node k as its primary and the same shape rooted there (the node list rotated); each
node's config gets ``options.zones`` for the zones after the first, and submissions and reads
go to the zones in turn, each op's value naming its zone (the checkers judge each zone apart).
Test option ``zone_upstream`` (zone -> each replica's upstreams, given whole; a sim replay's
zones, harness/sim/realrun.py) replaces a later zone's shape.

Workload ``updates``: clients submit update groups of one or two documents ``<zone>.d<k>``
(contents ``c<process>:<seq>``) at the server their thread is bound to (so submissions come in
at several servers), at a mean rate of ``1 / submit_interval_s`` (default 0.1 s), with a read
of that server's zone every ``read_every``-th op (default 5). A submit completes on its result
notification (``ok`` with the CSN, ``fail`` with an ARSError code, ``info`` after
``RESULT_TIMEOUT_S``). Checked by ``checkers.faults``, ``checkers.csn_order`` (the ordering
checker: the history's submits and reads, each node's journal and final ``ReadZone`` state)
and ``checkers.liveness`` (every CSN reaches every live replica within its bound after the
heal).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import networkx as nx

from checkers import csn_order, faults, liveness
from faults.hostile import HostileDef
from harness import generators as g
from harness.spec import DefiniteFailure, NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.antacid import hostile
from nodes.antacid.client import AntacidClient, AntacidNotSent, AntacidRefused, AntacidUnavailable
from nodes.antacid.core import BUGS

ZONE = "zone.test"
#: how long a submit waits for its result notification: under the runner's default 5 s op
#: timeout, so an unanswered submission is ``info`` with its GlobalSubmitID kept
RESULT_TIMEOUT_S = 4.0

DEFAULT_OPTIONS: dict[str, Any] = {
    "zone": ZONE,
    "pull_interval": 1.0,
    "propagate_retry": 0.5,
    "propagate_rounds": 20,  # 10 s of retries: longer than a kill + restart
    "notify_retry": 0.5,
    "reorder_timeout": 5.0,
}


def dag(shape: str, nodes: list[str]) -> nx.DiGraph:
    """The replication DAG, edges upstream -> downstream, rooted at ``nodes[0]``."""
    g_ = nx.DiGraph()
    g_.add_nodes_from(nodes)
    if shape == "chain":
        g_.add_edges_from(zip(nodes, nodes[1:], strict=False))
    elif shape == "tree":
        g_.add_edges_from((nodes[(i - 1) // 2], nodes[i]) for i in range(1, len(nodes)))
    elif shape == "diamond":
        layers = [nodes[:1], *(nodes[i:i + 2] for i in range(1, len(nodes), 2))]
        for above, below in itertools.pairwise(layers):
            g_.add_edges_from((u, d) for d in below for u in above)
    else:
        raise ValueError(f"ANTACID topology {shape!r} is unknown: use chain, tree or diamond")
    assert nx.is_directed_acyclic_graph(g_)
    return g_


def _edges(shape: str) -> Any:
    return lambda nodes: [(u, d) for u, d in dag(shape, nodes).edges]


def layered(nodes: list[str], edges: list[tuple[str, str]]) -> nx.DiGraph:
    """A mesh's links (``--topology``) as a DAG: each link points away from the primary
    ``nodes[0]`` (by hop distance); a link between nodes equally far carries no replication."""
    mesh = nx.Graph(edges)
    mesh.add_nodes_from(nodes)
    dist = nx.single_source_shortest_path_length(mesh, nodes[0])
    cut = sorted(set(nodes) - set(dist))
    if cut:
        raise ValueError(f"ANTACID nodes {cut} have no path of links to the primary {nodes[0]}")
    g_ = nx.DiGraph()
    g_.add_nodes_from(nodes)
    g_.add_edges_from((u, d) if dist[u] < dist[d] else (d, u)
                      for u, d in mesh.edges if dist[u] != dist[d])
    return g_


def upstreams(shape: str | nx.DiGraph, nodes: list[str]) -> dict[str, list[str]]:
    """Each node's upstreams in preference order (rotated by the node's index)."""
    g_ = dag(shape, nodes) if isinstance(shape, str) else shape
    out = {}
    for i, n in enumerate(nodes[1:], 1):
        ups = sorted(g_.predecessors(n), key=nodes.index)
        k = i % len(ups)
        out[n] = ups[k:] + ups[:k]
    return out


def zone_names(spec: TestSpec) -> list[str]:
    """The zones of a run: test option ``zone`` (default ``zone.test``), then, with
    ``zone_count`` k > 1, ``zone2.test`` .. ``zone<k>.test``."""
    count = int(spec.options.get("zone_count", 1))
    if count < 1:
        raise ValueError(f"test option zone_count must be at least 1, got {count}")
    return [str(spec.options.get("zone", ZONE))] + [f"zone{k}.test" for k in range(2, count + 1)]


def primaries(spec: TestSpec) -> dict[str, str]:
    """Zone k's primary is node k (wrapping): zone 1 on n1, zone 2 on n2, ..."""
    nodes = spec.node_ids
    return {z: nodes[k % len(nodes)] for k, z in enumerate(zone_names(spec))}


def _zone_dag(spec: TestSpec, primary: str) -> dict[str, list[str]]:
    """One zone's upstreams: the run's shape rooted at ``primary`` (the node list rotated to
    start there), over the links the cluster made when ``--topology`` chose them."""
    nodes = spec.node_ids
    k = nodes.index(primary)
    rot = nodes[k:] + nodes[:k]
    shape: str | nx.DiGraph = str(spec.options.get("topology", "chain"))
    if spec.topology is not None:  # --topology: the links the cluster made are the DAG
        shape = layered(rot, spec.edges())
    return upstreams(shape, rot)


def _node_extra(spec: TestSpec, _i: int, _run_dir: Path) -> dict[str, Any]:
    prim = primaries(spec)
    first, *more = zone_names(spec)
    given = spec.options.get("upstream")  # given whole: a sim replay's DAG (harness/sim/realrun.py)
    opts: dict[str, Any] = {"primary": prim[first],
                            "upstream": given if given is not None else _zone_dag(spec, prim[first])}
    if more:
        zone_up = spec.options.get("zone_upstream") or {}
        opts["zones"] = {z: {"primary": prim[z],
                             "upstream": zone_up.get(z) or _zone_dag(spec, prim[z])}
                         for z in more}
    return {"options": opts}


class _Client:
    """One harness process's client. ``submit`` waits for the result notification: ``ok``
    with the CSN once committed; an ARSError (at submission or in the notification) is
    ``fail`` with its code; no ARS channel (the submission never left) is ``fail`` without
    one; no notification within ``result_timeout_s`` is ``info`` (the
    GlobalSubmitID kept). Values are the checker's shape (docs/antacid.md, "Checker
    evidence"). ``read`` returns the server's ``ReadZone`` answer."""

    def __init__(self, addr: NodeAddr, result_timeout: float) -> None:
        self.node = addr.node
        self.result_timeout = result_timeout
        # notifications come back to the address the servers reach us at: the client link's
        # host (127.0.0.1, or a docker bridge's gateway, where the servers' containers can
        # reach the host)
        self.ars = AntacidClient(addr.host, addr.port, admin_url=addr.admin_url,
                                 notify_host=addr.host)

    async def _submit(self, docs: dict[str, str], zone: str | None) -> dict[str, Any]:
        value: dict[str, Any] = {"docs": sorted(docs), "node": self.node}
        if zone is not None:
            value["zone"] = zone
        try:
            gsid = await self.ars.submit(docs)
        except AntacidRefused as e:
            return {"type": "fail", "value": {**value, "error": e.error.code}, "error": str(e)}
        except AntacidNotSent as e:  # no channel: the server never saw it
            return {"type": "fail", "value": {**value, "error": None}, "error": str(e)}
        value.update(server=f"{gsid.server.host}:{gsid.server.port}",
                     incarn=gsid.server.incarn, ssn=gsid.ssn)
        try:
            note = await self.ars.result(gsid, self.result_timeout, zone)
        except AntacidUnavailable as e:
            return {"type": "info", "value": value, "error": str(e)}
        if note.error is not None:
            return {"type": "fail", "value": {**value, "csn": note.csn, "error": note.error.code},
                    "error": f"ARSError {note.error.code}: {note.error.text}"}
        return {"type": "ok", "value": {**value, "csn": note.csn, "error": None}}

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        v = op.get("value")
        if op["f"] == "submit":
            if isinstance(v, dict) and isinstance(v.get("docs"), dict):  # several zones
                return await self._submit(v["docs"], v.get("zone"))
            return await self._submit(v, None)
        if op["f"] == "read":
            zone = v.get("zone") if isinstance(v, dict) else None
            z = await self.ars.read_zone(zone)
            out = {"node": self.node, "last_csn": z["last_csn"], "docs": z["docs"]}
            return {"type": "ok", "value": out if zone is None else {**out, "zone": zone}}
        raise DefiniteFailure(f"unknown op {op['f']!r}")

    async def close(self) -> None:
        await self.ars.close()


def _client(addr: NodeAddr | None, _process: int) -> _Client:
    if addr is None:
        raise ValueError("the ANTACID client needs a node address")
    return _Client(addr, RESULT_TIMEOUT_S)


def _generator(spec: TestSpec) -> g.Generator:
    seq = itertools.count(1)
    interval = float(spec.options.get("submit_interval_s", 0.1))
    read_every = int(spec.options.get("read_every", 5))
    zones = zone_names(spec)

    def one(ctx: g.Context) -> dict[str, Any]:
        n = next(seq)
        zone = zones[n % len(zones)]  # submissions (and reads) spread over the zones
        if read_every and n % read_every == 0:
            return {"f": "read", "value": None if len(zones) == 1 else {"zone": zone}}
        k = ctx.rng.randrange(8)
        docs = {f"{zone}.d{k}": f"c{ctx.process}:{n}"}
        if ctx.rng.random() < 0.3:
            docs[f"{zone}.d{(k + 1) % 8}"] = f"c{ctx.process}:{n}"
        return {"f": "submit", "value": docs if len(zones) == 1 else {"zone": zone,
                                                                      "docs": docs}}

    return g.stagger(interval, g.Fn(one))


def updates_workload() -> Workload:
    return Workload(client=_client, generator=_generator,
                    checkers={faults.NAME: faults.check, csn_order.NAME: csn_order.check,
                              liveness.NAME: liveness.check})


PROTOCOL = ProtocolDef(
    name="antacid",
    module="nodes.antacid",
    workloads={"updates": updates_workload},
    bugs=BUGS,
    transport="tcp",
    default_options=DEFAULT_OPTIONS,
    node_extra=_node_extra,
    default_workload="updates",
    topologies={shape: _edges(shape) for shape in ("chain", "tree", "diamond")},
    hostile=HostileDef(hostile.messages, hostile.refusals, transport="tcp"),
)
