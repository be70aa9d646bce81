"""How the harness runs SDS: ``PROTOCOL`` (a `ProtocolDef`) and the ``broadcast`` workload.

SDS is a ``transport="udp"`` protocol: the cluster starts our UDP relay and gives node ``i`` the
relay address ``L(i,j)`` for each peer ``j``; a broadcast is one datagram per peer through those
links, so partitions, loss and latency/jitter (reordering) act on each delivery separately.

Workload ``broadcast``: clients send unique payloads ``c<process>:<seq>:<nonce>`` at a mean
rate of ``1 / send_interval_s`` (test option, default 0.05 s) across all client threads;
checked by `checkers.ordering`.

Timings are compressed for short test runs (``DEFAULT_OPTIONS``); the spec's own values
(T_min 30 s, T_max 120 s) are the node's defaults when no options are given.
"""

from __future__ import annotations

import itertools
from typing import Any

from checkers import liveness, ordering
from faults.hostile import HostileDef
from harness import generators as g
from harness.spec import DefiniteFailure, NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.sds import hostile
from nodes.sds.client import SdsClient, SdsRefused
from nodes.sds.core import BUGS

DEFAULT_OPTIONS: dict[str, Any] = {
    "resend_unacked_ms": 500,
    "resend_possibly_ms": 1500,
    "sync_interval_ms": 500,
    "t_min_ms": 200,
    "t_max_ms": 1000,
    "tick_ms": 50,
}


class _Client:
    """One harness process's client (harness.spec.Client): ``send`` completes ``ok`` with
    ``{"v": payload, "id", "lamport"}`` once the node holds it durably; a refusal is ``fail``;
    silence runs into the runner's op timeout and is ``info``."""

    def __init__(self, addr: NodeAddr, process: int) -> None:
        self.node: str | None = addr.node
        self.sds = SdsClient(addr.host, addr.port, process)

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        try:
            if op["f"] == "send":
                return {"type": "ok", "value": {"v": op["value"], **await self.sds.send(op["value"])}}
            if op["f"] == "ephemeral":
                await self.sds.ephemeral(op["value"])
                return {"type": "ok", "value": op["value"]}
        except SdsRefused as e:
            raise DefiniteFailure(str(e)) from e
        raise DefiniteFailure(f"unknown op {op['f']!r}")

    async def close(self) -> None:
        await self.sds.close()


def _client(addr: NodeAddr | None, process: int) -> _Client:
    if addr is None:
        raise ValueError("the SDS client needs a node address")
    return _Client(addr, process)


def _generator(spec: TestSpec) -> g.Generator:
    seq = itertools.count(1)
    interval = float(spec.options.get("send_interval_s", 0.05))

    def one(ctx: g.Context) -> dict[str, Any]:
        return {"f": "send",
                "value": f"c{ctx.process}:{next(seq)}:{ctx.rng.getrandbits(32):08x}"}

    return g.stagger(interval, g.Fn(one))


def broadcast_workload() -> Workload:
    return Workload(client=_client, generator=_generator,
                    checkers={ordering.NAME: ordering.check,
                              liveness.NAME: liveness.check})


PROTOCOL = ProtocolDef(
    name="sds",
    module="nodes.sds",
    workloads={"broadcast": broadcast_workload},
    bugs=BUGS,
    transport="udp",
    default_options=DEFAULT_OPTIONS,
    hostile=HostileDef(hostile.messages, hostile.refusals, transport="udp"),
    default_workload="broadcast",
)
