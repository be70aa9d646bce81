"""Search fault schedules on the simulator with hypothesis, so a failing schedule shrinks.

A schedule is a list of steps ``[kind, dt_ms, a, b]``: wait ``dt_ms`` virtual milliseconds,
then apply fault or op ``kind`` with small-integer arguments ``a`` and ``b`` (which node,
which shape, how much); the protocol's `Target` says what each kind means. Schedules are
drawn by ``hypothesis.find`` (not ``@given``): ``find`` is callable from a command, returns
the *shrunk* failing example itself, and takes a ``random`` so ``--seed`` fixes the search.
Its database is off (a replay file, not a hidden cache, is how a failure is kept) and there
is no per-example deadline: the wall budget is checked between examples instead.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st

from harness.spec import node_bugs

Step = list[Any]  # [kind, dt_ms, a, b]

#: per-run caps (`Simulation.cap`): a 5-server Garlic Farm run of 24 steps processes ~2,000
#: events; a message storm (a retry loop at network speed, multiplied by duplication) grows
#: without bound, so past these a run stops and fails as a storm instead of eating the machine
MAX_EVENTS = 100_000
WALL_CAP_S = 20.0
#: after the last heal, more messages than this per simulated second (the whole cluster) is a
#: storm: a correct 5-server cluster sends ~60/s in heartbeats
STORM_MSGS_PER_S = 2_000


def cap_witness(e: Exception) -> dict[str, Any]:
    """The witness of a run stopped by its cap (`harness.sim.driver.RunCap`)."""
    return {"checker": "liveness", "kind": f"{getattr(e, 'what', 'run')}-cap",
            "message": f"runaway run: {e} (a message storm or a retry loop; the run is "
                       f"stopped so one schedule cannot eat the machine)",
            "witness": {"t": getattr(e, "now", None), "events": getattr(e, "events", None)}}


def witness_of(res: Any) -> list[dict[str, Any]]:
    """A checker's failing verdict (a `checkers.result.Result`) as a run's witness entries:
    each anomaly of every failing leaf, named by that leaf's checker (a composite's failing
    children, each in turn); a failing verdict that names no anomaly gives its explanation,
    so a failure is never passed over for want of a witness. Every target flattens this way."""
    if res.valid is not False:
        return []
    if res.children:
        out = [w for c in res.children for w in witness_of(c)]
    else:
        out = [{"checker": res.checker, **a.to_json()} for a in res.anomalies]
    return out or [{"checker": res.checker, "message": res.explain()}]


@dataclass
class Outcome:
    """One simulated run: the checker's verdict, its witness and the run's bytes.

    ``made`` is the run's bytes, or what makes them: a search judges hundreds of runs a
    minute by ``ok`` alone, and serializing each one's trace was 15% of its wall time, so a
    target hands a function and `trace` calls it once, when a replay file or a test asks.
    The function reads only what the finished run left, so the bytes are the same either way."""

    ok: bool
    witness: list[dict[str, Any]]
    made: bytes | Callable[[], bytes]
    ops: list[dict[str, Any]] = field(default_factory=list)
    sim_seconds: float = 0.0

    @property
    def trace(self) -> bytes:
        """The whole run as bytes: what a same-seed rerun must reproduce exactly."""
        if not isinstance(self.made, bytes):
            self.made = self.made()
        return self.made


@dataclass(frozen=True)
class Target:
    """A protocol plugged into the search: its fault/op kinds and how to run a schedule."""

    name: str
    kinds: tuple[str, ...]
    bugs: tuple[str, ...]
    run: Callable[[list[Step], int, tuple[str, ...]], Outcome]
    #: kinds drawn only when asked (``harness sim run --hostile``), so that the schedules a
    #: seed draws without them stay what they were
    optional: tuple[str, ...] = ()
    #: the servers its run takes per-server bug modes for, ``NAME@1,3`` (a mixed cluster:
    #: `bugs_by_node`); (): every node runs the same modes
    per_node: tuple[int, ...] = ()
    #: bug mode -> optional kinds its search always draws (a bug only a fault outside the
    #: default vocabulary can show: SDS ``no-repair`` needs a sender ``gone`` for good)
    needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def bug_name(spec: str) -> str:
    """``forget-vote@1,3`` -> ``forget-vote``: the mode a per-server spec names."""
    return spec.split("@", 1)[0]


def bugs_by_node(bugs: tuple[str, ...], ids: tuple[int, ...]) -> dict[int, frozenset[str]]:
    """Each server's bug modes: ``NAME`` on every server, ``NAME@1,3`` on servers 1 and 3
    only (a mixed cluster: a core and its bug-mode variant side by side). Parsed as a real
    run parses ``--bug`` (`harness.spec.node_bugs`), so a replay file means the same on both."""
    if tuple(ids) != tuple(range(1, len(ids) + 1)):
        raise ValueError(f"servers must be numbered 1..{len(ids)}, got {ids}")
    return {i: frozenset(node_bugs(bugs, i, len(ids))) for i in ids}


class OutOfBudget(Exception):
    """The wall budget ran out before a failing schedule was found."""


def schedules(kinds: tuple[str, ...], max_steps: int = 24) -> st.SearchStrategy[list[Step]]:
    step = st.tuples(st.sampled_from(kinds), st.integers(0, 400), st.integers(0, 4),
                     st.integers(0, 4)).map(list)
    return st.lists(step, max_size=max_steps)


@dataclass
class Tally:
    """What a search covered, found or not: simulated runs made and the simulated seconds
    they spanned (runs, not wall time, are the measure on a shared machine)."""

    runs: int = 0
    sim_s: float = 0.0


@dataclass
class Found:
    schedule: list[Step]
    outcome: Outcome
    first_failure_s: float
    first_failure_runs: int  # simulated runs it took to find (the deterministic measure)
    examples: int
    wall_s: float
    #: CPU seconds of the search process to the first failure: on a shared machine close to
    #: what the wall time would be on a quiet one
    first_failure_cpu_s: float = 0.0


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (6.13x+) mixes constants mined from every loaded project module into what it
    draws, so the same seed drew other schedules after an unrelated import (a test suite's
    earlier tests, another protocol's suite). The search draws without them: the same seed
    gives the same schedules whatever is loaded. A private hook (hypothesis is pinned in
    constraints.txt); if it moves, the search still works, only less reproducibly."""
    from hypothesis.internal.conjecture import providers as p

    try:
        empty = p.Constants(integers=p.SortedSet(), floats=p.SortedSet(key=p.float_to_int),
                            bytes=p.SortedSet(), strings=p.SortedSet())
        saved = p._get_local_constants
    except AttributeError:
        yield
        return
    p._get_local_constants = lambda: empty
    try:
        yield
    finally:
        p._get_local_constants = saved


def search(target: Target, seed: int, bugs: tuple[str, ...], budget_s: float,
           max_steps: int = 24, shrink_s: float | None = None, runs: int | None = None,
           shrink_runs: int | None = None, extra: tuple[str, ...] = (),
           tally: Tally | None = None,
           clock: Callable[[], float] = time.monotonic) -> Found | None:
    """Draw schedules until one fails or ``budget_s`` wall seconds pass; then shrink it for
    at most ``shrink_s`` more (default: ``budget_s``), keeping the smallest failing one.

    ``runs``/``shrink_runs`` bound the same two phases by simulated runs instead: unlike wall
    time they do not depend on the machine's load, so a search bounded by them gives the same
    answer everywhere (the tests use them; wall time stays the backstop). ``extra``: the
    target's optional kinds to draw as well (``hostile``); a bug mode's `Target.needs` are
    added to them. ``tally``, if given, is filled with the runs made and their simulated
    seconds (shrinking included). ``clock`` measures the two budgets: `time.process_time`
    makes them CPU seconds of this process, near a quiet machine's wall seconds on a loaded
    one (``first_failure_s`` stays wall time)."""
    extra += tuple(dict.fromkeys(k for b in bugs for k in target.needs.get(bug_name(b), ())
                                 if k not in extra))
    unknown = [k for k in extra if k not in target.optional]
    if unknown:
        raise ValueError(f"{target.name} has no optional kind {', '.join(unknown)}; it has "
                         f"{', '.join(target.optional) or 'none'}")
    shrink_for = budget_s if shrink_s is None else shrink_s
    start, cpu0, budget0 = time.monotonic(), time.process_time(), clock()
    first: list[float] = []
    first_cpu: list[float] = []
    first_at: list[float] = []  # by ``clock``
    first_run: list[int] = []  # runs made when the first failure was found
    count = [0]

    seen: dict[str, bool] = {}  # hypothesis asks again about a schedule it judged: same answer

    def fails(schedule: list[Step]) -> bool:
        key = json.dumps(schedule)
        if key in seen:
            return seen[key]
        if not first and (clock() - budget0 > budget_s
                          or (runs is not None and count[0] >= runs)):
            raise OutOfBudget
        if first and (clock() - budget0 > first_at[0] + shrink_for
                      or (shrink_runs is not None and count[0] - first_run[0] >= shrink_runs)):
            return False  # shrinking past its share of the budget: keep what we have
        count[0] += 1
        outcome = target.run(schedule, seed, bugs)
        if tally is not None:
            tally.runs += 1
            tally.sim_s += outcome.sim_seconds
        bad = seen[key] = not outcome.ok
        if bad and not first:
            first.append(time.monotonic() - start)
            first_cpu.append(time.process_time() - cpu0)
            first_at.append(clock() - budget0)
            first_run.append(count[0])
        return bad

    cfg = settings(database=None, deadline=None, max_examples=10**9, derandomize=False,
                   phases=(Phase.generate, Phase.shrink),
                   suppress_health_check=list(HealthCheck))
    try:
        with _no_local_constants():
            schedule = find(schedules(target.kinds + extra, max_steps), fails, settings=cfg,
                            random=random.Random(seed))
    except OutOfBudget:
        return None
    return Found(schedule, target.run(schedule, seed, bugs), first[0], first_run[0], count[0],
                 time.monotonic() - start, first_cpu[0])
