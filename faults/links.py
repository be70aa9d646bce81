"""The link vocabulary: cut, one-way cut, latency, bandwidth, slicer, reset-peer, heal.

Vocabulary. A *link* ``(src, dst)`` is a proxy: ``src`` connects to ``dst`` through it (``src``
may be ``"client"``). A *flow* ``(src, dst)`` is data moving from ``src`` to ``dst``. Faults are
applied to flows, because that is what a partition means ("what ``a`` sends never reaches
``b``"). A TCP proxy carries two flows: for the proxy of link ``(a, b)``, the *upstream* stream is
``a``'s requests (flow ``a->b``) and the *downstream* stream is ``b``'s replies (flow ``b->a``).
So the flow ``a->b`` lives on

* the upstream stream of proxy ``(a, b)`` (``a``'s requests to ``b``), and
* the downstream stream of proxy ``(b, a)`` (``a``'s replies to ``b``'s requests),

and a one-way cut of ``a->b`` must put a toxic on both (`flow_targets`). A symmetric cut of
``a<->b`` is the two flows, i.e. both streams of both proxies.

A cut is Toxiproxy's ``timeout`` toxic with ``timeout=0``: bytes vanish and the connection stays
open and silent, like Jepsen's iptables DROP. Unlike DROP, TCP will not retransmit what the toxic
swallowed, so after a heal an old connection's byte stream has a hole in it. To never hand a node
a corrupted stream, healing a cut (by default) disables the affected proxies first, which closes
their connections, removes the toxics, and enables them again on the same port: nodes see the
connection drop at heal time and reconnect cleanly.

Latency is one-way per flow: a symmetric ``latency(ms=50)`` adds 100 ms to a round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from faults.toxiproxy import Toxic, ToxiproxyClient

CLIENT = "client"
Flow = tuple[str, str]
Stream = str  # "upstream" | "downstream"


class Kind(StrEnum):
    """Fault kinds a link backend may support."""

    CUT = "cut"
    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    SLICER = "slicer"
    RESET_PEER = "reset_peer"
    LOSS = "loss"  # UDP relay only: Toxiproxy cannot drop part of a TCP stream
    DUPLICATE = "duplicate"  # UDP relay only: a TCP stream cannot deliver a byte twice


def flows_of(pairs: Iterable[Flow], one_way: bool = False) -> frozenset[Flow]:
    """The flows a fault on ``pairs`` touches: each pair both ways unless ``one_way``."""
    out: set[Flow] = set()
    for a, b in pairs:
        if a == b:
            raise ValueError(f"a link needs two different ends, got ({a!r}, {b!r})")
        out.add((a, b))
        if not one_way:
            out.add((b, a))
    return frozenset(out)


def flow_targets(flow: Flow, links: Collection[Flow]) -> list[tuple[Flow, Stream]]:
    """Which (proxy link, stream) pairs carry ``flow``, given the proxies that exist."""
    src, dst = flow
    out: list[tuple[Flow, Stream]] = []
    if (src, dst) in links:
        out.append(((src, dst), "upstream"))
    if (dst, src) in links:
        out.append(((dst, src), "downstream"))
    return out


def node_pairs(nodes: Iterable[str], include_client: bool = False) -> frozenset[Flow]:
    """Every ordered node-node link (plus ``client -> node`` links if asked)."""
    ns = list(nodes)
    pairs = {(a, b) for a in ns for b in ns if a != b}
    if include_client:
        pairs |= {(CLIENT, n) for n in ns}
    return frozenset(pairs)


def toxic_for(kind: Kind, stream: Stream, params: Mapping[str, Any]) -> Toxic:
    """The Toxiproxy toxic implementing ``kind`` on one stream (name ``h_<kind>_<stream>``)."""
    name = f"h_{kind.value}_{stream}"
    if kind is Kind.CUT:
        attrs: dict[str, Any] = {"timeout": 0}
        ttype = "timeout"
    elif kind is Kind.LATENCY:
        attrs = {"latency": int(params.get("ms", 0)), "jitter": int(params.get("jitter_ms", 0))}
        ttype = "latency"
    elif kind is Kind.BANDWIDTH:
        attrs = {"rate": int(params["kbps"])}  # KB/s, Toxiproxy's unit
        ttype = "bandwidth"
    elif kind is Kind.SLICER:
        attrs = {"average_size": int(params.get("average_size", 16)),
                 "size_variation": int(params.get("size_variation", 8)),
                 "delay": int(params.get("delay_us", 1000))}
        ttype = "slicer"
    elif kind is Kind.RESET_PEER:
        attrs = {"timeout": int(params.get("timeout_ms", 0))}
        ttype = "reset_peer"
    else:
        raise UnsupportedFault(f"Toxiproxy (TCP) links cannot do {kind.value!r}")
    return Toxic(type=ttype, stream=stream, attributes=attrs, name=name)


class UnsupportedFault(ValueError):
    pass


class LinkFaults(Protocol):
    """What the nemesis needs from a link backend (TCP via Toxiproxy, or the UDP relay)."""

    kinds: frozenset[Kind]

    @property
    def links(self) -> frozenset[Flow]: ...

    async def apply(self, kind: Kind, flows: Iterable[Flow], **params: Any) -> list[Flow]:
        """Put ``kind`` on ``flows`` (replacing the same kind's parameters); returns the flows
        that exist on this backend and now carry it, sorted."""

    async def heal(self, kind: Kind | None = None,
                   flows: Iterable[Flow] | None = None) -> list[Flow]:
        """Remove faults we added (all, or one kind, or on some flows); returns healed flows."""


class LinkVocabulary:
    """Convenience verbs over `LinkFaults.apply` for pairs of nodes."""

    async def apply(self, kind: Kind, flows: Iterable[Flow], **params: Any) -> list[Flow]:
        raise NotImplementedError

    async def cut(self, pairs: Iterable[Flow], one_way: bool = False) -> list[Flow]:
        """Black-hole the pairs both ways, or only ``src -> dst`` when ``one_way``."""
        return await self.apply(Kind.CUT, flows_of(pairs, one_way))

    async def latency(self, pairs: Iterable[Flow], ms: int, jitter_ms: int = 0,
                      one_way: bool = False) -> list[Flow]:
        return await self.apply(Kind.LATENCY, flows_of(pairs, one_way), ms=ms,
                                jitter_ms=jitter_ms)

    async def bandwidth(self, pairs: Iterable[Flow], kbps: int,
                        one_way: bool = False) -> list[Flow]:
        return await self.apply(Kind.BANDWIDTH, flows_of(pairs, one_way), kbps=kbps)

    async def slicer(self, pairs: Iterable[Flow], average_size: int = 16,
                     size_variation: int = 8, delay_us: int = 1000,
                     one_way: bool = False) -> list[Flow]:
        return await self.apply(Kind.SLICER, flows_of(pairs, one_way),
                                average_size=average_size, size_variation=size_variation,
                                delay_us=delay_us)

    async def reset_peer(self, pairs: Iterable[Flow], timeout_ms: int = 0,
                         one_way: bool = False) -> list[Flow]:
        return await self.apply(Kind.RESET_PEER, flows_of(pairs, one_way),
                                timeout_ms=timeout_ms)


@dataclass(frozen=True)
class _Active:
    link: Flow
    stream: Stream
    kind: Kind
    flow: Flow
    toxic: str


def link_name(link: Flow) -> str:
    """The Toxiproxy proxy name (after the run prefix) for a link."""
    return f"{link[0]}_to_{link[1]}"


class TcpLinks(LinkVocabulary):
    """TCP links through Toxiproxy proxies, one per ordered pair.

    Build with `TcpLinks.create`; nodes must be configured with `listen[(src, dst)]` as their
    address for ``dst``. All HTTP calls of one operation go out concurrently.
    """

    kinds = frozenset({Kind.CUT, Kind.LATENCY, Kind.BANDWIDTH, Kind.SLICER, Kind.RESET_PEER})

    def __init__(self, client: ToxiproxyClient, listen: Mapping[Flow, str],
                 reset_connections_on_heal: bool = True) -> None:
        self.client = client
        self.listen: dict[Flow, str] = dict(listen)
        self.reset_connections_on_heal = reset_connections_on_heal
        self._active: dict[tuple[Flow, Stream, Kind], _Active] = {}

    @classmethod
    async def create(cls, client: ToxiproxyClient, upstreams: Mapping[Flow, str],
                     listen_host: str = "127.0.0.1", **kwargs: Any) -> TcpLinks:
        """Create one proxy per link: ``{(src, dst): dst's real "host:port"}``, listening on
        ``listen_host`` (where the nodes can reach the proxies: a bridge gateway, say)."""
        names = {link_name(link): link for link in upstreams}
        if len(names) != len(upstreams):
            raise ValueError("two links map to the same proxy name")
        listen = await client.create_proxies({link_name(k): v for k, v in upstreams.items()},
                                             listen_host=listen_host)
        return cls(client, {names[n]: addr for n, addr in listen.items()}, **kwargs)

    @property
    def links(self) -> frozenset[Flow]:
        return frozenset(self.listen)

    def active(self) -> dict[str, list[list[str]]]:
        """Flows carrying each kind of fault we added, for reports and tests."""
        out: dict[str, set[Flow]] = {}
        for a in self._active.values():
            out.setdefault(a.kind.value, set()).add(a.flow)
        return {k: [list(f) for f in sorted(v)] for k, v in sorted(out.items())}

    async def apply(self, kind: Kind, flows: Iterable[Flow], **params: Any) -> list[Flow]:
        kind = Kind(kind)
        if kind not in self.kinds:
            raise UnsupportedFault(f"TCP links cannot do {kind.value!r}")
        calls = []
        done: set[Flow] = set()
        for flow in flows:
            for link, stream in flow_targets(flow, self.listen):
                done.add(flow)
                key = (link, stream, kind)
                toxic = toxic_for(kind, stream, params)
                if key in self._active:
                    if kind is not Kind.CUT:
                        calls.append(self.client.update_toxic(link_name(link), toxic))
                    continue
                self._active[key] = _Active(link, stream, kind, flow, toxic.name)
                calls.append(self.client.add_toxic(link_name(link), toxic))
        await asyncio.gather(*calls)
        return sorted(done)

    async def heal(self, kind: Kind | None = None,
                   flows: Iterable[Flow] | None = None) -> list[Flow]:
        wanted = None if flows is None else set(flows)
        chosen = [a for a in self._active.values()
                  if (kind is None or a.kind is Kind(kind))
                  and (wanted is None or a.flow in wanted)]
        if not chosen:
            return []
        bounce = sorted({a.link for a in chosen if a.kind is Kind.CUT}) \
            if self.reset_connections_on_heal else []
        if bounce:
            await asyncio.gather(*(self.client.set_enabled(link_name(k), False) for k in bounce))
        try:
            await asyncio.gather(*(self.client.remove_toxic(link_name(a.link), a.toxic)
                                   for a in chosen))
            for a in chosen:
                self._active.pop((a.link, a.stream, a.kind), None)
        finally:
            if bounce:
                await asyncio.gather(*(self.client.set_enabled(link_name(k), True)
                                       for k in bounce))
        return sorted({a.flow for a in chosen})

    async def close(self, delete_proxies: bool = True) -> None:
        """Delete this run's proxies (their ports close) and the HTTP session."""
        try:
            if delete_proxies:
                await self.client.delete_proxies()
        finally:
            self._active.clear()
            await self.client.close()

    async def __aenter__(self) -> TcpLinks:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
