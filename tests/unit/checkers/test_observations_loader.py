"""Loading a run dir: torn journals are salvaged, gaps are recorded, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.observations import evidence_gaps, load_observations, verdict
from checkers.raft import election_safety, raft_checker
from tests.unit.checkers.gf_builders import healthy_cluster
from tests.unit.golden import Golden


def write_run(tmp_path: Path, obs: dict) -> Path:
    for name, n in obs["nodes"].items():
        d = tmp_path / "nodes" / name
        d.mkdir(parents=True)
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in n["events"]))
        if n["state"] is not None:
            (d / "state.json").write_text(json.dumps(n["state"]))
    return tmp_path


def test_round_trip_of_a_healthy_run(tmp_path: Path, golden: Golden) -> None:
    obs = load_observations(write_run(tmp_path, healthy_cluster()))
    assert obs["run_dir"] == str(tmp_path)
    assert sorted(obs["nodes"]) == ["n1", "n2", "n3"]
    assert all(n["missing"] == [] for n in obs["nodes"].values())
    assert golden(raft_checker()({}, [], obs)).valid is True


def test_torn_last_line_is_a_typed_gap(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy_cluster())
    with open(run / "nodes/n2/events.jsonl", "a") as f:
        f.write('{"seq": 500, "t": 1.0, "type": "role", "role": "lea')
    obs = load_observations(run)
    (gap,) = obs["nodes"]["n2"]["missing"]
    assert gap["what"] == "event" and gap["type"] == "role"
    assert election_safety({}, [], obs).valid == "unknown"
    assert any("n2" in g for g in evidence_gaps(obs, event_types=("role",)))
    assert evidence_gaps(obs, event_types=("apply",)) == []


def test_event_written_after_a_tear_is_salvaged(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy_cluster())
    with open(run / "nodes/n1/events.jsonl", "a") as f:
        f.write('{"seq":500,"t":1.0,"ty')
        f.write('{"seq":501,"t":2.0,"type":"start","term":2,"voted_for":null,"last_index":5}\n')
    obs = load_observations(run)
    assert obs["nodes"]["n1"]["events"][-1]["seq"] == 501
    (gap,) = obs["nodes"]["n1"]["missing"]
    assert gap["type"] is None  # the fragment does not say which event was lost


def test_missing_and_null_state_and_journal(tmp_path: Path, golden: Golden) -> None:
    cl = healthy_cluster()
    cl["nodes"]["n3"]["state"] = None
    run = write_run(tmp_path, cl)
    (run / "nodes/n2/state.json").write_text("null")
    (run / "nodes/n1/events.jsonl").unlink()
    obs = load_observations(run)
    assert obs["nodes"]["n3"]["state"] is None and obs["nodes"]["n2"]["state"] is None
    gaps = evidence_gaps(obs, state=True, event_types=("vote",))
    assert any(g.startswith("n1: no events.jsonl") for g in gaps)
    assert any(g.startswith("n2: no final state") for g in gaps)
    assert any(g.startswith("n3: no final state") for g in gaps)
    r = raft_checker()({}, [], obs)
    golden(r)
    assert r.valid == "unknown", r.explain()


def test_empty_run_dir(tmp_path: Path) -> None:
    obs = load_observations(tmp_path)
    assert obs["nodes"] == {}
    assert evidence_gaps(obs) == ["no node observations recorded"]


def test_verdict_is_worst_wins_on_evidence() -> None:
    assert verdict("x", [], {}, []).valid is True
    assert verdict("x", [], {}, ["n1: no final state"]).valid == "unknown"
