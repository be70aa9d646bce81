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

from checkers import ordering
from harness import generators as g
from harness.spec import NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.sds.client import SdsClient
from nodes.sds.core import BUGS

DEFAULT_OPTIONS: dict[str, Any] = {
    "resend_unacked_ms": 500,
    "resend_possibly_ms": 1500,
    "sync_interval_ms": 500,
    "t_min_ms": 200,
    "t_max_ms": 1000,
    "tick_ms": 50,
}


def _client(addr: NodeAddr | None, process: int) -> SdsClient:
    if addr is None:
        raise ValueError("the SDS client needs a node address")
    return SdsClient(addr, process)


def _generator(spec: TestSpec) -> g.Generator:
    seq = itertools.count(1)
    interval = float(spec.options.get("send_interval_s", 0.05))

    def one(ctx: g.Context) -> dict[str, Any]:
        return {"f": "send",
                "value": f"c{ctx.process}:{next(seq)}:{ctx.rng.getrandbits(32):08x}"}

    return g.stagger(interval, g.Fn(one))


def broadcast_workload() -> Workload:
    return Workload(client=_client, generator=_generator,
                    checkers={ordering.NAME: ordering.check})


PROTOCOL = ProtocolDef(
    name="sds",
    module="nodes.sds",
    workloads={"broadcast": broadcast_workload},
    bugs=BUGS,
    transport="udp",
    default_options=DEFAULT_OPTIONS,
    default_workload="broadcast",
)
