"""Reading a node's journal: a line that is no event is a gap; a torn write followed on the
same line by a whole event (a restarted node appending) keeps the event, whatever the tear
left (one byte, or half an event with nested objects); a node with no journal at all is a gap
for every journal check."""

from __future__ import annotations

from pathlib import Path

from checkers.observations import evidence_gaps, final_log, read_journal


def journal(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "events.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_json_line_that_is_no_event_is_a_gap(tmp_path: Path) -> None:
    events, gaps = read_journal(journal(tmp_path, '{"type":"start","seq":0}', '{"seq":1}',
                                        '{"type":"role","seq":2}'))
    assert [e["seq"] for e in events] == [0, 2]
    assert [g["what"] for g in gaps] == ["event"]


def test_whole_events_after_a_tear_are_kept(tmp_path: Path) -> None:
    whole = '{"type":"apply","seq":3,"index":3,"data":{"op":"append","v":"x"}}'
    events, gaps = read_journal(journal(
        tmp_path,
        '{"type":"apply","seq":2,"data":{"op":"app' + whole,   # torn mid nested object
        '{' + '{"type":"start","seq":4}'))                      # torn after one byte
    assert [(e["type"], e["seq"]) for e in events] == [("apply", 3), ("start", 4)]
    assert events[0]["data"] == {"op": "append", "v": "x"}
    assert [g["type"] for g in gaps] == ["apply", None]


def test_a_node_without_a_journal_is_a_gap_for_journal_checks() -> None:
    """In-memory observations may omit ``missing``; a node whose events are None has no
    journal, whether or not its state is missing too."""
    state_gap = {"what": "state", "type": None, "detail": "no state.json"}
    obs = {"nodes": {"n1": {"events": None, "state": None, "missing": [state_gap]},
                     "n2": {"events": None, "state": {}}}}
    assert evidence_gaps(obs, event_types=("apply",)) == ["n1: no journal", "n2: no journal"]


def test_a_blank_line_inside_a_journal_does_not_end_it(tmp_path: Path) -> None:
    # a restart after a kill can leave an empty or whitespace-only line; the events after
    # it are still evidence
    events, gaps = read_journal(journal(tmp_path, '{"type":"start","seq":0}', '', '  ',
                                        '{"type":"apply","seq":1}'))
    assert [e["seq"] for e in events] == [0, 1] and gaps == []


def test_a_log_entry_without_an_index_is_skipped_not_the_end_of_the_log() -> None:
    log = final_log("n1", {"term": 2, "log": [{"index": 1, "term": 1, "digest": "a"},
                                              {"term": 1, "digest": "?"}, "junk",
                                              {"index": 2, "term": 2, "digest": "b"}]})
    assert sorted(log.entries) == [1, 2] and log.entries[2].digest == "b"
