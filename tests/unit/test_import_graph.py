"""The layers, read from the code's own imports (every ``import``, lazy ones inside functions
included): a node never knows the harness, a checker never knows how a run was made, and no
two top-level packages depend on each other. See docs/contracts.md, section 0."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nodes", "vocabulary", "osutil", "checkers", "faults", "harness", "reports")
#: package -> the packages of ours it must never import
FORBIDDEN = {
    "nodes": set(PACKAGES) - {"nodes"},  # a node runs alone: its own code and libraries only
    "vocabulary": set(PACKAGES) - {"vocabulary"},
    "osutil": set(PACKAGES) - {"osutil"},
    "checkers": {"harness", "faults", "reports", "nodes", "osutil"},  # pure, over histories
    "faults": {"harness", "reports", "checkers"},
}


def imports(pkg: str, root: Path = ROOT) -> list[tuple[str, str]]:
    """(file:line, imported top-level package of ours) for every import in ``pkg``."""
    out = []
    for path in sorted((root / pkg).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else []
            for name in names:
                top = name.split(".")[0]
                if top in PACKAGES and top != pkg:
                    out.append((f"{path.relative_to(root)}:{n.lineno}", top))
    return out


def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(PACKAGES)
    for pkg in PACKAGES:
        for where, top in imports(pkg):
            g.add_edge(pkg, top)
            g.edges[pkg, top].setdefault("at", []).append(where)
    return g


@pytest.mark.parametrize("pkg", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(pkg: str) -> None:
    bad = [f"{where} imports {top}" for where, top in imports(pkg) if top in FORBIDDEN[pkg]]
    assert not bad, f"{pkg} must not import {sorted(FORBIDDEN[pkg])}:\n" + "\n".join(bad)


def test_no_cycle_between_top_level_packages() -> None:
    g = graph()
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "\n".join(
        " -> ".join([*c, c[0]]) + ": " + "; ".join(
            f"{a}->{b} at {g.edges[a, b]['at'][0]}" for a, b in zip(c, [*c[1:], c[0]], strict=True))
        for c in cycles)


def test_the_walk_sees_lazy_and_dotted_imports(tmp_path: Path) -> None:
    """The rules are only as good as the walk: an import inside a function counts, relative
    imports (inside the package) do not."""
    (tmp_path / "nodes" / "x").mkdir(parents=True)
    (tmp_path / "nodes" / "x" / "server.py").write_text(
        "from . import core\nimport json\n\ndef f():\n    from harness.spec import X\n"
        "    import checkers.result\n    import nodes.common\n")
    assert imports("nodes", tmp_path) == [("nodes/x/server.py:5", "harness"),
                                          ("nodes/x/server.py:6", "checkers")]


# ---------------------------------------------------------------------------------------------
# Optional dependencies (the pip extras, harness/optional.py): the core imports none of them at
# import time, and code that needs one says which extra to install.

#: what must import with every extra (and, for the CLI, pytest) missing: the whole core, plus
#: the parts of reports/ that the harness CLI loads (its subcommands) or serves without an extra
CORE = ("harness", "nodes", "faults", "checkers", "vocabulary", "osutil")
CORE_REPORTS = ("reports.cli", "reports.serve", "reports.discover")
PLUGIN = "harness.pytest_plugin"  # loaded by pytest only (entry point pytest11)

HIDE_AND_IMPORT = """
import importlib, json, pkgutil, sys
hide, pkgs, extra_mods, skip, also = json.loads(sys.argv[1])
for m in hide:
    sys.modules[m] = None  # what Python does for a module that is not there: import fails
mods = list(extra_mods)
for p in pkgs:
    mods.append(p)
    mods += [i.name for i in pkgutil.walk_packages(importlib.import_module(p).__path__, p + ".")]
mods = [m for m in mods if not m.endswith("__main__") and m not in skip]
for m in mods:
    importlib.import_module(m)
if also == "cli":
    import harness.cli
    harness.cli.parser()  # loads the subcommands of other packages (reports.cli) too
print(json.dumps(sorted(mods)))
"""


def _import_hidden(hide: list[str], pkgs: tuple[str, ...], extra_mods: tuple[str, ...],
                   skip: tuple[str, ...] = (), also: str = "") -> list[str]:
    import json
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", HIDE_AND_IMPORT,
                        json.dumps([hide, pkgs, extra_mods, skip, also])],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"with {hide} missing, importing the core failed:\n{p.stderr[-3000:]}"
    return json.loads(p.stdout)


def _optional_modules() -> list[str]:
    from harness.optional import EXTRAS

    return sorted(m for mods in EXTRAS.values() for m in mods)


def test_the_core_and_the_cli_import_with_no_extra_and_no_pytest() -> None:
    """`harness run` (local backend), ls/check/serve/clean and every library module of the core
    work with only the core installed: no extra and no pytest imported at import time."""
    mods = _import_hidden([*_optional_modules(), "pytest", "_pytest"], CORE, CORE_REPORTS,
                          skip=(PLUGIN,), also="cli")
    assert "harness.backends.docker" in mods and "nodes.garlicfarm.server" in mods  # it walked


def test_the_pytest_plugin_imports_with_no_extra() -> None:
    assert _import_hidden(_optional_modules(), (), (PLUGIN,)) == [PLUGIN]


def test_extras_match_pyproject() -> None:
    """harness/optional.py's EXTRAS names what pyproject.toml's extras install, and no core
    dependency is also an extra's."""
    import re
    import tomllib

    from harness.optional import EXTRAS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        out = {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in reqs}
        return out - {"chaos-harness"}  # an extra made of other extras

    extras = project["optional-dependencies"]
    assert {k: names(extras[k]) for k in EXTRAS} == {k: set(v) for k, v in EXTRAS.items()}
    assert not names(project["dependencies"]) & set(_optional_modules())
    assert set(extras["all"][0].split("[")[1].rstrip("]").split(",")) == set(EXTRAS)


@pytest.mark.parametrize(("extra", "call"), [
    ("docker", lambda: __import__("harness.backends.docker", fromlist=["x"]).connect()),
    ("docker", lambda: __import__("harness.backends.images.build", fromlist=["x"]).main([])),
    ("ssh", lambda: __import__("harness.backends.ssh", fromlist=["x"]).HostConn(None)),  # type: ignore[arg-type]
])
def test_a_missing_extra_names_what_to_install(monkeypatch: pytest.MonkeyPatch, extra: str,
                                               call: object) -> None:
    from harness.optional import EXTRAS, MissingExtra

    for m in EXTRAS[extra]:
        monkeypatch.setitem(__import__("sys").modules, m, None)
    with pytest.raises(MissingExtra, match=re.escape(f"pip install 'chaos-harness[{extra}]'")):
        call()  # type: ignore[operator]


def test_harness_report_without_its_extra_says_which(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    from harness import cli

    monkeypatch.setitem(__import__("sys").modules, "jinja2", None)
    assert cli.main(["report", "--store", str(tmp_path), "--engine", "local"]) == cli.INTERNAL
    err = " ".join(capsys.readouterr().err.split())  # unwrapped
    assert "harness report needs jinja2" in err, err
    assert "pip install 'chaos-harness[report]'" in err, err  # the brackets survive rich markup


def test_the_spark_engine_without_pyspark_says_which(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    from harness.optional import MissingExtra
    from reports.report import ReportOptions, make_engine

    monkeypatch.setitem(__import__("sys").modules, "pyspark", None)
    with pytest.raises(MissingExtra, match=re.escape(
            "needs pyspark, which is not installed: pip install 'chaos-harness[spark]' "
            "(or use --engine local)")):
        make_engine(ReportOptions(store=tmp_path, engine="spark"))
