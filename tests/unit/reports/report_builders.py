"""Stores for the report tests: real runner runs (in-process kv clients, with fault windows
the client obeys and the matching nemesis ops written into the history) and hand-made bad
histories (torn tail, corrupt middle, not a history, a non-linearizable kv history)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from checkers.result import Result
from harness import generators as g
from harness.runner import run
from harness.spec import DefiniteFailure, TestSpec, Workload

#: (kind, start s, end s) relative to the first op; the client misbehaves inside them
WINDOWS = (("partition", 0.25, 0.5), ("kill", 0.7, 0.85))
START = {"partition": "start-partition", "kill": "kill"}
END = {"partition": "stop-partition", "kill": "restart"}
#: the client misbehaves only this far inside each window (see FaultyKV.invoke)
GUARD_S = 0.01


class FaultyKV:
    """An atomic in-process kv store; inside a fault window ops fail, time out or slow down.

    ``stale`` (a bug mode) makes reads after the partition return the value from before it:
    a linearizability violation the pipeline must find.
    """

    node: str | None = "n1"
    data: dict[str, Any] = {}
    before: dict[str, Any] = {}
    t0: float | None = None
    n = 0
    stale = False

    def __init__(self, addr: Any, process: int) -> None:
        self.process = process

    @classmethod
    def reset(cls, stale: bool = False) -> None:
        cls.data, cls.before, cls.t0, cls.n, cls.stale = {}, {}, None, 0, stale

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        cls = FaultyKV
        if cls.t0 is None:
            cls.t0 = time.monotonic()
        t = time.monotonic() - cls.t0
        cls.n += 1
        # misbehave only well inside a window: the history's clock stamped the invocation
        # a moment before this call (longer on a loaded machine), and an op the history
        # places before a window must not fail
        active = [k for k, a, b in WINDOWS if a + GUARD_S <= t < b - GUARD_S]
        if active:
            await asyncio.sleep(0.01)
            if cls.n % 3 == 0:
                raise DefiniteFailure("no leader")
            if cls.n % 3 == 1:
                raise ConnectionError("timed out")
        if t < WINDOWS[0][1]:
            cls.before = dict(cls.data)
        k, v = op["value"]
        if op["f"] == "write":
            cls.data[k] = v
            return {"type": "ok"}
        if cls.stale and t >= WINDOWS[0][2]:
            return {"type": "ok", "value": [k, cls.before.get(k)]}
        return {"type": "ok", "value": [k, cls.data.get(k)]}

    async def close(self) -> None:
        pass


def _gen(spec: TestSpec) -> g.Generator:
    keys = "xyz"
    return g.stagger(0.003, g.mix(
        lambda c: {"f": "read", "value": [c.rng.choice(keys), None]},
        lambda c: {"f": "write", "value": [c.rng.choice(keys), c.rng.randrange(10_000)]}))


def ok_checker(test: dict[str, Any], history: list[dict[str, Any]], obs: dict[str, Any]) -> Result:
    return Result("ops-completed", True, stats={"ops": len(history)})


def real_run(store: Path, name: str = "kv", seed: int = 1, stale: bool = False,
             time_limit: float = 1.0, checkers: dict[str, Any] | None = None) -> Path:
    """A real runner run, then the nemesis ops of WINDOWS merged into its history by time."""
    FaultyKV.reset(stale)
    wl = Workload(client=FaultyKV, generator=_gen,
                  checkers={"ops-completed": ok_checker, **(checkers or {})})
    r = run(TestSpec(name=name, workload=wl, concurrency=3, seed=seed, time_limit=time_limit,
                     store=str(store)))
    add_nemesis(r.run_dir.history)
    add_node_journals(r.run_dir.path)
    return r.run_dir.path


def add_node_journals(run: Path, nodes: int = 3) -> None:
    """Node journals (contracts.md section 3) as a node runtime writes them: node clock ``t``."""
    for k in range(nodes):
        d = run / "nodes" / f"n{k + 1}"
        d.mkdir(parents=True, exist_ok=True)
        t0 = 1_700_000_000.0 + 0.01 * k
        ev = [{"seq": 0, "t": t0, "type": "start", "term": 0}]
        ev += [{"seq": i, "t": t0 + 0.1 * i, "type": "commit" if i % 4 else "role", "index": i}
               for i in range(1, 10)]
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))


def add_nemesis(history: Path) -> None:
    ops = [json.loads(line) for line in history.read_text().splitlines()]
    t0 = ops[0]["time"]
    nem = []
    for kind, a, b in WINDOWS:
        for f, t in ((START[kind], a), (END[kind], b)):
            ns = t0 + int(t * 1e9)
            nem += [{"process": "nemesis", "type": "invoke", "f": f, "value": {"node": "n2"},
                     "time": ns - 1000},
                    {"process": "nemesis", "type": "info", "f": f, "value": {"node": "n2"},
                     "time": ns}]
    allops = sorted(ops + nem, key=lambda o: o["time"])
    for i, o in enumerate(allops):
        o["index"] = i
    history.write_text("".join(json.dumps(o) + "\n" for o in allops))


def hand_run(store: Path, test: str, run_id: str, ops: list[dict[str, Any]] | None = None,
             raw: str | None = None, status: str = "complete") -> Path:
    """A run dir written by hand: ``ops`` as JSON lines, or ``raw`` text as the history."""
    d = store / test / run_id
    d.mkdir(parents=True)
    (d / "test.json").write_text(json.dumps({"name": test, "protocol": None, "nemesis": "none",
                                             "seed": 7, "status": status}))
    if raw is None:
        raw = "".join(json.dumps({**o, "index": i}) + "\n" for i, o in enumerate(ops or []))
    (d / "history.jsonl").write_text(raw)
    return d


def nonlinearizable_ops() -> list[dict[str, Any]]:
    """x: write 1, write 2 (both ok, sequential), then a read of 1: stale. y: a read of 42,
    never written: a phantom (and not linearizable either)."""
    ms = 1_000_000
    return [
        {"process": 0, "type": "invoke", "f": "write", "value": ["x", 1], "time": 1 * ms},
        {"process": 0, "type": "ok", "f": "write", "value": ["x", 1], "time": 2 * ms},
        {"process": 0, "type": "invoke", "f": "write", "value": ["x", 2], "time": 3 * ms},
        {"process": 0, "type": "ok", "f": "write", "value": ["x", 2], "time": 4 * ms},
        {"process": 1, "type": "invoke", "f": "read", "value": ["x", None], "time": 5 * ms},
        {"process": 1, "type": "ok", "f": "read", "value": ["x", 1], "time": 6 * ms},
        {"process": 1, "type": "invoke", "f": "read", "value": ["y", None], "time": 7 * ms},
        {"process": 1, "type": "ok", "f": "read", "value": ["y", 42], "time": 8 * ms},
    ]


def bad_store(store: Path) -> dict[str, Path]:
    """One of each bad input, next to whatever real runs the store already has."""
    good = nonlinearizable_ops()
    lines = "".join(json.dumps({**o, "index": i}) + "\n" for i, o in enumerate(good))
    return {
        "nonlin": hand_run(store, "handmade", "20261120T010000-aaaaaa", good),
        "torn": hand_run(store, "handmade", "20261120T020000-bbbbbb",
                         raw=lines + '{"process": 0, "type": "inv', status="running"),
        "corrupt": hand_run(store, "handmade", "20261120T030000-cccccc",
                            raw=lines[:200] + "\n#garbage#\n" + lines),
        "notops": hand_run(store, "handmade", "20261120T040000-dddddd",
                           raw='{"process": 0, "type": "invoke", "f": "read"}\n'),
    }
