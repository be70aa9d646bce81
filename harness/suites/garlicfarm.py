"""Garlic Farm as the harness runs it: the protocol definition, its workloads and checkers.

Workloads:
- ``kv``: reads, writes and compare-and-sets over a rotating set of keys through each node's
  KV endpoint (reads go through the Raft log); checked for linearizability per key and for
  Raft safety from the nodes' journals and final states.
- ``append``: unique values appended over the **raw wire** (handshake, then ClientRequest with
  one Application entry ``{"op": "append", "v": value}``), following the leader hint; checked
  by the append-log checker (every acknowledged append committed once, at the index the
  leader reported, in real-time order) and Raft safety.

Bug modes and the checker that must catch each (tests/chaos/test_garlicfarm_chaos.py):
``commit-without-majority`` -> linearizable / append; ``local-reads`` -> linearizable;
``forget-vote`` -> raft.vote-safety; ``ack-before-fsync`` -> append / raft.committed-not-lost;
``unsafe-config-change`` -> raft.membership-safety; ``sync-loop`` -> liveness (no-progress);
``no-term-bound`` (under the hostile nemesis) -> liveness.
"""

from __future__ import annotations

import itertools
import secrets
from pathlib import Path
from typing import Any

from checkers import append_log, liveness, raft
from checkers.linearizable import checker as linearizable
from faults.hostile import HostileDef
from harness import generators as g
from harness.spec import DefiniteFailure, NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.garlicfarm import hostile_driver
from nodes.garlicfarm.client import (
    KVClient,
    KVFail,
    KVIndeterminate,
    WireClient,
    WireFail,
    WireIndeterminate,
)
from nodes.garlicfarm.core import BUGS
from nodes.garlicfarm.tls import client_context, node_tls_material

Op = dict[str, Any]


def num_id(node: str) -> int:
    """The cluster names nodes n1..nN and gives node nK the Raft id K."""
    return int(node.removeprefix("n"))


class KVWorkloadClient:
    """One process's client of one node's KV endpoint (through its client proxy)."""

    def __init__(self, addr: NodeAddr | None, process: int, timeout: float = 4.0) -> None:
        assert addr is not None
        self.node = addr.node
        self.kv = KVClient(f"http://{addr.host}:{addr.port}", timeout=timeout)

    async def invoke(self, op: Op) -> Op:
        key, arg = op["value"]
        try:
            if op["f"] == "read":
                return {"type": "ok", "value": [key, await self.kv.read(key)]}
            if op["f"] == "write":
                await self.kv.write(key, arg)
            elif op["f"] == "cas":
                await self.kv.cas(key, arg[0], arg[1])
            else:
                raise ValueError(f"unknown kv op {op['f']!r}")
        except KVFail as e:
            raise DefiniteFailure(e.error) from e
        except KVIndeterminate as e:
            return {"type": "info", "value": op["value"], "error": e.error}
        return {"type": "ok", "value": op["value"]}

    async def close(self) -> None:
        await self.kv.close()


class AppendWorkloadClient:
    """Raw-wire appends; a process prefers its own node and follows the leader hint."""

    def __init__(self, addr: NodeAddr | None, process: int, timeout: float = 4.0) -> None:
        assert addr is not None
        self.node = addr.node
        self.prefer = num_id(addr.node)
        ca = Path(addr.run_dir) / "tls" / "ca.pem" if addr.run_dir else None
        # node_extra wrote the run CA unless the run asked for ``tls: false``
        ctx = client_context(ca) if ca is not None and ca.is_file() else None
        self.wire = WireClient({num_id(n): a for n, a in addr.all.items()}, timeout=timeout,
                               tls=ctx, names={num_id(n): n for n in addr.all})

    async def invoke(self, op: Op) -> Op:
        v = op["value"]
        try:
            index = await self.wire.append({"op": "append", "v": v}, prefer=self.prefer)
        except WireFail as e:
            raise DefiniteFailure(str(e)) from e
        except WireIndeterminate as e:
            return {"type": "info", "value": v, "error": str(e) or "no answer"}
        return {"type": "ok", "value": {"v": v, "index": index}}

    async def close(self) -> None:
        await self.wire.close()


def kv_ops(ctx: g.Context) -> Op:
    """Jepsen's register mix. Ten values: few enough that a cas sometimes matches, many
    enough that a stale read is rarely explained away by an indeterminate write of the
    same value."""
    r = ctx.rng.random()
    if r < 0.4:
        return {"f": "read", "value": None}
    if r < 0.7:
        return {"f": "write", "value": ctx.rng.randrange(10)}
    return {"f": "cas", "value": [ctx.rng.randrange(10), ctx.rng.randrange(10)]}


def kv_generator(spec: TestSpec, used: list[str] | None = None) -> g.Generator:
    """Independent keys: groups of threads hammer one key for a bounded number of ops, then
    move to a fresh key, which keeps each key's history small enough to check exactly.
    The keys handed out are appended to ``used`` (for the final reads)."""
    per_key_ops = int(spec.options.get("ops_per_key", 120))
    group = max(1, min(3, spec.concurrency))
    rate = float(spec.options.get("rate", 50))
    seen = used if used is not None else []

    def keys():
        for i in itertools.count():
            seen.append(f"k{i}")
            yield f"k{i}"

    return g.stagger(1.0 / rate, g.per_key(
        keys(), lambda k: g.limit(per_key_ops, kv_ops), group_size=group))


def append_generator(spec: TestSpec) -> g.Generator:
    rate = float(spec.options.get("rate", 50))
    nonce = secrets.token_hex(2)
    counter = itertools.count()
    return g.stagger(1.0 / rate, lambda ctx: {
        "f": "append", "value": f"p{ctx.process}:{next(counter)}:{nonce}"})


def kv_workload() -> Workload:
    """After heal and quiesce, every key the run touched is read once more (final reads)."""
    used: list[str] = []
    return Workload(client=KVWorkloadClient, generator=lambda spec: kv_generator(spec, used),
                    final_generator=lambda spec: g.seq(*({"f": "read", "value": [k, None]} for k in list(used))),
                    checkers={"linearizable": linearizable("kv", time_s=60.0),
                              "raft": raft.check, liveness.NAME: liveness.check})


def append_workload() -> Workload:
    return Workload(client=AppendWorkloadClient, generator=append_generator, client_port="peer",
                    checkers={"append": append_log.check, "raft": raft.check, liveness.NAME: liveness.check})


def node_extra(spec: TestSpec, index: int, run_path: Any) -> dict[str, Any]:
    """TLS: unless the run gives ``options.tls: false``, the run CA and this node's
    certificate are written under ``<run dir>/tls`` and named in ``options.tls``.
    Membership changes: nodes in ``options.late_nodes`` start outside the cluster (``join``)
    and run the establishment sequence when a "join" nemesis op starts them; the others'
    initial configuration (``members``) leaves them out."""
    opts: dict[str, Any] = {}
    want_tls = spec.options.get("tls", True)
    if want_tls not in (True, False):
        raise ValueError(f"options.tls must be true (default) or false, got {want_tls!r}")
    if want_tls:
        opts["tls"] = node_tls_material(Path(run_path) / "tls", spec.node_ids[index])
    late = set(spec.options.get("late_nodes", []))
    if not late:
        return {"options": opts}
    opts["members"] = [num_id(n) for n in spec.node_ids if n not in late]
    if spec.node_ids[index] in late:
        opts["join"] = True
    return {"options": opts}


def leader_of(states: dict[str, dict[str, Any] | None]) -> str | None:
    """The node that says it leads in the highest term (None when nobody does)."""
    leaders = [(s.get("term", 0), n) for n, s in states.items() if s and s.get("role") == "leader"]
    return max(leaders)[1] if leaders else None



PROTOCOL = ProtocolDef(
    name="garlicfarm",
    module="nodes.garlicfarm",
    workloads={"kv": kv_workload, "append": append_workload},
    default_workload="kv",
    bugs=BUGS,
    default_options={"election_timeout_ms": [300, 600], "heartbeat_ms": 75,
                     "meta_interval_ms": 1000},
    leader_of=leader_of,
    node_extra=node_extra,
    # every link is TLS and Digest: the hostile fault sends as a compromised member, holding
    # the run's credentials, and without them (nodes/garlicfarm/hostile_driver.py)
    hostile=HostileDef(hostile_driver.no_messages, hostile_driver.refusals, transport="tcp",
                       driver=hostile_driver.driver),
)
