"""Evidence is never lost silently: a torn journal tail and the errors a node survives are
journaled, and the checkers read them as gaps in that node's evidence."""

from __future__ import annotations

import logging

from checkers.observations import evidence_gaps, load_observations
from nodes.common.clock import Clock
from nodes.common.journal import Journal


def crashed_mid_write(path, fragment: bytes) -> Journal:
    j = Journal(path, Clock())
    j.emit("start", term=0)
    j.emit("commit", index=1, term=1, digest="d1")
    j.close()
    with open(path, "ab") as f:
        f.write(fragment)
    return Journal(path, Clock())  # the restart


def test_a_torn_tail_is_cut_and_journaled_with_its_type(tmp_path):
    j = crashed_mid_write(tmp_path / "events.jsonl", b'{"seq":2,"t":1.0,"type":"commit","ind')
    j.close()
    events, _ = j.since(0)
    rep = [e for e in events if e["type"] == "journal-repaired"]
    assert len(rep) == 1 and rep[0]["fragment_type"] == "commit" and rep[0]["bytes"] == 37
    assert rep[0]["file"] == "events.jsonl"


def test_the_checkers_see_the_cut_as_a_gap_of_that_type(tmp_path):
    node = tmp_path / "run" / "nodes" / "n1"
    node.mkdir(parents=True)
    crashed_mid_write(node / "events.jsonl", b'{"seq":2,"t":1.0,"type":"commit","ind').close()
    obs = load_observations(tmp_path / "run")
    gaps = evidence_gaps(obs, event_types=("commit",))
    assert any("cut a torn journal tail of 37 bytes" in g for g in gaps), gaps
    assert not any("torn" in g for g in evidence_gaps(obs, event_types=("vote",)))


def test_a_fragment_without_a_type_counts_against_every_journal_check(tmp_path):
    node = tmp_path / "run" / "nodes" / "n1"
    node.mkdir(parents=True)
    crashed_mid_write(node / "events.jsonl", b'{"seq":2,"t"').close()
    obs = load_observations(tmp_path / "run")
    assert any("torn journal tail" in g for g in evidence_gaps(obs, event_types=("vote",)))


def test_node_errors_are_logged_journaled_and_evidence_ones_are_gaps(tmp_path, caplog):
    node = tmp_path / "run" / "nodes" / "n1"
    node.mkdir(parents=True)
    j = Journal(node / "events.jsonl", Clock())
    with caplog.at_level(logging.WARNING):
        j.node_error("peer frame refused", ValueError("bad length"), evidence=False)
        j.node_error("unreadable log record #3 skipped", "CRC mismatch", evidence=True)
    j.close()
    assert "peer frame refused: ValueError: bad length" in caplog.text
    events, _ = j.since(0)
    assert [(e["type"], e["evidence"]) for e in events] == [("node-error", False),
                                                            ("node-error", True)]
    gaps = evidence_gaps(load_observations(tmp_path / "run"), event_types=("deliver",))
    assert gaps == ["n1: node error at seq 1: unreadable log record #3 skipped: CRC mismatch"]
