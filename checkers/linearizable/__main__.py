"""Command line: ``python -m checkers.linearizable --model M --format F FILE``.

Prints one JSON line ``{"valid", "ops", "elapsed_s", "witness", ...}``; exit code 0 valid,
1 not linearizable, 2 unknown (budget ran out), 3 the input could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys

from checkers.linearizable.engine import Budget, check
from checkers.linearizable.history import FORMATS, HistoryFormatError, read_file
from checkers.linearizable.models import MODELS, ModelError, get_model
from checkers.linearizable.svg import render_html

EXIT = {True: 0, False: 1, "unknown": 2}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m checkers.linearizable",
                                 description="Check a history for linearizability.")
    ap.add_argument("file")
    ap.add_argument("--model", default="cas-register", choices=list(MODELS))
    ap.add_argument("--format", default="jsonl", choices=FORMATS)
    ap.add_argument("--time-s", type=float, default=60.0, help="time budget (default 60)")
    ap.add_argument("--memory-mb", type=float, default=1024.0, help="memory budget (default 1024)")
    ap.add_argument("--html", help="also write the visual explanation to this file")
    ap.add_argument("--explain", action="store_true", help="print the witness text to stderr")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    # Porcupine's kv data reads a missing key as "": that is the kv model's initial value there
    options = {"initial": ""} if a.model == "kv" and a.format == "porcupine-kv" else {}
    try:
        history = read_file(a.file, a.format)
        r = check(history, get_model(a.model, **options), Budget(a.time_s, a.memory_mb))
    except (OSError, HistoryFormatError, ModelError) as e:
        print(json.dumps({"valid": "unknown", "error": str(e)}))
        print(f"error: {e}", file=sys.stderr)
        return 3
    out = {"valid": r.valid, "ops": r.ops, "elapsed_s": round(r.elapsed_s, 4),
           "witness": r.witness, "explored": r.explored, "parts": len(r.parts), "note": r.note}
    if a.html:
        out["html"] = str(render_html(r, a.html))
    print(json.dumps(out, default=repr))
    if a.explain and r.witness:
        print(r.witness["text"], file=sys.stderr)
    return EXIT[r.valid]


if __name__ == "__main__":
    sys.exit(main())
