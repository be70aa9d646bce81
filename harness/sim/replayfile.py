"""Replay files: a shrunk failing schedule kept as JSON, and its one-screen rendering.

A file holds ``protocol``, ``seed``, ``bug`` (list), ``schedule`` (steps), ``ops`` (the client
operations and their answers), ``witness`` (the checker's anomalies) and ``trace_sha256``:
the hash of the run's bytes, which a replay must reproduce exactly; ``zones`` when an ANTACID
search ran several (``--zones``; absent: one).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.sim.search import Outcome, Step

FIELDS = ("protocol", "seed", "bug", "schedule")


def record(protocol: str, seed: int, bugs: tuple[str, ...], schedule: list[Step],
           outcome: Outcome) -> dict[str, Any]:
    return {"protocol": protocol, "seed": seed, "bug": list(bugs), "schedule": schedule,
            "ops": outcome.ops, "witness": outcome.witness,
            "trace_sha256": hashlib.sha256(outcome.trace).hexdigest()}


def write(path: Path, rec: dict[str, Any]) -> None:
    path.write_text(json.dumps(rec, indent=1, default=repr) + "\n")


def read(path: Path) -> dict[str, Any]:
    """The replay file at ``path``; a clear error when it is not one."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable replay file ({e}); 'harness sim run' "
                         "writes one when it finds a failure") from e
    missing = [f for f in FIELDS if not isinstance(rec, dict) or f not in rec]
    if missing:
        raise ValueError(f"{path}: not a replay file, it lacks {', '.join(missing)}")
    return rec


def digest(outcome: Outcome) -> str:
    return hashlib.sha256(outcome.trace).hexdigest()


def screen(rec: dict[str, Any], width: int = 100) -> str:
    """The schedule and the witness, short enough for one screen."""
    zones = f", {rec['zones']} zones" if rec.get("zones", 1) != 1 else ""
    lines = [f"{rec['protocol']} seed {rec['seed']} bug {','.join(rec['bug']) or '(none)'}"
             f"{zones}: {len(rec['schedule'])} step(s)"]
    t = 0
    for kind, dt, a, b in rec["schedule"]:
        t += dt
        lines.append(f"  +{dt:>4} ms (t={t:>5} ms)  {kind:<9} a={a} b={b}")
    lines.append(f"witness ({len(rec['witness'])} anomal{'y' if len(rec['witness']) == 1 else 'ies'}):")
    for w in rec["witness"][:6]:
        lines.append(f"  [{w.get('checker')}] {w.get('kind')}: {w.get('message')}"[:2 * width])
        ev = json.dumps(w.get("witness"), sort_keys=True, default=repr)
        lines.append(f"    {ev[:2 * width]}")
    return "\n".join(lines)
