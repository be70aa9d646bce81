"""SWIM bench: failure detection and dissemination vs group size, message and CPU cost.

Two modes:

* ``real`` (default): real node processes on loopback, every datagram through the UDP relay,
  memberlist's comparison settings (1 s period, 0.5 s probe timeout, suspicion multiplier 4).
  Per size: wait for convergence, measure steady-state messages per member per period and CPU
  per node, then kill members one at a time (SIGKILL) and time, on the system-wide monotonic
  clock, the first suspicion anywhere (in periods) and the moment every survivor marks the
  victim dead (s); restart it and time until every survivor has its new generation (join
  dissemination, periods).
"First detection" is the SWIM paper's count (expected e/(e-1) = 1.58): whole protocol
periods the accuser began after the crash, up to the one whose probe failed; the raw time from
the crash (partial period included) is reported too, as ``..._since_crash_periods``.

* ``sim``: the same sans-IO cores on the unit tests' simulated network, for large samples of
  the detection-time distribution quickly.

``--encrypt on`` runs the real nodes with a keyring (every datagram AES-GCM sealed, 29 bytes
more); ``--encrypt both`` runs each size without, then with, and prints the figures side by
side: encryption must leave detection and dissemination unchanged within noise.

    .venv/bin/python -m bench.bench_swim --sizes 5,10,30,60 --kills 4
    .venv/bin/python -m bench.bench_swim --sizes 5,10 --kills 4 --encrypt both
    .venv/bin/python -m bench.bench_swim --mode sim --sizes 5,10,30,60 --kills 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MEMBERLIST_ALL_DEAD_S = {5: 7.1, 10: 6.0}  # measured on this machine, same settings
SETTINGS = {"period_s": 1.0, "probe_timeout_s": 0.5, "suspicion_mult": 4}
BENCH_KEY = "42" * 32  # AES-256; a bench-only key
#: the figures printed side by side by ``--encrypt both`` (a dict's "mean" where it has one)
COMPARED = ("converge_s", "msgs_per_member_per_period", "bytes_per_member_per_period",
            "cpu_pct_per_node", "first_detection_periods", "first_detection_since_crash_periods",
            "all_survivors_dead_s", "per_survivor_dead_s", "restart_known_everywhere_periods")


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, int(p * len(s)))]  # noqa: E731
    return {"n": len(s), "mean": round(statistics.fmean(s), 3), "p10": round(q(0.1), 3),
            "p50": round(q(0.5), 3), "p90": round(q(0.9), 3), "max": round(s[-1], 3)}


# ------------------------------------------------------------------------------ real mode


async def _events(cl: Any, n: str, cursor: dict[str, int]) -> list[dict[str, Any]]:
    try:
        got = await cl.admin(n, "GET", f"/admin/events?since={cursor.get(n, 0)}")
    except Exception:
        return []
    cursor[n] = got["next"]
    return got["events"]


async def _converged(cl: Any, live: list[str]) -> bool:
    for n in live:
        try:
            st = await cl.admin(n, "GET", "/admin/state")
        except Exception:
            return False
        if sorted(st["alive"]) != sorted(set(live) - {n}):
            return False
    return True


async def _wait(pred: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await pred():
            return True
        await asyncio.sleep(0.25)
    return False


async def bench_real_size(n: int, kills: int, steady_s: float, seed: int,
                          encrypt: bool = False) -> dict[str, Any]:
    from harness.cluster import Cluster
    from harness.spec import TestSpec
    from harness.store import new_run
    from harness.suites.swim import PROTOCOL

    period = SETTINGS["period_s"]
    store = Path(tempfile.mkdtemp(prefix="bench-swim-"))
    options: dict[str, Any] = {**SETTINGS, **({"keyring": [BENCH_KEY]} if encrypt else {})}
    spec = TestSpec(name=f"bench-swim-{n}", protocol=PROTOCOL, nodes=n, seed=seed,
                    store=str(store), options=options)
    rng = random.Random(seed)
    out: dict[str, Any] = {"nodes": n, "encrypt": encrypt}
    cl = Cluster(spec, new_run(spec.name, store), start_timeout_s=60 + 3 * n)
    try:
        await cl.start()
        live = list(cl.nodes)
        t0 = time.monotonic()
        ok = await _wait(lambda: _converged(cl, live), 60 + n)
        out["converge_s"] = round(time.monotonic() - t0, 2) if ok else None
        s0 = {x: (await cl.admin(x, "GET", "/admin/state"))["stats"] for x in live}
        m0 = time.monotonic()
        await asyncio.sleep(steady_s)
        s1 = {x: (await cl.admin(x, "GET", "/admin/state"))["stats"] for x in live}
        dt = time.monotonic() - m0
        out["msgs_per_member_per_period"] = round(statistics.fmean(
            (s1[x]["datagrams_out"] - s0[x]["datagrams_out"]) / (dt / period) for x in live), 3)
        out["bytes_per_member_per_period"] = round(statistics.fmean(
            (s1[x]["bytes_out"] - s0[x]["bytes_out"]) / (dt / period) for x in live), 1)
        out["cpu_pct_per_node"] = round(100 * statistics.fmean(
            (s1[x]["cpu_s"] - s0[x]["cpu_s"]) / dt for x in live), 2)
        firsts, whole, all_dead, per_obs, joins = [], [], [], [], []
        for _ in range(kills):
            victim = rng.choice(live[1:] if len(live) > 1 else live)
            vid = cl.nodes.index(victim) + 1
            survivors = [x for x in live if x != victim]
            cursor: dict[str, int] = {}
            for x in survivors:  # skip old events
                while await _events(cl, x, cursor):
                    pass
            t_kill = time.monotonic()
            await cl.kill(victim)
            first: float | None = None
            acc: float | None = None
            dead_at: dict[str, float] = {}
            deadline = t_kill + 40
            while time.monotonic() < deadline and len(dead_at) < len(survivors):
                for x in survivors:
                    for e in await _events(cl, x, cursor):
                        if e.get("member") != vid or e.get("mono", 0) < t_kill:
                            continue
                        if e["type"] in ("suspect", "dead"):
                            first = e["mono"] if first is None else min(first, e["mono"])
                        if e["type"] == "suspect" and e.get("local"):
                            acc = e["mono"] if acc is None else min(acc, e["mono"])
                        if e["type"] == "dead" and x not in dead_at:
                            dead_at[x] = e["mono"]
                await asyncio.sleep(0.2)
            if first is not None:
                firsts.append((first - t_kill) / period)
            if acc is not None:
                whole.append(float(math.floor((acc - t_kill) / period + 1e-9)))
            per_obs += [t - t_kill for t in dead_at.values()]
            if len(dead_at) == len(survivors):
                all_dead.append(max(dead_at.values()) - t_kill)
            # restart: how long until every survivor knows the new generation
            t_up = time.monotonic()
            await cl.restart(victim)
            seen: dict[str, float] = {}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(seen) < len(survivors):
                for x in survivors:
                    for e in await _events(cl, x, cursor):
                        if (e.get("member") == vid and e["type"] in ("joined", "alive")
                                and e.get("gen", 0) >= 1 and x not in seen):
                            seen[x] = e["mono"]
                await asyncio.sleep(0.2)
            if len(seen) == len(survivors):
                joins.append((max(seen.values()) - t_up) / period)
            await _wait(lambda: _converged(cl, live), 30)
        out["first_detection_periods"] = summary(whole)
        out["first_detection_since_crash_periods"] = summary(firsts)
        out["all_survivors_dead_s"] = summary(all_dead)
        out["per_survivor_dead_s"] = summary(per_obs)
        out["restart_known_everywhere_periods"] = summary(joins)
        if n in MEMBERLIST_ALL_DEAD_S:
            out["memberlist_all_dead_s"] = MEMBERLIST_ALL_DEAD_S[n]
    finally:
        await cl.close()
    return out


# ------------------------------------------------------------------------------ sim mode


def bench_sim_size(n: int, kills: int, seed: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.sim.swim import SwimSim as Sim
    from nodes.swim.core import Options

    opts = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4)
    firsts, whole, all_dead, spread, msgs = [], [], [], [], []
    for k in range(kills):
        s = Sim(n, opts, seed=seed + k)
        while not s.converged() and s.now < 120:
            s.run_for(1)
        sent0 = s.sent
        s.run_for(5)
        msgs.append((s.sent - sent0) / n / 5)
        rng = random.Random(seed + k)
        victim = rng.choice(s.ids[1:])
        s.run_for(rng.uniform(0, 1))
        t_kill = s.now
        s.crash(victim)
        s.run_for(30)
        sus = [e.t for e in s.events if e.t >= t_kill and e.fields.get("member") == victim
               and e.type in ("suspect", "dead")]
        acc = [e.t for e in s.events if e.t >= t_kill and e.fields.get("member") == victim
               and e.type == "suspect" and e.fields.get("local")]
        if acc:
            whole.append(float(math.floor(min(acc) - t_kill + 1e-9)))
        dead = {e.node: e.t for e in reversed(s.events) if e.t >= t_kill
                and e.type == "dead" and e.fields.get("member") == victim}
        if sus:
            firsts.append(min(sus) - t_kill)
        if len(dead) == n - 1:
            all_dead.append(max(dead.values()) - t_kill)
            spread.append(max(dead.values()) - min(dead.values()))
    return {"nodes": n, "first_detection_periods": summary(whole),
            "first_detection_since_crash_periods": summary(firsts),
            "all_survivors_dead_s": summary(all_dead), "death_spread_periods": summary(spread),
            "msgs_per_member_per_period": round(statistics.fmean(msgs), 3),
            "memberlist_all_dead_s": MEMBERLIST_ALL_DEAD_S.get(n)}


def side_by_side(off: dict[str, Any], on: dict[str, Any]) -> str:
    """One size's figures, encryption off and on, one line each (means of distributions)."""
    def fig(r: dict[str, Any], k: str) -> str:
        v = r.get(k)
        v = v.get("mean", "-") if isinstance(v, dict) else v
        return "-" if v is None else str(v)

    rows = [f"{'nodes=' + str(off['nodes']):<38}{'off':>10}{'on':>10}"]
    rows += [f"{k:<38}{fig(off, k):>10}{fig(on, k):>10}" for k in COMPARED]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_swim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("real", "sim"), default="real")
    ap.add_argument("--sizes", default="5,10,30,60")
    ap.add_argument("--kills", type=int, default=4, help="kills per size")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of steady-state cost")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--encrypt", choices=("off", "on", "both"), default="off",
                    help="real mode: seal every datagram with AES-GCM (both: side by side)")
    ap.add_argument("--out", default=None, help="write the JSON results here too")
    args = ap.parse_args(argv)
    if args.mode == "sim" and args.encrypt != "off":
        ap.error("--encrypt needs --mode real: the simulator passes messages, not datagrams")
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.encrypt]
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        if args.mode == "sim":
            r = bench_sim_size(n, args.kills, args.seed)
            print(json.dumps(r), flush=True)
            results.append(r)
            continue
        pair = []
        for enc in modes:
            r = asyncio.run(bench_real_size(n, args.kills, args.steady, args.seed, enc))
            print(json.dumps(r), flush=True)
            pair.append(r)
        if len(pair) == 2:
            print(side_by_side(*pair), flush=True)
        results += pair
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
