"""The runner: start nodes, run client processes and the nemesis, heal, check, store.

Order of a run (Jepsen's): set up the cluster -> client and nemesis streams run concurrently
until the generator ends or the time limit -> heal every fault -> quiesce -> final ops (reads)
-> dump node state and journals -> tear down -> run checkers -> write results. Teardown runs
in ``finally``: a failed test or Ctrl-C leaves no process, proxy or port behind.

Process semantics are Jepsen's: a worker thread t starts as process t; when an op ends
``info`` the process is retired (its op may still take effect) and the thread continues as
process ``t + concurrency``, with a fresh client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Protocol

from checkers import faults, stats
from checkers.result import Result, Validity, compose, run_checker, write_artifacts
from harness import store as store_mod
from harness.generators import Context, Generator, Pending, time_limit
from harness.runlog import run_log, to_file
from harness.spec import Client, DefiniteFailure, TestSpec, Workload
from vocabulary.history import NEMESIS, History, HistoryWriter, read_history

log = logging.getLogger("harness.runner")

Op = dict[str, Any]


class Progress(Protocol):
    def phase(self, name: str) -> None: ...
    def op(self, op: Op) -> None: ...


class _NoProgress:
    def phase(self, name: str) -> None:
        pass  # the runner logs every phase (_Logged)

    def op(self, op: Op) -> None:
        pass


@dataclass
class RunResult:
    run_dir: store_mod.RunDir
    seed: int
    valid: Validity
    result: Result
    ops: int
    complete: bool = True


class ClusterLike(Protocol):
    """What the runner needs of a running cluster (harness.cluster.Cluster provides it)."""

    async def start(self) -> None: ...
    def client_addr(self, thread: int) -> Any: ...
    async def nemesis_invoke(self, op: Op) -> Op: ...
    async def heal_all(self) -> Op: ...
    async def collect(self) -> None: ...
    async def close(self) -> None: ...


def _seeded(seed: int, stream: str) -> random.Random:
    return random.Random(f"{seed}:{stream}")


class _Run:
    def __init__(self, spec: TestSpec, workload: Workload, history: HistoryWriter,
                 cluster: ClusterLike | None, progress: Progress) -> None:
        self.spec = spec
        self.workload = workload
        self.h = history
        self.cluster = cluster
        self.progress = progress
        self.threads: tuple[int, ...] = tuple(range(spec.concurrency))
        self.client_rng = _seeded(spec.seed, "client")
        self.nemesis_rng = _seeded(spec.seed, "nemesis")

    def now_s(self) -> float:
        return self.h.now() / 1e9

    async def _pending(self, p: Pending) -> None:
        if p.until is None:
            await asyncio.sleep(0.005)
        else:
            await asyncio.sleep(max(0.0, min(p.until - self.now_s(), 0.5)))

    async def _open(self, thread: int, process: int) -> Client:
        addr = self.cluster.client_addr(thread) if self.cluster else None
        c = self.workload.client(addr, process)
        if asyncio.iscoroutine(c):
            c = await c
        return c

    def _record(self, op: Op) -> Op:
        self.h.append(op)
        self.progress.op(op)
        return op

    async def client_thread(self, thread: int, gen: Generator) -> None:
        spec = self.spec
        process = thread
        client = await self._open(thread, process)
        try:
            while True:
                o = gen.op(Context(self.now_s(), thread, process, self.threads, self.client_rng))
                if o is None:
                    return
                if isinstance(o, Pending):
                    await self._pending(o)
                    continue
                inv = {"process": process, "type": "invoke", "f": o["f"], "value": o.get("value")}
                if client.node is not None:
                    inv["node"] = client.node
                self._record(inv)
                try:
                    async with asyncio.timeout(spec.op_timeout):
                        res = await client.invoke(o)
                except TimeoutError:
                    res = {"type": "info", "value": o.get("value"), "error": "timeout"}
                except DefiniteFailure as e:
                    res = {"type": "fail", "value": o.get("value"), "error": str(e)}
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # indeterminate: it may have happened
                    res = {"type": "info", "value": o.get("value"), "error": f"{type(e).__name__}: {e}"}
                done: Op = {"process": process, "type": res.get("type", "info"), "f": o["f"],
                            "value": res.get("value", o.get("value"))}
                if client.node is not None:
                    done["node"] = client.node
                if res.get("error") is not None:
                    done["error"] = res["error"]
                self._record(done)
                if done["type"] == "info":
                    with contextlib.suppress(Exception):
                        await client.close()
                    process += spec.concurrency
                    client = await self._open(thread, process)
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def nemesis_thread(self, gen: Generator) -> None:
        """Plays the nemesis generator's ops one at a time, and the ones the cluster asked to
        retry (its answer's ``retry_in_s``: a membership change an operator tool would try
        again, harness/member_change.py) when due, each as its own op, until the time limit."""
        assert self.cluster is not None
        retries: list[tuple[float, Op]] = []  # (due, op), by due time
        ended, stop_at = False, self.now_s() + self.spec.time_limit  # as time_limit() counts
        while True:
            if retries and retries[0][0] <= self.now_s():
                o: Any = retries.pop(0)[1]
            elif ended:
                if not retries or retries[0][0] >= stop_at:
                    return
                await self._pending(Pending(retries[0][0]))
                continue
            else:
                o = gen.op(Context(self.now_s(), NEMESIS, NEMESIS, (NEMESIS,), self.nemesis_rng))
                if o is None:
                    ended = True
                    continue
                if isinstance(o, Pending):
                    due = retries[0][0] if retries else None
                    await self._pending(o if due is None or o.until is None or o.until < due
                                        else Pending(due))
                    continue
            self._record({"process": NEMESIS, "type": "invoke", "f": o["f"], "value": o.get("value")})
            try:
                res = await self.cluster.nemesis_invoke(o)
                done = {"process": NEMESIS, "type": "info", "f": o["f"], "value": res.get("value")}
                if res.get("error"):
                    done["error"] = res["error"]
                if res.get("retry_in_s") is not None:
                    retries.append((self.now_s() + float(res["retry_in_s"]),
                                    {"f": o["f"], "value": o.get("value")}))
                    retries.sort(key=lambda r: r[0])
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("nemesis op %s failed: %s", o, e)
                done = {"process": NEMESIS, "type": "info", "f": o["f"], "value": o.get("value"),
                        "error": f"{type(e).__name__}: {e}"}
            self._record(done)

    async def heal(self) -> None:
        if self.cluster is None:
            return
        self._record({"process": NEMESIS, "type": "invoke", "f": "heal-all", "value": None})
        done: Op = {"process": NEMESIS, "type": "info", "f": "heal-all"}
        try:
            done["value"] = await self.cluster.heal_all()
        except Exception as e:  # the run goes on: checkers see what the nodes have
            log.warning("heal-all failed: %s", e)
            done.update(value=None, error=f"{type(e).__name__}: {e}")
        self._record(done)

    async def run_clients(self, gen: Generator) -> None:
        await asyncio.gather(*(self.client_thread(t, gen) for t in self.threads))

    async def main_phase(self) -> None:
        spec = self.spec
        gen = time_limit(spec.time_limit, self.workload.generator(spec))
        tasks = [asyncio.ensure_future(self.run_clients(gen))]
        nemesis = spec.nemesis_stream()
        if self.cluster is not None and nemesis is not None:
            tasks.append(asyncio.ensure_future(
                self.nemesis_thread(time_limit(spec.time_limit, nemesis))))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def standard_checkers(desc: dict[str, Any]) -> dict[str, Any]:
    """What every protocol run is checked for besides its workload's checkers: that every
    client function succeeded at least once (``stats``) and that the faults it asked for were
    applied (``faults``, when it had a nemesis). The runner, ``harness check`` and the
    report's re-run all take them from here."""
    if not desc.get("protocol"):
        return {}
    out: dict[str, Any] = {"stats": stats.check}
    if desc.get("nemesis") not in (None, "", "none"):
        out["faults"] = faults.check
    return out


def run_checkers(spec_desc: dict[str, Any], checkers: dict[str, Any], run_dir: store_mod.RunDir
                 ) -> tuple[Result, bool]:
    """Run every checker on the stored history; a crashing checker is ``unknown``, never a pass."""
    history = read_history(run_dir.history)
    observations = load_observations(run_dir, spec_desc.get("node_command"))
    results = [history_result(spec_desc, history)]
    for name, chk in checkers.items():
        results.append(run_checker(name, chk, spec_desc, history.ops, observations))
    top = compose("all", results)
    write_artifacts(top, run_dir.path)  # the checks are pure: their explanations are written here
    complete = results[0].valid is True
    if not complete:
        top.note = results[0].note
    return top, complete


def history_result(spec_desc: dict[str, Any], history: History) -> Result:
    """The ``history`` leaf: a run that was cut off (torn history, or a run that did not reach
    ``complete``) proves nothing about what happened after the cut, so it is ``unknown``."""
    problems = list(history.problems)
    status = spec_desc.get("status")
    if status not in (None, "complete"):
        problems.append(f"the run ended {status}, before its final reads and state dumps")
    examined = {"ops": len(history.ops)}
    if problems:
        return Result("history", "unknown", examined=examined,
                      note="history incomplete: " + "; ".join(problems))
    return Result("history", True, examined=examined)


def load_observations(run_dir: store_mod.RunDir, node_command: str | None = None
                      ) -> dict[str, Any]:
    try:
        from checkers.observations import load_observations as load
    except ImportError:  # protocol-less runs need none
        return {"nodes": {}, "run_dir": str(run_dir.path)}
    obs = load(run_dir.path, node_command)
    obs["run_dir"] = str(run_dir.path)
    return obs


def make_cluster(spec: TestSpec, run_dir: store_mod.RunDir, toxiproxy_url: str | None) -> ClusterLike:
    from harness.cluster import Cluster

    return Cluster(spec, run_dir, toxiproxy_url=toxiproxy_url)


class _Logged:
    """Every phase into the run's log as well as to the progress sink."""

    def __init__(self, inner: Progress) -> None:
        self.inner = inner

    def phase(self, name: str) -> None:
        log.info("phase: %s", name)
        self.inner.phase(name)

    def op(self, op: Op) -> None:
        self.inner.op(op)


async def run_test(spec: TestSpec, *, progress: Progress | None = None,
                   toxiproxy_url: str | None = None) -> RunResult:
    """Run one test end to end and return its verdict; the run is stored either way, with
    the harness's own log of it in ``harness.log``."""
    workload = spec.resolved_workload()
    checkers = {**workload.checkers, **standard_checkers(spec.describe()), **spec.checkers}
    run_dir = store_mod.new_run(spec.name, store_mod.Path(spec.store) if spec.store else None)
    with run_log(run_dir.harness_log) as log_file:
        try:
            return await _run_in(spec, workload, checkers, run_dir,
                                 _Logged(progress or _NoProgress()), toxiproxy_url)
        except BaseException as e:
            to_file(log_file, log.name, logging.ERROR,
                    f"run ended by {type(e).__name__}: {e}", exc_info=True)
            raise


async def _run_in(spec: TestSpec, workload: Workload, checkers: dict[str, Any],
                  run_dir: store_mod.RunDir, progress: Progress, toxiproxy_url: str | None
                  ) -> RunResult:
    desc = {**spec.describe(), "status": "running", "run_dir": str(run_dir.path),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    store_mod.write_json(run_dir.test_json, desc)
    log.info("run %s seed=%d", run_dir.path, spec.seed)
    history = HistoryWriter(run_dir.history)
    desc["started_wall"] = time.time() - history.now() / 1e9  # history time 0, wall clock
    cluster: ClusterLike | None = None
    status = "interrupted"
    try:
        # inside the try: a backend that cannot be set up (no engine, a missing extra) ends
        # the run as failed in test.json, not as running for ever
        cluster = make_cluster(spec, run_dir, toxiproxy_url) if spec.protocol else None
        run = _Run(spec, workload, history, cluster, progress)
        if cluster is not None:
            progress.phase("starting cluster")
            await cluster.start()
        progress.phase("running workload and nemesis")
        await run.main_phase()
        progress.phase("healing")
        await run.heal()
        if cluster is not None and spec.quiesce_s > 0:
            progress.phase(f"quiescing {spec.quiesce_s:g}s")
            await asyncio.sleep(spec.quiesce_s)
        if workload.final_generator is not None:
            # ops that complete from here on are the final reads, not the run's work
            # (`pytest_plugin.ok_ops_of`: a test's minimum of ok ops counts the work only)
            desc["final_from_s"] = history.now() / 1e9
            progress.phase("final reads")
            await run.run_clients(workload.final_generator(spec))
        if cluster is not None:
            progress.phase("collecting node state")
            desc["collect_s"] = history.now() / 1e9  # the end of the quiet window (liveness)
            await cluster.collect()
            if getattr(cluster, "hostile_report", None):  # "sent N, node refused M" per node
                desc["hostile"] = cluster.hostile_report
            if getattr(cluster, "membership_report", None):  # attempts and final outcomes
                desc["membership_changes"] = cluster.membership_report
        status = "complete"
    except (KeyboardInterrupt, asyncio.CancelledError):
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        history.close()
        if cluster is not None:
            with contextlib.suppress(Exception):
                await cluster.close()
        desc.update(status=status, ops=history.count, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        store_mod.write_json(run_dir.test_json, desc)
        log.info("run %s: %d ops recorded", status, history.count)
    progress.phase("checking")
    result, complete = await asyncio.to_thread(run_checkers, desc, checkers, run_dir)
    store_mod.write_json(run_dir.results_json, {"valid": result.valid, "seed": spec.seed,
                                                "result": result.to_json()})
    log.info("verdict: %s%s", result.valid, "" if complete else f" ({result.note})")
    return RunResult(run_dir, spec.seed, result.valid, result, history.count, complete)


def run(spec: TestSpec, **kw: Any) -> RunResult:
    """Synchronous entry point (CLI, pytest). Ctrl-C tears down and re-raises."""
    return asyncio.run(run_test(spec, **kw))
