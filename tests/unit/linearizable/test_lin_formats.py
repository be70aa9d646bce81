"""The two Porcupine input formats, parsed line by line: every op kind, every outcome, and
every malformed line named by its number. Parsed histories are pinned whole (golden)."""

from __future__ import annotations

import pytest

from checkers.linearizable.history import (
    HistoryFormatError,
    parse_porcupine_etcd,
    parse_porcupine_kv,
    read_file,
)
from tests.unit.golden import Golden

P = "INFO  jepsen.util - "
ETCD = "\n".join([
    f"{P}0\t:invoke\t:write\t3", f"{P}1\t:invoke\t:read\tnil", f"{P}0\t:ok\t:write\t3",
    f"{P}1\t:ok\t:read\t3", "",
    f"{P}2\t:invoke\t:cas\t[3 4]", f"{P}2\t:fail\t:cas\t[3 4]",     # compare failed: completed
    f"{P}3\t:invoke\t:read\tnil", f"{P}3\t:fail\t:read\t:timed-out",  # dropped
    f"{P}4\t:invoke\t:cas\t[-3 5]", f"{P}4\t:info\t:cas\t[-3 5]",    # open-ended
    f"{P}5\t:invoke\t:read\tnil", f"{P}5\t:ok\t:read\tnil",
    f"{P}6\t:invoke\t:cas\t[3 9]", f"{P}6\t:ok\t:cas\t[3 9]",
])


def test_etcd_every_outcome(golden: Golden) -> None:
    h = golden(parse_porcupine_etcd(ETCD))
    assert h.events == 14 and not h.timed
    assert h.invoked == {"write": 1, "read": 3, "cas": 3}
    got = [(o.id, o.process, o.f, o.value, o.output, o.call, o.ret) for o in h.ops]
    assert got[:3] == [(0, 0, "write", 3, None, 0, 2), (1, 1, "read", None, 3, 1, 3),
                       (2, 2, "cas", [3, 4], False, 5, 6)]
    assert [o.process for o in h.ops] == [0, 1, 2, 4, 5, 6]  # process 3's read is dropped
    open_ = h.ops[3]
    assert (open_.f, open_.value, open_.ret) == ("cas", [-3, 5], None)
    assert (h.ops[4].output, h.ops[5].output) == (None, True)


@pytest.mark.parametrize(("text", "error"), [
    (f"{P}0\t:invoke\t:write\tx", "line 1: expected an integer, got 'x'"),
    (f"{P}0\t:invoke\t:cas\t[1]", "line 1: cas value '[1]' is not [from to]"),
    (f"\n{P}0\t:ok\t:write\t1", "line 2: completion for process 0 with no call"),
    (f"{P}0\t:invoke\t:read\tnil\n{P}0\t:ok\t:read\tmaybe", "line 2: expected an integer"),
    ("garbage", "line 1: not an etcd Jepsen log line: 'garbage'"),
])
def test_etcd_malformed_lines_are_named(text: str, error: str) -> None:
    with pytest.raises(HistoryFormatError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_porcupine_etcd(text)


KV = "\n".join([
    '{:process 0, :type :invoke, :f :put, :key "a", :value "x"}',
    '{:process 1, :type :invoke, :f :get, :key "a", :value nil}',
    '{:process 0, :type :ok, :f :put, :key "a", :value "x"}',
    '{:process 1, :type :ok, :f :get, :key "a", :value "x"}',
    '{:process 2, :type :invoke, :f :append, :key "b", :value "y"}',
    '{:process 3, :type :invoke, :f :get, :key "b", :value nil}',
    '{:process 3, :type :ok, :f :get, :key "b", :value nil}',
])


def test_kv_every_kind(golden: Golden) -> None:
    h = golden(parse_porcupine_kv(KV))
    assert h.events == 7 and h.invoked == {"write": 1, "read": 2, "append": 1}
    got = [(o.process, o.f, o.value, o.output, o.call, o.ret) for o in h.ops]
    assert got == [(0, "write", ["a", "x"], None, 0, 2), (1, "read", ["a", None], ["a", "x"], 1, 3),
                   (2, "append", ["b", "y"], got[2][3], 4, None),
                   (3, "read", ["b", None], ["b", ""], 5, 6)]


def test_kv_malformed_lines_are_named() -> None:
    with pytest.raises(HistoryFormatError, match="line 1: completion for process 4 with no call"):
        parse_porcupine_kv('{:process 4, :type :ok, :f :get, :key "a", :value nil}')
    with pytest.raises(HistoryFormatError, match="line 2: not a Porcupine kv line"):
        parse_porcupine_kv(KV.splitlines()[0] + "\n{:process 0}")


def test_read_file_by_format(tmp_path) -> None:
    f = tmp_path / "h.log"
    f.write_text(ETCD)
    assert len(read_file(f, "porcupine-etcd").ops) == 6
    with pytest.raises(HistoryFormatError):
        read_file(f, "porcupine-kv")
    with pytest.raises((HistoryFormatError, ValueError)):
        read_file(f, "edn")
