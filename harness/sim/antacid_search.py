"""ANTACID as a search target: what each schedule step does to a primary and three replicas
(`AntacidSim`), and how a run is judged (`checkers.csn_order` plus liveness after heal).

Kinds (server ``b`` counted over ``p, r1, r2, r3``): ``partition`` (shape ``a``: even,
isolate server ``b``; odd, split ``p r1 | r2 r3``), ``heal``, ``crash``, ``restart``,
``loss`` and ``dup`` (rate ``a``/10), ``delay`` (latency 1 + 50·``a`` ms, jitter 10·``b``
ms: above the 0.3 s call timeout a call fails while its answer is still coming, which is how
a retried submission reaches the primary twice), ``write`` (a two-document group submitted
at server ``b``, keys chosen by ``a``) and ``read`` (a ReadZone at server ``b``). A ``delay``
or ``dup`` step that leaves the links slower than the call timeout or duplicating, with no
write open, also submits one at a server with two upstreams (``r2`` or ``r3`` by ``b``): the
shape a forgotten SSN commits twice (its propagate times out or arrives twice and goes on by
the other upstream while the original commits), else a rare draw (127-382 runs per seed for
``duplicates-undetected``; 8-86 with it). A bug mode
is switched on in every server (the bug only bites where its code runs). Clock skew only when
asked (``--skew``): the core reads no wall clock for an ordering decision.

Zones (``harness sim run antacid --zones N``, `target`; default 1): zone k's primary is
server k (`harness.sim.antacid.zone_topologies`); a ``write`` or ``read`` goes to zone ``a``
mod N, the liveness check submits once in every zone, and each zone is judged apart. One
zone draws and runs exactly what it always did.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

from checkers import csn_order
from harness.sim.antacid import AntacidSim
from harness.sim.play import play
from harness.sim.search import Outcome, Step, Target, witness_of
from nodes.antacid.core import BUGS

KINDS = ("partition", "heal", "crash", "restart", "loss", "dup", "delay", "write", "read")
CALL_TIMEOUT_S = 0.3
SETTLE_S = 20.0  # after the last heal: the reorder timeout (3 s) and pulls (0.5 s) many times
QUIET_LOOK_S = 0.5  # a settle looks this often whether it can end early (`_Run.settle`)


class _Run:
    def __init__(self, seed: int, bugs: tuple[str, ...], zones: int = 1) -> None:
        self.sim = AntacidSim(seed=seed, call_timeout=CALL_TIMEOUT_S,
                              bugs={n: bugs for n in ("p", "r1", "r2", "r3")}, zones=zones)
        self.names = list(self.sim.topo.servers)
        self.zones = list(self.sim.topos)
        self.writes = 0
        self.ops: list[dict[str, Any]] = []  # the writes' ops (`_write`)

    def step(self, s: Step) -> None:
        kind, dt, a, b = s
        sim = self.sim
        sim.run_for(dt / 1000)
        n = self.names[b % len(self.names)]
        if kind == "partition":
            if a % 2 == 0:
                sim.partition([n], [j for j in self.names if j != n])
            else:
                sim.partition(self.names[:2], self.names[2:])
        elif kind == "restart":  # only a server that is down (a running one is left be)
            if not sim.nodes[n].up:
                sim.boot(n)
        elif kind == "write":
            self._write(n, a)
        elif kind == "read" and sim.running(n):
            sim.read(n, self.zones[a % len(self.zones)] if sim.zoned else None)
        elif kind == "hostile":
            sim.hostile_burst(n, a)
        else:
            sim.fault_step(kind, n, a, b, delay=(0.001, 0.05, 0.01))
            if kind in ("delay", "dup") and self._slow_or_dup() \
                    and not any(o["type"] == "invoke" for o in self.ops):
                self._write(self._two_upstreams(a, b), a)

    def _write(self, n: str, a: int) -> None:
        """A two-document group submitted at ``n`` (if it runs), keys chosen by ``a``."""
        sim = self.sim
        if not sim.running(n):
            return
        self.writes += 1
        w = self.writes
        z = self.zones[a % len(self.zones)]
        self.ops.append(sim.submit(n, (f"{z}.k{a % 3}", f"v{w}", "write"),
                                   (f"{z}.g{(a + 1) % 3}", f"w{w}", "write")))

    def _trip(self) -> float:
        """The longest round trip the links can take now (latency and jitter both ways)."""
        net = self.sim.net
        return 2 * (net.latency + net.jitter)

    def _slow_or_dup(self) -> bool:
        """The links are slower than a call's round trip can be, or duplicate messages."""
        return self._trip() > CALL_TIMEOUT_S or self.sim.net.dup > 0

    def _two_upstreams(self, a: int, b: int) -> str:
        """A server with two upstreams in zone ``a``'s DAG, picked by ``b``."""
        up = self.sim.topos[self.zones[a % len(self.zones)]].upstream
        two = [j for j in self.names if len(up.get(j, ())) >= 2]
        return two[b % len(two)]

    def play_out(self) -> None:
        """After the last step: when the links are slower than a call's timeout (a round trip
        of latency and jitter past `CALL_TIMEOUT_S`), the calls the last steps made play out
        under them, long enough to time out and be retried while their answers still come
        (the last heal would otherwise undo the delay before any call failed, and a retry
        that reaches the primary after the original committed is what a forgotten SSN
        commits twice)."""
        trip = self._trip()
        if trip > CALL_TIMEOUT_S:
            self.sim.run_for(CALL_TIMEOUT_S + trip)

    def settle(self) -> None:
        """Run up to `SETTLE_S`, ending early once the servers have been quiescent
        (`AntacidSim.quiescent`) at two looks `QUIET_LOOK_S` apart: what remains would be
        empty pulls, and the two 20 s settles were most of a run's CPU."""
        sim = self.sim
        end, quiet = sim.now + SETTLE_S, 0
        while sim.now < end and quiet < 2:
            sim.run_until(min(end, sim.now + QUIET_LOOK_S))
            quiet = quiet + 1 if sim.quiescent() else 0

    def progress(self) -> dict[str, Any] | None:
        """Liveness: after the last heal, a submission at the last server commits in every
        zone. None: they did."""
        sim = self.sim
        self.settle()
        ops = [sim.submit(self.names[-1], (f"{z}.final", "final", "write")) for z in self.zones]
        self.settle()
        op = next((o for o in ops if o["type"] != "ok"), ops[0])
        if op["type"] != "ok":
            return {"kind": "no-progress-after-heal", "message":
                    f"a submission at {self.names[-1]} had no commit {SETTLE_S:g} s after the "
                    f"last heal (state {op['type']}, value {op['value']})",
                    "witness": {"t": sim.now}}
        return None


def run(schedule: list[Step], seed: int, bugs: tuple[str, ...], zones: int = 1) -> Outcome:
    """Run ``schedule`` on a fresh primary and three replicas (``zones`` zones) and judge it."""
    r = _Run(seed, bugs, zones)
    sim = r.sim
    stuck = play(sim, schedule, r.step, ids=r.names, latency=0.001, settle=r.progress,
                 finish=r.play_out)
    history = sim.finish()
    res = csn_order.check(sim.test(), history, sim.observations())
    witness: list[dict[str, Any]] = witness_of(res)
    if stuck:
        witness.append(stuck)
    tail = json.dumps(history, sort_keys=True, default=str).encode()
    return Outcome(not witness, witness, lambda: sim.trace_bytes() + tail, history, sim.now)


TARGET = Target("antacid", KINDS, BUGS, run, optional=("hostile", "skew"))


def target(zones: int = 1) -> Target:
    """The search target over ``zones`` zones (1: `TARGET` itself)."""
    if zones < 1:
        raise ValueError(f"--zones must be at least 1, got {zones}")
    return TARGET if zones == 1 else replace(TARGET, run=partial(run, zones=zones))
