"""Golden results: a checker's whole output (verdict, note, examined counts, every anomaly's
kind, message and witness) pinned in ``tests/unit/golden/<module>/<test>.json``.

The witness is what a person reads to act on a violation: a change to its keys or wording is
a change to the product, so it must show up in review as a changed golden file. Regenerate
after an intended change with ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit`` and read the diff.
Timings (``elapsed_s``) and tracebacks vary from run to run and are left out.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from checkers.result import Result

ROOT = Path(__file__).parent / "golden"
#: stats that differ between two runs of the same check
VOLATILE = frozenset({"elapsed_s", "traceback"})


def stable(x: Any) -> Any:
    """``x`` as JSON with the volatile keys dropped (tuples become lists, as in results.json)."""
    if isinstance(x, Result):
        return stable(x.to_json())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return stable({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    if isinstance(x, dict):
        return {str(k): stable(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list | tuple):
        return [stable(v) for v in x]
    if isinstance(x, set | frozenset):
        return sorted((stable(v) for v in x), key=repr)
    return json.loads(json.dumps(x, default=repr))


class Golden:
    """Compares results with their stored copy, one file per call in a test."""

    def __init__(self, module: str, test: str, nodeid: str = "") -> None:
        self.stem = ROOT / module / test.replace("/", "_").replace("[", "-").rstrip("]")
        self.nodeid = nodeid or module
        self.calls = 0

    def __call__(self, result: Any) -> Any:
        """Compare ``result`` with its stored copy; returns it, so a call can wrap a check."""
        self.calls += 1
        path = self.stem.with_name(f"{self.stem.name}-{self.calls}.json") if self.calls > 1 \
            else self.stem.with_suffix(".json")
        got = stable(result)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
            return result
        if not path.exists():
            raise AssertionError(f"no golden file {path}: run UPDATE_GOLDEN=1 .venv/bin/pytest "
                                 f"'{self.nodeid}' once, then review and commit it")
        want = json.loads(path.read_text())
        assert got == want, (f"the result differs from {path} (if the change is intended, rerun "
                             f"with UPDATE_GOLDEN=1 and review the diff)")
        return result
