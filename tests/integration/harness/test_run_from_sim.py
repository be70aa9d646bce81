"""``harness run --from FILE`` with a sim replay file: the simulator's finding (a Garlic Farm
``forget-vote`` schedule found and shrunk by ``harness sim run``) played on real processes,
its faults through the real nemesis, judged by the suite's checkers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def harness(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def test_a_sim_finding_drives_a_real_run_and_says_whether_it_confirms(tmp_path):
    replay = tmp_path / "fv.json"
    # seed 2 finds forget-vote after 177 runs and shrinks it to: isolate the leader, kill it
    found = harness("sim", "run", "garlicfarm", "--bug", "forget-vote", "--seed", "2",
                    "--runs", "300", "--shrink-runs", "60", "--out", str(replay))
    assert found.returncode == 1, found.stdout[-2000:] + found.stderr[-2000:]
    sim = json.loads(replay.read_text())
    assert [s[0] for s in sim["schedule"]][-2:] == ["partition", "crash"], sim["schedule"]

    store = tmp_path / "store"
    r = harness("run", "--from", str(replay), "--store", str(store))
    said = " ".join(r.stderr.split())
    assert r.returncode in (0, 1), said[-3000:]
    assert "sim replay: step 0 loss: skipped" in said  # TCP: said, not silently dropped
    run = (store / "latest").resolve()
    test = json.loads((run / "test.json").read_text())
    assert (test["protocol"], test["bugs"], test["seed"], len(test["nodes"])) == \
        ("garlicfarm", ["forget-vote"], 2, 5)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    nem = [o for o in ops if o["process"] == "nemesis" and o["f"] != "heal-all"]
    # the schedule's faults, in its order, aimed at the leader, each said once in the history
    asked = [(o["f"], o["value"]) for o in nem if o["type"] == "invoke"]
    assert asked[:2] == [("start-partition", {"shape": "isolate", "node": "leader"}),
                         ("kill", {"node": "leader"})], asked
    done = [o["value"] for o in nem if o["type"] != "invoke"][:2]
    assert done[1]["nodes"] == [done[0]["node"]], done  # the isolated leader is the one killed
    results = json.loads((run / "results.json").read_text())
    if r.returncode == 1:
        assert "CONFIRMED on real processes: the real run failed (" in said
        assert results["valid"] is False
    else:
        assert "NOT confirmed: the real run passed every checker" in said
    assert "replay: harness run --from " + str(replay) in said
