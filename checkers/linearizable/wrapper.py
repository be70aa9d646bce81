"""The harness-facing checker: ``(test, history, observations) -> Result``.

Pairs the harness history (client ops only), runs :func:`check`, and turns the outcome into
the project's :class:`~checkers.result.Result`. When ``observations`` names a ``run_dir``,
the failing part's explanation is written to ``<run_dir>/linearizable/<part>.html`` and
its path recorded in the anomaly's witness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

from checkers.linearizable.engine import Budget, LinResult, check
from checkers.linearizable.history import LinHistory, from_ops
from checkers.linearizable.models import Model, ModelError, get_model
from checkers.linearizable.svg import html_page
from checkers.result import Anomaly, Artifact, Checker, Result, verdict


def _slug(key: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "all" if key is None else str(key))[:80] or "part"


def to_result(r: LinResult, name: str = "linearizable") -> Result:
    """The harness Result for a LinResult; a failure carries its HTML explanation as an
    artifact (``linearizable/<part>.html``), written by the runner after the check."""
    anomalies: list[Anomaly] = []
    artifacts: list[Artifact] = []
    note = r.note
    part = r.failed
    if part is not None and part.witness is not None:
        w = dict(part.witness)
        artifacts.append(Artifact(f"linearizable/{_slug(part.key)}.html",
                                  partial(html_page, r, part)))
        f = w["failed_op"]
        where = "" if part.key is None else f" on key {part.key!r}"
        note = (f"not linearizable{where}: {f['describe']} by process {f['process']} cannot be "
                f"placed after a linearizable prefix of {w['prefix_len']} ops")
        anomalies.append(Anomaly(kind="nonlinearizable", message=note, witness=w))
    elif r.valid == "unknown":
        note = f"undecided: {r.note}; raise the budget or shorten the history"
    return Result(checker=name, valid=r.valid, anomalies=anomalies, stats=r.stats(), note=note,
                  artifacts=artifacts)


def examined(h: LinHistory, r: LinResult | None = None) -> dict[str, int]:
    """What a check looked at: operations that may have happened (``fail`` ones are dropped),
    how many of them completed ``ok``, how many stayed open (``info``), the parts (keys; none
    when the model could not read the history, ``r`` absent), and ``ok_<f>``: the ``ok``
    operations of each function the history invoked (zero for one that never succeeded)."""
    ok_by_f = Counter(str(op.f) for op in h.ops if op.ret is not None)
    ok = sum(ok_by_f.values())
    keys = len(r.parts) if r is not None else 0
    functions = sorted(set(h.invoked) | {str(op.f) for op in h.ops})
    return {"ops": len(h.ops), "ok": ok, "info": len(h.ops) - ok, "keys": keys,
            **{f"ok_{f}": ok_by_f[f] for f in functions}}


def needs(counts: Mapping[str, int]) -> tuple[str, ...]:
    """The counts a pass cannot do without: some ``ok`` op, and an ``ok`` op of every invoked
    function (Jepsen's ``stats`` rule), over the whole history handed in. A cas that failed its
    precondition is a ``fail``: fine, as long as some cas succeeded somewhere."""
    return ("ok", *(k for k in counts if k.startswith("ok_")))


def judged(res: Result, counts: dict[str, int]) -> Result:
    """``res`` with its examined counts. A pass over a history in which no operation completed
    ``ok`` (empty, all ``fail``, all ``info``), or in which some invoked function never did
    (every write failed), proved nothing about what never took effect, so it is unknown."""
    res.examined = counts
    if res.valid is not True:
        return res
    out = verdict(res.checker, [], res.stats, examined=counts, needs=needs(counts))
    if out.valid == "unknown":
        out.note += f" ({_why_unproven(counts)})"
    return out


def _why_unproven(counts: Mapping[str, int]) -> str:
    if not counts["ok"]:
        return (f"none of the {counts['ops']} operations that may have happened completed ok: "
                "an empty, all-fail or all-info history has no order to check")
    never = [k.removeprefix("ok_") for k in needs(counts)[1:] if not counts[k]]
    return (f"no {', '.join(never)} completed ok: the history never showed one take effect, "
            "so its linearizability was not tested; look at why those operations failed")


def checker(model: str | Model = "kv", *, time_s: float | None = 60.0,
            memory_mb: float | None = 1024.0, name: str = "linearizable") -> Checker:
    """A harness checker for ``model`` (a name from ``MODELS`` or a Model) under a budget."""
    m = get_model(model)
    budget = Budget(time_s=time_s, memory_mb=memory_mb)

    def run(test: dict[str, Any], history: list[dict[str, Any]],
            observations: dict[str, Any]) -> Result:
        h = from_ops(history)
        try:
            r = check(h, m, budget)
        except ModelError as e:
            return Result(checker=name, valid="unknown", examined=examined(h),
                          note=f"the {m.name} model cannot read this history: {e}; give the "
                               "checker the model its workload speaks")
        return judged(to_result(r, name), examined(h, r))

    return run
