"""Sort the surviving mutants of a mutmut run (mutants/) into what they can change.

A survivor is a code change no checker test noticed. What it can change decides whether it
matters (issue 14: every survivor in verdict logic is killed or argued equivalent):

* ``presentation``: the text or layout a person reads (an anomaly's message or witness, a
  note, the CLI's words), never which verdict is reached;
* ``statistics``: a figure in ``Result.stats`` that no verdict reads (``examined`` counts are
  not statistics: a zero there makes a verdict unknown);
* ``defensive-default``: the default of a lookup in evidence that the loaders always
  provide (``dict.get(k, [])`` to ``get(k, None)``): it could only make the checker raise,
  and ``run_checker`` turns a raise into ``unknown``, never a pass;
* ``verdict``: everything else, argued one by one in docs/mutation.md or killed by a test.

    .venv/bin/python scripts/mutation_survivors.py [--markdown FILE]

Reads mutmut's own files (mutants/**/*.py and their .meta); run after scripts/mutation.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path("mutants")

#: functions that only format what the verdict already decided
PRESENTATION_FUNCS = {
    "witness_text", "_short", "_slug", "examined_text", "explain", "to_json", "_part_name",
    "brief", "_why_unproven", "_names", "_ranges",
}
#: functions that only compute figures for ``stats``
STATISTICS_FUNCS = {"stats", "_stats", "_percentiles", "_stale_reads"}
PRESENTATION_CALLS = {"Anomaly", "where", "brief", "_sync_skipped", "dumps", "print"}


@dataclass
class Survivor:
    name: str
    module: str
    function: str
    before: str
    after: str
    category: str = "verdict"


def survivors(root: Path = ROOT) -> list[str]:
    out = []
    for meta in sorted(root.rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
            if status_by_exit_code[code] in ("survived", "no tests"):
                out.append(name)
    return out


def _functions(path: Path) -> dict[str, tuple[list[str], ast.FunctionDef]]:
    src = path.read_text()
    lines = src.splitlines()
    out = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
            out[node.name] = (lines[node.lineno - 1:node.end_lineno], node)
    return out


def _enclosing(fn: ast.FunctionDef, lineno: int, col: int) -> list[ast.AST]:
    """The nodes of ``fn`` whose source span holds position (lineno, col)."""
    pos = (lineno, col)
    return [n for n in ast.walk(fn) if getattr(n, "end_lineno", None) is not None
            and (n.lineno, n.col_offset) <= pos <= (n.end_lineno, n.end_col_offset)]


def _call_name(c: ast.Call) -> str:
    f = c.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def categorize(s: Survivor, fn: ast.FunctionDef, lineno: int, col: int) -> str:
    # mutmut names a function x_<name>, a method xǁ<Class>ǁ<name>
    base = s.function.split("ǁ")[-1] if "ǁ" in s.function else s.function.removeprefix("x_")
    if base in PRESENTATION_FUNCS or s.module.endswith("witness"):
        return "presentation"
    if base in STATISTICS_FUNCS:
        return "statistics"
    for node in _enclosing(fn, lineno, col):
        if isinstance(node, ast.Call) and _call_name(node) in PRESENTATION_CALLS:
            return "presentation"
        if isinstance(node, ast.keyword) and node.arg in ("note", "message"):
            return "presentation"
        if isinstance(node, ast.JoinedStr):
            return "presentation"
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            text = " ".join(ast.unparse(t) for t in targets)
            if re.search(r"\bstats\b|\bcounts\b", text):
                return "statistics"
    if re.search(r"\.get\([^,()]+, (\[\]|\{\}|set\(\)|\(\))\)", s.before) and re.search(
            r"\.get\([^,()]+, ?(None)?\)", s.after):
        return "defensive-default"
    strip = re.compile(r'"[^"]*"|\'[^\']*\'')
    if strip.sub("S", s.before) == strip.sub("S", s.after) and not re.search(
            r"(==|!=|\bin\b|\.get\(|\[)\s*['\"]", s.before):
        return "presentation"  # a string that is shown, not compared or looked up
    return "verdict"


def collect(root: Path = ROOT) -> list[Survivor]:
    cache: dict[Path, dict[str, tuple[list[str], ast.FunctionDef]]] = {}
    out = []
    for name in survivors(root):
        module, function = name.rsplit(".", 1)
        path = root / (module.replace(".", "/") + ".py")
        if path not in cache:
            cache[path] = _functions(path)
        funcs = cache[path]
        base = function.rsplit("__mutmut_", 1)[0]
        orig, node = funcs[base + "__mutmut_orig"]
        mut, _ = funcs[function]
        diff = [ln for ln in difflib.unified_diff(orig[1:], mut[1:], lineterm="", n=0)]
        raw = next((ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")),
                   "")
        before = raw.strip()
        after = next((ln[1:].strip() for ln in diff if ln.startswith("+") and not
                      ln.startswith("+++")), "")
        hunk = next((ln for ln in diff if ln.startswith("@@")), "@@ -1 +1 @@")
        lineno = node.lineno + int(re.match(r"@@ -(\d+)", hunk).group(1))  # type: ignore[union-attr]
        first = next((i for i, (x, y) in enumerate(zip(before, after, strict=False)) if x != y),
                     min(len(before), len(after)))
        col = len(raw) - len(raw.lstrip()) + first
        s = Survivor(name, module, base, before, after)
        s.category = categorize(s, node, lineno, col)
        out.append(s)
    return out


def markdown(items: list[Survivor]) -> str:
    counts = Counter(s.category for s in items)
    lines = ["| category | survivors |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in counts.most_common()]
    for cat in ("verdict", "defensive-default", "statistics", "presentation"):
        group = [s for s in items if s.category == cat]
        if not group:
            continue
        lines += ["", f"### {cat} ({len(group)})", "", "| mutant | before | after |",
                  "|---|---|---|"]
        for s in group:
            short = s.name.removeprefix("checkers.")
            lines.append(f"| `{short}` | `{s.before[:90]}` | `{s.after[:90]}` |".replace(
                "||", "|"))
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", type=Path, help="write the sorted list here")
    a = ap.parse_args()
    if not ROOT.is_dir():
        print("no mutants/ here: run scripts/mutation first", file=sys.stderr)
        return 255
    items = collect()
    for k, v in Counter(s.category for s in items).most_common():
        print(f"{k:18} {v}")
    if a.markdown:
        a.markdown.write_text(markdown(items))
    return 0


if __name__ == "__main__":
    sys.exit(main())
