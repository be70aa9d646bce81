"""pytest plugin (pytest11 entry point): the ``chaos`` marker, options and fixtures.

A chaos test says what must have happened, not only what must not: a green that could come
from a run which tested nothing is worth nothing.

- ``chaos_run(spec, min_ok=N)``: run a TestSpec with the session's options applied (backend,
  seed, time, Toxiproxy URL). The test fails, with the witness and the run dir, unless
  (:func:`correct_run_shortfalls`) the run is valid, at least ``min_ok`` client ops completed
  ``ok``, the ``faults`` leaf (added to every run with a nemesis) is True (each requested
  fault kind was applied at least once), and every True leaf examined something (a non-zero
  count in ``Result.examined``). ``min_ok`` defaults to 1; a test states its own minimum.
- ``chaos_run(build, expect="raft.vote-safety", anomaly=None, min_ok=N)``: a bug-mode test.
  ``build`` is a factory, ``lambda: TestSpec(...)`` or the test's own spec builder, that turns
  the bug on; it is called twice, because a nemesis generator is consumed by its run. The
  first spec runs with its bugs and the named *leaf* (a dotted path to a result without
  children; a composite such as ``"ordering"`` fails the test, listing its leaves) must be
  False, with an anomaly of kind ``anomaly`` when given (for a leaf such as ``2pc`` that
  reports several properties). The second spec is the correct-node control: the same seed and
  schedule with ``bugs=[]`` (and ``-control`` added to its name); there the leaf must be True
  and have examined something, ``min_ok`` ops must be ok and the faults applied, else the
  test cannot tell "caught the bug" from "flags this schedule anyway". The factory must build
  a new spec with the same seed each time (give the builder a fixed ``seed``). Returns the
  buggy run's ``RunResult``.
- ``chaos_seed``: the seed a test draws from (``--chaos-seed``, else a fixed one per test).
  ``--chaos-seed`` also reseeds every spec a ``chaos_run`` is given, and named faults
  (``TestSpec(faults=Faults("partition,kill"))``) are drawn from the spec's seed when the run
  starts, so the option replays fault schedules too.
- ``chaos_cluster(spec)``: an async context manager giving a started cluster (nodes, proxies,
  nemesis via ``cluster.nemesis_invoke``), with a history writer in its run dir in the store;
  for tests that drive ops and faults themselves (docs/nightly.md has an example).
- ``chaos_run(..., backend="docker")``: a test about one backend pins it.
- Time limit: ``--chaos-time``, else the ``chaos_time`` ini setting, else
  ``$HARNESS_TIME_LIMIT`` (checked at start). Named faults take it as it is; an explicit
  schedule is only lengthened; ``min_ok`` is scaled down to a shorter run.
- The nightly (``scripts/nightly``, ``harness.nightly``): ``--chaos-replay FILE`` runs only
  the tests FILE names, each with its seed; ``--chaos-outcomes FILE`` writes each test's
  outcome and seed when the session ends.
- The reaper: a session with chaos tests first removes what killed sessions left
  (``harness clean``'s rule: labelled resources whose owner pid is gone on this host);
  ``--chaos-no-reap`` skips it.
- ``chaos_toxiproxy``: the one Toxiproxy server of the session (its URL), shared by every
  run; ``--toxiproxy-url`` or ``$TOXIPROXY_URL`` names one to use instead.
- ``chaos_store``: the store every run of the session is written into, so ``harness report``
  over it sees them (``--chaos-store``, else the ``chaos_store`` ini setting, else
  ``$HARNESS_STORE``, else ``store/``; a relative path is taken from where pytest was
  started). Each run's seed and run dir are JUnit properties (``seed``, ``run_dir``), and the
  terminal summary lists the run dirs of the tests that failed.

The checks are pure functions of a ``Result`` tree and a count, so they are unit-tested on
hand-made trees and shared with tests that call the runner themselves (the backend tests).

Chaos tests run only when selected: ``pytest -m chaos`` (exactly the chaos tests), ``--chaos``
(everything), any ``-m`` expression that picks them (``-m "not chaos or smoke"`` is the
default test command's unit + bounded smoke set), or their file or node id named on the
command line. A plain ``pytest`` runs the rest and says how many chaos tests it left out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from checkers.result import Result, examined_text

if TYPE_CHECKING:
    from harness.runner import RunResult
    from harness.spec import TestSpec


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("chaos", "chaos tests (chaos-harness)")
    from harness.backends import BACKENDS

    g.addoption("--chaos-backend", default=None, choices=sorted(BACKENDS),
                help="where nodes run (default: the chaos_backend ini setting, else "
                     "$HARNESS_BACKEND, else local)")
    parser.addini("chaos_backend", "where the chaos tests' nodes run (see --chaos-backend)",
                  default="")
    g.addoption("--toxiproxy-url", default=None, help="use this Toxiproxy server instead of our own")
    g.addoption("--chaos-seed", type=int, default=None, help="seed for every chaos test (replay)")
    g.addoption("--chaos-time", default=None,
                help="time limit (s) for every chaos test, replacing each test's own (a test "
                     "with an explicit fault schedule only gets longer); default: the "
                     "chaos_time ini setting, else $HARNESS_TIME_LIMIT, else each test's own")
    parser.addini("chaos_time", "time limit (s) of every chaos test (see --chaos-time)", default="")
    g.addoption("--chaos", action="store_true", default=False,
                help="run the chaos tests too (they run only when selected: -m, --chaos, or "
                     "their file named)")
    g.addoption("--chaos-store", default=None,
                help="store the runs go to (default: the chaos_store ini setting, else "
                     "$HARNESS_STORE, else store/)")
    parser.addini("chaos_store", "store the chaos runs go to (see --chaos-store)", default="")
    g.addoption("--chaos-node-command", default=None, metavar="CMD",
                help="run your own implementation in place of the reference node, a command "
                     "with {config} (docs/extending.md; default: the chaos_node_command ini "
                     "setting, else $HARNESS_NODE_COMMAND, else the reference node)")
    parser.addini("chaos_node_command", "your implementation's command (see "
                  "--chaos-node-command)", default="")
    g.addoption("--chaos-replay", default=None, metavar="FILE",
                help="run only the tests FILE names, each with its own seed (the nightly's "
                     "retry-seeds.json: [{nodeid, seed}, ...] under \"tests\")")
    g.addoption("--chaos-outcomes", default=None, metavar="FILE",
                help="write each test's outcome, seed and run dirs to FILE (JSON) at the end")
    g.addoption("--chaos-no-reap", action="store_true", default=False,
                help="do not remove, at session start, what killed sessions left behind "
                     "(containers, networks, volumes, loopback ssh nodes whose owner is gone)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a chaos test against real nodes (pytest -m chaos)")
    config.addinivalue_line("markers", "smoke: a bounded chaos test that the default test command runs too")
    backend_of(config)  # a bad name fails the session here, before any cluster starts
    node_command_of(config)  # so does a node command that cannot start a node
    time_of(config)  # likewise a bad time limit
    outcomes = config.getoption("--chaos-outcomes")
    if outcomes:
        path = Path(outcomes)
        config.pluginmanager.register(
            OutcomeRecorder(path if path.is_absolute() else config.invocation_params.dir / path,
                            config), "chaos-outcomes")


def pytest_collection_finish(session: pytest.Session) -> None:
    """The reaper (as testcontainers' Ryuk): before a session's first chaos test, remove what
    killed sessions left behind. Owned resources carry their owner's ``host:pid``
    (``harness.backends.clean``); only those whose owner process is gone on this host go, so
    a session still running here, or one on another host sharing the engine, keeps its own."""
    c = session.config
    if (c.option.collectonly or c.getoption("--chaos-no-reap")
            or not any(i.get_closest_marker("chaos") for i in session.items)):
        return
    from harness.backends.clean import clean

    tr = c.pluginmanager.get_plugin("terminalreporter")
    try:
        # remote ssh hosts only when the session's runs go there: elsewhere no login at start
        rep = clean(ssh_hosts=None if backend_of(c) == "ssh" else "")
    except Exception as e:  # housekeeping: it must not stop the tests
        if tr is not None:
            tr.write_line(f"chaos reaper: skipped ({type(e).__name__}: {e}); run "
                          f"`harness clean` to see what killed sessions left")
        return
    if tr is not None and (rep.removed or rep.kept):
        tr.write_line(f"chaos reaper: removed {len(rep.removed)} leftovers of dead sessions, "
                      f"kept {len(rep.kept)} of live ones")
        for r in rep.removed:
            tr.write_line(f"  - {r}")


def selected_explicitly(item_path: Path, args: list[str], start: Path) -> bool:
    """Whether a command-line argument names this test's file (or one of its node ids)."""
    for a in args:
        p = Path(a.split("::", 1)[0])
        if (p if p.is_absolute() else start / p).resolve() == item_path.resolve():
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before -k/-m: a replay entry must see every test collected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    replay = config.getoption("--chaos-replay")
    if replay:
        replay_only(config, items, replay)
    if config.getoption("--chaos") or config.option.markexpr or replay:
        return
    start = config.invocation_params.dir
    args = list(config.invocation_params.args)
    keep, left = [], []
    for item in items:
        chaos = item.get_closest_marker("chaos") is not None
        (left if chaos and not selected_explicitly(item.path, args, start) else keep).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
        config.stash[_LEFT_OUT] = len(left)


def replay_only(config: pytest.Config, items: list[pytest.Item], path: str) -> None:
    """``--chaos-replay FILE``: keep only the tests FILE names, each given its own seed; the
    names that match no collected test are kept for the summary and the outcomes file."""
    from harness.nightly import NightlyError, read_retries

    file = Path(path)
    if not file.is_absolute():
        file = config.invocation_params.dir / file
    if not file.exists():
        raise pytest.UsageError(f"--chaos-replay {path}: no such file (scripts/nightly writes "
                                f"<store>/_nightly/retry-seeds.json after a night)")
    try:
        seeds = {r.nodeid: r.seed for r in read_retries(file)}
    except NightlyError as e:
        raise pytest.UsageError(f"--chaos-replay: {e}") from None
    keep, left = [], []
    for item in items:
        if item.nodeid in seeds:
            item.stash[_REPLAY_SEED] = seeds[item.nodeid]
            keep.append(item)
        else:
            left.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
    found = {i.nodeid for i in keep}
    config.stash[_REPLAY_MISSING] = [n for n in seeds if n not in found]


_REPLAY_SEED = pytest.StashKey[int | None]()
_REPLAY_MISSING = pytest.StashKey[list[str]]()
_LEFT_OUT = pytest.StashKey[int]()


#: where each session-wide chaos setting can be given: (option, ini setting, environment
#: variable), looked up in that order by :func:`first_set`
SETTINGS = {
    "backend": ("--chaos-backend", "chaos_backend", "HARNESS_BACKEND"),
    "node_command": ("--chaos-node-command", "chaos_node_command", "HARNESS_NODE_COMMAND"),
    "time": ("--chaos-time", "chaos_time", "HARNESS_TIME_LIMIT"),
    "store": ("--chaos-store", "chaos_store", "HARNESS_STORE"),
}


def given(config: pytest.Config, name: str) -> tuple[str | None, str | None, str | None]:
    """The option's, the ini setting's and the environment's values of setting ``name``."""
    option, ini, env = SETTINGS[name]
    return config.getoption(option), config.getini(ini), os.environ.get(env)


def first_set(name: str, option: str | None, ini: str | None, env: str | None
              ) -> tuple[str, str] | None:
    """(where it came from, value) of the first non-blank of the three, so that an error can
    name the place to fix; None when none is set."""
    o, i, e = SETTINGS[name]
    for where, value in ((o, option), (f"the {i} ini setting", ini), (f"${e}", env)):
        if value is not None and str(value).strip():
            return where, str(value)
    return None


def resolve_store(option: str | None, ini: str, env: str | None, start: Path) -> Path:
    """The session's store, else ``store``; relative to ``start`` (where pytest was started)."""
    found = first_set("store", option, ini, env)
    path = Path(found[1] if found else "store")
    return path if path.is_absolute() else start / path


def backend_of(config: pytest.Config) -> str:
    """The backend given, else local; checked at start, so a typo fails the session before
    any cluster starts."""
    from harness.backends import BACKENDS

    where, name = first_set("backend", *given(config, "backend")) or ("the default", "local")
    if name not in BACKENDS:
        raise pytest.UsageError(f"chaos backend {name!r} (from {where}): choose one of "
                                f"{', '.join(sorted(BACKENDS))}")
    return name


def node_command_of(config: pytest.Config) -> str | None:
    """The node command given, checked at start like the backend."""
    from harness.node_command import NodeCommandError, parse

    found = first_set("node_command", *given(config, "node_command"))
    if found is None:
        return None
    try:
        parse(found[1])
    except NodeCommandError as e:
        raise pytest.UsageError(f"{e} (from {found[0]})") from None
    return found[1]


def resolve_time(option: str | None, ini: str, env: str | None) -> float | None:
    """The session's time limit (s), else None (each test keeps its own); the nightly
    workflow's ``time_limit`` input arrives as ``$HARNESS_TIME_LIMIT``. ValueError, naming
    where it came from, for anything but a positive number."""
    found = first_set("time", option, ini, env)
    if found is None:
        return None
    where, value = found
    try:
        t = float(value)
    except ValueError:
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"{where}={value!r}: give the time limit of each chaos test as a "
                         f"positive number of seconds, e.g. 60")
    return t


def time_of(config: pytest.Config) -> float | None:
    try:
        return resolve_time(*given(config, "time"))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def store_of(config: pytest.Config) -> Path:
    return resolve_store(*given(config, "store"), config.invocation_params.dir)


def pytest_report_header(config: pytest.Config) -> str:
    seed = config.getoption("--chaos-seed")
    t = time_of(config)
    seeds = ("from " + config.getoption("--chaos-replay") if config.getoption("--chaos-replay")
             else "all " + str(seed) if seed is not None else "from each test")
    return (f"chaos: backend {backend_of(config)}, toxiproxy "
            f"{config.getoption('--toxiproxy-url') or 'one of our own for the session'}, "
            f"store {store_of(config)}, seeds {seeds}, "
            f"time limit {f'{t:g} s' if t is not None else 'from each test'}")


#: the JUnit property names a run is recorded under
RUN_PROPERTIES = ("seed", "run_dir")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    """The run dirs of the failed chaos tests, where a person starts reading."""
    left = config.stash.get(_LEFT_OUT, 0)
    if left:
        terminalreporter.write_line(f"{left} chaos tests not selected: run them with -m chaos "
                                    f"or --chaos")
    for nodeid in config.stash.get(_REPLAY_MISSING, []):
        terminalreporter.write_line(f"--chaos-replay names {nodeid}, which was not collected "
                                    f"(gone, or outside the paths given)")
    lines = []
    for rep in terminalreporter.stats.get("failed", []):
        runs = [v for k, v in rep.user_properties if k == "run_dir"]
        if runs:
            lines.append(f"{rep.nodeid}: {', '.join(map(str, runs))}")
    if lines:
        terminalreporter.write_sep("-", "chaos run dirs of the failed tests")
        for line in lines:
            terminalreporter.write_line(line)


class OutcomeRecorder:
    """``--chaos-outcomes FILE``: each test's outcome, the seed it ran with and its run dirs,
    written when the session ends (``harness.nightly`` reads it to choose the retries). The
    seed is the one its runs recorded, else the replay or session seed it was given, else
    None (its own)."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path, self.config = path, config
        self.phases: dict[str, list[Any]] = {}
        self.given: dict[str, int | None] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        seed = self.config.getoption("--chaos-seed")
        for i in items:
            self.given[i.nodeid] = i.stash[_REPLAY_SEED] if _REPLAY_SEED in i.stash else seed

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from harness.nightly import Outcome

        seeds = [v for k, v in report.user_properties if k == "seed"]
        dirs = tuple(str(v) for k, v in report.user_properties if k == "run_dir")
        seed = seeds[0] if seeds else self.given.get(report.nodeid)
        self.phases.setdefault(report.nodeid, []).append(
            Outcome(report.nodeid, report.outcome, seed, dirs))

    def pytest_sessionfinish(self) -> None:
        from harness.nightly import Outcomes, combine, outcomes_json

        out = Outcomes([combine(p) for p in self.phases.values()],
                       self.config.stash.get(_REPLAY_MISSING, []))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(outcomes_json(out))


@dataclass(frozen=True)
class ChaosOptions:
    backend: str
    toxiproxy_url: str | None
    seed: int | None
    time: float | None
    node_command: str | None = None

    def apply(self, spec: Any) -> Any:
        """The session's backend, seed and time limit on ``spec``. A spec with a built
        nemesis (an explicit schedule, timed to its own time limit) is only lengthened, never
        cut short; a spec with named ``faults`` or none takes the time as it is."""
        spec.backend = self.backend
        if self.node_command is not None:
            spec.node_command = self.node_command
        if self.seed is not None:
            spec.seed = self.seed
        if self.time is not None:
            spec.time_limit = (self.time if spec.nemesis is None
                               else max(spec.time_limit, self.time))
        return spec

    def for_item(self, item: pytest.Item) -> ChaosOptions:
        """These options with the item's own replay seed (``--chaos-replay``), if it has one."""
        if _REPLAY_SEED in item.stash:
            return replace(self, seed=item.stash[_REPLAY_SEED])
        return self


def scaled_min_ok(min_ok: int, own_s: float, run_s: float) -> int:
    """A test states ``min_ok`` for its own time limit; a session time limit that shortens
    the run asks proportionally fewer ok ops (at least 1), a longer one still the stated
    number."""
    if run_s >= own_s or own_s <= 0:
        return min_ok
    return max(1, math.ceil(min_ok * run_s / own_s))


@pytest.fixture(scope="session")
def chaos_options(request: pytest.FixtureRequest) -> ChaosOptions:
    c = request.config
    return ChaosOptions(backend_of(c), c.getoption("--toxiproxy-url"),
                        c.getoption("--chaos-seed"), time_of(c), node_command_of(c))


@pytest.fixture
def chaos_seed(chaos_options: ChaosOptions, request: pytest.FixtureRequest) -> int:
    """The seed a test draws from: its ``--chaos-replay`` seed, else ``--chaos-seed`` when
    given (a night's seed, a replay), else a fixed seed of the test's own, from its node id,
    so a rerun replays it."""
    seed = chaos_options.for_item(request.node).seed
    if seed is not None:
        return seed
    return zlib.crc32(request.node.nodeid.encode()) % 2**31 or 1


@pytest.fixture(scope="session")
def chaos_toxiproxy(chaos_options: ChaosOptions) -> Iterator[str]:
    """The URL of the one Toxiproxy server the session's runs share (each run's proxies carry
    its run id as a prefix): ``--toxiproxy-url`` or ``$TOXIPROXY_URL`` when given, else one we
    start here, on first use, and stop when the session ends."""
    url = chaos_options.toxiproxy_url or os.environ.get("TOXIPROXY_URL")
    if url:
        yield url
        return
    from faults.toxiproxy import ToxiproxyServer

    with ToxiproxyServer.start() as server:
        yield server.url


# ---------------------------------------------------------------- the checks, pure

def ok_client_ops(ops: Iterable[dict[str, Any]], before_s: float | None = None) -> int:
    """Client (non-nemesis) completions of type ``ok``: what the run really got done.
    ``before_s``: only those completed before then (the final reads began: test.json's
    ``final_from_s``), since a DRiP run's final reads (every key at every client) alone
    made thousands of ok ops and met any minimum with no update done (session 45)."""
    from vocabulary.faults import is_nemesis

    end = None if before_s is None else before_s * 1e9
    return sum(1 for o in ops if o.get("type") == "ok" and not is_nemesis(o)
               and (end is None or o.get("time", 0) < end))


def examined_nothing(leaf: Result) -> bool:
    """No non-zero count: a zero beside a non-zero one (``faults_failed=0``) is information,
    but a leaf whose every count is zero, or that gave none, judged nothing."""
    return not any(v for v in leaf.examined.values())


def vacuous_true_leaves(result: Result) -> list[str]:
    """Each True leaf that examined nothing, as a line a person reads."""
    return [f"{path} is True but examined nothing ({examined_text(leaf.examined) or 'no counts'})"
            for path, leaf in result.leaves() if leaf.valid is True and examined_nothing(leaf)]


def fault_shortfalls(result: Result) -> list[str]:
    """Why the ``faults`` leaf does not prove every requested fault kind applied, if it does not."""
    leaf = result.find("faults")
    if leaf is None:
        return ["the run had a nemesis but its result has no faults leaf "
                "(harness.runner.standard_checkers adds it from the spec's nemesis)"]
    if leaf.valid is not True:
        return [f"faults: valid={leaf.valid}: {leaf.note or 'no reason given'}"]
    return []


def ok_shortfall(ok_ops: int, min_ok: int) -> list[str]:
    if ok_ops >= min_ok:
        return []
    return [f"{ok_ops} client ops completed ok, the test demands at least {min_ok}"]


def external_unknowns(result: Result) -> list[str]:
    """Leaves left unknown only because a ``--node-command`` implementation wrote no journal
    (checkers.observations.load_node words their notes)."""
    return [path for path, leaf in result.leaves()
            if leaf.valid == "unknown" and "--node-command" in (leaf.note or "")]


def correct_run_shortfalls(result: Result, *, ok_ops: int, min_ok: int, nemesis: bool,
                           external: bool = False) -> list[str]:
    """What a correct-node run lacks to count as a pass; empty when it is one. For your own
    implementation (``external``), the checks that need the reference node's journal may say
    unknown for that reason alone; every other leaf must still pass."""
    out = [] if result.valid is True else [f"the run is valid={result.valid}, expected True"]
    if external and out:
        excused = set(external_unknowns(result))
        left = [f"{p}={leaf.valid}" for p, leaf in result.leaves()
                if leaf.valid is not True and p not in excused]
        out = [f"the run is valid={result.valid}: {', '.join(left)}"] if left else []
    out += ok_shortfall(ok_ops, min_ok)
    if nemesis:
        out += fault_shortfalls(result)
    return out + vacuous_true_leaves(result)


def leaf_problem(result: Result, path: str) -> str | None:
    """Why ``path`` names no leaf of ``result`` (missing, or a composite), else None."""
    sub = result.find(path)
    leaves = [p for p, _ in result.leaves()]
    if sub is None:
        return f"the result has no checker {path!r}; its leaves are: {', '.join(leaves)}"
    if sub.children:
        mine = [p for p in leaves if p.startswith(path + ".")]
        return (f"{path!r} is a composite, not a leaf: a bug-mode test must name the exact leaf "
                f"that catches its bug, one of: {', '.join(mine)}")
    return None


def caught_shortfalls(result: Result, path: str, anomaly: str | None = None) -> list[str]:
    """Why the buggy run's leaf ``path`` did not catch the bug (with an ``anomaly`` of that
    kind, when given, and a witness a person can read); empty when it did."""
    problem = leaf_problem(result, path)
    if problem:
        return [problem]
    leaf = result.find(path)
    assert leaf is not None
    if leaf.valid is not False:
        return [f"expected {path} to be invalid, got valid={leaf.valid}"
                + (f" ({leaf.note})" if leaf.note else "")]
    kinds = sorted({a.kind for a in leaf.anomalies})
    if anomaly is not None and anomaly not in kinds:
        return [f"{path} is invalid, but with anomalies {kinds or 'none'}, not {anomaly!r}"]
    if not leaf.note and not any(a.message for a in leaf.anomalies):
        return [f"{path} is invalid without a witness: no anomaly message and no note"]
    return []


def control_shortfalls(result: Result, path: str, *, ok_ops: int, min_ok: int, nemesis: bool
                       ) -> list[str]:
    """Why the correct-node control does not show that ``path`` flags the bug, not the
    schedule: the leaf must be True and have examined something, the ops and faults real."""
    problem = leaf_problem(result, path)
    if problem:
        return [problem]
    leaf = result.find(path)
    assert leaf is not None
    out = []
    if leaf.valid is not True:
        out.append(f"the correct node has {path} valid={leaf.valid}"
                   + (f" ({leaf.note})" if leaf.note else "")
                   + ": the leaf flags this schedule, not (only) the bug")
    elif examined_nothing(leaf):
        out.append(f"the correct node's {path} is True but examined nothing "
                   f"({examined_text(leaf.examined) or 'no counts'}): the control proves nothing")
    out += ok_shortfall(ok_ops, min_ok)
    if nemesis:
        out += fault_shortfalls(result)
    return out


# ---------------------------------------------------------------- the fixtures

def has_nemesis(spec: TestSpec) -> bool:
    """Whether the runner adds a ``faults`` leaf for this spec (one rule: the runner's)."""
    from harness.runner import standard_checkers

    return "faults" in standard_checkers(spec.describe())


def ok_ops_of(res: RunResult) -> int:
    """Ok client ops in the run's stored history (the evidence, not a checker's summary)."""
    from vocabulary.history import read_history

    final_from = res.run_dir.read_test().get("final_from_s")
    return ok_client_ops(read_history(res.run_dir.history).ops,
                         float(final_from) if final_from is not None else None)


def where(res: RunResult) -> str:
    return f"run dir: {res.run_dir.path} (seed {res.seed}; rerun with --chaos-seed {res.seed})"


def fail(headline: str, problems: list[str], res: RunResult, detail: str = "") -> None:
    """Fail the test with every problem, the result tree's account and the run dir."""
    lines = "\n".join(f"- {p}" for p in problems)
    pytest.fail(f"{headline}:\n{lines}\n{res.result.explain()}\n{detail}{where(res)}", pytrace=False)


def assert_correct_run(spec: TestSpec, res: RunResult, min_ok: int) -> None:
    """Fail the test unless ``res`` is a correct-node pass (:func:`correct_run_shortfalls`);
    for tests that call the runner themselves, as ``chaos_run`` does."""
    problems = correct_run_shortfalls(res.result, ok_ops=ok_ops_of(res), min_ok=min_ok,
                                      nemesis=has_nemesis(spec),
                                      external=spec.node_command is not None)
    if problems:
        fail(f"{spec.name} on {spec.backend}: the correct node's run did not pass", problems, res)


def bug_and_control(build: Callable[[], TestSpec]) -> tuple[TestSpec, TestSpec]:
    """Two specs from one factory: the buggy one, and its correct-node control on the same
    seed and schedule. Fails the test when the factory cannot give that."""
    if not callable(build):
        pytest.fail("a bug-mode chaos_run needs a spec factory (lambda: TestSpec(...)), not a "
                    "spec: the correct-node control needs a fresh nemesis built the same way",
                    pytrace=False)
    bug, control = build(), build()
    if bug is control:
        pytest.fail("the spec factory returned the same TestSpec twice; build a new one per "
                    "call (its nemesis generator is consumed by a run)", pytrace=False)
    if not bug.bugs:
        pytest.fail(f"{bug.name}: expect names a leaf but the spec turns on no bug mode; give "
                    f"bugs=[...] (a correct-node test leaves expect at True)", pytrace=False)
    if (bug.seed, bug.nemesis_desc) != (control.seed, control.nemesis_desc):
        pytest.fail(f"{bug.name}: the factory built seed {bug.seed} / nemesis "
                    f"{bug.nemesis_desc!r}, then {control.seed} / {control.nemesis_desc!r}: the "
                    f"control must run the same seed and schedule; give the builder a fixed "
                    f"seed", pytrace=False)
    control.bugs, control.name = [], f"{control.name}-control"
    return bug, control


@pytest.fixture(scope="session")
def chaos_store(request: pytest.FixtureRequest) -> Path:
    return store_of(request.config)


@pytest.fixture
def chaos_run(chaos_options: ChaosOptions, chaos_store: Path, chaos_toxiproxy: str,
              request: pytest.FixtureRequest) -> Callable[..., Any]:
    from harness.runner import run

    def run_one(spec: TestSpec, opts: ChaosOptions, min_ok: int) -> tuple[RunResult, int]:
        """Run ``spec`` with the session's options; the result and ``min_ok`` scaled to the
        time limit the run really had."""
        own = spec.time_limit
        opts.apply(spec)
        if spec.store is None:
            spec.store = str(chaos_store)
        res = run(spec, toxiproxy_url=chaos_toxiproxy)
        record_run(request.node, res.seed, res.run_dir.path)
        return res, scaled_min_ok(min_ok, own, spec.time_limit)

    def correct(source: Any, opts: ChaosOptions, min_ok: int) -> RunResult:
        spec = source() if callable(source) else source
        res, min_ok = run_one(spec, opts, min_ok)
        assert_correct_run(spec, res, min_ok)
        return res

    def caught(build: Any, opts: ChaosOptions, path: str, anomaly: str | None, min_ok: int
               ) -> RunResult:
        bug, control = bug_and_control(build)
        if opts.node_command is not None:
            pytest.skip("a bug-mode test plants a bug in the reference node; with "
                        "--chaos-node-command your implementation runs instead")
        res, _ = run_one(bug, opts, min_ok)
        problems = caught_shortfalls(res.result, path, anomaly)
        if problems:
            leaf = res.result.find(path)
            stats = (f"{path} stats: {json.dumps(leaf.stats, default=str)[:2000]}\n"
                     if leaf is not None else "")
            fail(f"{bug.name} (bugs {bug.bugs}): the bug was not caught by {path}", problems,
                 res, stats)
        ctl, min_ok = run_one(control, opts, min_ok)
        problems = control_shortfalls(ctl.result, path, ok_ops=ok_ops_of(ctl), min_ok=min_ok,
                                      nemesis=has_nemesis(control))
        if problems:
            fail(f"{control.name}: the correct-node control on the same seed and schedule "
                 f"does not clear {path}", problems, ctl, f"buggy run's {where(res)}\n")
        return res

    def _run(spec: Any, expect: bool | str = True, *, min_ok: int = 1,
             anomaly: str | None = None, backend: str | None = None) -> RunResult:
        opts = chaos_options.for_item(request.node)
        if backend is not None:  # a test about one backend pins it
            opts = replace(opts, backend=backend)
        if expect is True:
            if anomaly is not None:
                pytest.fail("anomaly= goes with expect='<leaf>' (a bug-mode test)", pytrace=False)
            return correct(spec, opts, min_ok)
        if not isinstance(expect, str):
            pytest.fail(f"expect={expect!r}: give True (a correct node) or the dotted path of "
                        f"the leaf that must catch the bug, e.g. 'raft.vote-safety'", pytrace=False)
        return caught(spec, opts, expect, anomaly, min_ok)

    return _run


def record_run(item: pytest.Item, seed: int, run_dir: Path) -> None:
    """The run's seed and dir as the test's user properties: JUnit properties, the terminal
    summary's run dirs, and the seed the nightly retries a failure with."""
    item.user_properties += [("seed", seed), ("run_dir", str(run_dir))]


@pytest.fixture
def chaos_cluster(chaos_options: ChaosOptions, chaos_store: Path, chaos_toxiproxy: str,
                  request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``async with chaos_cluster(spec) as c``: a started cluster of ``spec`` (the session's
    backend, seed and Toxiproxy), its run dir in the chaos store and ``c.history`` a
    history writer there; nodes, proxies and links are torn down on leaving the block, also
    when the test fails. No runner drives it: the test's own ops and faults are the run."""
    from harness.cluster import open_cluster
    from harness.store import new_run
    from vocabulary.history import HistoryWriter

    opts = chaos_options.for_item(request.node)

    @contextlib.asynccontextmanager
    async def _open(spec: Any) -> AsyncIterator[Any]:
        opts.apply(spec)
        rd = new_run(spec.name, chaos_store)
        record_run(request.node, spec.seed, rd.path)
        async with open_cluster(spec, rd, toxiproxy_url=chaos_toxiproxy) as c:
            with HistoryWriter(rd.history) as h:
                c.history = h
                yield c

    return _open
