"""Which runs a report covers: a store, run or test directories, globs, a date range.

Discovery only reads each run's small files (test.json, results.json) and the last byte of
its history; histories themselves are read by the ingest pass, in parallel.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_DIR = "_report"  # under the store: index, datasets, cached state


@dataclass
class RunInfo:
    """What the store says about one run before its history is read."""

    run_id: str  # "<test>/<run-id>", unique within a store
    test: str
    path: str
    protocol: str = "none"
    nemesis: str = "none"
    workload: str = ""
    seed: int | None = None
    status: str = "unknown"
    started: str = ""
    date: str = "1970-01-01"
    history_bytes: int = 0
    history_mtime: float = 0.0
    #: the stored verdict the harness wrote at run time (results.json), if any
    stored: dict[str, Any] | None = None
    #: problems found before reading the history (no test.json, unreadable results.json)
    problems: list[str] = field(default_factory=list)

    def key(self) -> tuple[str, int, float]:
        """Changes when the history changes: decides whether a cached ingest is stale."""
        return (self.run_id, self.history_bytes, self.history_mtime)


def _date_of(run_id: str, started: str) -> str:
    for s, fmt in ((run_id[:8], "%Y%m%d"), (started[:10], "%Y-%m-%d")):
        try:
            return dt.datetime.strptime(s, fmt).date().isoformat()
        except ValueError:
            continue
    return "1970-01-01"


def run_info(path: Path) -> RunInfo:
    """Read one run directory's metadata; problems are recorded, never raised."""
    path = path.resolve()
    info = RunInfo(run_id=f"{path.parent.name}/{path.name}", test=path.parent.name, path=str(path))
    try:
        desc = json.loads((path / "test.json").read_text())
        info.protocol = desc.get("protocol") or "none"
        info.nemesis = str(desc.get("nemesis") or "none")
        info.workload = str(desc.get("workload") or "")
        info.seed = desc.get("seed")
        info.status = str(desc.get("status") or "unknown")
        info.started = str(desc.get("started") or "")
    except (OSError, ValueError) as e:
        info.problems.append(f"test.json unreadable: {e}")
    info.date = _date_of(path.name, info.started)
    try:
        st = (path / "history.jsonl").stat()
        info.history_bytes, info.history_mtime = st.st_size, st.st_mtime
    except OSError:
        pass
    try:
        info.stored = json.loads((path / "results.json").read_text())
    except FileNotFoundError:
        pass
    except ValueError as e:
        info.problems.append(f"results.json unreadable: {e}")
    return info


def _is_run(p: Path) -> bool:
    return (p / "test.json").is_file() or (p / "history.jsonl").is_file()


def _expand(selector: str, store: Path) -> list[Path]:
    """A selector is a run dir, a test dir, the store itself, or a glob of any of those."""
    # a named path is followed if it is a link (``store/latest``); links met while walking the
    # store are not (they would count a run twice)
    cands = [Path(p).resolve() for p in sorted(glob.glob(selector))] or \
        [Path(p).resolve() for p in sorted(glob.glob(str(store / selector)))]
    out: list[Path] = []
    for c in cands:
        if not c.is_dir() or c.name == REPORT_DIR:
            continue
        if _is_run(c):
            out.append(c)
        else:
            kids = [k for k in sorted(c.iterdir()) if k.is_dir() and not k.is_symlink()]
            runs = [k for k in kids if _is_run(k)]
            out.extend(runs or [g for k in kids if k.name != REPORT_DIR
                                for g in sorted(k.iterdir()) if g.is_dir() and _is_run(g)])
    return out


def find_runs(store: Path, selectors: list[str] | None = None, since: str | None = None,
              until: str | None = None) -> list[RunInfo]:
    """Every run the selectors name (default: the whole store), oldest first, de-duplicated.

    ``since``/``until`` are inclusive ISO dates compared with the run's start date.
    """
    paths = [p for s in (selectors or [str(store)]) for p in _expand(s, store)]
    seen: dict[str, RunInfo] = {}
    for p in paths:
        if os.path.islink(p):
            continue
        info = run_info(p)
        if since and info.date < since:
            continue
        if until and info.date > until:
            continue
        seen.setdefault(info.run_id, info)
    return sorted(seen.values(), key=lambda r: (r.date, Path(r.path).name, r.run_id))
