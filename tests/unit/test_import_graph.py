"""The layers, read from the code's own imports (every ``import``, lazy ones inside functions
included): a node never knows the harness, a checker never knows how a run was made, and no
two top-level packages depend on each other. See docs/contracts.md, section 0."""

from __future__ import annotations

import ast
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
