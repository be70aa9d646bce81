"""The harness command line: run, check, ls, clean, report, serve.

Progress is shown live with rich; a verdict table, with what each checker examined, ends
every run. Exit codes follow Jepsen's (see EXIT_CODES); each subcommand's --help lists its
own, and run --help lists the protocols, workloads and bug modes the registry knows when
the help is built.
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
import tomllib
from collections import Counter
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from checkers.result import Result, Validity, examined_text

if TYPE_CHECKING:
    from harness.spec import ProtocolDef

console = Console(stderr=True)
EXIT = {True: 0, False: 1, "unknown": 2}
#: entry point group of subcommand providers: each is called with the subparsers to add to
COMMANDS = "chaos_harness.commands"
INTERRUPTED, USAGE, INTERNAL = 130, 254, 255
#: the distribution this command belongs to, if pyproject.toml is not beside the package
DIST = "chaos-harness"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
WIDTH = 88  # descriptions and epilogs are filled to this many columns

_VERDICT_CODES = """\
  0    valid: every checker passed and examined something
  1    invalid: a checker found a violation (its witness is printed)
  2    unknown: a checker had nothing to judge, ran out of budget, or evidence was
       missing (a requested fault never applied, a cut-off history, ...)"""
_USAGE_CODE = "  254  invalid arguments (nothing was started, no run directory was made)"
_INTERNAL_CODE = """\
  255  internal or set-up error (no Toxiproxy, no Docker, a crash): the message says
       what to do next; rerun with -v for the log"""
EXIT_CODES = f"""exit codes:
{_VERDICT_CODES}
  130  interrupted (Ctrl-C): nodes torn down, test.json says status: interrupted
{_USAGE_CODE}
{_INTERNAL_CODE}"""
#: what each subcommand's exit status means (run's is EXIT_CODES); a plugin's command that
#: is not listed here gets GENERIC_EXIT_CODES unless it set an epilog of its own
COMMAND_EXIT_CODES: dict[str, str] = {
    "run": EXIT_CODES,
    "check": f"""exit codes:
{_VERDICT_CODES}
  130  interrupted (Ctrl-C); results.json is rewritten only once every checker ran
  254  invalid arguments or no such run (nothing was checked or written)
  255  internal error (the run's protocol is not installed, a checker module fails to
       import, a crash); rerun with -v for the log""",
    "ls": """exit codes:
  0    the runs were listed (an empty or missing store lists none)
  254  invalid arguments
  255  internal error; rerun with -v for the log""",
    "clean": """exit codes:
  0    the leftovers were removed (or, with --dry-run, listed); what was kept is said
  130  interrupted (Ctrl-C)
  254  invalid arguments
  255  internal or set-up error; rerun with -v for the log""",
    "report": """exit codes:
  0    every selected run is valid
  1    at least one selected run is invalid
  2    a run is unknown or could not be read
  254  invalid arguments
  255  internal or set-up error: no Java for the spark engine (install
       openjdk-17-jre-headless, or use --engine local), a crash; rerun with -v""",
    "serve": """exit codes:
  0    the server stopped
  130  interrupted (Ctrl-C): the server stopped
  254  invalid arguments, or no store there
  255  internal or set-up error (the port is taken, a crash); rerun with -v for the log""",
}
GENERIC_EXIT_CODES = """exit codes (a plugin's command; its own documentation may say more):
  0    success
  130  interrupted (Ctrl-C)
  254  invalid arguments
  255  internal or set-up error; rerun with -v for the log"""


def _text(*paragraphs: str) -> str:
    """Plain paragraphs filled to WIDTH (help text is not reStructuredText)."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), WIDTH) for p in paragraphs)


def _pyproject() -> dict[str, Any]:
    try:
        return tomllib.loads(PYPROJECT.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def package_version() -> str:
    """The installed distribution's version; pyproject.toml's when it is not installed."""
    project = _pyproject()
    try:
        return version(project.get("name") or DIST)
    except PackageNotFoundError:
        return str(project.get("version") or "unknown")


class _Version(argparse.Action):
    """--version, looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> NoReturn:
        name = _pyproject().get("name") or DIST
        sys.stdout.write(f"{parser.prog} ({name}) {package_version()}\n")
        parser.exit(0)


class UsageError(Exception):
    """A command line that cannot run: exit 254 before anything starts."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions and epilogs keep their line breaks; an option's default is shown unless it
    has none (None, False, []) or its help already says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, [], argparse.SUPPRESS):
            return action.help
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)".lstrip()
        return action.help


class Parser(argparse.ArgumentParser):
    """argparse that exits 254 on a usage error (its own 2 would read as "unknown").

    ``build_epilog``, when set, makes the epilog when the help is shown (run's lists what the
    protocol registry holds at that moment)."""

    build_epilog: Callable[[], str] | None = None

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:
        if self.build_epilog is not None:
            self.epilog = self.build_epilog()
        return super().format_help()


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
    console.print(f"run dir: [bold]{run_dir}[/]  (results.json, history.jsonl, nodes/)",
                  soft_wrap=True)
    return EXIT[result.valid]


def cmd_run(a: argparse.Namespace) -> int:
    from harness.runner import run

    spec = run_spec(a)
    replay = f", replaying {a.from_}" if a.from_ else ""
    sim_rec = getattr(a, "sim_replay", None)
    for note in getattr(a, "sim_notes", []):
        _say(f"sim replay: {note}")
    console.print(f"[bold]{spec.name}[/]: {spec.nodes} nodes on {spec.backend}, nemesis "
                  f"{spec.nemesis_desc}, {spec.time_limit:g}s, [bold]seed {spec.seed}[/]"
                  f"{replay} (rerun with --seed {spec.seed})", highlight=False)
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        progress = LiveProgress(live, spec.time_limit)
        res = run(spec, progress=progress, toxiproxy_url=a.toxiproxy_url)
    code = _finish(res.result, res.run_dir.path)
    if sim_rec is not None:
        from harness.sim.realrun import verdict_line

        console.print(verdict_line(res.result, sim_rec.get("witness") or []),
                      markup=False, highlight=False, soft_wrap=True)
        _say(f"replay: harness run --from {a.from_}")
        return code
    _say(f"replay: harness run --from {res.run_dir.test_json}")
    return code


def run_spec(a: argparse.Namespace) -> Any:
    """The TestSpec a ``harness run`` command line asks for: from PROTOCOL and the options
    (unset ones at replay.CLI_DEFAULTS), or from a stored run's test.json (``--from``) with the
    options given put over the stored ones. Every name is checked before anything starts."""
    import random

    from harness.nemesis_generator import Faults
    from harness.replay import CLI_DEFAULTS, ReplayError, spec_from_record
    from harness.spec import TestSpec, node_bugs

    if a.node_command is not None:
        from harness.node_command import NodeCommandError, parse

        try:
            parse(a.node_command)
        except NodeCommandError as e:
            raise UsageError(str(e)) from None
    if a.from_ is not None:
        if a.protocol is not None:
            raise UsageError(f"give PROTOCOL ({a.protocol}) or --from, not both: --from "
                             "replays the stored run's protocol")
        path, record = read_record(a.from_, a.store)
        from harness.sim.realrun import is_replay

        if is_replay(record):
            return _sim_replay_spec(a, record)
        if a.sim_scale is not None:
            raise UsageError("--sim-scale is for a sim replay file ('harness sim run' writes "
                             f"one); {path} is a stored run's test.json")
        if a.topology is not None:
            raise UsageError("--topology cannot change a replayed run: --from keeps the stored "
                             "run's topology")
        if a.zones is not None:
            raise UsageError("--zones cannot change a replayed run: --from keeps the stored "
                             "run's zones (its options.zone_count)")
        if a.add_member or (record.get("add_member") and a.nodes is not None):
            raise UsageError("--add-member and --nodes cannot change a replayed run that adds "
                             "members: --from keeps the stored run's members and additions")
        if a.decommission:
            raise UsageError("--decommission cannot change a replayed run: --from keeps the "
                             "stored run's decommissions")
        overrides = {"nodes": a.nodes, "time_limit": a.time_limit, "nemesis": a.nemesis,
                     "nemesis_interval": a.nemesis_interval, "backend": a.backend,
                     "seed": a.seed, "workload": a.workload, "concurrency": a.concurrency,
                     "bugs": a.bug, "name": a.name, "node_command": a.node_command,
                     "kill_for_good": kill_for_good(
                         a.kill_for_good, a.time_limit or record.get("time_limit")) or None,
                     # beside the replayed run unless told otherwise: <store>/<test>/<run>
                     "store": a.store or str(path.parent.parent.parent)}
        try:
            spec = spec_from_record(record, overrides)
        except ValueError as e:  # ReplayError, or a protocol/workload the registry lacks
            what = "cannot be replayed" if isinstance(e, ReplayError) else "is not replayable here"
            raise UsageError(f"{path} {what}: {e}") from None
        validate_names(spec.protocol.name, spec.workload or None, spec.bugs,
                       spec.faults.kinds if spec.faults else "none")
        return spec
    if a.protocol is None:
        raise UsageError("give a PROTOCOL to run (see the list in 'harness run --help'), or "
                         "--from RUN/test.json to replay a stored run")
    opt = {k: CLI_DEFAULTS[k] if getattr(a, k) is None else getattr(a, k)
           for k in ("nodes", "time_limit", "nemesis", "nemesis_interval", "backend")}
    proto = validate_names(a.protocol, a.workload, a.bug, opt["nemesis"])
    if "clock-rate" in [n.strip() for n in opt["nemesis"].split(",")] and \
            opt["backend"] != "local":
        raise UsageError(f"--nemesis clock-rate needs --backend local, not {opt['backend']}: "
                         "it preloads libfaketime into each node process (faults/clockrate.py)")
    topology = None
    if a.topology not in (None, "full"):
        if a.topology not in proto.topologies:
            raise UsageError(f"protocol {proto.name} has no topology {a.topology!r}; choose "
                             f"one of: {', '.join(['full', *sorted(proto.topologies)])}")
        topology = proto.topologies[a.topology]
    try:
        node_bugs(a.bug, 1, opt["nodes"])
    except ValueError as e:
        raise UsageError(f"--bug: {e}") from None
    options = {}
    if a.zones is not None:
        if proto.name != "antacid":
            raise UsageError(f"--zones is for antacid (zones with a primary each); protocol "
                             f"{proto.name} has none")
        options["zone_count"] = a.zones
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
    nodes = [f"n{i + 1}" for i in range(opt["nodes"])]
    gone = kill_for_good(a.kill_for_good, opt["time_limit"])
    added = add_member(a, proto, nodes, opt["time_limit"], gone)
    if unknown := sorted(set(gone) - set(nodes)):
        raise UsageError(f"--kill-for-good: {unknown} are not nodes of this run ({nodes[0]}.."
                         f"{nodes[-1]}, from --nodes)")
    if late := sorted(n for n, at in gone.items() if at >= opt["time_limit"]):
        raise UsageError(f"--kill-for-good: {late} would be killed after the run's "
                         f"--time-limit {opt['time_limit']:g}s; give an earlier @SECONDS")
    return TestSpec(
        name=a.name or f"{a.protocol}-{a.workload or proto.default_workload}",
        protocol=proto, workload=a.workload or "", nodes=opt["nodes"] + len(added),
        faults=Faults(opt["nemesis"], opt["nemesis_interval"]), time_limit=opt["time_limit"],
        concurrency=a.concurrency or opt["nodes"], backend=opt["backend"], bugs=a.bug,
        store=a.store, seed=seed, node_command=a.node_command, topology=topology,
        quiesce_s=quiesce_for(proto, opt["nodes"]), kill_for_good=gone, options=options,
        add_member=added, decommission=decommission(a, proto, gone, opt["time_limit"]),
    )


def decommission(a: argparse.Namespace, proto: ProtocolDef, gone: dict[str, float],
                 time_limit: float) -> dict[str, float]:
    """``--decommission NODE[@SECONDS]`` values as node -> seconds (default: two thirds of
    the time limit), checked: the protocol has the membership op, NODE is killed for good
    earlier in the run, the time is inside it."""
    untimed = {arg.strip() for arg in a.decommission if "@" not in arg}
    out = {n: 2 * time_limit / 3 if n in untimed else at
           for n, at in kill_for_good(a.decommission, time_limit, flag="--decommission").items()}
    if out and proto.member_entry is None:
        raise UsageError(f"--decommission: protocol {proto.name} has no membership op to remove "
                         "a member with; drip has one")
    for node, at in out.items():
        if node not in gone:
            raise UsageError(f"--decommission {node}: decommission a node this run kills for "
                             f"good (--kill-for-good {node}@SECONDS, earlier)")
        if not gone[node] < at < time_limit:
            raise UsageError(f"--decommission {node}@{at:g}: give a time after its kill for "
                             f"good at {gone[node]:g}s and before --time-limit {time_limit:g}s")
    return out


def add_member(a: argparse.Namespace, proto: ProtocolDef, nodes: list[str],
               time_limit: float, gone: dict[str, float]) -> dict[str, float]:
    """``--add-member NODE[@SECONDS]`` values as node -> seconds, checked: the protocol has
    the op, the names are the next free ones after --nodes, the times inside the run, and no
    option beside it that cannot hold a node unknown at the start."""
    added = kill_for_good(a.add_member, time_limit, flag="--add-member")
    if not added:
        return added
    if proto.member_entry is None:
        raise UsageError(f"--add-member: protocol {proto.name} has no add-member op (a member "
                         "added at run time through its membership API); drip has one")
    if clash := sorted(set(added) & set(nodes)):
        raise UsageError(f"--add-member: {clash} clash with nodes of this run ({nodes[0]}.."
                         f"{nodes[-1]}, from --nodes); name new nodes from n{len(nodes) + 1}")
    want = [f"n{len(nodes) + i + 1}" for i in range(len(added))]
    if sorted(added, key=lambda n: (len(n), n)) != want:
        raise UsageError(f"--add-member: name the added nodes {', '.join(want)} (the next free "
                         f"names after --nodes {len(nodes)}), not {', '.join(sorted(added))}")
    if late := sorted(n for n, at in added.items() if at >= time_limit):
        raise UsageError(f"--add-member: {late} would be added after the run's --time-limit "
                         f"{time_limit:g}s; give an earlier @SECONDS")
    if gone_too := sorted(set(gone) & set(added)):
        raise UsageError(f"--add-member with --kill-for-good of the same node {gone_too}: "
                         "kill for good names first members only")
    if a.topology not in (None, "full"):
        raise UsageError(f"--add-member with --topology {a.topology}: an added node joins a "
                         "full mesh; leave --topology out")
    return added


def _sim_replay_spec(a: argparse.Namespace, record: dict[str, Any]) -> Any:
    """A real run of a sim replay file: its faults mapped onto the nemesis
    (harness/sim/realrun.py), its bug modes, seed and protocol; the options that make sense
    beside it (--seed, --time-limit, --name, --store, --backend, --sim-scale) are applied, the
    rest refused."""
    from harness.sim.realrun import Unsupported, profile, spec_for

    fixed = {"--nodes": a.nodes, "--nemesis": a.nemesis, "--nemesis-interval": a.nemesis_interval,
             "--workload": a.workload, "--topology": a.topology, "--concurrency": a.concurrency,
             "--bug": a.bug or None, "--node-command": a.node_command,
             "--kill-for-good": a.kill_for_good or None, "--zones": a.zones,
             "--add-member": a.add_member or None, "--decommission": a.decommission or None}
    given = [k for k, v in fixed.items() if v is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot change a sim replay: its schedule, bug modes "
                         "and cluster come from the file")
    try:
        profile(str(record.get("protocol")))
    except ValueError as e:
        raise UsageError(str(e)) from None
    proto = validate_names(record["protocol"], None, list(record.get("bug") or []), "none")
    try:
        spec, mapped = spec_for(record, proto, scale=a.sim_scale or 1.0, seed=a.seed,
                                time_limit=a.time_limit, name=a.name, store=a.store,
                                backend=a.backend or "local",
                                quiesce_s=quiesce_for(proto, profile(proto.name).nodes,
                                                      profile(proto.name).options))
    except Unsupported as e:
        raise UsageError(f"--from {a.from_}: {e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--from {a.from_}: not a usable sim replay file: {e}") from None
    a.sim_replay, a.sim_notes = record, mapped.notes
    return spec


def kill_for_good(args: list[str], time_limit: float | None,
                  flag: str = "--kill-for-good") -> dict[str, float]:
    """``--kill-for-good NODE[@SECONDS]`` values (or ``flag``'s: same shape) as node ->
    seconds (default: a third of the time limit)."""
    from harness.replay import CLI_DEFAULTS

    out: dict[str, float] = {}
    for arg in args:
        node, _, at = arg.partition("@")
        try:
            out[node.strip()] = float(at) if at else (
                time_limit or CLI_DEFAULTS["time_limit"]) / 3
        except ValueError:
            raise UsageError(f"{flag} {arg!r}: give NODE or NODE@SECONDS, e.g. "
                             "n1@5") from None
        if out[node.strip()] < 0:
            raise UsageError(f"{flag} {arg!r}: SECONDS must not be negative")
    return out


def quiesce_for(proto: ProtocolDef, nodes: int, options: dict[str, Any] | None = None
                ) -> float:
    """The pause after the heal: at least the protocol's liveness bound (+0.5 s), so a run
    goes on long enough after its last heal for liveness to be judged rather than come out
    unknown (ANTACID's bound grows with the replication depth); never under the 3 s default.
    ``options``: the run's own node options over the protocol's defaults (a sim replay's
    timers: SWIM's bound grows with its period)."""
    from checkers.liveness import PROTOCOLS, bound_of

    if proto.name not in PROTOCOLS and proto.name != "swim":
        return 3.0
    test = {"nodes": [f"n{i}" for i in range(1, nodes + 1)],
            "node_options": {**proto.default_options, **(options or {})}}
    return max(3.0, bound_of(test, proto.name) + 0.5)


def read_record(arg: str, store: str | None) -> tuple[Path, dict[str, Any]]:
    """(path, contents) of the test.json ``--from`` names: the file itself, a run directory,
    or a run id as ``harness ls`` prints it."""
    import json

    path = Path(arg)
    if path.suffix == ".json" and not path.is_file():
        raise UsageError(f"--from: there is no file {path.resolve()}; give a run's test.json, "
                         "its run dir or its id (see 'harness ls')")
    if not path.is_file():
        path = resolve_run(arg, store).test_json
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"--from: {path} cannot be read as a run's test.json: {e}") from None
    if not isinstance(record, dict):
        raise UsageError(f"--from: {path} is not a run's test.json (not a JSON object)")
    return path.resolve(), record


def validate_names(protocol: str, workload: str | None, bugs: list[str], nemesis: str) -> Any:
    """Every name on the command line against the protocol, before anything starts: a typo
    makes no run directory and starts no process. Returns the ProtocolDef."""
    from faults.schedules import kinds_for
    from harness.protocols import get_protocol

    try:
        proto = get_protocol(protocol)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if workload is not None and workload not in proto.workloads:
        raise UsageError(f"protocol {proto.name} has no workload {workload!r}; "
                         f"choose one of: {', '.join(sorted(proto.workloads))}")
    from harness.spec import bug_name

    unknown = [b for b in bugs if bug_name(b) not in proto.bugs]
    if unknown:
        raise UsageError(f"protocol {proto.name} has no bug mode {', '.join(map(repr, unknown))}; "
                         f"choose from: {', '.join(proto.bugs) or '(none)'}")
    names = [n.strip() for n in nemesis.split(",") if n.strip()]
    if names != ["none"]:
        try:
            kinds_for(["clock-skew" if n == "clock" else n for n in names], ["n1"])
        except ValueError as e:
            raise UsageError(f"--nemesis: {e}") from None
    return proto


def resolve_run(arg: str, store: str | None) -> Any:
    """A run dir from what the user typed: a path to it, or an id as ``harness ls`` prints it
    (<test>/<run-id>, or the bare <run-id> when it names one run) looked up in the store."""
    from harness.store import DEFAULT_STORE, RunDir, runs

    given = Path(arg)
    if (given / "test.json").is_file():
        return RunDir(given.resolve())
    root = Path(store) if store else DEFAULT_STORE
    if arg and (root / arg / "test.json").is_file():
        return RunDir((root / arg).resolve())
    if arg and "/" not in arg:
        found = [rd for rd in runs(root) if rd.path.name == arg]
        if len(found) == 1:
            return found[0]
        if found:
            raise UsageError(f"run id {arg} is in {len(found)} tests; give one of: "
                             + ", ".join(run_id(rd) for rd in found))
    raise UsageError(f"{given.resolve()} is not a run dir (no test.json), nor a run id in the "
                     f"store {root}; see 'harness ls'")


def _verdict_of(path: Path) -> str:
    """The verdict a results file holds, for saying what is about to be replaced."""
    import json

    try:
        return str(json.loads(path.read_text())["valid"])
    except FileNotFoundError:
        return "none"
    except (ValueError, KeyError, TypeError, OSError):
        return "unreadable"


def _say(text: str) -> None:
    """A plain line on stderr: paths unwrapped and free of rich markup."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def cmd_check(a: argparse.Namespace) -> int:
    import os
    import shutil

    from harness.protocols import get_protocol
    from harness.runner import run_checkers, standard_checkers
    from harness.spec import TestSpec
    from harness.store import write_json

    rd = resolve_run(a.run_dir, a.store)
    out = Path(a.out).resolve() if a.out else rd.results_json
    if not out.parent.is_dir():
        raise UsageError(f"--out: there is no directory {out.parent}")
    previous = _verdict_of(rd.results_json)
    rewrite = out == rd.results_json
    prev_json = rd.path / "results.prev.json"
    if rewrite and rd.results_json.exists():
        _say(f"rewriting {out}; the previous verdict was {previous} (kept as {prev_json})")
    elif rewrite:
        _say(f"writing {out}; there was no previous verdict")
    elif rd.results_json.exists():
        _say(f"writing {out}; {rd.results_json} is left as it is (its verdict: {previous})")
    else:
        _say(f"writing {out}; the run has no results.json and is left without one")
    desc = rd.read_test()
    spec = TestSpec(name=desc["name"], protocol=get_protocol(desc["protocol"]),
                    workload=desc.get("workload") or "")
    result, complete = run_checkers(desc, {**spec.resolved_workload().checkers,
                                           **standard_checkers(desc)}, rd)
    if rewrite and rd.results_json.exists():  # atomically, like every store write
        tmp = prev_json.with_suffix(".json.tmp")
        shutil.copyfile(rd.results_json, tmp)
        os.replace(tmp, prev_json)
    write_json(out, {"valid": result.valid, "seed": desc.get("seed"), "result": result.to_json()})
    if not complete:
        console.print(f"[yellow]{result.note}[/]")
    code = _finish(result, rd.path)
    if previous != str(result.valid):
        _say(f"the verdict changed: {previous} before, {result.valid} now (in {out})")
    return code


def run_id(rd: Any) -> str:
    """A run's id in its store: <test>/<run-id>, what ``harness check`` takes."""
    return f"{rd.path.parent.name}/{rd.path.name}"


def _started_from_id(name: str) -> str | None:
    """new_run names a run by its local start time: 20261121T010000-1a2b3c."""
    import time

    try:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.strptime(name.split("-")[0],
                                                                 "%Y%m%dT%H%M%S"))
    except ValueError:
        return None


def list_runs(store: Path | None) -> list[dict[str, Any]]:
    """Every readable run in the store, oldest first, as ``harness ls --json`` prints it."""
    from harness.store import runs

    out = []
    for rd in runs(store):
        try:
            d = rd.read_test()
        except (ValueError, OSError):
            continue  # a half-made or foreign directory: not a run to list
        try:
            verdict: Validity | str | None = (rd.read_results() or {}).get("valid")
        except (ValueError, OSError):
            verdict = "unreadable"
        out.append({
            "id": run_id(rd), "run_id": rd.path.name, "test": rd.path.parent.name,
            "path": str(rd.path), "protocol": d.get("protocol"), "workload": d.get("workload"),
            "nemesis": d.get("nemesis"), "seed": d.get("seed"), "status": d.get("status"),
            "ops": d.get("ops"), "started": d.get("started") or _started_from_id(rd.path.name),
            "verdict": verdict,
        })
    return out


def cmd_ls(a: argparse.Namespace) -> int:
    import json

    from harness.store import DEFAULT_STORE

    store = Path(a.store) if a.store else DEFAULT_STORE
    rows = list_runs(store)
    if a.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    t = Table(title=f"runs in {store}")
    # the id is what one pastes into `harness check`: never cut, folded or ellipsised
    t.add_column("run", no_wrap=True, overflow="ignore",
                 min_width=max((len(r["id"]) for r in rows), default=3))
    for c in ("protocol", "nemesis", "seed", "status", "ops", "verdict"):
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(r["id"], *(("-" if r[k] is None else str(r[k])) for k in
                             ("protocol", "nemesis", "seed", "status", "ops", "verdict")))
    out = Console()
    need = out.measure(t, options=out.options.update_width(10_000)).minimum
    Console(width=max(out.width, need)).print(t)  # wider than the terminal rather than cut
    return 0


def cmd_clean(a: argparse.Namespace) -> int:
    from harness.backends.clean import clean

    report = clean(all_runs=a.all, images=a.images, dry_run=a.dry_run)
    console.print(report.summary())
    return 0


def protocols_text() -> str:
    """Every registered protocol with its workloads and bug modes, read from the registry now
    (ours and the chaos_harness.protocols entry points); a suite that fails to load says so."""
    from harness.protocols import GROUP, get_protocol, names

    lines = [f"protocols (built-in suites and the {GROUP} entry points):"]
    try:
        known = names()
    except Exception as e:  # e.g. two suites claiming one name: say so, still show the help
        return "\n".join([*lines, f"  (the registry cannot be read: {e})"])
    for name in known:
        lines.append(f"  {name}")
        try:
            proto = get_protocol(name)
        except Exception as e:
            lines.append(f"    (cannot be loaded: {type(e).__name__}: {e})")
            continue
        default = proto.default_workload or next(iter(proto.workloads), "")
        workloads = [f"{w} (default)" if w == default else w for w in proto.workloads]
        for label, items in (("workloads", workloads), ("bug modes", list(proto.bugs))):
            lines.append(textwrap.fill(f"{label}: {', '.join(items) or '(none)'}", WIDTH,
                                       initial_indent="    ", subsequent_indent="      ",
                                       break_on_hyphens=False))
    return "\n".join(lines)


def nemesis_text() -> str:
    """The fault kinds --nemesis accepts, from the fault menu."""
    from faults.schedules import named_kinds

    kinds = ", ".join(["none", *sorted(named_kinds(["n1"]))])
    return "nemesis fault kinds (--nemesis takes a comma list; clock means clock-skew):\n" + \
        textwrap.fill(kinds, WIDTH, initial_indent="  ", subsequent_indent="  ",
                      break_on_hyphens=False)


def run_epilog() -> str:
    return "\n\n".join([protocols_text(), nemesis_text(), EXIT_CODES])


STORE_HELP = "the run store (default: $HARNESS_STORE, else ./store)"


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="harness", formatter_class=HelpFormatter, description=_text(
        "A Jepsen-style chaos harness for replication and membership protocols: it starts a "
        "protocol's reference nodes, drives a client workload at them while a nemesis injects "
        "faults (partitions, kills, pauses, clock skew, slow or lossy links), records every "
        "operation, and checks the history and the nodes' own evidence.",
        "Every run is stored as a directory <store>/<test>/<run-id>/ holding test.json, "
        "history.jsonl, nodes/ and results.json; <store>/latest points at the newest."),
        epilog=EXIT_CODES + "\n\nrun 'harness COMMAND --help' for a command's options and "
        "what its exit status means.")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="log at INFO level to stderr; print the traceback of an internal error")
    ap.add_argument("--version", action=_Version, help="print the version and exit")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser, metavar="COMMAND")

    r = sub.add_parser("run", help="run a chaos test against a protocol's reference nodes",
                       formatter_class=HelpFormatter, description=_text(
        "Start a cluster of PROTOCOL's reference nodes, run one of its workloads against it "
        "for --time-limit seconds while the nemesis injects faults, heal, run the final "
        "reads, collect every node's state, and check the history and that evidence. The run "
        "is stored in the store whatever happens; its verdict ends the output.",
        "Every name given (protocol, --workload, --bug, --nemesis) is checked before anything "
        "starts: a typo starts no process and makes no run directory."))
    r.build_epilog = run_epilog
    r.add_argument("protocol", nargs="?", help="a protocol from the list below (not with --from)")
    r.add_argument("--from", dest="from_", metavar="RUN/test.json",
                   help="replay a stored run: its protocol, workload, nodes, concurrency, time "
                        "limit, faults and their interval, seed, bug modes, backend, options "
                        "and timing, from its test.json (or a run dir, or a run id as 'harness "
                        "ls' prints it); options given beside it override the stored ones; "
                        "the replay is stored beside that run unless --store is given. A "
                        "sim replay file ('harness sim run' writes one) instead plays its "
                        "schedule on real processes and says whether they confirm the finding "
                        "(docs/sim.md)")
    from harness.replay import CLI_DEFAULTS as d  # the defaults a spec gets: said once

    r.add_argument("--nodes", type=positive_int, help=f"cluster size (default: {d['nodes']})")
    r.add_argument("--time-limit", type=non_negative_float,
                   help="seconds of workload and faults; 0 runs only the final reads "
                        f"(default: {d['time_limit']})")
    r.add_argument("--nemesis", help="comma list of fault kinds (listed below), or none "
                                     f"(default: {d['nemesis']})")
    r.add_argument("--nemesis-interval", type=positive_float,
                   help="seconds a fault is held and between faults, about "
                        f"(default: {d['nemesis_interval']})")
    from harness.backends import BACKENDS

    r.add_argument("--backend", choices=BACKENDS,
                   help="where nodes run: local processes, docker containers (host or bridge "
                        f"network) or ssh hosts (default: {d['backend']})")
    r.add_argument("--seed", type=int,
                   help="seed of the workload and fault schedule; the same seed replays the "
                        "same schedule (default: a random one, printed)")
    r.add_argument("--workload", help="one of the protocol's workloads (default: the one marked "
                                      "default below)")
    r.add_argument("--topology", metavar="SHAPE",
                   help="which nodes peer with which: full (the default), or a shape the "
                        "protocol offers (DRiP: figure1, ring, line); partitions are then drawn "
                        "against it")
    r.add_argument("--concurrency", type=positive_int, help="client threads (default: --nodes)")
    r.add_argument("--bug", action="append", default=[], metavar="MODE",
                   help="switch on one of the protocol's bug modes (listed below); repeatable; "
                   "MODE@1,3 puts it on servers n1 and n3 only (a mixed cluster)")
    r.add_argument("--node-command", metavar="CMD",
                   help="start your own implementation instead of the reference node: a command "
                        "with {config} (the node's config file), optionally {python} and {id}; "
                        "see docs/extending.md")
    r.add_argument("--kill-for-good", action="append", default=[], metavar="NODE[@SECONDS]",
                   help="kill NODE at SECONDS into the run (default: a third of --time-limit) "
                        "and leave it down through the final heal: the checkers judge the run "
                        "without it (ANTACID's primary: availability unknown, safety judged on "
                        "the replicas); beside --nemesis; repeatable")
    r.add_argument("--add-member", action="append", default=[], metavar="NODE[@SECONDS]",
                   help="DRiP: a node beyond --nodes (n5 after --nodes 4), known to no member, "
                        "added at SECONDS into the run (default: a third of --time-limit) "
                        "through a member's POST /admin/members, then started with join; "
                        "faults target the first members; repeatable")
    r.add_argument("--decommission", action="append", default=[], metavar="NODE[@SECONDS]",
                   help="DRiP: after --kill-for-good NODE, a running member removes NODE "
                        "through POST /admin/members at SECONDS (default: two thirds of "
                        "--time-limit), so updates commit without it again; repeatable")
    r.add_argument("--zones", type=positive_int, metavar="N",
                   help="ANTACID: N zones on every node, zone k's primary on node k (wrapping), "
                        "submissions spread over them; each zone judged apart (default: 1)")
    r.add_argument("--name", help="test name, the store directory the run goes in (default: "
                                  "PROTOCOL-WORKLOAD)")
    r.add_argument("--store", help=STORE_HELP)
    r.add_argument("--sim-scale", type=positive_float, metavar="FACTOR",
                   help="with --from a sim replay file ('harness sim run' writes one): play "
                        "its schedule's waits FACTOR times as long (default: 1)")
    r.add_argument("--toxiproxy-url", metavar="URL",
                   help="API URL of a running Toxiproxy server for TCP faults (default: "
                        "$TOXIPROXY_URL, else one started for the run)")
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("check", help="re-run the checkers on a stored run",
                       formatter_class=HelpFormatter, description=_text(
        "Re-run every checker of a stored run's protocol and workload on its history and node "
        "evidence, print the verdict table, and rewrite the run's results.json with the new "
        "verdict. Before it does, it says which file it rewrites and what the previous verdict "
        "was, and keeps the previous file as results.prev.json. With --out the new verdict is "
        "written to that file instead and results.json is left as it is. Checkers that write "
        "explanations (pages, plots) write them into the run directory either way."))
    c.add_argument("run_dir", metavar="RUN",
                   help="a run directory, or a run id as 'harness ls' prints it "
                        "(<test>/<run-id>, or the bare <run-id>), looked up in the store")
    c.add_argument("--store", help=STORE_HELP + "; where a run id is looked up")
    c.add_argument("--out", metavar="FILE",
                   help="write the new results to FILE (relative to the current directory) "
                        "and leave results.json untouched (default: rewrite results.json)")
    c.set_defaults(fn=cmd_check)

    ls = sub.add_parser("ls", help="list the runs in the store", formatter_class=HelpFormatter,
                        description=_text(
        "List every run in the store, oldest first: its id (what 'harness check' takes; never "
        "shortened), protocol, nemesis, seed, status, op count and stored verdict. With --json "
        "the same runs, with their paths, workloads and start times, are printed as a JSON "
        "list for scripts."))
    ls.add_argument("--store", help=STORE_HELP)
    ls.add_argument("--json", action="store_true",
                    help="print a JSON list of runs instead of a table")
    ls.set_defaults(fn=cmd_ls)

    cl = sub.add_parser("clean", help="remove containers, networks, volumes and processes a crashed "
                                      "harness left behind", formatter_class=HelpFormatter,
                        description=_text(
        "Remove what a harness killed without cleaning up left behind: docker containers, "
        "volumes and networks labelled as ours whose harness process is gone, node "
        "directories on the ssh hosts of $HARNESS_SSH_HOSTS whose owner is gone, and the ssh "
        "backend's own loopback sshd leftovers. What a live harness still owns is kept. The "
        "run store is never touched."))
    cl.add_argument("--all", action="store_true", help="also those of runs whose harness still lives")
    cl.add_argument("--images", action="store_true", help="also the cached node images")
    cl.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    cl.set_defaults(fn=cmd_clean)

    from harness.sim.cli import add_commands as add_sim

    add_sim(sub)  # sim run, sim replay
    for ep in sorted(entry_points(group=COMMANDS), key=lambda e: e.name):
        ep.load()(sub)  # ours: report, serve (reports.cli); a plugin's own
    summaries = {a.dest: a.help for a in sub._choices_actions}
    for name, p in sub.choices.items():  # a plugin's commands get the same kind of help
        if p.formatter_class is argparse.HelpFormatter:
            p.formatter_class = HelpFormatter
        if p.description is None and summaries.get(name):
            summary = str(summaries[name])
            p.description = _text(summary[:1].upper() + summary[1:] + ".")
        for action in p._actions:  # options a plugin left without help still show defaults
            if action.help is None and action.option_strings:
                if action.dest == "store":
                    action.help = STORE_HELP
                elif action.default not in (None, False, [], argparse.SUPPRESS):
                    action.help = "(default: %(default)s)"
        if p.epilog is None:
            p.epilog = COMMAND_EXIT_CODES.get(name, GENERIC_EXIT_CODES)
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
    except UsageError as e:  # soft-wrapped: a path or command in it stays one copyable line
        console.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
        return USAGE
    except Exception as e:  # a set-up failure or a bug of ours: say so, never "unknown"
        console.print(f"[red]error:[/] {type(e).__name__}: {escape(str(e))}", soft_wrap=True)
        console.print("rerun with -v for the log; if it is no set-up problem, it is a harness bug")
        if a.verbose:
            logging.getLogger("harness").exception("internal error")
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
