"""Re-running the protocols' own checkers (Raft, append-log, 2PC, ordering, membership) per run.

These checkers read node evidence (``nodes/<node>/events.jsonl`` and ``state.json``), not only
the history. They come from the **one registry the runner uses**: ``harness.protocols`` ->
``ProtocolDef.workloads[<test.json workload>]().checkers`` (``harness.runner.run_test`` takes
the same dict). A checker some pipeline checker re-checks per key (``PipelineChecker.covers``,
e.g. ``linearizable`` by ``kv-linearizable``) is not run twice.

How the evidence reaches the executor: **by path**. Each task gets ``(run_id, run dir)`` rows
and reads ``test.json``, ``history.jsonl`` and the node journals/state from the run dir with
the harness's own readers (``reports.ingest.load_history``, ``checkers.observations``), so the
verdict is computed from exactly what the runner's checkers read. This needs the store on a
filesystem every executor sees under the same path: true for ``local[n]`` and for a
standalone cluster on one machine (or a shared mount). The ingest already needs the same
(its executors read the histories by path).

The task is embarrassingly parallel: one row per run, runs dealt by history size
over several partitions per core, no shuffle.

A verdict never goes missing silently: a crash, an unknown protocol, an unreadable history or
test.json is an ``unknown`` result with the reason; a registry checker absent from this run's
results is reported as "not re-run" by ``aggregate.agreement``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.result import Checker, Result, run_checker
from reports.checks import MAX_ANOMALIES, covered, frozen_heap, result_rows
from reports.scan import deal
from reports.schema import RESULTS, validity_str

#: the result row named when the registry itself cannot be consulted for a run
REGISTRY_ROW = "protocol-checkers"
#: the input column of a re-run task: JSON ``{"run_id", "path"}`` per row
RUN_COLUMN = "run"


def registry_checkers(test: dict[str, Any]) -> tuple[dict[str, Checker], str]:
    """The checkers the runner ran for this test description, minus the covered ones.

    Returns ``(checkers, why_none)``: an empty dict with a reason when the test has none in
    the registry (no protocol, a custom workload object). Raises ``ValueError`` for a
    protocol or workload the registry does not know.
    """
    proto = test.get("protocol")
    if not proto or proto == "none":
        return {}, "no protocol: the run's checkers were not from the registry"
    from harness.protocols import get_protocol

    p = get_protocol(str(proto))
    wl = test.get("workload") or p.default_workload
    if wl == "custom":
        return {}, "custom workload: its checkers are not in the registry"
    try:
        factory = p.workloads[wl]
    except KeyError:
        raise ValueError(f"protocol {proto} has no workload {wl!r} in the registry "
                         f"(has {sorted(p.workloads)})") from None
    from harness.runner import standard_checkers

    skip = covered()
    every = {**factory().checkers, **standard_checkers(test)}
    return {n: c for n, c in every.items() if n not in skip}, ""


def rerun_run(run_id: str, path: str) -> list[tuple[Result, int]]:
    """Every registry checker of one run, from its run dir: ``[(result, history ops)]``.

    Mirrors ``harness.runner.run_checkers``: a crashing checker is ``unknown``, never a pass.
    """
    from checkers.observations import load_observations
    from reports.ingest import load_history
    from vocabulary.history import HistoryError

    root = Path(path)
    try:
        test = json.loads((root / "test.json").read_text())
        if not isinstance(test, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return [(Result(REGISTRY_ROW, "unknown", note=f"test.json unreadable, checkers not "
                        f"re-run: {e}", stats={"rerun": True}), 0)]
    try:
        checkers, _why = registry_checkers(test)
    except Exception as e:  # unknown protocol/workload, or its module does not import
        return [(Result(REGISTRY_ROW, "unknown",
                        note=f"cannot get this run's checkers from harness.protocols: "
                             f"{type(e).__name__}: {e}", stats={"rerun": True}), 0)]
    if not checkers:
        return []
    try:
        history = load_history(str(root / "history.jsonl"))
    except HistoryError as e:
        return [(Result(name, "unknown", note=f"history unreadable, not re-run: {e}",
                        stats={"rerun": True}), 0) for name in checkers]
    observations = load_observations(root, test.get("node_command"))
    observations["run_dir"] = str(root)
    out = []
    for name, chk in checkers.items():
        r = flatten(run_checker(name, chk, test, history.ops, observations))
        r.stats["rerun"] = True
        if not history.complete and r.valid is True:  # a cut-off history proves nothing
            r.valid = "unknown"
            r.note = "history incomplete: " + "; ".join(history.problems)
        out.append((r, len(history.ops)))
    return out


def flatten(r: Result, limit: int = MAX_ANOMALIES) -> Result:
    """A composed result (``raft`` = six checks) as one row: the failing parts' anomalies
    (each witness names its part), a note naming every part that is not ``True``, and each
    part's verdict in ``stats.parts_valid``. A row keeps no children."""
    if not r.children:
        return r
    leaves: list[tuple[str, Result]] = []

    def walk(x: Result, path: str) -> None:
        if not x.children:
            leaves.append((path, x))
        for c in x.children:
            walk(c, f"{path}/{c.checker}" if path else c.checker)

    walk(r, "")
    out = Result(r.checker, r.valid, list(r.anomalies), dict(r.stats), note=r.note)
    bad = [(p, x) for p, x in leaves if x.valid is not True]
    for p, x in bad:
        for a in x.anomalies:
            a.witness = {"check": p, **a.witness}
            out.anomalies.append(a)
    out.anomalies = out.anomalies[:limit]
    parts = "; ".join(f"{p}: {validity_str(x.valid)}" + (f" ({x.note[:160]})" if x.note else "")
                      for p, x in bad)
    out.note = "; ".join(n for n in (r.note, parts) if n)[:800]
    out.stats["parts_valid"] = {p: validity_str(x.valid) for p, x in leaves}
    out.stats["examined_parts"] = {p: x.examined for p, x in leaves}
    return out


def rerun_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The Spark/local driver: rows of run JSON (``RUN_COLUMN``) -> RESULTS batches."""
    with frozen_heap():
        for b in batches:
            for s in b.column(0).to_pylist():
                for run in json.loads(s):
                    rows = rerun_run(run["run_id"], run["path"])
                    if rows:
                        yield pa.RecordBatch.from_pydict(result_rows(run["run_id"], rows),
                                                         schema=RESULTS)


def rerun_slices(runs: Iterable[Any], parts: int) -> list[str]:
    """Runs that may have registry checkers, dealt by history size into at most ``parts``
    slices of JSON: balanced tasks without knowing costs."""
    todo = [r for r in runs if r.protocol not in ("", "none")]
    return [json.dumps([{"run_id": r.run_id, "path": r.path} for r in s])
            for s in deal(todo, lambda r: r.history_bytes, parts)]
