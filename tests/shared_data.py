"""Test data from outside the project: ``../shared/data/<name>`` from the project's root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_path(name: str) -> Path:
    """Where ``name`` is, whether or not it is there."""
    return ROOT.parent / "shared" / "data" / name


def shared_data(name: str, what: str) -> Path:
    """The path of ``name``; a skip without it, a failure without it under ``CI`` (a run
    that silently skipped its golden data would pass having checked nothing)."""
    path = shared_path(name)
    if not path.exists():
        why = (f"{what} is not at {path}: check out the shared data beside the project "
               f"(../shared/data/{name} from its root)")
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI is set, so this is a failure, not a skip", pytrace=False)
        pytest.skip(why)
    return path
