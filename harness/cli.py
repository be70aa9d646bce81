"""The ``harness`` command line: run, check, ls, clean, report, serve.

Progress is shown live with rich; a verdict table, with what each checker examined, ends
every run. Exit codes follow Jepsen's (see ``EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.live import Live
from rich.table import Table

from checkers.result import Result, Validity, examined_text

console = Console(stderr=True)
EXIT = {True: 0, False: 1, "unknown": 2}
#: entry point group of subcommand providers: each is called with the subparsers to add to
COMMANDS = "chaos_harness.commands"
INTERRUPTED, USAGE, INTERNAL = 130, 254, 255
EXIT_CODES = """exit codes:
  0    valid: every checker passed and examined something
  1    invalid: a checker found a violation (its witness is printed)
  2    unknown: a checker had nothing to judge, ran out of budget, or evidence was
       missing (a requested fault never applied, a cut-off history, ...)
  130  interrupted (Ctrl-C): nodes torn down, test.json says status: interrupted
  254  invalid arguments (nothing was started, no run directory was made)
  255  internal or set-up error (no Toxiproxy, no Docker, a crash): the message says
       what to do next; rerun with -v for the log"""


class UsageError(Exception):
    """A command line that cannot run: exit 254 before anything starts."""


class Parser(argparse.ArgumentParser):
    """argparse that exits 254 on a usage error (its own 2 would read as "unknown")."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _number(cast: Callable[[str], Any], ok: Callable[[Any], bool], what: str
            ) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not ok(v) or v != v:  # v != v: NaN
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return v
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
positive_float = _number(float, lambda v: 0 < v < float("inf"), "a positive number")
non_negative_float = _number(float, lambda v: 0 <= v < float("inf"), "a number >= 0")


class LiveProgress:
    """The runner's progress sink: phase, elapsed time, op counts by outcome, faults."""

    def __init__(self, live: Live, time_limit: float) -> None:
        self.live = live
        self.time_limit = time_limit
        self.counts: Counter[str] = Counter()
        self.phase_name = "starting"
        self.last_fault = ""
        self.t = 0.0

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.live.update(self.render())

    def op(self, op: dict[str, Any]) -> None:
        if op.get("process") == "nemesis":
            if op["type"] == "info":
                self.last_fault = f"{op['f']} {op.get('value') or ''}"[:90]
        else:
            self.counts[op["type"]] += 1
        self.t = op.get("time", 0) / 1e9
        if sum(self.counts.values()) % 50 == 0 or op.get("process") == "nemesis":
            self.live.update(self.render())

    def render(self) -> Table:
        t = Table.grid(padding=(0, 2))
        done = min(self.t / self.time_limit, 1.0) if self.time_limit else 0
        bar = "█" * int(done * 30) + "░" * (30 - int(done * 30))
        t.add_row("[bold]phase[/]", self.phase_name)
        t.add_row("[bold]time[/]", f"{bar} {self.t:5.1f}s / {self.time_limit:g}s")
        t.add_row("[bold]ops[/]", f"[green]ok {self.counts['ok']}[/]  [red]fail {self.counts['fail']}[/]"
                  f"  [yellow]info {self.counts['info']}[/]")
        t.add_row("[bold]last fault[/]", self.last_fault or "-")
        return t


def verdict_table(result: Result) -> Table:
    style = {True: "green", False: "bold red", "unknown": "yellow"}
    t = Table(title="verdict")
    t.add_column("checker", no_wrap=True)
    t.add_column("valid", no_wrap=True)
    t.add_column("examined", overflow="fold")
    t.add_column("anomalies", justify="right")
    t.add_column("detail", overflow="fold")
    rows = list(result.leaves()) if result.children else [("all", result)]
    for path, r in rows:
        first = r.anomalies[0].message if r.anomalies else r.note
        t.add_row(path, f"[{style[r.valid]}]{r.valid}[/]", examined_text(r.examined) or "-",
                  str(len(r.anomalies)), (first or "")[:100])
    return t


def _finish(result: Result, run_dir: Path) -> int:
    console.print(verdict_table(result))
    if result.valid is not True:
        console.print(result.explain())
    console.print(f"run dir: [bold]{run_dir}[/]  (results.json, history.jsonl, nodes/)")
    return EXIT[result.valid]


def cmd_run(a: argparse.Namespace) -> int:
    import random

    from harness.nemesis_generator import build_nemesis
    from harness.runner import run
    from harness.spec import TestSpec

    proto = validate_run(a)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
    node_ids = [f"n{i + 1}" for i in range(a.nodes)]
    nemesis, desc = build_nemesis(a.nemesis, a.nemesis_interval, node_ids, seed)
    spec = TestSpec(
        name=a.name or f"{a.protocol}-{a.workload or proto.default_workload}",
        protocol=proto, workload=a.workload or "", nodes=a.nodes, nemesis=nemesis,
        nemesis_desc=desc, time_limit=a.time_limit, concurrency=a.concurrency or a.nodes,
        backend=a.backend, bugs=a.bug, store=a.store, seed=seed,
    )
    console.print(f"[bold]{spec.name}[/]: {a.nodes} nodes on {a.backend}, nemesis {desc}, "
                  f"{a.time_limit:g}s, [bold]seed {spec.seed}[/] (rerun with --seed {spec.seed})")
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        progress = LiveProgress(live, a.time_limit)
        res = run(spec, progress=progress, toxiproxy_url=a.toxiproxy_url)
    return _finish(res.result, res.run_dir.path)


def validate_run(a: argparse.Namespace) -> Any:
    """Every name on the command line against the protocol, before anything starts: a typo
    makes no run directory and starts no process."""
    from faults.schedules import kinds_for
    from harness.protocols import get_protocol

    try:
        proto = get_protocol(a.protocol)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if a.workload is not None and a.workload not in proto.workloads:
        raise UsageError(f"protocol {proto.name} has no workload {a.workload!r}; "
                         f"choose one of: {', '.join(sorted(proto.workloads))}")
    unknown = [b for b in a.bug if b not in proto.bugs]
    if unknown:
        raise UsageError(f"protocol {proto.name} has no bug mode {', '.join(map(repr, unknown))}; "
                         f"choose from: {', '.join(proto.bugs) or '(none)'}")
    names = [n.strip() for n in a.nemesis.split(",") if n.strip()]
    if names != ["none"]:
        try:
            kinds_for(["clock-skew" if n == "clock" else n for n in names], ["n1"])
        except ValueError as e:
            raise UsageError(f"--nemesis: {e}") from None
    return proto


def cmd_check(a: argparse.Namespace) -> int:
    from harness.protocols import get_protocol
    from harness.runner import run_checkers, standard_checkers
    from harness.spec import TestSpec
    from harness.store import RunDir, write_json

    rd = RunDir(Path(a.run_dir).resolve())
    if not rd.test_json.exists():
        raise UsageError(f"{rd.path} is not a run dir (no test.json); see `harness ls`")
    desc = rd.read_test()
    spec = TestSpec(name=desc["name"], protocol=get_protocol(desc["protocol"]),
                    workload=desc.get("workload") or "")
    result, complete = run_checkers(desc, {**spec.resolved_workload().checkers,
                                           **standard_checkers(desc)}, rd)
    write_json(rd.results_json, {"valid": result.valid, "seed": desc.get("seed"),
                                 "result": result.to_json()})
    if not complete:
        console.print(f"[yellow]{result.note}[/]")
    return _finish(result, rd.path)


def cmd_ls(a: argparse.Namespace) -> int:
    from harness.store import runs

    t = Table(title=f"runs in {a.store or 'store'}")
    for c in ("run", "protocol", "nemesis", "seed", "status", "ops", "valid"):
        t.add_column(c)
    for rd in runs(Path(a.store) if a.store else None):
        try:
            d = rd.read_test()
        except ValueError:
            continue
        r = rd.read_results() or {}
        v: Validity | str = r.get("valid", "-")
        t.add_row(str(rd.path.relative_to(rd.path.parent.parent.parent)), str(d.get("protocol")),
                  str(d.get("nemesis")), str(d.get("seed")), str(d.get("status")), str(d.get("ops", "-")),
                  str(v))
    Console().print(t)
    return 0


def cmd_clean(a: argparse.Namespace) -> int:
    from harness.backends.clean import clean

    report = clean(all_runs=a.all, images=a.images, dry_run=a.dry_run)
    console.print(report.summary())
    return 0


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="harness", description="A Jepsen-style chaos harness for replication and "
                "membership protocols.", epilog=EXIT_CODES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    r = sub.add_parser("run", help="run a chaos test against reference nodes", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("protocol")
    r.add_argument("--nodes", type=positive_int, default=5, help="cluster size (default: 5)")
    r.add_argument("--time-limit", type=non_negative_float, default=30.0,
                   help="seconds of workload and faults; 0 runs only the final reads (default: 30)")
    from faults.schedules import named_kinds

    r.add_argument("--nemesis", default="partition,kill",
                   help="comma list of: none, " + ", ".join(sorted(named_kinds(["n1"]))) +
                        " (default: partition,kill)")
    r.add_argument("--nemesis-interval", type=positive_float, default=5.0,
                   help="seconds a fault is held and between faults, about (default: 5)")
    from harness.backends import BACKENDS

    r.add_argument("--backend", default="local", choices=BACKENDS)
    r.add_argument("--seed", type=int)
    r.add_argument("--workload")
    r.add_argument("--concurrency", type=positive_int, help="client threads (default: --nodes)")
    r.add_argument("--bug", action="append", default=[], help="switch on a named bug mode")
    r.add_argument("--name")
    r.add_argument("--store")
    r.add_argument("--toxiproxy-url")
    r.set_defaults(fn=cmd_run)
    c = sub.add_parser("check", help="re-run the checkers on a stored run")
    c.add_argument("run_dir")
    c.set_defaults(fn=cmd_check)
    ls = sub.add_parser("ls", help="list runs in the store")
    ls.add_argument("--store")
    ls.set_defaults(fn=cmd_ls)
    cl = sub.add_parser("clean", help="remove containers, networks, volumes and processes a crashed "
                                      "harness left behind")
    cl.add_argument("--all", action="store_true", help="also those of runs whose harness still lives")
    cl.add_argument("--images", action="store_true", help="also the cached node images")
    cl.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    cl.set_defaults(fn=cmd_clean)
    for ep in sorted(entry_points(group=COMMANDS), key=lambda e: e.name):
        ep.load()(sub)  # ours: report, serve (reports.cli); a plugin's own
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        return a.fn(a)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: nodes and proxies were torn down; the partial run is "
                      "in the store with status: interrupted[/]")
        return INTERRUPTED
    except UsageError as e:
        console.print(f"[red]error:[/] {e}")
        return USAGE
    except Exception as e:  # a set-up failure or a bug of ours: say so, never "unknown"
        console.print(f"[red]error:[/] {type(e).__name__}: {e}")
        console.print("rerun with -v for the log; if it is no set-up problem, it is a harness bug")
        if a.verbose:
            logging.getLogger("harness").exception("internal error")
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
