"""What a run page links to and how to reproduce the run: the run dir's files (history,
results, the harness's log, node logs and journals, explanation pages) as RELATIVE links, so a
copied, zipped or uploaded store still works, and the replay commands.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

#: files listed on a run page at most (a run of many nodes can hold many)
MAX_FILES = 400
#: the report's own folder inside a run dir: the page itself, plots; not listed again
REPORT_SUBDIR = "report"
#: the files a person looks for first, in this order, ahead of the rest
FIRST = ("test.json", "results.json", "results.prev.json", "history.jsonl", "harness.log")


@dataclass(frozen=True)
class FileLink:
    path: str  # relative to the run dir, "/"-separated
    href: str  # relative to the page, URL-quoted
    size: int


def href(target: Path, page_dir: Path) -> str:
    """A relative, URL-quoted link from a page in ``page_dir`` to ``target``."""
    return quote(os.path.relpath(target, page_dir).replace(os.sep, "/"))


def run_files(run_path: Path, page_dir: Path) -> tuple[list[FileLink], int]:
    """Every regular file in the run dir (its report folder apart), the well-known ones first,
    then by path; symlinks are not followed. Returns (at most MAX_FILES links, total count)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(run_path):
        d = Path(dirpath)
        if d == run_path:
            dirnames[:] = [n for n in dirnames if n != REPORT_SUBDIR]
        dirnames.sort()
        found += [d / n for n in filenames if (d / n).is_file() and not (d / n).is_symlink()]

    def order(p: Path) -> tuple[int, str]:
        rel = p.relative_to(run_path).as_posix()
        return (FIRST.index(rel) if rel in FIRST else len(FIRST), rel)

    found.sort(key=order)
    links = [FileLink(p.relative_to(run_path).as_posix(), href(p, page_dir), p.stat().st_size)
             for p in found[:MAX_FILES]]
    return links, len(found)


def explainer(witness: dict[str, Any], run_path: Path, page_dir: Path) -> str | None:
    """A relative link to the page that explains an anomaly (the linearizability explainer,
    recorded in the witness as the absolute path it was written to), if the run dir holds it.
    A store moved since keeps the page at the same place inside the run dir."""
    recorded = witness.get("html")
    if not isinstance(recorded, str) or not recorded:
        return None
    p = Path(recorded)
    candidates = [p] if p.is_absolute() else [run_path / p]
    if p.is_absolute() and len(p.parts) >= 2:  # moved: same last two parts in this run dir
        candidates.append(run_path / p.parent.name / p.name)
    for c in candidates:
        try:
            c.resolve().relative_to(run_path.resolve())
        except ValueError:
            continue
        if c.is_file():
            return href(c, page_dir)
    return None


@dataclass(frozen=True)
class Reproduce:
    from_cmd: str
    explicit: str | None  # None: the stored spec cannot be replayed (``why`` says so)
    not_expressible: list[str]
    why: str = ""


def read_test(run_path: Path) -> dict[str, Any] | None:
    """The run's test.json, or None when it is missing or unreadable."""
    try:
        record = json.loads((run_path / "test.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def reproduce(run_path: Path, record: dict[str, Any] | None) -> Reproduce:
    """``harness run --from <run>/test.json`` and the equivalent explicit command line."""
    import shlex

    from harness.replay import command_line

    from_cmd = shlex.join(["harness", "run", "--from", str(run_path / "test.json")])
    if record is None:
        return Reproduce(from_cmd, None, [], "this run's test.json cannot be read")
    try:
        cmd = command_line(record)
    except (ValueError, KeyError, TypeError) as e:
        return Reproduce(from_cmd, None, [], f"this run cannot be replayed: {e}")
    return Reproduce(from_cmd, cmd.text, cmd.not_expressible)
