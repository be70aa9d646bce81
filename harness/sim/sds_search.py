"""SDS as a search target: what each schedule step does to a five-participant channel
(`SdsSim`), and how a run is judged (`checkers.ordering`, as a real run is, after the last
heal and a settle of `SETTLE_S`, longer while repair still delivers (`settle`): its
``convergence``, ``same-set`` and ``buffers-drain`` leaves are the liveness check, a message
some node never gets or a buffer that never drains).

Kinds (node ``b`` of ``n0..n4``): ``partition`` (shape ``a``: even, isolate node ``b``; odd,
split ``n0 n1 | n2 n3 n4``), ``heal``, ``crash``, ``restart``, ``pause``/``resume``, ``loss``
and ``dup`` (rate ``a``/10), ``delay`` (latency 1 + 20·``a`` ms, jitter 5·``b`` ms),
``send`` (a client sends one message at node ``b``) and ``burst`` (``10·(a+1)`` sends at node
``b`` in one millisecond: the Lamport clock runs ahead of the wall clock), ``round`` (every
running node sends once, all in one millisecond: equal Lamport times, which is what a
tie-break or an arrival-order log needs to show) and ``thread`` (a ``burst`` at node ``b``,
then 5 ms later every other running node answers once: answers stamped from a clock that
missed the burst's Lamport times show a missing Lamport update). A bug mode is switched on in
every node.
When asked, ``hostile`` (``--hostile``: one burst of `nodes.sds.hostile`'s datagrams at
node ``b`` from an address outside the channel; ``a`` odd: only those that decode) and
``skew`` (``--skew``: `Simulation.SKEWS`; the calendar clock seeds the Lamport clock), and
``gone`` (``--gone``, and always with ``no-repair``: node ``b`` killed for good, which the last
heal does not restart; the checker judges it as a real run's ``gone.json`` node; ``a % 5``
from 1 to 4: it dies broadcasting one last send, which reached only the next ``a`` peers, so
the rest can get it by repair alone: `_Run.last_words`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from checkers import ordering
from harness.sim.play import play
from harness.sim.sds import SdsSim
from harness.sim.search import Outcome, Step, Target, witness_of
from nodes.sds import hostile
from nodes.sds.core import SdsOptions

NAMES = [f"n{i}" for i in range(5)]
KINDS = ("partition", "heal", "crash", "restart", "pause", "resume", "loss", "dup", "delay",
         "send", "burst", "round", "thread")
BUGS = ("empty-history", "acks-ignored", "bloom-ignored", "deliver-without-deps",
        "resend-new-lamport", "order-by-arrival", "ties-descending-id", "no-resend",
        "no-lamport-update", "no-repair")
#: a message a live node misses is re-armed by its sender from the peers' Bloom filters, also
#: after a restart (the sender's durable log), so repair is the only route only when the
#: sender never comes back: ``no-repair`` is searched with ``gone``, whose last words (a send
#: cut short by the sender's death) leave a message some live nodes hold and others lack
#: (docs/sim.md)
NEEDS = {"no-repair": ("gone",)}
#: ``thread``: the answers' delay after the burst (ms)
ANSWER_MS = 5
#: the SDS tests' compressed timings (resends in 0.5 s, syncs every 0.5 s, repair 0.2-2 s; a
#: peer silent for 5 s no longer counts towards the bloom acknowledgement threshold)
OPTS = SdsOptions(resend_unacked_ms=500, resend_possibly_ms=1500, sync_interval_ms=500,
                  t_min_ms=200, t_max_ms=2000, peer_bloom_stale_ms=5000)
SETTLE_S = 20.0  # after the last heal: many resend, sync and repair rounds
#: the settle goes on past ``SETTLE_S`` while some node still delivers within a window this
#: long (a repair or relay hop: request backoff up to ``t_max_ms``, answer backoff up to
#: ``t_max_ms``, relay grace ``resend_possibly_ms``), at most ``SETTLE_MORE_S`` more: SDS-R
#: walks a chain of missed messages from a gone sender one hop at a time (each held message
#: names two predecessors, and only a delivered one is served), so its length, not a bug, sets
#: how long repair takes; the liveness check judges progress stopping, not a speed
PROGRESS_WINDOW_S = (2 * OPTS.t_max_ms + OPTS.resend_possibly_ms) / 1000
SETTLE_MORE_S = 3 * SETTLE_S


#: the hostile peer's address: not a participant, as the real fault's own socket is not
ATTACKER = "mallory"


@dataclass(frozen=True)
class _Named:
    """A `nodes.sds.hostile.Target`: a participant by its sender id."""

    node: str


def hostile_burst(sim: SdsSim, n: str, a: int) -> int:
    """One burst of SDS's hostile datagrams at participant ``n`` from the attacker's address
    (``a % 2``: 0 every kind, 1 only the ones that decode, so the core's checks, not the
    codec's, are what is hit); how many reached the network. The datagrams come from
    `nodes.sds.hostile` (the real ``hostile`` fault's), drawn from a random seeded by the
    run's seed and the time, so a replay sends the same bytes."""
    rng = random.Random(f"{sim.seed}:hostile:{sim.now!r}:{n}")
    targets = [_Named(n)] + [_Named(m) for m in NAMES if m != n]
    sent = 0
    for node, kind, data in hostile.messages(rng, targets):
        if node != n or (a % 2 == 1 and kind in ("truncated", "garbage")):
            continue
        sim.trace.append((sim.now, "hostile", n, kind))
        sent += sim.inject(ATTACKER, n, ATTACKER, data)
    return sent


class _Run:
    def __init__(self, seed: int, bugs: tuple[str, ...]) -> None:
        self.sim = SdsSim(NAMES, OPTS, seed=seed, bugs={n: bugs for n in NAMES})
        self.history: list[dict[str, Any]] = []

    def send(self, n: str) -> None:
        """A client send at ``n``, recorded as the history op `checkers.ordering` reads."""
        payload = f"{n}:{len(self.history)}"
        op: dict[str, Any] = {"index": len(self.history), "f": "send", "node": n,
                              "time": self.sim.now, "type": "ok"}
        try:
            op["value"] = {"v": payload, "id": self.sim.send(n, payload)}
        except ValueError as e:  # the core refused it: not acknowledged, so not judged
            op.update(type="fail", value={"v": payload}, error=str(e))
        self.history.append(op)

    def _round(self, skip: str | None = None) -> None:
        """Every running node but ``skip`` sends once, all in this millisecond."""
        for m in NAMES:
            if m != skip and self.sim.running(m):
                self.send(m)

    def last_words(self, n: str, reach: int) -> None:
        """Node ``n`` dies for good in the middle of broadcasting a send: its datagrams went
        out to the ``reach`` peers after it (in ``NAMES`` order, round from ``n``) and not to
        the rest, whose only route to the message is then repair by those that got it."""
        sim = self.sim
        i = NAMES.index(n)
        peers = NAMES[i + 1:] + NAMES[:i]
        missed = {(n, m) for m in peers[reach:]} - sim.net.cut
        sim.trace.append((sim.now, "last-words", n, peers[:reach]))
        sim.net.cut |= missed
        try:
            self.send(n)
        finally:
            sim.net.cut -= missed
        sim.kill_for_good(n)

    def step(self, s: Step) -> None:
        kind, dt, a, b = s
        sim = self.sim
        sim.run_for(dt / 1000)
        n = NAMES[b % len(NAMES)]
        if kind == "partition":
            if a % 2 == 0:
                sim.partition([n], [j for j in NAMES if j != n])
            else:
                sim.partition(NAMES[:2], NAMES[2:])
        elif kind in ("send", "burst", "thread") and sim.running(n):
            for _ in range(1 if kind == "send" else 10 * (a + 1)):
                self.send(n)
            if kind == "thread":
                sim.run_for(ANSWER_MS / 1000)
                self._round(skip=n)
        elif kind == "round":
            self._round()
        elif kind == "hostile":
            hostile_burst(sim, n, a)
        elif kind == "gone" and a % len(NAMES) and sim.running(n):
            self.last_words(n, a % len(NAMES))
        else:
            sim.fault_step(kind, n, a, b, delay=(0.001, 0.02, 0.005))


def settle(sim: SdsSim) -> None:
    """``SETTLE_S`` after the last heal, then longer while repair still delivers (see
    `PROGRESS_WINDOW_S`): a message that stops moving is judged, one still moving is not."""
    sim.run_for(SETTLE_S)
    end = sim.now + SETTLE_MORE_S
    while sim.now < end and _delivered_since(sim, sim.now - PROGRESS_WINDOW_S):
        sim.run_for(min(PROGRESS_WINDOW_S, end - sim.now))


def _delivered_since(sim: SdsSim, t: float) -> bool:
    """Some node delivered a message after ``t`` (the journal is in time order)."""
    for e in reversed(sim.events):
        if e.t <= t:
            return False
        if e.type == "deliver":
            return True
    return False


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
    """Run ``schedule`` on a fresh five-node channel, heal, settle, and judge it."""
    r = _Run(seed, bugs)
    sim = r.sim
    stuck = play(sim, schedule, r.step, ids=NAMES, latency=0.001, settle=lambda: settle(sim))
    witness: list[dict[str, Any]] = [] if stuck is None else [stuck]
    if not witness:
        witness += witness_of(ordering.check({}, r.history, sim.observations()))
    tail = json.dumps([r.history, witness], sort_keys=True, default=str).encode()
    return Outcome(not witness, witness, lambda: sim.trace_bytes() + tail, r.history, sim.now)


TARGET = Target("sds", KINDS, BUGS, run, optional=("hostile", "skew", "gone"),
                needs=NEEDS)
