"""Were the faults the test asked for actually applied?

A chaos run's "valid" claims that the system kept its promises *under faults*. A nemesis op
that failed (its completion carries an ``error``: no leader to kill, a proxy that refused a
toxic) did not fault anything, so it is not counted; a requested kind with no successful
application leaves every fault-dependent verdict unproven, and this leaf says ``unknown``,
naming the kind. Composed worst-wins with the protocol's checkers, the run is then unknown.

Requested kinds come from the test's nemesis description (``"partition,kill-leader,pause"``)
and from every start op the nemesis invoked (custom schedules carry labels, not kind names).
A membership op the nemesis completed without error (a late node's ``join``, a ``leave``, an
``add-member``, a ``decommission`` or Garlic Farm's ``remove-server``) counts as kind ``membership`` applied, so a schedule of
membership changes alone (a sim replay's Garlic Farm ``add``) is judged; a failed one asks
for nothing (the membership reports say what became of each change). A ``last-send`` (a node's
last words before it is gone, harness/last_send.py) is kind ``last-send``: one that failed
(its peers never held the message) leaves the run unproven.
"""

from __future__ import annotations

from typing import Any

from checkers.result import Anomaly, Result
from vocabulary.faults import KIND_OF_START, nemesis_pairs, requested_kinds

NAME = "faults"
#: nemesis ops that change the membership (harness/cluster.py's own ops)
MEMBERSHIP_OPS = frozenset({"join", "leave", "add-member", "decommission", "remove-server"})


def check(test: dict[str, Any], history: list[dict[str, Any]],
                   observations: dict[str, Any]) -> Result:
    """``True`` when every requested fault kind was applied at least once."""
    applied: dict[str, int] = {}
    failed: dict[str, list[str]] = {}
    for inv, done in nemesis_pairs(history):
        kind = KIND_OF_START.get(str(inv.get("f")))
        if kind is None and inv.get("f") == "last-send":
            kind = "last-send"
        if kind is None:
            if inv.get("f") in MEMBERSHIP_OPS and done is not None and not done.get("error"):
                applied["membership"] = applied.get("membership", 0) + 1
            continue
        if done is None:
            failed.setdefault(kind, []).append(f"{inv.get('f')}: no completion (history ended)")
        elif done.get("error"):
            failed.setdefault(kind, []).append(f"{inv.get('f')}: {done['error']}")
        else:
            applied[kind] = applied.get(kind, 0) + 1
    requested = requested_kinds(str(test.get("nemesis") or ""))
    for kind in [*applied, *failed]:
        if kind not in requested:
            requested.append(kind)
    examined = {"requested_kinds": len(requested), "faults_applied": sum(applied.values()),
                "faults_failed": sum(len(v) for v in failed.values())}
    stats = {"applied": applied, "failed": {k: len(v) for k, v in failed.items()},
             "requested": requested}
    if not requested:
        return Result(NAME, "unknown", [], stats, examined=examined,
                      note="the test has a nemesis but no fault was ever attempted")
    missing = [k for k in requested if not applied.get(k)]
    if not missing:
        return Result(NAME, True, [], stats, examined=examined)
    reasons = []
    for k in missing:
        errs = failed.get(k, [])
        reasons.append(f"{k}: never applied ({len(errs)} attempts failed, first: {errs[0]})"
                       if errs else f"{k}: never attempted within the time limit")
    # failures are evidence a person reads, not protocol anomalies: the leaf stays unknown
    witnesses = [Anomaly("fault-not-applied", r, {"kind": k, "errors": failed.get(k, [])[:5]})
                 for k, r in zip(missing, reasons, strict=True)]
    return Result(NAME, "unknown", [], {**stats, "not_applied": [w.to_json() for w in witnesses]},
                  examined=examined,
                  note="requested faults were not applied, so the verdicts under them are "
                       "unproven: " + "; ".join(reasons))
