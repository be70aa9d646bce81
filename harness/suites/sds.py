"""How the harness runs SDS: ``PROTOCOL`` (a `ProtocolDef`) and the ``broadcast`` workload.

SDS is a ``transport="udp"`` protocol: the cluster starts our UDP relay and gives node ``i`` the
relay address ``L(i,j)`` for each peer ``j``; a broadcast is one datagram per peer through those
links, so partitions, loss and latency/jitter (reordering) act on each delivery separately.

Workload ``broadcast``: clients send unique payloads ``c<process>:<seq>:<nonce>`` at a mean
rate of ``1 / send_interval_s`` (test option, default 0.05 s) across all client threads;
checked by `checkers.ordering`. Options ``identical_every``, ``repeat_every`` and
``ephemeral_every`` (default 0: off) mix in identical payloads from several senders, repeats
of one sender's text and ephemerals (`mixed_op`); off by default because today's ids are a hash
of the content alone (issue 24 item 2), so identical texts collide on the correct node.

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


def _every(spec: TestSpec, name: str) -> int:
    k = spec.options.get(name, 0)
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"SDS option {name} must be a whole number >= 0 (0: off), not {k!r}")
    return k


def mixed_op(n: int, process: Any, nonce: int, last: dict[Any, str], *, identical: int = 0,
             repeat: int = 0, ephemeral: int = 0) -> dict[str, Any]:
    """The ``n``-th op (from 1): every ``identical``-th op sends a text shared by the next
    few such ops whoever sends them (``same:<k>``, four sends each: identical payloads from
    several senders), every ``repeat``-th repeats the process's previous text (one sender,
    the same text twice), every ``ephemeral``-th is an ephemeral; 0 turns a kind off."""
    if ephemeral and n % ephemeral == 0:
        return {"f": "ephemeral", "value": f"e{process}:{n}:{nonce:08x}"}
    if repeat and n % repeat == 0 and process in last:
        return {"f": "send", "value": last[process]}
    if identical and n % identical == 0:
        text = f"same:{n // (identical * 4)}"
    else:
        text = f"c{process}:{n}:{nonce:08x}"
    last[process] = text
    return {"f": "send", "value": text}


def _generator(spec: TestSpec) -> g.Generator:
    seq = itertools.count(1)
    interval = float(spec.options.get("send_interval_s", 0.05))
    kinds = {"identical": _every(spec, "identical_every"), "repeat": _every(spec, "repeat_every"),
             "ephemeral": _every(spec, "ephemeral_every")}
    last: dict[Any, str] = {}

    def one(ctx: g.Context) -> dict[str, Any]:
        return mixed_op(next(seq), ctx.process, ctx.rng.getrandbits(32), last, **kinds)

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
