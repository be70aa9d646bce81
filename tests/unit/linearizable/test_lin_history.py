"""Parsing and pairing: harness op dicts, Porcupine's etcd and kv line formats."""

from __future__ import annotations

import pytest

from checkers.linearizable import UNKNOWN, from_ops, parse_porcupine_etcd, parse_porcupine_kv
from checkers.linearizable.history import HistoryFormatError, read_file
from tests.unit.linearizable.helpers import hist


def test_pairing_per_process_with_fail_info_and_open_calls():
    h = hist((0, "invoke", "write", 1), (1, "invoke", "write", 2), (0, "ok", "write", 1),
             (1, "fail", "write", 2), (2, "invoke", "read", None), (2, "info", "read", None),
             (3, "ok", "read", 5),  # a completion with no invocation is ignored
             (4, "invoke", "write", 3))
    lh = from_ops(h)
    assert [(o.process, o.f, o.status) for o in lh.ops] == [(0, "write", "ok"),
                                                          (2, "read", "info"),
                                                          (4, "write", "info")]
    assert [o.id for o in lh.ops] == [0, 1, 2]
    assert lh.ops[0].call == 0 and lh.ops[0].ret == 2 and lh.ops[1].output is UNKNOWN
    assert not lh.timed


def test_etcd_lines_tabs_or_spaces_and_outcomes():
    text = "\n".join([
        "INFO  jepsen.util - 0\t:invoke\t:cas\t[1 2]",
        "INFO  jepsen.util - 1  :invoke  :read  nil",
        "INFO  jepsen.util - 2\t:invoke\t:write\t4",
        "INFO  jepsen.util - 3\t:invoke\t:read\tnil",
        "INFO  jepsen.util - 0\t:fail\t:cas\t[1 2]",
        "INFO  jepsen.util - 1  :ok  :read  nil",
        "INFO  jepsen.util - 2\t:info\t:write\t:timed-out",
        "INFO  jepsen.util - 3\t:fail\t:read\t:timed-out",
        "",
    ])
    lh = parse_porcupine_etcd(text)
    ops = {o.process: o for o in lh.ops}
    assert set(ops) == {0, 1, 2}  # the timed-out read is dropped
    assert ops[0].value == [1, 2] and ops[0].output is False and ops[0].ret == 4
    assert ops[1].output is None and ops[1].status == "ok"
    assert ops[2].value == 4 and ops[2].status == "info"


def test_etcd_bad_line_says_where():
    with pytest.raises(HistoryFormatError, match="line 1"):
        parse_porcupine_etcd("garbage\n")


def test_kv_lines():
    text = "\n".join([
        '{:process 0, :type :invoke, :f :get, :key "3", :value nil}',
        '{:process 1, :type :invoke, :f :append, :key "3", :value "x 1 0 y"}',
        '{:process 0, :type :ok, :f :get, :key "3", :value ""}',
        '{:process 2, :type :invoke, :f :put, :key "4", :value "x 2 0 y"}',
    ])
    lh = parse_porcupine_kv(text)
    get, app, put = lh.ops
    assert (get.f, get.value, get.output) == ("read", ["3", None], ["3", ""])
    assert (app.f, app.value, app.status) == ("append", ["3", "x 1 0 y"], "info")
    assert (put.f, put.value) == ("write", ["4", "x 2 0 y"])


def test_unknown_format_is_an_error(tmp_path):
    f = tmp_path / "h"
    f.write_text("")
    with pytest.raises(HistoryFormatError, match="unknown format"):
        read_file(f, "edn")
