"""Print the killed share of mutmut's mutants per file (from mutants/**/*.meta).

A mutant is killed when its tests failed, hung or crashed on it (mutmut's own statuses, from
``mutmut.stats``); it survived when they passed; no-tests when no test covers its line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

#: what counts as caught: the tests failed, hung, or crashed on the mutant
CAUGHT = ("killed", "timeout", "segfault", "caught by type check")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fail-under", type=float, default=None, help="exit 1 below this killed %%")
    ap.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    a = ap.parse_args()
    root = Path("mutants")
    per_file: dict[str, Counter[str]] = {}
    survivors: list[str] = []
    for meta in sorted(root.rglob("*.py.meta")):
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        src = str(meta.relative_to(root)).removesuffix(".meta")
        c = per_file.setdefault(src, Counter())
        for name, code in codes.items():
            s = status_by_exit_code[code]
            c["caught" if s in CAUGHT else s] += 1
            if s in ("survived", "no tests"):
                survivors.append(name)
    if not per_file:
        print("no mutmut results under mutants/: run scripts/mutation", file=sys.stderr)
        return 255
    total: Counter[str] = Counter()
    # killed% is over the mutants that were run: an interrupted run still gives a fair share
    print(f"{'file':44} {'mutants':>8} {'not-run':>8} {'killed':>7} {'survived':>9} "
          f"{'no-tests':>9} {'killed%':>8}")
    for src, c in [*per_file.items(), ("all of checkers/", total)]:
        if c is not total:
            total.update(c)
        n = sum(c.values())
        ran = n - c["not checked"]
        print(f"{src:44} {n:8} {c['not checked']:8} {c['caught']:7} {c['survived']:9} "
              f"{c['no tests']:9} {100 * c['caught'] / max(ran, 1):7.1f}%")
    share = 100 * total["caught"] / max(sum(total.values()) - total["not checked"], 1)
    if a.survivors:
        print("\n".join(survivors))
    if a.fail_under is not None and share < a.fail_under:
        print(f"killed {share:.1f}% < {a.fail_under}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
