"""The ``report`` and ``serve`` subcommands of the ``harness`` CLI.

``harness.cli.parser()`` wires them with ``reports.cli.add_subcommands(sub)``; each
subcommand sets ``fn`` like the others. Exit codes follow the CLI's: 0 every selected run
valid, 1 one invalid, 2 unknown or an unreadable run, 254 a usage error, 255 a set-up error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT = {"true": 0, "false": 1, "unknown": 2}
#: the CLI's codes: a set-up error (here, no Java for the spark engine), a usage error, Ctrl-C
SETUP, USAGE, INTERRUPTED = 255, 254, 130


def _conf_item(it: str) -> tuple[str, str]:
    """One ``--conf``, checked while parsing so that a bad one is a usage error (254)."""
    k, sep, v = it.partition("=")
    if not sep or not k.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{it!r}: expected spark.KEY=VALUE")
    return k, v


def cmd_report(a: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from harness.optional import require
    from harness.store import DEFAULT_STORE

    require("report", "harness report")
    from reports.report import ReportOptions, build_report

    con = Console(stderr=True)
    if a.engine == "spark":  # before discovery and before a JVM is asked for
        from reports.spark_engine import java_problem

        problem = java_problem()
        if problem:
            con.print(f"[red]error:[/] {escape(problem)}")
            return SETUP
    store = Path(a.store) if a.store else DEFAULT_STORE
    opts = ReportOptions(store=store, selectors=a.runs, since=a.since, until=a.until,
                         engine=a.engine, master=a.master, conf=dict(a.conf), pages=a.pages,
                         recovery_window_s=a.recovery_window)
    res = build_report(opts)
    runs = res.output.runs
    counts = runs["verdict"].where(runs["error"] == "", "error").value_counts().to_dict()
    con.print(f"{len(runs)} run(s): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
              + f"  ({res.output.timings['total_s']:.1f} s, {res.output.ingested} ingested)")
    for r in runs[runs["error"] != ""].itertuples():
        con.print(f"[red]{escape(r.run_id)}: {escape(r.error)}[/]")
    mism = runs[runs["mismatch"] != ""] if "mismatch" in runs else runs.iloc[0:0]
    if len(mism):
        con.print(f"[red bold]{len(mism)} run(s) where a stored verdict (results.json) and the "
                  "report's re-run disagree:[/]")
        for r in mism.head(20).itertuples():
            con.print(f"[red]  {escape(r.run_id)}: {escape(r.mismatch)}[/]")
    con.print(f"report: [bold]{escape(str(res.index))}[/]  "
              f"(JUnit: {escape(str(res.index.parent / 'junit.xml'))})")
    verdicts = set(runs["verdict"])
    if "false" in verdicts:
        return EXIT["false"]
    if "unknown" in verdicts or (runs["error"] != "").any():
        return EXIT["unknown"]
    return EXIT["true"]


def cmd_serve(a: argparse.Namespace) -> int:
    from harness.store import DEFAULT_STORE
    from reports.serve import serve

    store = Path(a.store) if a.store else DEFAULT_STORE
    if not store.is_dir():
        print(f"error: no store at {store.resolve()}; give --store, or run 'harness run' first",
              file=sys.stderr)
        return USAGE
    try:
        serve(store, a.host, a.port)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return INTERRUPTED
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``report`` and ``serve`` on the harness CLI's subparsers."""
    r = sub.add_parser("report", help="consistency report (HTML, JUnit, Parquet) over stored runs")
    r.add_argument("runs", nargs="*", help="run dirs, test dirs or globs (default: the whole store)")
    r.add_argument("--store", help="the store (default: $HARNESS_STORE or ./store)")
    r.add_argument("--since", help="first run date, YYYY-MM-DD (inclusive)")
    r.add_argument("--until", help="last run date, YYYY-MM-DD (inclusive)")
    r.add_argument("--engine", choices=("spark", "local"), default="spark",
                   help="spark (default; local mode unless --master) or local (one process)")
    r.add_argument("--master", help="Spark master URL (default: local[<cores>])")
    r.add_argument("--conf", action="append", default=[], metavar="spark.KEY=VALUE", type=_conf_item,
                   help="a Spark setting; repeatable")
    r.add_argument("--pages", choices=("auto", "all", "failed", "none"), default="auto",
                   help="which run pages to render (auto: all up to 200 runs, then failures "
                        "and the newest 50)")
    r.add_argument("--recovery-window", type=float, default=5.0, metavar="S",
                   help="seconds after a heal counted as the 'recovering' phase (default 5)")
    r.set_defaults(fn=cmd_report)
    s = sub.add_parser("serve", help="browse the store's reports and run files over HTTP "
                                     "(loopback)")
    s.add_argument("--store")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)  # 0: a free port, printed
    s.set_defaults(fn=cmd_serve)
