"""The run store: ``store/<test>/<run-id>/`` with test.json, history.jsonl, nodes/, results.json
and harness.log.

``store/latest`` points at the newest run. A run's ``test.json`` says ``"status": "running"``
until the harness finishes it, so an interrupted run is recognisable as incomplete.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_STORE = Path(os.environ.get("HARNESS_STORE", "store"))

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(name: str) -> str:
    return _SAFE.sub("-", name).strip("-") or "test"


def write_json(path: Path, data: Any) -> None:
    """Write atomically (temp file + rename): a crash never leaves half a JSON file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=repr) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def test_json(self) -> Path:
        return self.path / "test.json"

    @property
    def results_json(self) -> Path:
        return self.path / "results.json"

    @property
    def harness_log(self) -> Path:
        """The harness's own log of the run (harness.runlog)."""
        return self.path / "harness.log"

    def node_dir(self, node: str) -> Path:
        d = self.path / "nodes" / node
        d.mkdir(parents=True, exist_ok=True)
        return d

    def read_test(self) -> dict[str, Any]:
        return json.loads(self.test_json.read_text())

    def read_results(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.results_json.read_text())
        except FileNotFoundError:
            return None


def new_run(test_name: str, store: Path | None = None) -> RunDir:
    store = Path(store or DEFAULT_STORE)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    path = store / safe_name(test_name) / run_id
    path.mkdir(parents=True)
    _point_latest(store, path)
    return RunDir(path.resolve())


def _point_latest(store: Path, path: Path) -> None:
    link = store / "latest"
    tmp = store / f".latest-{secrets.token_hex(4)}"
    os.symlink(os.path.relpath(path, store), tmp)
    os.replace(tmp, link)


def runs(store: Path | None = None) -> Iterator[RunDir]:
    """Every run in the store, oldest first."""
    store = Path(store or DEFAULT_STORE)
    found = sorted(store.glob("*/*/test.json"), key=lambda p: p.parent.name)
    for t in found:
        if t.parent.parent.name != "latest":
            yield RunDir(t.parent.resolve())
