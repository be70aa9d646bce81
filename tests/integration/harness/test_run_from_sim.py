"""``harness run --from FILE`` with a sim replay file: the simulator's finding (a Garlic Farm
``forget-vote`` schedule found and shrunk by ``harness sim run``; DRiP and ANTACID findings;
a mixed Garlic Farm cluster) played on real processes, its faults through the real nemesis,
judged by the suite's checkers."""

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
    # seed 2 finds forget-vote; what it shrinks to follows the core and the search (it was
    # "loss, isolate the leader, kill it" before the session-40 Garlic Farm fixes, then nine
    # partitions and a crash), so the real run is held to the schedule it gets, step by step
    found = harness("sim", "run", "garlicfarm", "--bug", "forget-vote", "--seed", "2",
                    "--runs", "300", "--shrink-runs", "60", "--out", str(replay))
    assert found.returncode == 1, found.stdout[-2000:] + found.stderr[-2000:]
    sim = json.loads(replay.read_text())
    kinds = [s[0] for s in sim["schedule"]]
    assert set(kinds) <= {"partition", "crash", "loss", "heal"} and "crash" in kinds, kinds

    store = tmp_path / "store"
    r = harness("run", "--from", str(replay), "--store", str(store))
    said = " ".join(r.stderr.split())
    assert r.returncode in (0, 1), said[-3000:]
    for i, k in enumerate(kinds):  # TCP has no datagram loss: said, not silently dropped
        if k == "loss":
            assert f"sim replay: step {i} loss: skipped" in said
    run = (store / "latest").resolve()
    test = json.loads((run / "test.json").read_text())
    assert (test["protocol"], test["bugs"], test["seed"], len(test["nodes"])) == \
        ("garlicfarm", ["forget-vote"], 2, 5)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    nem = [o for o in ops if o["process"] == "nemesis" and o["f"] != "heal-all"]
    # the schedule's faults, in its order, each said once in the history
    asked = [o["f"] for o in nem if o["type"] == "invoke"]
    mapped = {"partition": "start-partition", "crash": "kill"}
    assert asked == [mapped[k] for k in kinds if k in mapped], (asked, kinds)
    done = [o["value"] for o in nem if o["type"] != "invoke"]
    assert len(done) == len(asked) and all(d.get("nodes") or d.get("node") or d.get("cut")
                                           for d in done), done  # each applied to real nodes
    results = json.loads((run / "results.json").read_text())
    if r.returncode == 1:
        assert "CONFIRMED on real processes: the real run failed (" in said
        assert results["valid"] is False
    else:
        assert "NOT confirmed: the real run passed every checker" in said
    assert "replay: harness run --from " + str(replay) in said


def found(tmp_path: Path, protocol: str, bug: str, seed: int) -> Path:
    """The replay file ``harness sim run`` writes for ``bug`` at ``seed`` (it must fail)."""
    out = tmp_path / f"{protocol}.json"
    r = harness("sim", "run", protocol, "--bug", bug, "--seed", str(seed), "--runs", "300",
                "--shrink-runs", "60", "--out", str(out))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    return out


def real(replay: Path, store: Path) -> tuple[str, Path, dict]:
    """The real run of ``replay``: what it said, its run dir and its test.json."""
    r = harness("run", "--from", str(replay), "--store", str(store))
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode in (0, 1), said[-3000:]
    run = (store / "latest").resolve()
    return said, run, json.loads((run / "test.json").read_text())


def node_bugs(run: Path, test: dict) -> list[list[str]]:
    return [json.loads((run / "nodes" / n / "config.json").read_text())["bugs"]
            for n in [f"n{i + 1}" for i in range(len(test["nodes"]))]]


def test_a_drip_finding_is_confirmed_on_the_sims_mesh(tmp_path):
    # seed 1 finds retake-duplicate-votes with no fault at all (the mesh's cycle hands every
    # node each vote twice); the 4 real nodes on the sim's ring and chord fail the same way
    replay = found(tmp_path, "drip", "retake-duplicate-votes", 1)
    said, run, test = real(replay, tmp_path / "store")
    assert (test["protocol"], test["bugs"], test["seed"], len(test["nodes"])) == \
        ("drip", ["retake-duplicate-votes"], 1, 4)
    assert sorted(map(tuple, test["topology"])) == [
        ("n1", "n2"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4"), ("n3", "n4")]
    assert "CONFIRMED on real processes: the real run failed (2pc)" in said, said[-3000:]
    results = json.loads((run / "results.json").read_text())
    (twopc,) = [c for c in results["result"]["children"] if c["checker"] == "2pc"]
    kinds = {a["kind"] for a in twopc["anomalies"]}
    assert "propagated-twice" in kinds, kinds


def test_an_antacid_finding_is_confirmed_with_the_sims_primary_and_replicas(tmp_path):
    # seed 0 finds partial-group with one write of a two-document group: replicas apply only
    # its first document; the real workload's groups do the same (seed 1's find has been
    # `partition, dup` since a duplicating dup step submits the write itself)
    replay = found(tmp_path, "antacid", "partial-group", 0)
    said, run, test = real(replay, tmp_path / "store")
    assert (test["protocol"], test["bugs"], len(test["nodes"])) == \
        ("antacid", ["partial-group"], 4)
    cfg = json.loads((run / "nodes" / "n3" / "config.json").read_text())
    assert (cfg["options"]["primary"], cfg["options"]["upstream"]["n3"]) == ("n1", ["n2", "n1"])
    assert "sim replay: step 0 write: left to the workload" in said
    assert "CONFIRMED on real processes: the real run failed (" in said, said[-3000:]
    assert "csn-order.group-atomic" in said


def test_a_mixed_cluster_finding_runs_the_mode_on_its_servers_only(tmp_path):
    # forget-vote on servers 1 and 2 only: found at seed 2 (isolate the leader, kill it)
    replay = found(tmp_path, "garlicfarm", "forget-vote@1,2", 2)
    said, run, test = real(replay, tmp_path / "store")
    assert test["bugs"] == ["forget-vote@1,2"]
    assert node_bugs(run, test) == [["forget-vote"], ["forget-vote"], [], [], []]
    # the real leader need not be a server running the mode: either verdict, said
    assert ("CONFIRMED on real processes" in said) or ("NOT confirmed" in said), said[-3000:]
