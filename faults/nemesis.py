"""The nemesis: performs nemesis ops and says exactly what it did.

``invoke(op)`` takes a nemesis op (``{"f": ..., "value": ...}``, contracts.md) and returns the
completion: the same op with ``type: "info"`` and a ``value`` naming every decision taken (which
node "random" or "leader" meant, which flows were cut, the partition's components), so the
history alone says what happened. A fault that could not be done completes with an ``error``
string and whatever part was done; it never raises. ``heal_all()`` undoes everything still
active (links, paused and killed nodes, clocks) and is safe to call at any time, e.g. in a
``finally``.

Node faults go through a `NodeControl` the harness provides; link faults through one or more
`faults.links.LinkFaults` backends (TCP through Toxiproxy, UDP through the relay): each link op
goes to every backend that supports its kind. All randomness comes from the ``rng`` passed in.

Ops (value fields; ``links`` is a list of ``[src, dst]`` pairs, default every node-node pair):

* ``start-partition`` ``{shape: halves|random-halves|isolate|majorities-ring|bridge|min-edge-cut|
  articulation|explicit, one_way?, node? (isolate: a name, "random" or "leader"), shuffle? (bridge),
  groups? | cut? (explicit)}``; ``stop-partition``. Clients are never cut by a partition. On a
  sparse topology (DRiP's ring, line, figure 1) a drawn shape that severs no path of it is
  replaced by a minimum edge cut, recorded as ``asked`` and ``why``; ``min-edge-cut`` and
  ``articulation`` are chosen from the topology's graph (from the full mesh when there is none).
* ``start-latency`` ``{ms, jitter_ms?, links?, one_way?}``; ``stop-latency``
* ``start-loss`` ``{p, links?, one_way?}`` (UDP only); ``stop-loss``
* ``start-duplicate`` ``{p, links?, one_way?}`` (UDP only: each datagram twice with probability p);
  ``stop-duplicate``
* ``start-bandwidth`` ``{kbps, links?}``; ``stop-bandwidth``
* ``start-slicer`` ``{average_size?, size_variation?, delay_us?, links?}``; ``stop-slicer``
* ``reset-peer`` ``{timeout_ms?, links?}``; ``stop-reset-peer``
* ``kill`` / ``pause`` ``{node: name | [names] | "random" | "leader" | "follower" | "all"}``;
  ``restart`` / ``resume`` ``{node?}`` (default: every killed / paused node)
* ``kill`` ``{node, for_good: true}``: killed and left down through the final heal (a node
  that is gone for good: ``gone``); nothing restarts it, later kills and pauses skip it, and
  ``heal_all`` names it under ``gone`` so the checkers judge the run without it
* ``clock-skew`` ``{node, offset_s}``; ``clock-reset`` ``{node?}`` (default: every skewed node;
  it also puts a node's clock rate back to 1)
* ``clock-rate`` ``{node, rate}``: the node's clocks (monotonic and calendar) run at ``rate``
  times true time from now on, continuing from what they read (no jump), through a restart
  too; the harness starts such a run's nodes under libfaketime (faults/clockrate.py)
* ``start-hostile`` ``{interval_s?, nodes?, skip?}``: a burst of the protocol's hostile messages
  (faults/hostile.py) to each node (default every node; ``nodes`` a list of names, or one
  pick: a name, "random", "leader", "follower" or "all", resolved when the op runs) now and
  every ``interval_s`` (0.5), the message kinds in ``skip`` left out;
  ``stop-hostile`` ends it and completes with what was sent, per node and kind
* ``heal-all`` ``{}``: ``heal_all()`` as an op, for a schedule that needs the final heal at a
  time of its own (a sim replay's last heal, before the members still out rejoin)
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from faults import partitions
from faults.hostile import HostileSender
from faults.links import Flow, Kind, LinkFaults, flows_of, node_pairs

Op = dict[str, Any]


class NodeControl(Protocol):
    """What the nemesis needs from the harness to act on node processes."""

    nodes: list[str]

    async def kill(self, node: str) -> None: ...          # SIGKILL

    async def restart(self, node: str) -> None: ...       # start again, data dir kept

    async def pause(self, node: str) -> None: ...         # SIGSTOP

    async def resume(self, node: str) -> None: ...        # SIGCONT

    async def set_clock_offset(self, node: str, offset_s: float) -> None: ...

    async def set_clock_rate(self, node: str, rate: float) -> None: ...

    async def leader(self) -> str | None: ...             # best guess, or None


class NemesisError(Exception):
    """A fault that cannot be done as asked; the message goes into the completion's error."""


def _pairs(value: dict[str, Any], default: Iterable[Flow]) -> frozenset[Flow]:
    raw = value.get("links")
    pairs = default if raw is None else [(str(a), str(b)) for a, b in raw]
    return flows_of(pairs, bool(value.get("one_way", False)))


def _enc(flows: Iterable[Flow]) -> list[list[str]]:
    return [list(f) for f in sorted(set(flows))]


class Nemesis:
    """Executes nemesis ops against nodes and links; tracks what is active to undo it."""

    def __init__(self, rng: random.Random, nodes: NodeControl | None = None,
                 links: LinkFaults | Sequence[LinkFaults] = (),
                 node_names: Sequence[str] | None = None,
                 topology: Sequence[Flow] | None = None,
                 hostile: HostileSender | None = None) -> None:
        self.rng = rng
        self.hostile = hostile
        self.control = nodes
        self.backends: list[LinkFaults] = [links] if hasattr(links, "apply") else list(links)  # type: ignore[arg-type]
        names = node_names if node_names is not None else (nodes.nodes if nodes else [])
        self.nodes: list[str] = list(names)
        #: the peer edges when not every pair of nodes talks (DRiP's mesh shapes); None = all
        self.topology: list[Flow] | None = None if topology is None else [
            (str(a), str(b)) for a, b in topology]
        self.partition: frozenset[Flow] | None = None
        self.killed: set[str] = set()
        #: killed for good: never restarted, not even by ``heal_all``
        self.gone: set[str] = set()
        #: late nodes not started yet (a "join" starts them): no "random", "follower" or
        #: "all" pick names them, so a kill, and the restart after it, cannot start one early
        self.unstarted: set[str] = set()
        self.paused: set[str] = set()
        self.skewed: dict[str, float] = {}
        self.rated: dict[str, float] = {}  # node -> clock rate, for nodes not at 1
        self._lock = asyncio.Lock()  # ops run one at a time, so the bookkeeping stays true
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "start-partition": self._start_partition,
            "stop-partition": lambda v: self._stop_links(Kind.CUT, v),
            "start-latency": lambda v: self._start_links(Kind.LATENCY, v, ms=int(v["ms"]),
                                                         jitter_ms=int(v.get("jitter_ms", 0))),
            "stop-latency": lambda v: self._stop_links(Kind.LATENCY, v),
            "start-loss": lambda v: self._start_links(Kind.LOSS, v, p=float(v["p"])),
            "stop-loss": lambda v: self._stop_links(Kind.LOSS, v),
            "start-duplicate": lambda v: self._start_links(Kind.DUPLICATE, v, p=float(v["p"])),
            "stop-duplicate": lambda v: self._stop_links(Kind.DUPLICATE, v),
            "start-bandwidth": lambda v: self._start_links(Kind.BANDWIDTH, v,
                                                           kbps=int(v["kbps"])),
            "stop-bandwidth": lambda v: self._stop_links(Kind.BANDWIDTH, v),
            "start-slicer": lambda v: self._start_links(
                Kind.SLICER, v, average_size=int(v.get("average_size", 16)),
                size_variation=int(v.get("size_variation", 8)),
                delay_us=int(v.get("delay_us", 1000))),
            "stop-slicer": lambda v: self._stop_links(Kind.SLICER, v),
            "reset-peer": lambda v: self._start_links(Kind.RESET_PEER, v,
                                                      timeout_ms=int(v.get("timeout_ms", 0))),
            "stop-reset-peer": lambda v: self._stop_links(Kind.RESET_PEER, v),
            "kill": self._kill,
            "restart": self._restart,
            "pause": self._pause,
            "resume": self._resume,
            "clock-skew": self._clock_skew,
            "clock-reset": self._clock_reset,
            "clock-rate": self._clock_rate,
            "start-hostile": self._start_hostile,
            "stop-hostile": self._stop_hostile,
            "heal-all": lambda _v: self._heal_all(),  # invoke holds the lock already
        }

    @property
    def supported(self) -> list[str]:
        return sorted(self._handlers)

    async def invoke(self, op: Op) -> Op:
        """Perform ``op``; returns its completion (``type: "info"``), never raises."""
        value = op.get("value")
        value = dict(value) if isinstance(value, dict) else {}
        done: Op = {**op, "type": "info"}
        handler = self._handlers.get(str(op.get("f")))
        if handler is None:
            done["value"] = value
            done["error"] = f"unknown nemesis op {op.get('f')!r}; known: {self.supported}"
            return done
        try:
            async with self._lock:
                done["value"] = await handler(value)
        except Exception as e:  # the history must record the failure, not lose the op
            done["value"] = value
            done["error"] = f"{type(e).__name__}: {e}"
        return done

    # ---- links -------------------------------------------------------------------------

    def _backends_for(self, kind: Kind) -> list[LinkFaults]:
        found = [b for b in self.backends if kind in b.kinds]
        if not found:
            hint = " (Toxiproxy cannot drop part of a TCP stream; use the UDP relay)" \
                if kind is Kind.LOSS else ""
            raise NemesisError(f"no link backend supports {kind.value!r}{hint}")
        return found

    async def _apply(self, kind: Kind, flows: frozenset[Flow], **params: Any) -> list[Flow]:
        results = await asyncio.gather(*(b.apply(kind, flows, **params)
                                         for b in self._backends_for(kind)))
        return sorted({f for r in results for f in r})

    async def _heal(self, kind: Kind | None, flows: Iterable[Flow] | None = None) -> list[Flow]:
        fl = None if flows is None else list(flows)
        backends = self.backends if kind is None else [b for b in self.backends
                                                       if kind in b.kinds]
        results = await asyncio.gather(*(b.heal(kind, fl) for b in backends))
        return sorted({f for r in results for f in r})

    async def _start_links(self, kind: Kind, value: dict[str, Any],
                           **params: Any) -> dict[str, Any]:
        flows = _pairs(value, node_pairs(self.nodes))
        applied = await self._apply(kind, flows, **params)
        return {**value, **params, "flows": _enc(applied)}

    async def _stop_links(self, kind: Kind, value: dict[str, Any]) -> dict[str, Any]:
        raw = value.get("links")
        flows = None if raw is None else _pairs(value, ())
        healed = await self._heal(kind, flows)
        if kind is Kind.CUT and flows is None:
            self.partition = None
        return {**value, "healed": _enc(healed)}

    async def _grudge(self, value: dict[str, Any]) -> tuple[frozenset[Flow], dict[str, Any]]:
        shape = value.get("shape", "halves")
        one_way = bool(value.get("one_way", False))
        nodes = self.nodes
        info: dict[str, Any] = {"shape": shape, "one_way": one_way}
        if shape == "halves":
            grudge = partitions.halves(nodes, one_way)
        elif shape == "random-halves":
            grudge = partitions.random_halves(nodes, self.rng, one_way)
        elif shape == "isolate":
            spec = value.get("node", "random")
            if not isinstance(spec, str):
                raise NemesisError(f"isolate takes one node, a name, 'random' or 'leader': {spec!r}")
            (node,) = await self._resolve(spec, set())
            grudge = partitions.isolate(nodes, node, one_way)
            info["node"] = node
        elif shape == "majorities-ring":
            grudge = partitions.majorities_ring(nodes, self.rng)
        elif shape == "bridge":
            order = list(nodes)
            if value.get("shuffle", False):
                self.rng.shuffle(order)
            bridge_node, grudge = partitions.bridge(order)
            info["bridge"] = bridge_node
        elif shape == "min-edge-cut":
            grudge = partitions.min_edge_cut(nodes, self._edges(), self.rng)
        elif shape == "articulation":
            try:
                point, grudge = partitions.articulation_cut(nodes, self._edges(), self.rng)
                info["node"] = point
            except ValueError as e:  # no single node holds this mesh together
                grudge = partitions.min_edge_cut(nodes, self._edges(), self.rng)
                info.update(asked=shape, shape="min-edge-cut", why=str(e))
        elif shape == "explicit":
            if "groups" in value:
                grudge = partitions.from_components(value["groups"], one_way)
            else:
                grudge = frozenset((str(a), str(b)) for a, b in value["cut"])
        else:
            raise NemesisError(f"unknown partition shape {shape!r}")
        if self.topology is not None and shape != "explicit" \
                and not partitions.severs(nodes, self.topology, grudge):
            # on a sparse mesh a shape drawn for a full one may cut only pairs that never
            # talk: not a partition. Take the cheapest real one instead, and say so.
            info.update(asked=shape, shape="min-edge-cut", one_way=False,
                        why=f"{shape} severs no path of the topology")
            info.pop("bridge", None)
            info.pop("node", None)
            grudge = partitions.min_edge_cut(nodes, self.topology, self.rng)
        return grudge, info

    def _edges(self) -> list[Flow]:
        if self.topology is not None:
            return self.topology
        return [(a, b) for i, a in enumerate(self.nodes) for b in self.nodes[i + 1:]]

    async def _start_partition(self, value: dict[str, Any]) -> dict[str, Any]:
        grudge, info = await self._grudge(value)
        replaced = None
        if grudge == self.partition:  # the one in force again: kept, no heal in between
            info = {**info, "kept": True}
        elif self.partition is not None:  # one partition at a time: replace, and say so
            replaced = _enc(await self._heal(Kind.CUT))
        if not info.get("kept"):
            self.partition = grudge
            await self._apply(Kind.CUT, grudge)
        comps = (partitions.components(self.nodes, grudge) if self.topology is None else
                 partitions.topology_components(self.nodes, self.topology, grudge))
        out = {**value, **info, "components": comps,
               "cut": partitions.encode(grudge)}
        if replaced is not None:
            out["replaced"] = replaced
        return out

    async def hold_cut(self, flows: Iterable[Flow]) -> list[Flow]:
        """Cut ``flows`` on top of the partition in force, which stays as it is (a cluster
        op's brief hold: Garlic Farm's ``remove-server``, harness/gf_remove.py); the flows it
        cut, for `release_cut`."""
        async with self._lock:
            return await self._apply(Kind.CUT, frozenset(flows) - (self.partition or frozenset()))

    async def release_cut(self, flows: Iterable[Flow]) -> list[Flow]:
        """Give back the flows a `hold_cut` cut, save those the partition in force cuts."""
        async with self._lock:
            back = [f for f in flows if f not in (self.partition or frozenset())]
            return await self._heal(Kind.CUT, back) if back else []

    # ---- nodes -------------------------------------------------------------------------

    def _control(self) -> NodeControl:
        if self.control is None:
            raise NemesisError("this nemesis was given no NodeControl: node faults unavailable")
        return self.control

    async def _resolve(self, spec: Any, exclude: set[str]) -> list[str]:
        candidates = [n for n in self.nodes if n not in exclude and n not in self.unstarted]
        if spec == "random":
            if not candidates:
                raise NemesisError("no node left to choose from")
            return [self.rng.choice(candidates)]
        if spec == "leader":
            leader = await self._control().leader()
            if leader is None:
                raise NemesisError("no leader known: nothing done")
            return [leader]
        if spec == "follower":  # any node but the leader (random among them)
            leader = await self._control().leader()
            rest = [n for n in candidates if n != leader]
            if not rest:
                raise NemesisError("no follower left to choose from")
            return [self.rng.choice(rest)]
        if spec == "all":
            return candidates
        names = [spec] if isinstance(spec, str) else list(spec)
        unknown = [n for n in names if n not in self.nodes]
        if unknown:
            raise NemesisError(f"unknown node(s) {unknown}; nodes are {self.nodes}")
        return names

    async def _each(self, fn: Callable[[str], Awaitable[None]], names: list[str]) -> None:
        await asyncio.gather(*(fn(n) for n in names))

    async def _kill(self, value: dict[str, Any]) -> dict[str, Any]:
        names = await self._resolve(value.get("node", "random"), self.killed | self.gone)
        await self._each(self._control().kill, names)
        if value.get("for_good"):
            self.gone.update(names)
            self.killed.difference_update(names)
        else:
            self.killed.update(names)
        self.paused.difference_update(names)  # a killed process is no longer stopped
        return {**value, "nodes": names}

    async def _restart(self, value: dict[str, Any]) -> dict[str, Any]:
        spec = value.get("node", value.get("nodes"))
        names = sorted(self.killed) if spec is None else await self._resolve(spec, set())
        if gone := sorted(self.gone.intersection(names)):
            raise NemesisError(f"{gone} were killed for good: nothing restarts them")
        await self._each(self._control().restart, names)
        self.killed.difference_update(names)
        return {**value, "nodes": names}

    async def _pause(self, value: dict[str, Any]) -> dict[str, Any]:
        names = await self._resolve(value.get("node", "random"),
                                    self.paused | self.killed | self.gone)
        await self._each(self._control().pause, names)
        self.paused.update(names)
        return {**value, "nodes": names}

    async def _resume(self, value: dict[str, Any]) -> dict[str, Any]:
        spec = value.get("node", value.get("nodes"))
        names = sorted(self.paused) if spec is None else await self._resolve(spec, set())
        await self._each(self._control().resume, names)
        self.paused.difference_update(names)
        return {**value, "nodes": names}

    async def _clock_skew(self, value: dict[str, Any]) -> dict[str, Any]:
        names = await self._resolve(value.get("node", "random"), set())
        offset = float(value["offset_s"])
        control = self._control()
        await self._each(lambda n: control.set_clock_offset(n, offset), names)
        for n in names:
            self.skewed[n] = offset
        return {**value, "nodes": names, "offset_s": offset}

    async def _clock_reset(self, value: dict[str, Any]) -> dict[str, Any]:
        spec = value.get("node", value.get("nodes"))
        names = sorted(self.skewed.keys() | self.rated.keys()) if spec is None \
            else await self._resolve(spec, set())
        control = self._control()
        # a node gone for good has no process to ask; its clock rate is a file, reset too
        await self._each(lambda n: control.set_clock_offset(n, 0.0),
                         [n for n in names if (spec is not None or n in self.skewed)
                          and n not in self.gone])
        await self._each(lambda n: control.set_clock_rate(n, 1.0),
                         [n for n in names if n in self.rated])
        for n in names:
            self.skewed.pop(n, None)
            self.rated.pop(n, None)
        return {**value, "nodes": names}

    async def _clock_rate(self, value: dict[str, Any]) -> dict[str, Any]:
        names = await self._resolve(value.get("node", "random"), self.gone)
        rate = float(value["rate"])
        if not rate > 0:
            raise NemesisError(f"clock-rate: the rate must be positive, got {rate}")
        control = self._control()
        await self._each(lambda n: control.set_clock_rate(n, rate), names)
        for n in names:
            if rate == 1.0:
                self.rated.pop(n, None)
            else:
                self.rated[n] = rate
        return {**value, "nodes": names, "rate": rate}

    # ---- hostile messages ----------------------------------------------------------------

    def _sender(self) -> HostileSender:
        if self.hostile is None:
            raise NemesisError("this protocol declares no hostile messages (ProtocolDef.hostile; "
                               "see faults/hostile.py)")
        return self.hostile

    async def _start_hostile(self, value: dict[str, Any]) -> dict[str, Any]:
        sender = self._sender()
        interval = float(value.get("interval_s", 0.5))
        nodes = value.get("nodes")
        if isinstance(nodes, str):  # a pick ("leader", "follower", "random", "all") or a name
            nodes = await self._resolve(nodes, self.gone)
            value = {**value, "nodes": nodes}
        chosen = None if nodes is None else [str(n) for n in nodes]
        if value.get("skip"):  # the generic sender filters kinds, a driver only if it says so
            if not (isinstance(sender, HostileSender) or getattr(sender, "takes_skip", False)):
                raise NemesisError("start-hostile 'skip' needs the generic hostile sender; "
                                   "this protocol's driver sends every kind")
            sender.start(interval, chosen, [str(k) for k in value["skip"]])
        else:
            sender.start(interval, chosen)
        return {**value, "interval_s": interval}

    async def _stop_hostile(self, value: dict[str, Any]) -> dict[str, Any]:
        sender = self._sender()
        await sender.stop()
        return {**value, "sent": sender.counts()}

    # ---- everything --------------------------------------------------------------------

    async def heal_all(self) -> dict[str, Any]:
        """Undo every active fault; each step runs even if an earlier one failed.

        Waits for an op in progress to finish first.

        Returns what was undone (and ``errors`` if any step failed): suitable as the value of
        a final ``heal`` op in the history.
        """
        async with self._lock:
            return await self._heal_all()

    async def _heal_all(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        errors: list[str] = []
        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("links", lambda: self._heal(None)),
            ("resumed", lambda: self._resume({})),
            ("restarted", lambda: self._restart({})),
            ("clocks-reset", lambda: self._clock_reset({})),
        ]
        if self.hostile is not None and self.hostile.running:
            try:
                out["hostile-stopped"] = (await self._stop_hostile({}))["sent"]
            except Exception as e:
                errors.append(f"hostile: {type(e).__name__}: {e}")
        for name, step in steps:
            if name != "links" and self.control is None:
                continue
            try:
                result = await step()
                out[name] = _enc(result) if name == "links" else result["nodes"]
            except Exception as e:
                errors.append(f"{name}: {type(e).__name__}: {e}")
        self.partition = None
        if self.gone:
            out["gone"] = sorted(self.gone)
        if errors:
            out["errors"] = errors
        return out
