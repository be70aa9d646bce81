"""Report pipeline throughput: Spark local[1] / local[2] against the same checkers in one process.

Builds (or reuses) a synthetic store of N runs x M ops (default 1,000 x 10,000 = 10M history
ops: kv reads/writes/cas from a simulated atomic store, so every run is linearizable, with
partition and kill windows that fail or time out ops), then measures:

- Spark start-up (a fresh session, first trivial job);
- ingest (history JSONL -> the partitioned Parquet events dataset), Spark local[2];
- the report proper (every pipeline checker + every aggregate, pages off) over the dataset:
  Spark local[1] and Spark local[2], each in a fresh session (its first report, cold, and
  ``--repeat`` warm ones), then the in-process engine;
- how the report's time grows with the store's size (fractions of the runs, Spark local[2]).

Every report figure carries the pipeline's own step timings (``analyse.*``), the CPU time of
the whole process tree (driver + JVM + Python workers: ``cpu_s``, and ``cores_used`` = CPU /
wall) and the 1-minute load average before and after: on a shared 2-core machine a local[2]
run only gets two cores when nobody else is using them, and these say whether it did.

Run:  .venv/bin/python bench/bench_reports.py --runs 1000 --ops 10000 --store /tmp/bench-store
Prints one JSON document (also written to --out). Ops/s = history ops checked per second.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reports.discover import find_runs  # noqa: E402
from reports.html import write_report  # noqa: E402
from reports.local_engine import LocalEngine  # noqa: E402
from reports.pipeline import data_dir, run_pipeline  # noqa: E402

KEYS = 10
CONCURRENCY = 5


def _history(seed: int, n_ops: int) -> str:
    """A linearizable kv history (effects at completion) with two fault windows."""
    rng = random.Random(seed)
    data: dict[int, int] = {}
    out: list[str] = []
    t = 0
    pending: dict[int, tuple[str, int, Any]] = {}
    procs = list(range(CONCURRENCY))
    nxt = CONCURRENCY
    faults = [(n_ops // 4, n_ops // 3, "start-partition", "stop-partition"),
              (n_ops // 2, n_ops // 2 + n_ops // 20, "kill", "restart")]

    def line(p: int, typ: str, f: str, k: int, v: str, node: int, i: int, t: int) -> str:
        return (f'{{"process":{p},"type":"{typ}","f":"{f}","value":["k{k}",{v}],'
                f'"node":"n{node}","index":{i},"time":{t}}}\n')

    i = 0
    while i < n_ops:
        for a, b, f_start, f_end in faults:
            if i in (a, b):
                f = f_start if i == a else f_end
                out.append(f'{{"process":"nemesis","type":"invoke","f":"{f}","value":null,'
                           f'"index":{i},"time":{t}}}\n')
                out.append(f'{{"process":"nemesis","type":"info","f":"{f}",'
                           f'"value":{{"node":"n2"}},"index":{i + 1},"time":{t + 1000}}}\n')
                i += 2
                t += 2000
        in_fault = any(a <= i < b for a, b, _, _ in faults)
        slot = rng.randrange(CONCURRENCY)
        p = procs[slot]
        t += rng.randrange(20_000, 200_000)
        node = p % 5 + 1
        if p not in pending:
            k = rng.randrange(KEYS)
            r = rng.random()
            if r < 0.5:
                f, v = "read", "null"
            elif r < 0.9:
                f, v = "write", str(rng.randrange(1000))
            elif k in data:
                f, v = "cas", f"[{data[k]},{rng.randrange(1000)}]"
            else:
                f, v = "write", str(rng.randrange(1000))
            pending[p] = (f, k, v)
            out.append(line(p, "invoke", f, k, v, node, i, t))
        else:
            f, k, v = pending.pop(p)
            typ = "ok"
            if in_fault and rng.random() < 0.6:
                typ = "fail" if rng.random() < 0.5 else "info"
            val = v
            if typ == "ok":
                if f == "write":
                    data[k] = int(v)
                elif f == "read":
                    val = "null" if k not in data else str(data[k])
                else:
                    old, new = json.loads(v)
                    if data.get(k) == old:
                        data[k] = new
                    else:
                        typ = "fail"
            elif typ == "info" and f != "read" and rng.random() < 0.5:
                if f == "write":
                    data[k] = int(v)  # an info write that did happen
            out.append(line(p, typ, f, k, val, node, i, t))
            if typ == "info":
                procs[slot] = nxt
                nxt += 1
        i += 1
    return "".join(out)


def _write_run(args: tuple[Path, int, int]) -> int:
    store, n, n_ops = args
    day = 1 + n * 7 // 1000 % 28
    d = store / "synthetic" / f"202611{day:02d}T{n // 3600 % 24:02d}{n // 60 % 60:02d}{n % 60:02d}-{n:06x}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "test.json").write_text(json.dumps({
        "name": "synthetic", "protocol": "garlicfarm" if n % 2 else "drip",
        "nemesis": "partition,kill", "seed": n, "status": "complete"}))
    (d / "history.jsonl").write_text(_history(n, n_ops))
    return n_ops


def make_store(store: Path, runs: int, ops: int) -> float:
    have = len(list(store.glob("synthetic/*/history.jsonl"))) if store.exists() else 0
    if have == runs:
        return 0.0
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    with mp.Pool(os.cpu_count() or 2) as pool:
        pool.map(_write_run, [(store, n, ops) for n in range(runs)], chunksize=8)
    return time.perf_counter() - t0


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + sys) of this process and every descendant, live or reaped: the
    driver, its JVM and the Python workers. CPU / wall = the cores a phase really used."""
    tck = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[tuple[int, list[str]]]] = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            s = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        f = s[s.rfind(")") + 2:].split()
        kids.setdefault(int(f[1]), []).append((int(p), f))
    root = pid or os.getpid()
    s = Path(f"/proc/{root}/stat").read_text()
    f = s[s.rfind(")") + 2:].split()
    total = sum(int(x) for x in f[11:15])  # utime stime cutime cstime
    stack = [root]
    while stack:
        for c, f in kids.get(stack.pop(), []):
            total += sum(int(x) for x in f[11:15])
            stack.append(c)
    return total / tck


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ops", type=int, default=10_000, help="history ops per run")
    ap.add_argument("--store", default="/tmp/bench-reports-store")
    ap.add_argument("--out", default="/tmp/bench-reports.json")
    ap.add_argument("--fractions", default="0.1", help="store sizes for the growth curve")
    ap.add_argument("--skip", default="", help="comma list of: local, spark1, growth")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="warm re-runs of the report per Spark engine (best one compared)")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    store = Path(a.store)
    res: dict[str, Any] = {"runs": a.runs, "ops_per_run": a.ops, "cpus": os.cpu_count(),
                           "load_avg": os.getloadavg()}
    res["generate_s"] = make_store(store, a.runs, a.ops)
    if a.generate_only:
        print(json.dumps(res))
        return
    runs = find_runs(store)
    shutil.rmtree(data_dir(store), ignore_errors=True)

    from reports.spark_engine import SparkEngine

    def report(engine: Any, rs: list[Any]) -> dict[str, Any]:
        """The whole report minus run pages: pipeline, index page, JUnit per run; with the
        CPU time of the whole process tree and the load of the machine around it."""
        load0 = os.getloadavg()[0]
        c0 = tree_cpu_s()
        t0 = time.perf_counter()
        out = run_pipeline(store, rs, engine)
        write_report(store, out, rs, engine.name, pages="none")
        wall = time.perf_counter() - t0
        cpu = tree_cpu_s() - c0
        return {**{k: round(v, 2) for k, v in out.timings.items()}, "total_s": wall,
                "cpu_s": round(cpu, 1), "cores_used": round(cpu / wall, 2),
                "load_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
                "ops": int(out.runs["ops"].sum())}

    def emit() -> None:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))
        print(json.dumps(res, indent=1, default=str), flush=True)

    # The nightly job: a fresh local[2] session ingests the store, then reports on it
    # (cold Python workers and a cold JIT included: that is what a nightly report pays).
    t, eng = _timed(lambda: SparkEngine("local[2]"))
    eng.spark.range(10).count()
    res["spark_startup_s"] = t
    first = report(eng, runs)
    total_ops = first["ops"]
    res["total_ops"] = total_ops
    res["ingest_spark2_s"] = first["ingest_s"]
    res["ingest_ops_per_s"] = total_ops / first["ingest_s"]
    res["nightly_spark2"] = first
    res["nightly_report_spark2_s"] = first["total_s"] - first["ingest_s"]
    emit()
    if "growth" not in skip:
        res["growth_spark2"] = {}
        for frac in [float(x) for x in a.fractions.split(",") if x] + [1.0]:
            sub = runs[: max(1, int(len(runs) * frac))]
            r = report(eng, sub)
            res["growth_spark2"][f"{len(sub)} runs / {r['ops']} ops"] = round(r["total_s"], 2)
            emit()
    eng.close()

    # local[1] against local[2]: each in a fresh session over the same ingested dataset, the
    # first report (cold workers, cold JIT) and then warm re-runs; the best warm run of each.
    masters = [m for m in ("local[1]", "local[2]") if not (m == "local[1]" and "spark1" in skip)]
    for m in masters:
        eng = SparkEngine(m)
        runs_m = [report(eng, runs) for _ in range(1 + a.repeat)]
        eng.close()
        res[f"report_{m}"] = runs_m
        res[f"report_{m}_first_s"] = runs_m[0]["total_s"]
        res[f"report_{m}_best_s"] = min(r["total_s"] for r in runs_m)
        emit()
    if len(masters) == 2:
        res["speedup_first_local2_over_local1"] = (
            res["report_local[1]_first_s"] / res["report_local[2]_first_s"])
        res["speedup_best_local2_over_local1"] = (
            res["report_local[1]_best_s"] / res["report_local[2]_best_s"])
    res["report_spark2_ops_per_s"] = total_ops / res["report_local[2]_best_s"]
    emit()
    if "local" not in skip:
        r = report(LocalEngine(), runs)
        res["report_inprocess"] = r
        res["report_inprocess_s"] = r["total_s"]
        res["report_inprocess_ops_per_s"] = total_ops / r["total_s"]
        res["spark2_over_inprocess"] = res["report_local[2]_best_s"] / r["total_s"]
        res["spark2_first_plus_startup_over_inprocess"] = (
            (res["report_local[2]_first_s"] + res["spark_startup_s"]) / r["total_s"])
        emit()


if __name__ == "__main__":
    main()
