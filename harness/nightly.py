"""The nightly's memory between nights: which seed a night plays, and which failing tests the
next night retries first, each with the seed it failed with.

``scripts/nightly`` runs a night in two pytest sessions over the same store: first the
retries (``--chaos-replay <store>/_nightly/retry-seeds.json``: only the tests it names, each
with its own seed), then the whole selection with the night's new seed (``--chaos-seed``).
Each session writes its outcomes (``--chaos-outcomes``, written by the pytest plugin from the
seed each test recorded); :func:`next_retries` turns the old retry list and the two outcome
files into the next one. Everything here is a pure function of JSON-shaped data, plus the
small command line the script calls (``python -m harness.nightly seed|update``).

Retry rules (one seed per test, so one session can replay every retry):

- a retried test that failed again keeps its seed (the oldest seed still failing);
- a retried test that passed is dropped (fixed, or the failure does not reproduce);
- a retried test the retry session did not collect at all is dropped (it is gone, or
  outside the night's selection); one collected but deselected (``-k``) is kept, untried;
- a test that failed with the night's seed is added, unless it already has a retry seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: where, under the store, the nightly keeps its state
NIGHTLY_DIR = "_nightly"
RETRY_FILE = "retry-seeds.json"
NIGHTS_FILE = "nights.jsonl"
FORMAT = 1
MAX_SEED = 2**31 - 1


class NightlyError(ValueError):
    """Bad input (a seed, a state file); the message says what to fix."""


@dataclass(frozen=True)
class Retry:
    """A test the next night reruns first, with the seed it failed with."""

    nodeid: str
    seed: int | None  # None: the test's own fixed seed (it failed without a session seed)
    since: str = ""  # the night it first failed with this seed
    run_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """One test of one session, as the plugin writes it (``--chaos-outcomes``)."""

    nodeid: str
    outcome: str  # passed | failed | skipped
    seed: int | None
    run_dirs: tuple[str, ...] = ()


@dataclass
class Outcomes:
    tests: list[Outcome] = field(default_factory=list)
    #: replay entries that matched no collected test
    missing: list[str] = field(default_factory=list)


def parse_seed(text: str, source: str) -> int:
    """A seed given by a person: a whole number 1..2**31-1."""
    try:
        seed = int(text.strip())
    except ValueError:
        raise NightlyError(f"{source}={text!r} is not a seed: give a whole number "
                           f"1..{MAX_SEED}") from None
    if not 1 <= seed <= MAX_SEED:
        raise NightlyError(f"{source}={seed} is out of range: give 1..{MAX_SEED}")
    return seed


def choose_seed(given: str | None, rng: random.Random | None = None) -> int:
    """The night's seed: the one given (``--seed``, ``$NIGHTLY_SEED``), else a fresh random
    one, so every night plays other schedules; the script prints it for a replay."""
    if given is not None and given.strip():
        return parse_seed(given, "seed")
    return (rng or random.SystemRandom()).randrange(1, MAX_SEED + 1)


def _seed_of(v: Any, where: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise NightlyError(f"{where}: seed {v!r} is not a whole number")
    return v


def parse_retries(text: str, where: str) -> list[Retry]:
    """The retry file (``{"format": 1, "tests": [{nodeid, seed, since, run_dirs}]}``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NightlyError(f"{where} is not JSON ({e}); fix it or delete it (the retries in it "
                           f"are then forgotten)") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise NightlyError(f"{where}: expected {{\"tests\": [{{\"nodeid\": ..., \"seed\": ...}}]}}")
    out = []
    for i, t in enumerate(data["tests"]):
        if not isinstance(t, dict) or not isinstance(t.get("nodeid"), str) or not t["nodeid"]:
            raise NightlyError(f"{where}: tests[{i}] needs a \"nodeid\" string")
        out.append(Retry(t["nodeid"], _seed_of(t.get("seed"), f"{where}: tests[{i}]"),
                         str(t.get("since", "")), tuple(map(str, t.get("run_dirs", ())))))
    return out


def read_retries(path: Path) -> list[Retry]:
    """The retries in ``path``; none when it does not exist yet (the first night)."""
    if not path.exists():
        return []
    return parse_retries(path.read_text(), str(path))


def retries_json(retries: list[Retry]) -> str:
    return json.dumps({"format": FORMAT, "tests": [
        {**asdict(r), "run_dirs": list(r.run_dirs)} for r in retries]}, indent=1) + "\n"


def parse_outcomes(text: str, where: str) -> Outcomes:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NightlyError(f"{where} is not JSON ({e})") from None
    tests = [Outcome(t["nodeid"], t["outcome"], _seed_of(t.get("seed"), where),
                     tuple(t.get("run_dirs", ()))) for t in data.get("tests", [])]
    return Outcomes(tests, list(data.get("missing", [])))


def read_outcomes(path: Path | None) -> Outcomes:
    """A session's outcomes; none when the session did not run (no retries) or died before
    writing them (then nothing is learned from it, and the old retries stay)."""
    if path is None or not path.exists():
        return Outcomes()
    return parse_outcomes(path.read_text(), str(path))


def outcomes_json(o: Outcomes) -> str:
    return json.dumps({"format": FORMAT, "tests": [
        {**asdict(t), "run_dirs": list(t.run_dirs)} for t in o.tests],
        "missing": o.missing}, indent=1) + "\n"


def combine(outcomes: list[Outcome]) -> Outcome:
    """One test's outcome over its phases (setup, call, teardown): failed if any failed, else
    skipped if any skipped; the seed and run dirs of all of them."""
    kinds = {o.outcome for o in outcomes}
    kind = "failed" if "failed" in kinds else "skipped" if "skipped" in kinds else "passed"
    seed = next((o.seed for o in outcomes if o.seed is not None), None)
    dirs = tuple(dict.fromkeys(d for o in outcomes for d in o.run_dirs))
    return Outcome(outcomes[0].nodeid, kind, seed, dirs)


@dataclass
class Update:
    retries: list[Retry]
    fixed: list[Retry] = field(default_factory=list)
    still_failing: list[Retry] = field(default_factory=list)
    dropped_missing: list[Retry] = field(default_factory=list)
    untried: list[Retry] = field(default_factory=list)
    added: list[Retry] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"retries for the next night: {len(self.retries)} "
                 f"(still failing {len(self.still_failing)}, new {len(self.added)}, "
                 f"untried {len(self.untried)}; fixed {len(self.fixed)}, "
                 f"dropped {len(self.dropped_missing)})"]
        lines += [f"  still failing: {r.nodeid} (seed {r.seed}, since {r.since})"
                  for r in self.still_failing]
        lines += [f"  new: {r.nodeid} (seed {r.seed})" for r in self.added]
        lines += [f"  fixed: {r.nodeid} (seed {r.seed} passed)" for r in self.fixed]
        lines += [f"  dropped: {r.nodeid} (not collected: gone, or outside this night's "
                  f"selection)" for r in self.dropped_missing]
        return "\n".join(lines)


def next_retries(old: list[Retry], replayed: Outcomes, night: Outcomes, night_id: str
                 ) -> Update:
    """The next night's retries from tonight's two sessions (rules: the module docstring)."""
    ran = {o.nodeid: o for o in replayed.tests}
    missing = set(replayed.missing)
    up = Update(retries=[])
    for r in old:
        o = ran.get(r.nodeid)
        if r.nodeid in missing:
            up.dropped_missing.append(r)
        elif o is None or o.outcome == "skipped":
            up.untried.append(r)
            up.retries.append(r)
        elif o.outcome == "failed":
            kept = Retry(r.nodeid, r.seed, r.since, o.run_dirs or r.run_dirs)
            up.still_failing.append(kept)
            up.retries.append(kept)
        else:
            up.fixed.append(r)
    have = {r.nodeid for r in up.retries}
    for o in night.tests:
        if o.outcome == "failed" and o.nodeid not in have:
            new = Retry(o.nodeid, o.seed, night_id, o.run_dirs)
            up.added.append(new)
            up.retries.append(new)
            have.add(o.nodeid)
    return up


# ---------------------------------------------------------------- the script's command line

def _cmd_seed(a: argparse.Namespace) -> int:
    print(choose_seed(a.given))
    return 0


def _cmd_update(a: argparse.Namespace) -> int:
    path = Path(a.retry)
    up = next_retries(read_retries(path), read_outcomes(Path(a.replayed) if a.replayed else None),
                      read_outcomes(Path(a.night)), a.night_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(retries_json(up.retries))
    tmp.replace(path)
    print(up.summary())
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.nightly",
                                 description="seed and retry bookkeeping for scripts/nightly")
    sub = ap.add_subparsers(required=True)
    s = sub.add_parser("seed", help="print the night's seed (the given one, else random)")
    s.add_argument("--given", default=None)
    s.set_defaults(fn=_cmd_seed)
    u = sub.add_parser("update", help="write the next night's retry file")
    u.add_argument("--retry", required=True, help="the retry file (read, then rewritten)")
    u.add_argument("--replayed", default=None, help="outcomes of the retry session, if it ran")
    u.add_argument("--night", required=True, help="outcomes of the night's session")
    u.add_argument("--night-id", required=True)
    u.set_defaults(fn=_cmd_update)
    a = ap.parse_args(argv)
    try:
        return int(a.fn(a))
    except NightlyError as e:
        print(f"nightly: {e}", file=sys.stderr)
        return 254


if __name__ == "__main__":
    raise SystemExit(main())
