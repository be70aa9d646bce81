"""Loading a run dir: torn journals are salvaged, gaps are recorded, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.observations import evidence_gaps, load_observations, verdict
from checkers.raft import check as raft_check
from checkers.raft import election_safety
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
    assert golden(raft_check({}, [], obs)).valid is True


def test_a_node_gone_for_good_owes_no_final_state(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy_cluster())
    (run / "nodes/n2/state.json").unlink()
    assert evidence_gaps(load_observations(run), state=True) == [
        "n2: no final state (no state.json (node unreachable at the end of the run?))"]
    (run / "nodes/n2/gone.json").write_text('{"node": "n2"}')
    obs = load_observations(run)
    assert obs["nodes"]["n2"]["gone"] and obs["nodes"]["n2"]["missing"] == []
    assert evidence_gaps(obs, state=True) == []


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
    r = raft_check({}, [], obs)
    golden(r)
    assert r.valid == "unknown", r.explain()


def test_empty_run_dir(tmp_path: Path) -> None:
    obs = load_observations(tmp_path)
    assert obs["nodes"] == {}
    assert evidence_gaps(obs) == ["no node observations recorded"]


def test_verdict_is_worst_wins_on_evidence() -> None:
    assert verdict("x", [], {}, []).valid is True
    assert verdict("x", [], {}, ["n1: no final state"]).valid == "unknown"


def test_every_kind_of_damage_is_a_named_gap(tmp_path: Path, golden: Golden) -> None:
    """What a crash or a bad disk can leave, node by node, as the loader reports it."""
    nodes = tmp_path / "nodes"
    torn = ('{"type": "send", "id": "' + "x" * 120 + '{"t": 1, "not": "an event"}'
            '{"seq": 9, "type": "deliver", "id": "b"}')
    files = {
        "n1": {"events.jsonl": '{"seq": 1, "type": "start"}\n' + torn + "\n[1, 2]\n\n",
               "state.json": "[]"},
        "n2": {"events.jsonl": '{"seq": 1, "type": "journal-repaired", "bytes": 17, '
                               '"fragment_type": "apply"}\n'
                               '{"seq": 2, "type": "node-error", "evidence": true, '
                               '"where": "apply", "error": "bad"}\n'
                               '{"seq": 3, "type": "node-error", "evidence": false}\n',
               "state.json": "{not json"},
        "n3": {},
    }
    for n, fs in files.items():
        (nodes / n).mkdir(parents=True)
        for name, text in fs.items():
            (nodes / n / name).write_text(text)
    obs = load_observations(tmp_path)
    assert obs.pop("run_dir") == str(tmp_path)
    golden(obs)
    n1 = obs["nodes"]["n1"]
    assert [e["seq"] for e in n1["events"]] == [1, 9]  # the whole event after the tear is kept
    assert [(g["what"], g["type"]) for g in n1["missing"]] == [
        ("event", "send"), ("event", None), ("state", None)]
    assert n1["missing"][0]["detail"].endswith("x" * 55 + "'")  # the fragment, cut at 80 bytes
    assert "holds list, not a state object" in n1["missing"][2]["detail"]
    line3 = "n1: events.jsonl line 3: unreadable (torn write?): '[1, 2]'"
    assert n1["missing"][1]["detail"] == line3.removeprefix("n1: ")
    gaps = golden(evidence_gaps(obs, state=True, event_types=("apply",)))
    assert gaps == [  # per node: state, then journal gaps of the types asked for (or untyped)
        "n1: no final state (state.json holds list, not a state object (node unreachable at "
        "the end of the run?))", line3,
        "n2: no final state (state.json unreadable: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1))",
        "n2: the node cut a torn journal tail of 17 bytes on restart (seq 1)",
        "n2: node error at seq 2: apply: bad",
        "n3: no final state (no state.json (node unreachable at the end of the run?))",
        "n3: no events.jsonl"]
    assert evidence_gaps(obs, event_types=("deliver",)) == [
        line3, "n2: node error at seq 2: apply: bad", "n3: no events.jsonl"]
    assert evidence_gaps(obs) == []  # asked for nothing: nothing missing
