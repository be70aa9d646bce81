"""The nightly long search: every protocol's correct core under `harness sim run` schedules for
a bounded wall budget, with and without the ``hostile`` kind where the protocol draws it.

Nightly only (``chaos``, never ``smoke``): ten searches of ``$HARNESS_SIM_SEARCH_S`` seconds
each (default 120; shrinking a find takes as long again at most). The search is seeded by the
night's ``--chaos-seed`` (else a fixed seed per test), so each night draws other schedules and
a failed test is retried with its seed. A find fails the test with its replay file, written to
``<store>/_sim/``, and the command that replays it (docs/sim.md, "Nightly long search").
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from harness.sim import replayfile
from harness.sim.cli import targets
from harness.sim.search import Outcome, Step, Target, search

pytestmark = pytest.mark.chaos

PROTOCOLS = ("garlicfarm", "swim", "antacid", "sds", "drip")
#: the wall budget of each search to a first failure, in seconds
BUDGET_ENV = "HARNESS_SIM_SEARCH_S"
DEFAULT_BUDGET_S = 120.0


def budget_s() -> float:
    raw = os.environ.get(BUDGET_ENV, "")
    if not raw:
        return DEFAULT_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        pytest.fail(f"${BUDGET_ENV}={raw!r}: give the seconds each simulator search may run, "
                    "e.g. 120", pytrace=False)
    return value


def counted(t: Target) -> tuple[Target, list[int]]:
    """``t`` with its runs counted: a search that ran no schedule has tested nothing."""
    runs = [0]

    def run(schedule: list[Step], seed: int, bugs: tuple[str, ...]) -> Outcome:
        runs[0] += 1
        return t.run(schedule, seed, bugs)

    return dataclasses.replace(t, run=run), runs


def test_every_protocol_is_searched() -> None:
    """A protocol plugged into the search later must be added here too."""
    assert set(PROTOCOLS) == set(targets()), sorted(targets())


@pytest.mark.parametrize("hostile", [False, True], ids=["plain", "hostile"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_correct_core_survives_a_long_search(protocol: str, hostile: bool, chaos_seed: int,
                                             chaos_store: Path) -> None:
    t = targets()[protocol]
    if hostile and "hostile" not in t.optional:
        pytest.skip(f"{protocol}'s simulator target draws no hostile kind yet")
    extra = ("hostile",) if hostile else ()
    target, runs = counted(t)
    limit = budget_s()
    found = search(target, chaos_seed, (), limit, extra=extra)
    assert runs[0] > 0, f"the {protocol} search ran no schedule within {limit:g} s"
    if found is None:
        return
    rec = replayfile.record(t.name, chaos_seed, (), found.schedule, found.outcome)
    out = chaos_store / "_sim" / f"sim-{protocol}{'-hostile' if hostile else ''}-{chaos_seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    replayfile.write(out, rec)
    pytest.fail(f"correct {protocol} failed a simulated schedule"
                f"{' with hostile peers' if hostile else ''} (seed {chaos_seed}, "
                f"{found.first_failure_runs} runs to find, shrunk to {len(found.schedule)} "
                f"step(s)); replay file {out}: `harness sim replay {out}`\n"
                f"{replayfile.screen(rec)}", pytrace=False)
