"""How the harness runs SWIM: `PROTOCOL` (a ProtocolDef over the UDP relay) and its workload.

SWIM has no client operations in the KV sense. The ``membership`` workload's client ops are:

* ``clock-sync`` (once, thread 0, at the start): completes with the harness's
  ``{"wall": time.time(), "mono": time.monotonic()}``, which lets the checker place node
  journal events (stamped with the node's ``mono``, the same system-wide CLOCK_MONOTONIC) on
  the history's time axis, immune to clock-skew faults (docs/swim.md, "Time alignment");
* ``leave`` / ``join`` on one node, planned by ``test.options["swim_plan"]`` as
  ``[[at_s, "leave"|"join", "n3"], ...]``: the op goes to the node's own ``/swim/*`` route.
  ``at_s`` counts from the cluster's start (the history's zero), or with
  ``options.swim_plan_origin = "workload"`` from the workload's first op, the origin the
  nemesis's schedule counts from (a sim replay's plan and faults must share one axis: the
  workload starts seconds after the cluster, more on a loaded machine);
* ``key-install`` / ``key-use`` / ``key-remove`` (key rotation, encryption on), planned as
  ``[at_s, "key-use", "n3", "<hex key>"]``: ``POST /swim/keys`` on that node.

Encryption (docs/swim.md, "Encryption"): ``options.keyring`` (hex keys, primary first) goes
to every node; ``options.node_keyrings`` ``{"n4": [...]}`` overrides it per node.

Thread ``i`` serves node ``node_ids[i % n]`` (use ``concurrency >= nodes`` to plan ops on every
node). After its plan a thread idles until the time limit, so the nemesis has the whole run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from checkers import liveness, membership
from faults.hostile import HostileDef
from harness.generators import Context, Pending
from harness.spec import NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.swim import hostile
from nodes.swim.core import BUGS

Op = dict[str, Any]
KEY_OPS = ("key-install", "key-use", "key-remove")


class SwimClient:
    """Talks to one node's HTTP routes (the admin port: the client port's relay is UDP)."""

    def __init__(self, addr: NodeAddr | None, process: int) -> None:
        self.node = addr.node if addr else None
        self.url = addr.admin_url if addr else ""
        self._s: aiohttp.ClientSession | None = None

    async def invoke(self, op: Op) -> Op:
        f = op["f"]
        if f == "clock-sync":
            return {"type": "ok", "value": {"wall": time.time(), "mono": time.monotonic()}}
        if self._s is None:
            self._s = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3))
        if f in KEY_OPS:
            body = {"op": f.removeprefix("key-"), "key": op["value"]["key"]}
            async with self._s.post(f"{self.url}/swim/keys", json=body) as r:
                got = await r.json()
                if r.status != 200:
                    return {"type": "fail", "error": got.get("error", r.status)}
            return {"type": "ok", "value": {"node": self.node, "keys": got["keys"]}}
        if f in ("leave", "join"):
            async with self._s.post(f"{self.url}/swim/{f}") as r:
                r.raise_for_status()
                body = await r.json()
            return {"type": "ok", "value": {"node": self.node, "gen": body.get("gen"),
                                            "left": body.get("left")}}
        raise ValueError(f"unknown swim op {f!r}")

    async def close(self) -> None:
        if self._s is not None:
            await self._s.close()


@dataclass
class MembershipGen:
    """clock-sync once, then each thread's planned leave/join ops, then idle."""

    nodes: list[str]
    plan: list[tuple[float, str, str, str | None]]
    #: plan times count from the workload's first op, not the cluster's start
    from_workload: bool = False
    _synced: bool = False
    _origin: float = 0.0
    _done: set[int] = field(default_factory=set)

    def op(self, ctx: Context) -> Op | Pending | None:
        if not self._synced:
            self._synced = True
            self._origin = ctx.time if self.from_workload else 0.0
            return {"f": "clock-sync", "value": None}
        thread = int(ctx.thread)
        node = self.nodes[thread % len(self.nodes)] if self.nodes else None
        for i, (due, f, n, key) in enumerate(self.plan):
            if i in self._done or n != node:
                continue
            at = due + self._origin
            if ctx.time >= at:
                self._done.add(i)
                return {"f": f, "value": {"node": n, "key": key} if f in KEY_OPS else n}
            return Pending(at)
        return Pending(1e12)  # idle: the time limit ends us


def membership_generator(spec: TestSpec) -> MembershipGen:
    raw = spec.options.get("swim_plan", [])
    plan = sorted((float(a), str(f), str(n), str(rest[0]) if rest else None)
                  for a, f, n, *rest in raw)
    for _, f, n, key in plan:
        if f in KEY_OPS and key is None:
            raise ValueError(f"swim_plan: {f} on {n} needs a key: [at_s, {f!r}, {n!r}, hex]")
    origin = spec.options.get("swim_plan_origin", "cluster")
    if origin not in ("cluster", "workload"):
        raise ValueError(f"swim_plan_origin must be 'cluster' or 'workload', got {origin!r}")
    return MembershipGen(spec.node_ids, plan, from_workload=origin == "workload")


def node_extra(spec: TestSpec, index: int, _run_path: Any) -> dict[str, Any]:
    """A node's own keyring from ``options.node_keyrings`` (a wrong-key node, say)."""
    own = spec.options.get("node_keyrings", {}).get(spec.node_ids[index])
    return {"options": {"keyring": own}} if own is not None else {}


def membership_workload() -> Workload:
    return Workload(client=SwimClient, generator=membership_generator,
                    checkers={"membership": membership.check,
                              liveness.NAME: liveness.check})


PROTOCOL = ProtocolDef(
    name="swim",
    module="nodes.swim",
    workloads={"membership": membership_workload},
    bugs=BUGS,
    transport="udp",
    default_options={"period_s": 0.5, "probe_timeout_s": 0.25, "indirect_k": 3,
                     "suspicion_mult": 4},
    hostile=HostileDef(hostile.messages, hostile.refusals, transport="udp"),
    default_workload="membership",
    node_extra=node_extra,
)
