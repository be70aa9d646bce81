"""The ``hostile`` fault: protocol-made bad messages sent straight to the nodes.

A protocol that takes part declares a `HostileDef` (its suite's ``ProtocolDef.hostile``): a
provider that builds one burst of hostile messages with the protocol's own codec (extreme
field values, oversize fields, forged senders, replays, truncation, garbage), the transport
that carries them, and how to read a node's refusal counters from its ``/admin/state``. The
providers live beside their codecs (nodes/<protocol>/hostile.py, which never import this
package: they yield plain ``(node, kind, data)`` tuples); the suite joins them in a `HostileDef`.

The generic part here sends those bursts to each node's listening address on loopback,
bypassing the link proxies (an attacker does not go through our partitions), and counts what
it sent per node and per message kind, so a run can say "sent N, node refused M". All
randomness comes from the ``rng`` given, seeded from the run seed, so a run replays.

A message may name a member it is forged from, ``(node, kind, data, via)``: it is then sent
into the link ``via -> node`` (``routes``, which the cluster fills from the UDP relay's links),
so the node receives it from the very address it holds for ``via``, as if that member sent it:
the checks behind a node's address book (origins, generations, ack sequence numbers) are
exercised, not only the address book. Such a message passes that link's faults (a cut drops
it), as the member's own would.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nodes.common.bursts import BurstTask

#: the largest payload one loopback UDP datagram carries (IPv4: 65,535 - 20 - 8)
MAX_UDP = 65_507


@dataclass(frozen=True)
class Target:
    """A node as the attacker sees it: its name, protocol id and listening address."""

    node: str
    num_id: int
    host: str
    port: int


class Hostile(NamedTuple):
    """One hostile message for ``node``; ``kind`` names what it tries (for the counts);
    ``via``: the member whose address it is forged from (None: the attacker's own address).

    A plain tuple, so providers under nodes/ (which never import faults/) yield
    ``(node, kind, data)`` or ``(node, kind, data, via)`` without knowing this class."""

    node: str
    kind: str
    data: bytes
    via: str | None = None


#: one burst: (rng, every target) -> ``(node, kind, data[, via])`` messages, each to one target
Provider = Callable[[random.Random, Sequence[Target]], Iterable[tuple[Any, ...]]]
#: a node's /admin/state -> its refusal counters by name (only what it refused or dropped)
Refusals = Callable[[Mapping[str, Any]], dict[str, int]]
#: (targets, rng, each node's config) -> a sender with `HostileSender`'s interface (``start``,
#: ``stop``, ``close``, ``counts``, ``running``, ``sent``), for a protocol whose attacks are
#: more than raw datagrams or connections (DRiP: mutual TLS and a signed token per request)
Driver = Callable[[Sequence["Target"], random.Random, Mapping[str, Mapping[str, Any]]], Any]


@dataclass(frozen=True)
class HostileDef:
    """What a protocol supplies for the ``hostile`` fault."""

    messages: Provider
    refusals: Refusals
    transport: str = "udp"  # "udp": one datagram each; "tcp": connect, send, close
    driver: Driver | None = None  # set: the cluster uses it instead of a `HostileSender`

    def __post_init__(self) -> None:
        if self.transport not in ("udp", "tcp"):
            raise ValueError(f"hostile transport must be 'udp' or 'tcp', got {self.transport!r}")


@dataclass
class HostileSender(BurstTask):
    """Sends bursts to the targets, on demand or every ``interval_s`` until stopped.

    ``sent[node][kind]`` counts the messages handed to the network; ``failed`` counts sends
    the OS refused (a TCP connect refused, say), which say nothing about the node's code.
    ``routes[(via, node)]``: the address to send a message forged from ``via`` to (the UDP
    relay's listening address of link ``via -> node``).
    """

    spec: HostileDef
    targets: Sequence[Target]
    rng: random.Random
    routes: Mapping[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    sent: dict[str, Counter[str]] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    _sock: socket.socket | None = field(default=None, init=False, repr=False)

    def _targets(self, nodes: Iterable[str] | None) -> list[Target]:
        if nodes is None:
            return list(self.targets)
        want = set(nodes)
        known = {t.node for t in self.targets}
        if want - known:
            raise ValueError(f"no hostile target(s) {sorted(want - known)}; known: {sorted(known)}")
        return [t for t in self.targets if t.node in want]

    async def burst(self, nodes: Iterable[str] | None = None,
                    skip: Iterable[str] = ()) -> int:
        """Build one burst from the provider and send it, the kinds in ``skip`` left out (a
        sim replay's step that sent only some kinds); returns how many were sent. The
        provider sees every target, the chosen ``nodes`` first, as a message forged from a
        member needs another member to name; only what is addressed to them is sent."""
        targets = self._targets(nodes)
        chosen = {t.node for t in targets}
        view = targets + [t for t in self.targets if t.node not in chosen]
        by_node = {t.node: t for t in self.targets}
        leave_out = frozenset(skip)
        n = 0
        for raw in self.spec.messages(self.rng, view):
            h = Hostile(*raw)
            t = by_node.get(h.node)
            if t is None:
                raise ValueError(f"the provider addressed {h.node!r}, not a target of this burst")
            if h.kind in leave_out or h.node not in chosen:
                continue
            dest = (t.host, t.port)
            if h.via is not None:
                if self.spec.transport != "udp" or (h.via, h.node) not in self.routes:
                    raise ValueError(
                        f"no route to send {h.kind!r} to {h.node} as if from {h.via}: forged "
                        f"senders need a UDP protocol behind the relay (routes from its links)")
                dest = self.routes[(h.via, h.node)]
            ok = await (self._udp(dest, h.data) if self.spec.transport == "udp"
                        else self._tcp(t, h.data))
            if ok:
                self.sent.setdefault(h.node, Counter())[h.kind] += 1
                n += 1
            else:
                self.failed[h.node] = self.failed.get(h.node, 0) + 1
        return n

    async def _udp(self, dest: tuple[str, int], data: bytes) -> bool:
        if len(data) > MAX_UDP:
            raise ValueError(f"a hostile datagram of {len(data)} bytes cannot be sent "
                             f"(UDP carries at most {MAX_UDP}); make the provider cap it")
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sock.bind(("127.0.0.1", 0))
            self._sock.setblocking(False)
        try:
            self._sock.sendto(data, dest)
        except BlockingIOError:  # our send buffer is full: give the node a moment, try once more
            await asyncio.sleep(0.01)
            try:
                self._sock.sendto(data, dest)
            except OSError:
                return False
        except OSError:  # e.g. ICMP port unreachable from an earlier datagram (node killed)
            return False
        return True

    async def _tcp(self, t: Target, data: bytes) -> bool:
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection(t.host, t.port), 1.0)
        except (TimeoutError, OSError):
            return False
        try:
            w.write(data)
            await asyncio.wait_for(w.drain(), 1.0)
            return True
        except (TimeoutError, OSError):
            return False
        finally:
            w.close()
            with contextlib.suppress(Exception):  # bounded: a node that stops reading
                await asyncio.wait_for(w.wait_closed(), 1.0)  # would hold us for good
            w.transport.abort()  # (a no-op once closed)

    def start(self, interval_s: float, nodes: Iterable[str] | None = None,
              skip: Iterable[str] = ()) -> None:
        """Send a burst now and then every ``interval_s`` until `stop` (``skip``: kinds left
        out of each)."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if self.running:
            raise RuntimeError("hostile traffic is already running; stop-hostile first")
        chosen = None if nodes is None else list(nodes)
        self._targets(chosen)  # a bad node name fails the start op, not the task
        left_out = list(skip)

        async def loop() -> None:
            while True:
                await self.burst(chosen, left_out)
                await asyncio.sleep(interval_s)

        self._launch(loop(), "hostile")

    def close(self) -> None:
        super().close()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def counts(self) -> dict[str, dict[str, Any]]:
        """What was sent so far, per node: ``{node: {"sent": N, "by_kind": {...}}}``."""
        return {n: {"sent": sum(c.values()), "by_kind": dict(sorted(c.items())),
                    **({"failed": self.failed[n]} if n in self.failed else {})}
                for n, c in sorted(self.sent.items())}


def report(spec: HostileDef, counts: Mapping[str, Mapping[str, Any]],
           states: Mapping[str, Mapping[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Per node: what was sent (``counts``) beside what the node says it refused.

    A node whose state could not be read (killed at the end) has ``refused: None``.
    """
    out: dict[str, dict[str, Any]] = {}
    for node in sorted(set(counts) | set(states)):
        state = states.get(node)
        refused = None if state is None else spec.refusals(state)
        sent = counts.get(node, {})
        # a driver's further detail (what each kind was answered, failed connects) kept too
        more = {k: v for k, v in sent.items() if k not in ("sent", "by_kind")}
        out[node] = {"sent": int(sent.get("sent", 0)), "by_kind": dict(sent.get("by_kind", {})),
                     **more, "refused": refused,
                     "refused_total": None if refused is None else sum(refused.values())}
    return out
