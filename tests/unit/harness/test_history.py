import json

import pytest

from vocabulary.history import HistoryError, HistoryWriter, pairs, read_history


def test_write_then_read(tmp_path):
    p = tmp_path / "history.jsonl"
    with HistoryWriter(p) as w:
        w.append({"process": 0, "type": "invoke", "f": "read", "value": ["x", None]})
        w.append({"process": 0, "type": "ok", "f": "read", "value": ["x", 1]})
    h = read_history(p)
    assert h.complete
    assert [o["index"] for o in h.ops] == [0, 1]
    assert h.ops[1]["time"] >= h.ops[0]["time"]


def test_flushed_as_it_goes(tmp_path):
    p = tmp_path / "history.jsonl"
    w = HistoryWriter(p)
    w.append({"process": 0, "type": "invoke", "f": "read", "value": None})
    assert len(read_history(p).ops) == 1  # visible before close
    w.close()


def test_truncated_file_is_readable_and_marked_incomplete(tmp_path):
    p = tmp_path / "history.jsonl"
    with HistoryWriter(p) as w:
        for i in range(3):
            w.append({"process": i, "type": "invoke", "f": "write", "value": i})
    data = p.read_bytes()
    p.write_bytes(data[:-7])  # tear the last line
    h = read_history(p)
    assert not h.complete
    assert len(h.ops) == 2
    assert "torn" in h.problems[0]


def test_corrupt_middle_is_an_error(tmp_path):
    p = tmp_path / "history.jsonl"
    p.write_text(json.dumps({"type": "invoke", "process": 0}) + "\n{garbage\n"
                 + json.dumps({"type": "ok", "process": 0}) + "\n")
    with pytest.raises(HistoryError, match="corrupt in the middle"):
        read_history(p)


def test_not_an_op_is_an_error(tmp_path):
    p = tmp_path / "history.jsonl"
    p.write_text('{"type": "bogus"}\n')
    with pytest.raises(HistoryError, match="not an op"):
        read_history(p)


def test_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(HistoryError, match="no history file"):
        read_history(tmp_path / "nope.jsonl")


def test_pairs_matches_per_process_and_leaves_open_ones():
    ops = [
        {"process": 0, "type": "invoke", "f": "w"},
        {"process": 1, "type": "invoke", "f": "r"},
        {"process": 0, "type": "ok", "f": "w"},
        {"process": 2, "type": "invoke", "f": "w"},
        {"process": 1, "type": "info", "f": "r"},
    ]
    ps = pairs(ops)
    assert [(p.invoke["process"], p.outcome) for p in ps] == [(0, "ok"), (1, "info"), (2, None)]
    assert [(p.at, p.done_at) for p in ps] == [(0, 2), (1, 4), (3, None)]


def test_pairs_an_invoke_again_leaves_the_last_open_and_an_orphan_completion_is_dropped():
    ops = [
        {"process": 0, "type": "ok", "f": "w"},  # completes nothing
        {"process": 0, "type": "invoke", "f": "w"},
        {"process": 0, "type": "invoke", "f": "r"},  # the write never returned
        {"process": 0, "type": "fail", "f": "r"},
        {"process": "nemesis", "type": "invoke", "f": "kill"},
        {"process": "nemesis", "type": "info", "f": "kill"},
    ]
    assert [(p.invoke["f"], p.outcome, p.done_at) for p in pairs(ops)] == [
        ("w", None, None), ("r", "fail", 3), ("kill", "info", 5)]
