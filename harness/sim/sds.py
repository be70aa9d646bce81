"""SDS on the simulator: how an `SdsCore` is rebuilt from its durable log and held messages,
a client's send, and the views the SDS tests read (each node's ordered log). Time is in
seconds, as for every core; ``run_ms`` is the SDS tests' milliseconds."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from harness.sim.driver import Simulation
from nodes.common.effects import Persist
from nodes.sds.core import HELD, LOG, SdsCommand, SdsCore, SdsOptions
from nodes.sds.wire import Message, decode

#: the calendar time every simulated node believes at virtual time 0 (epoch ms)
EPOCH_MS = 1_700_000_000_000


def restored(durable: Iterable[Persist]) -> tuple[list[Message], list[Message]]:
    """The log entries and held messages a restart reads back, in the order written."""
    log, held = [], []
    for p in durable:
        (log if p.what == LOG else held if p.what == HELD else []).append(decode(p.record))
    return log, held


class SdsSim(Simulation):
    """Participants ``names`` of one channel; datagrams are the wire bytes themselves."""

    def __init__(self, names: list[str], options: SdsOptions | None = None, seed: int = 0,
                 loss: float = 0.0, dup: float = 0.0, latency_ms: int = 1,
                 jitter_ms: int = 0, bugs: Mapping[str, Iterable[str]] | None = None) -> None:
        opts = options or SdsOptions()
        bugs = dict(bugs or {})

        def make(n: str, durable: list[Persist], _boot: int, rng: random.Random) -> SdsCore:
            return SdsCore(n, names, opts, bugs.get(n, ()), rng, EPOCH_MS,
                           wall=lambda now, n=n: EPOCH_MS / 1000 + self.wall(n, now), durable=restored(durable))

        super().__init__(names, make, seed=seed, latency=latency_ms / 1000,
                         jitter=jitter_ms / 1000, loss=loss, dup=dup)
        self.boot_all()
        self.run_for(0)

    @property
    def cores(self) -> dict[str, SdsCore]:
        return {i: n.core for i, n in self.nodes.items() if isinstance(n.core, SdsCore)}

    def send(self, node: str, content: str | bytes) -> str:
        """A client sends ``content`` through ``node``; returns the message id."""
        data = content.encode() if isinstance(content, str) else content
        answer = self.replies[self.command(node, SdsCommand("send", data))]
        if not answer["ok"]:
            raise ValueError(answer["error"])
        return str(answer["id"])

    def run_ms(self, ms: int) -> None:
        self.run_for(ms / 1000)

    @property
    def delivered(self) -> dict[str, list[str]]:
        """Each node's log entries in the order they entered (journal ``send``/``deliver``)."""
        out: dict[str, list[str]] = {n: [] for n in self.ids}
        for e in self.events:
            if e.type in ("send", "deliver"):
                out[e.node].append(e.fields["id"])
        return out

    def observations(self) -> dict[str, Any]:
        """The channel as `checkers.ordering` reads a run: each node's journal and its
        ``/admin/state`` protocol part (None for a node that is down), and ``gone`` for a node
        killed for good, as a real run's ``gone.json`` marks it (`checkers.observations`)."""
        nodes: dict[str, Any] = {}
        for n in self.ids:
            evs = [{"seq": k, "t": e.t, "type": e.type, **e.fields}
                   for k, e in enumerate(e for e in self.events if e.node == n)]
            core = self.cores.get(n) if self.nodes[n].up else None
            nodes[n] = {"events": evs, "missing": [],
                        # the node's own clock: ages in its state are differences of
                        # its own readings (a skewed node's, read on true time, looked
                        # older or younger than they were)
                        "state": core.snapshot(int(self.nodes[n].local(self.now) * 1000))
                        if core else None,
                        **({"gone": True} if n in self.gone else {})}
        return {"nodes": nodes, "run_dir": "sim"}

    def logs(self) -> dict[str, list[str]]:
        return {n: [m.message_id for m in c.ordered_log()] for n, c in self.cores.items()}
