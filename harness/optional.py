"""The optional parts of chaos-harness (its pip extras), and one clear error when one is missing.

The core (``harness run`` on the local backend, the nodes, the checkers, ``harness
ls|check|serve|clean``, the pytest plugin) imports none of these at import time
(tests/unit/test_import_graph.py checks it with the packages hidden). Code that needs one calls
`require` before importing it, so a missing package names the extra that brings it instead of
failing with a bare ``ModuleNotFoundError`` somewhere deep in a run.
"""

from __future__ import annotations

import importlib.util

DIST = "chaos-harness"
#: extra -> the top-level modules it brings (each the import name of the extra's distribution;
#: tests/unit/test_import_graph.py checks this against pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "report": ("jinja2", "matplotlib", "pandas", "pyarrow"),
    "spark": ("pyspark",),
    "docker": ("docker", "backports.tarfile"),
    "ssh": ("paramiko",),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra to install."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not importable here."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {sorted(EXTRAS)}")
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str, hint: str = "") -> None:
    """Raise `MissingExtra` unless every module of ``extra`` is installed.

    ``what`` names the feature that needs it (``"the docker backend"``), ``hint`` an
    alternative that needs no install (``"or use --engine local"``)."""
    gone = missing(extra)
    if gone:
        raise MissingExtra(
            f"{what} needs {', '.join(gone)}, which is not installed: "
            f"pip install '{DIST}[{extra}]'" + (f" ({hint})" if hint else ""))
