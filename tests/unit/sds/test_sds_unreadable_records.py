"""A durable SDS record that no longer decodes is skipped on restart, logged and journaled as
lost evidence (the ordering checkers then say unknown for that node), never dropped silently."""

from __future__ import annotations

import logging

from checkers.observations import evidence_gaps, load_observations
from nodes.common.config import parse_config
from nodes.common.records import RecordFile
from nodes.sds.server import LOG_FILE, SdsNode


def test_an_unreadable_log_record_is_journaled_as_lost_evidence(tmp_path, caplog):
    data = tmp_path / "run" / "nodes" / "n1" / "data"
    data.mkdir(parents=True)
    rf = RecordFile.open(data / LOG_FILE)
    rf.append(b"\x0a\xff not a protobuf SDS message")  # a whole record whose payload is junk
    rf.close()
    cfg = parse_config({"id": "n1", "num_id": 1, "host": "127.0.0.1", "data_dir": str(data),
                        "ports": {"peer": 1, "client": 2, "admin": 3}, "peers": {},
                        "bugs": [], "seed": 1, "options": {}}, known_bugs=())
    with caplog.at_level(logging.WARNING):
        node = SdsNode(cfg)  # reads the durable files back for its core
    assert node.entries == []
    node.records.close()
    node.journal.close()
    assert "unreadable log record #0 skipped" in caplog.text
    events, _ = node.journal.since(0)
    assert [(e["type"], e["evidence"]) for e in events] == [("node-error", True)]
    (data.parent / "events.jsonl").write_bytes((data / "events.jsonl").read_bytes())
    gaps = evidence_gaps(load_observations(tmp_path / "run"), event_types=("deliver",))
    assert any("unreadable log record #0 skipped" in g for g in gaps), gaps
