"""``harness run --from RUN/test.json``: a real garlicfarm run, replayed from what it stored."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from faults import schedules as sch
from harness.nemesis_generator import Faults

ROOT = Path(__file__).resolve().parents[3]
#: a seed whose schedule has no fault step within MARGIN_S of the time limit (asserted below):
#: a replay slower or faster by a few hundred ms still plays the same steps
SEED, TIME_LIMIT, KINDS, INTERVAL, MARGIN_S = 7, 4.0, "kill,partition", 1.0, 0.6


def harness(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def said(r: subprocess.CompletedProcess[str]) -> str:
    """stderr with rich's line wrapping undone."""
    return " ".join(r.stderr.split())


def nemesis_invokes(run: Path) -> list[tuple[str, Any]]:
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    return [(o["f"], o.get("value")) for o in ops
            if o["process"] == "nemesis" and o["type"] == "invoke"]


def planned_steps() -> list[tuple[float, str]]:
    """(nominal start s, op f) of the schedule the seed draws, as Faults.build draws it."""
    f = Faults(KINDS, INTERVAL)
    steps = sch.RandomSchedule(sch.kinds_for(f.names, ["n1", "n2", "n3"]), seed=SEED,
                               count=None, gap_s=(0.5 * INTERVAL, 1.5 * INTERVAL),
                               duration_s=(0.5 * INTERVAL, 1.5 * INTERVAL))
    t, out = 0.0, []
    for delay, op in itertools.islice(steps, 12):
        t += delay
        out.append((t, op["f"]))
    return out


def test_a_replay_plays_the_same_seed_and_fault_schedule(tmp_path):
    steps = planned_steps()
    assert min(abs(t - TIME_LIMIT) for t, _ in steps) > MARGIN_S, \
        f"the schedule changed: pick a seed with no step near the limit: {steps}"
    store = tmp_path / "store"
    r = harness("run", "garlicfarm", "--nodes", "3", "--time-limit", str(TIME_LIMIT),
                "--nemesis", KINDS, "--nemesis-interval", str(INTERVAL), "--seed", str(SEED),
                "--store", str(store))
    assert r.returncode in (0, 2), r.stderr[-3000:]
    first = (store / "latest").resolve()
    assert f"replay: harness run --from {first}/test.json" in said(r)

    again = harness("run", "--from", str(first / "test.json"))
    assert again.returncode in (0, 2), again.stderr[-3000:]
    second = (store / "latest").resolve()  # stored beside the replayed run
    assert second != first and second.parent == first.parent
    a, b = (json.loads((d / "test.json").read_text()) for d in (first, second))
    volatile = {"run_dir", "started", "finished", "ops", "status", "started_wall", "collect_s",
                "final_from_s"}
    assert {k: v for k, v in a.items() if k not in volatile} == \
        {k: v for k, v in b.items() if k not in volatile}
    assert b["seed"] == SEED and b["faults"] == {"kinds": KINDS, "interval_s": INTERVAL}
    assert json.loads((second / "results.json").read_text())["seed"] == SEED

    played = nemesis_invokes(first)
    expected = [f for t, f in steps if t < TIME_LIMIT]
    assert [f for f, _ in played if f != "heal-all"] == expected, played
    assert nemesis_invokes(second) == played  # same kinds, same targets, same order

    # an option given beside --from overrides the stored one, the rest is kept
    third = harness("run", "--from", str(second), "--nemesis", "none", "--time-limit", "1")
    assert third.returncode in (0, 2), third.stderr[-3000:]
    c = json.loads(((store / "latest").resolve() / "test.json").read_text())
    assert (c["nemesis"], c["time_limit"], c["seed"], c["nodes"]) == \
        ("none", 1.0, SEED, ["n1", "n2", "n3"])


def test_replay_errors_are_usage_errors(tmp_path):
    r = harness("run", "--from", str(tmp_path / "nosuch" / "test.json"), timeout=60)
    assert r.returncode == 254 and "there is no file" in said(r), r.stderr
    r = harness("run", "--from", "nosuch-run-id", "--store", str(tmp_path), timeout=60)
    assert r.returncode == 254 and "harness ls" in said(r), r.stderr
    bad = tmp_path / "s" / "t" / "r"
    bad.mkdir(parents=True)
    (bad / "test.json").write_text(json.dumps({"name": "t", "protocol": None}))
    r = harness("run", "--from", str(bad / "test.json"), timeout=60)
    assert r.returncode == 254 and "no protocol" in said(r), r.stderr
    r = harness("run", "garlicfarm", "--from", str(bad / "test.json"), timeout=60)
    assert r.returncode == 254 and "not both" in said(r)
    assert not (tmp_path / "s" / "latest").exists()
