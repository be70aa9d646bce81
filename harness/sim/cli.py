"""`harness sim run` and `harness sim replay`: the search and its replay from the command line."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.sim import replayfile

if TYPE_CHECKING:
    from harness.sim.search import Target


def targets() -> dict[str, Target]:
    """Protocols the search can drive (a protocol plugs in with a `Target`)."""
    from harness.sim.antacid_search import TARGET as ANTACID
    from harness.sim.drip_search import TARGET as DRIP
    from harness.sim.gf_search import TARGET as GF
    from harness.sim.sds_search import TARGET as SDS
    from harness.sim.swim_search import TARGET as SWIM

    return {t.name: t for t in (GF, SWIM, ANTACID, SDS, DRIP)}


def budget(text: str) -> float:
    """``60s``, ``2m`` or a bare number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([sm]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a budget: give seconds, e.g. 60s or 2m")
    return float(m.group(1)) * (60 if m.group(2) == "m" else 1)


def _usage(message: str) -> Exception:
    from harness.cli import UsageError  # exit 254: nothing ran

    return UsageError(message)


def _target(name: str) -> Target:
    ts = targets()
    if name not in ts:
        raise _usage(f"no simulator search for {name!r}; choose from "
                         f"{', '.join(sorted(ts))}")
    return ts[name]


def _zoned(t: Target, zones: int) -> Target:
    """``t`` over ``zones`` zones (``--zones``, a replay file's ``zones``): ANTACID only."""
    if zones == 1:
        return t
    if t.name != "antacid" or zones < 1:
        raise _usage(f"--zones {zones}: only antacid runs several zones, and at least one; "
                     "drop --zones or give a positive count")
    from harness.sim.antacid_search import target

    return target(zones)


def cmd_run(a: argparse.Namespace) -> int:
    t = _zoned(_target(a.protocol), a.zones)
    from harness.sim.search import bug_name

    if not t.per_node and any("@" in b for b in a.bug):
        raise _usage(f"{t.name} runs every node with the same bug modes: drop the @SERVERS "
                     "(per-server bug modes: garlicfarm, drip)")
    bad = [b for b in a.bug if bug_name(b) not in t.bugs]
    if bad:
        raise _usage(f"{t.name} has no bug mode {', '.join(bad)}; choose from "
                         f"{', '.join(t.bugs)}")
    bugs = tuple(a.bug)
    extra = ((("hostile",) if a.hostile else ()) + (("skew",) if a.skew else ())
             + (("gone",) if a.gone else ()))
    for k in extra:
        if k not in t.optional:
            raise _usage(f"{t.name} has no {k} kind in its schedules yet; drop --{k}")
    if a.members:
        if "decommission" not in t.optional:
            raise _usage(f"{t.name} has no optional membership kinds (its own, if any, are "
                         "always drawn); drop --members (drip has them)")
        extra += ("decommission", "add")
    from harness.sim.search import Tally, search  # hypothesis: imported only when searching
    print(f"searching {t.name} schedules, seed {a.seed}, bug {','.join(bugs) or '(none)'}, "
          f"budget {a.budget:g} s{', with hostile peers' if a.hostile else ''}"
          f"{', with clock skew' if a.skew else ''}"
          f"{', with gone nodes' if a.gone else ''}"
          f"{', with membership changes' if a.members else ''}"
          f"{f', {a.zones} zones' if a.zones != 1 else ''}", file=sys.stderr)
    if t.per_node:
        from harness.sim.search import bugs_by_node

        try:  # a server a NAME@SERVERS names must exist: said before any run
            bugs_by_node(bugs, t.per_node)
        except ValueError as e:
            raise _usage(f"--bug {e}") from None
    tally = Tally()
    found = search(t, a.seed, bugs, a.budget, shrink_s=a.shrink, runs=a.runs,
                   shrink_runs=a.shrink_runs, extra=extra, tally=tally)
    covered = f"{tally.runs} runs, {tally.sim_s:,.0f} simulated s"
    if found is None:
        print(f"no failing schedule found within {a.budget:g} s ({covered})")
        return 0
    rec = replayfile.record(t.name, a.seed, bugs, found.schedule, found.outcome)
    if a.zones != 1:
        rec["zones"] = a.zones
    out = Path(a.out or f"sim-{t.name}-{a.seed}.json")
    replayfile.write(out, rec)
    print(replayfile.screen(rec))
    print(f"first failure after {found.first_failure_s:.1f} s wall ({found.first_failure_runs} "
          f"schedules run; {found.examples} with shrinking); shrunk to {len(found.schedule)} step(s); in all {covered}; "
          f"replay: harness sim replay {out}")
    return 1


def cmd_replay(a: argparse.Namespace) -> int:
    try:
        rec = replayfile.read(Path(a.file))
    except ValueError as e:
        raise _usage(str(e)) from e
    t = _zoned(_target(rec["protocol"]), int(rec.get("zones", 1)))
    outcome = t.run([list(s) for s in rec["schedule"]], int(rec["seed"]), tuple(rec["bug"]))
    now = replayfile.record(t.name, int(rec["seed"]), tuple(rec["bug"]), rec["schedule"], outcome)
    if "zones" in rec:
        now["zones"] = rec["zones"]
    print(replayfile.screen(now))
    want = rec.get("trace_sha256")
    if want and want != now["trace_sha256"]:
        print(f"NOT reproduced byte for byte: trace {now['trace_sha256'][:16]} != recorded "
              f"{want[:16]} (the core or the simulator changed since the file was written)")
        return 2
    print("reproduced byte for byte" if want else "replayed (the file records no trace hash)")
    return 0 if outcome.ok else 1


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    s = sub.add_parser("sim", help="search fault schedules in deterministic simulation",
                       description="Run a protocol's real core on a simulated network and clock "
                       "under hypothesis-drawn fault schedules; a failure is shrunk and written "
                       "as a replay file.")
    ss = s.add_subparsers(dest="sim_cmd", required=True, metavar="SUBCOMMAND")
    r = ss.add_parser("run", help="search schedules until one fails or the budget runs out")
    r.add_argument("protocol", help="garlicfarm, swim, antacid, sds or drip")
    r.add_argument("--budget", type=budget, default=60.0,
                   help="wall time to search for a first failure, e.g. 60s or 2m (shrinking "
                        "gets as long again at most) (default: 60s)")
    r.add_argument("--shrink", type=budget, default=None,
                   help="wall time to shrink a failure once found (default: as --budget)")
    r.add_argument("--runs", type=int, default=None, metavar="N",
                   help="at most N simulated runs to a first failure: unlike --budget the "
                        "same on any machine (default: no limit)")
    r.add_argument("--shrink-runs", type=int, default=None, metavar="N",
                   help="at most N simulated runs to shrink it (default: no limit)")
    r.add_argument("--seed", type=int, default=0, help="seed of the search and the simulation "
                                                       "(default: 0)")
    r.add_argument("--bug", action="append", default=[], metavar="NAME",
                   help="switch on a bug mode of the protocol; repeatable; NAME@1,3 "
                        "switches it on for servers 1 and 3 only (a mixed cluster; garlicfarm, drip)")
    r.add_argument("--hostile", action="store_true",
                   help="draw the hostile kind too: an adversarial peer's burst of the "
                        "protocol's own messages (extreme fields, forged senders, replays, "
                        "truncation) at one node (every protocol)")
    r.add_argument("--skew", action="store_true",
                   help="draw the skew kind too: one node's monotonic clock runs at half or "
                        "twice true speed, or its calendar clock steps 60 s back or forward "
                        "(every protocol)")
    r.add_argument("--gone", action="store_true",
                   help="draw the gone kind too: one node killed for good, never restarted, "
                        "not even by the last heal, some while broadcasting a last send that "
                        "reached only some peers (sds; always drawn with --bug no-repair)")
    r.add_argument("--members", action="store_true",
                   help="draw membership changes too: decommission (a member removed through "
                        "the admin API by another) and add (a fresh node added with its "
                        "address, then started to join) (drip; garlicfarm draws add/remove "
                        "always)")
    r.add_argument("--zones", type=int, default=1, metavar="N",
                   help="run N zones, zone k's primary on server k, each zone judged apart; "
                        "written to the replay file (antacid) (default: 1)")
    r.add_argument("--out", metavar="FILE", help="replay file to write on a failure "
                                                 "(default: sim-PROTOCOL-SEED.json)")
    r.set_defaults(fn=cmd_run)
    p = ss.add_parser("replay", help="rerun a replay file and print its schedule and witness")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(fn=cmd_replay)
