"""Simulator speed: simulated seconds per wall second, per protocol, under steady load.

Garlic Farm: 5 servers, a client write to the leader every ``--interval`` simulated seconds
(all through the codec, every entry replicated, committed and applied); the target is
>= 1,000x real time. SWIM: 5 members probing (1 s period). SDS: 5 participants, one send
every ``--interval`` round robin. DRiP: the search target's 4-node mesh (ring and chord), one
client update every ``--interval`` round robin over 8 keys (each a full 2PC vote over HTTP in
JSON). ANTACID: the search target's primary and 3 replicas, one two-document group submitted
every ``--interval`` round robin. DRiP and ANTACID are set up as `harness sim run` sets them
up (`drip_search._Run`, `antacid_search._Run`). Each figure is the median of ``--repeat``
runs.

    .venv/bin/python -m bench.bench_sim --seconds 60 --interval 0.02

``--bug-table``: instead, for every bug mode of every search target (``--only`` narrows),
search ``--seeds`` seeds from a random start and print the median wall time to the first
failure (and the search process's CPU seconds to it: on a loaded machine close to a quiet
machine's wall time), the median shrunk schedule size and the 1-minute load average (``--budget`` wall seconds a seed to find,
``--shrink`` to shrink; a seed that finds nothing within its budget counts as not found).

    .venv/bin/python -m bench.bench_sim --bug-table --seeds 5 --budget 60 --shrink 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.sim.driver import Simulation


@dataclass(frozen=True)
class Took:
    """Wall and CPU seconds of one run: on a shared machine the wall figure moves with the
    other processes, the CPU figure much less, so both are printed."""

    wall: float
    cpu: float


def _loaded(sim: Simulation, seconds: float, interval: float, act: Callable[[int], None]) -> Took:
    """Run ``seconds`` of simulated time, calling ``act(k)`` every ``interval``."""
    start, cpu = time.perf_counter(), time.process_time()
    k = 0
    end = sim.now + seconds
    while sim.now < end:
        act(k)
        k += 1
        sim.run_for(interval)
    return Took(time.perf_counter() - start, time.process_time() - cpu)


def garlicfarm(seconds: float, interval: float, seed: int) -> tuple[Took, int]:
    from harness.sim.garlicfarm import GfSim, app_entry
    from nodes.garlicfarm.codec import MsgType, Request

    sim = GfSim([1, 2, 3, 4, 5], seed=seed)
    lead = sim.wait_leader()

    def write(k: int) -> None:
        sim.client_request(lead, Request(MsgType.CLIENT_REQUEST, 0, 0, 0,
                                         entries=(app_entry(k),)))

    wall = _loaded(sim, seconds, interval, write)
    applied = len(sim.applied(lead))
    if applied < 0.9 * seconds / interval:
        raise SystemExit(f"garlicfarm: only {applied} writes applied: the load did not run")
    return wall, applied


def swim(seconds: float, interval: float, seed: int) -> tuple[Took, int]:
    from harness.sim.swim import SwimSim
    from nodes.swim.core import Options

    sim = SwimSim(5, Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4), seed=seed)
    wall = _loaded(sim, seconds, 1.0, lambda k: None)
    return wall, sim.sent


def sds(seconds: float, interval: float, seed: int) -> tuple[Took, int]:
    from harness.sim.sds import SdsSim

    names = [f"p{i}" for i in range(1, 6)]
    sim = SdsSim(names, seed=seed)
    wall = _loaded(sim, seconds, interval, lambda k: sim.send(names[k % 5], f"m{k}"))
    return wall, len(sim.delivered[names[0]])


def drip(seconds: float, interval: float, seed: int) -> tuple[Took, int]:
    from harness.sim.drip_search import NODES, _Run

    r = _Run(seed, ())
    uids: list[str] = []

    def update(k: int) -> None:
        uids.append(r.update(NODES[k % len(NODES)], f"k{k % 8}"))

    wall = _loaded(r.sim, seconds, interval, update)
    r.sim.run_for(5.0)  # let the last votes decide (not timed)
    committed = sum(r.sim.committed(u) for u in uids)
    if committed < 0.9 * len(uids):
        raise SystemExit(f"drip: only {committed} of {len(uids)} updates committed: "
                         "the load did not run")
    return wall, committed


def antacid(seconds: float, interval: float, seed: int) -> tuple[Took, int]:
    from harness.sim.antacid_search import _Run

    r = _Run(seed, ())
    ops: list[dict[str, object]] = []

    def submit(k: int) -> None:
        n = r.names[k % len(r.names)]
        ops.append(r.sim.submit(n, (f"{r.zones[0]}.k{k % 3}", f"v{k}", "write"),
                                (f"{r.zones[0]}.g{k % 5}", f"w{k}", "write")))

    wall = _loaded(r.sim, seconds, interval, submit)
    r.sim.run_for(5.0)  # let the last submissions commit (not timed)
    ok = sum(op["type"] == "ok" for op in ops)
    if ok < 0.9 * len(ops):
        raise SystemExit(f"antacid: only {ok} of {len(ops)} submissions committed: "
                         "the load did not run")
    return wall, ok


BENCHES = {"garlicfarm": garlicfarm, "swim": swim, "sds": sds, "drip": drip,
           "antacid": antacid}
#: nodes each bench runs (DRiP and ANTACID: the search targets' 4)
NODES = {"garlicfarm": 5, "swim": 5, "sds": 5, "drip": 4, "antacid": 4}


def bug_table(only: list[str] | None, seeds: int, budget_s: float, shrink_s: float,
              bugs: list[str] | None = None, per_seed: bool = False,
              cpu_budget: bool = False) -> None:
    """One row per (protocol, bug mode): found/seeds, median seconds to the first failure
    (over the seeds that found it), median shrunk size, the witness kinds seen; with
    ``per_seed``, first a line per seed: runs to the first failure (the load-independent
    measure), its wall seconds, the shrunk size."""
    from harness.sim.cli import targets
    from harness.sim.search import Tally, search

    print(f"{'protocol':<11} {'bug mode':<26} found  median first-failure s  CPU s  "
          f"shrunk steps  witness kinds  load")
    for name, t in sorted(targets().items()):
        if only and name not in only:
            continue
        for bug in t.bugs:
            if bugs and bug not in bugs:
                continue
            times, cpus, sizes, kinds = [], [], [], set()
            for seed in range(1, seeds + 1):
                tally = Tally()
                f = search(t, seed, (bug,), budget_s, shrink_s=shrink_s, tally=tally,
                           clock=time.process_time if cpu_budget else time.monotonic)
                if per_seed:
                    print(f"  {name} {bug} seed {seed}: " + (
                        f"not found in {budget_s:g} {'CPU ' if cpu_budget else ''}s "
                        f"({tally.runs} runs)" if f is None else
                        f"{f.first_failure_runs} runs, {f.first_failure_s:.1f} s "
                        f"({f.first_failure_cpu_s:.1f} CPU s), shrunk to {len(f.schedule)} "
                        f"steps") + f", load {os.getloadavg()[0]:.1f}", flush=True)
                if f is not None:
                    times.append(f.first_failure_s)
                    cpus.append(f.first_failure_cpu_s)
                    sizes.append(len(f.schedule))
                    kinds |= {w.get("kind", "?") for w in f.outcome.witness}
            med = f"{statistics.median(times):.1f}" if times else "-"
            cpu = f"{statistics.median(cpus):.1f}" if cpus else "-"
            size = f"{statistics.median(sizes):g}" if sizes else "-"
            print(f"{name:<11} {bug:<26} {len(times)}/{seeds}  {med:>22}  {cpu:>5}  "
                  f"{size:>12}  {','.join(sorted(kinds)) or '-'}  {os.getloadavg()[0]:.1f}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per run")
    ap.add_argument("--interval", type=float, default=0.02, help="seconds between client ops")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", choices=sorted(BENCHES),
                    help="one protocol (repeatable)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--bug-table", action="store_true",
                    help="time the search to find each bug mode instead (see above)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--shrink", type=float, default=20.0)
    ap.add_argument("--bug", action="append", help="only this bug mode (repeatable)")
    ap.add_argument("--per-seed", action="store_true",
                    help="bug table: also each seed's runs and seconds to the first failure")
    ap.add_argument("--cpu-budget", action="store_true",
                    help="bug table: --budget and --shrink in CPU seconds of the search "
                         "process (a quiet machine's wall seconds, on a loaded one)")
    a = ap.parse_args()
    if a.bug_table:
        bug_table(a.only, a.seeds, a.budget, a.shrink, a.bug, a.per_seed, a.cpu_budget)
        return
    out = {}
    for name in a.only or BENCHES:
        walls, cpus, work = [], [], 0
        for r in range(a.repeat):
            took, work = BENCHES[name](a.seconds, a.interval, r + 1)
            walls.append(took.wall)
            cpus.append(took.cpu)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        out[name] = {"sim_s": a.seconds, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                     "speedup": round(a.seconds / wall, 1),
                     "speedup_cpu": round(a.seconds / cpu, 1), "work": work,
                     "nodes": NODES[name]}
        if not a.json:
            mark = "  (target >= 1000x)" if name == "garlicfarm" else ""
            print(f"{name:<11} {NODES[name]} nodes, {a.seconds:g} sim s in {wall:.3f} wall s ({cpu:.3f} CPU s): "
                  f"{a.seconds / wall:,.0f}x real time ({a.seconds / cpu:,.0f}x by CPU); "
                  f"{work} ops/messages{mark}")
    if a.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
