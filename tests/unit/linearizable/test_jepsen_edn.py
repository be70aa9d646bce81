"""Jepsen's ``history.edn`` (format ``jepsen-edn``): the EDN reader, the op mapping and
pairing, verdicts on hand-written histories under data/jepsen/, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.linearizable import check, read_file
from checkers.linearizable.__main__ import main
from checkers.linearizable.edn import EdnError, Keyword, Symbol, loads, read_records
from checkers.linearizable.history import FORMATS, UNKNOWN, HistoryFormatError, parse_jepsen_edn

DATA = Path(__file__).parent / "data" / "jepsen"


def jepsen(name: str):
    return read_file(DATA / name, "jepsen-edn")


# --- the EDN reader -------------------------------------------------------------------------

def test_edn_reads_every_supported_form() -> None:
    v = loads('{:a 1, :b [-2 2.5 1e3 7N 1.5M "q\\"\\n\\u00e9" nil true false] ; note\n'
              ' :c #{1 [2 3]} :d (x/y - +) :e #inst "2020-01-01" :f \\a :g \\newline'
              ' #_ :gone #_ 0 :h #jepsen.history.Op{:index 0} [1 2] :vec-key}')
    assert v == {
        Keyword("a"): 1,
        Keyword("b"): [-2, 2.5, 1000.0, 7, 1.5, 'q"\né', None, True, False],
        Keyword("c"): frozenset({1, (2, 3)}),
        Keyword("d"): [Symbol("x/y"), Symbol("-"), Symbol("+")],
        Keyword("e"): "2020-01-01",
        Keyword("f"): "a", Keyword("g"): "\n",
        Keyword("h"): {Keyword("index"): 0},
        (1, 2): Keyword("vec-key"),
    }
    assert isinstance(v[Keyword("b")][0], int) and isinstance(v[Keyword("b")][2], float)
    assert repr(Keyword("cas")) == ":cas"


@pytest.mark.parametrize(("text", "where", "why"), [
    ("{:a 1", (1, 6), "the text ended inside the map opened at line 1, column 1"),
    ("[1\n 2)", (2, 3), "')' closes a list, but the open one is a vector"),
    ("\n\n  {:a}", (3, 3), "odd number of forms"),
    ('"abc', (1, 1), "a string that is never closed"),
    ("{:a 1 :a 2}", (1, 1), "duplicate map key :a"),
    ("#{1 1}", (1, 1), "a set with a duplicate element"),
    ("1/2", (1, 1), "not a number: '1/2'"),
    ("012", (1, 1), "not a number"),
    (":", (1, 1), "not a keyword"),
    ('#"re"', (1, 1), "unsupported dispatch"),
    ("]", (1, 1), "unexpected ']'"),
    ('"a\\q"', (1, 3), "unknown string escape \\q"),
    ("[#_]", (1, 4), "#_ with no form after it"),
    ("1 2", (1, 3), "more than one top-level form"),
    ("", (1, 1), "no form in the text"),
    ("[" * 300, (1, 102), "forms nested more than 100 deep"),
])
def test_edn_errors_say_where_and_what(text: str, where: tuple[int, int], why: str) -> None:
    with pytest.raises(EdnError) as e:
        loads(text)
    assert (e.value.line, e.value.column) == where
    assert why in str(e.value) and str(e.value).startswith(f"line {where[0]}, column {where[1]}: ")


def test_records_in_both_layouts_carry_their_lines() -> None:
    per_line = "{:a 1}\n\n{:b 2}\n"
    vector = "; comment\n[{:a 1}\n #_{:skipped 0}\n {:b 2}]\n"
    assert read_records(per_line) == [(1, {Keyword("a"): 1}), (3, {Keyword("b"): 2})]
    assert read_records(vector) == [(2, {Keyword("a"): 1}), (4, {Keyword("b"): 2})]
    assert read_records(" \n") == []
    with pytest.raises(EdnError, match="line 2, column 1: a form after the history's vector"):
        read_records("[{:a 1}]\n{:b 2}")


# --- the mapping to operations ---------------------------------------------------------------

def test_register_history_maps_pairs_and_skips_the_nemesis() -> None:
    h = jepsen("register-ok.edn")
    assert h.timed and h.events == 10  # 12 lines, 2 nemesis ops skipped
    assert h.invoked == {"write": 2, "read": 3}
    got = [(o.process, o.f, o.value, o.output, o.call, o.ret, o.index, o.ret_index) for o in h.ops]
    assert got == [
        (0, "write", 1, 1, 1000, 2000, 0, 2),
        (1, "read", None, 1, 1100, 2100, 1, 3),
        (0, "write", 2, 2, 3000, 4000, 6, 9),
        (1, "read", None, 1, 3100, 3200, 7, 8),
        (1, "read", None, 2, 5000, 5100, 10, 11),
    ]
    assert "start-partition" not in h.invoked


def test_fail_is_dropped_info_and_unanswered_calls_are_open_ended() -> None:
    h = jepsen("cas-register.edn")
    assert [(o.process, o.f, o.value) for o in h.ops] == [
        (0, "write", 0), (2, "write", 3), (0, "cas", [3, 4]), (1, "read", None)]
    info = h.ops[1]
    assert info.ret is None and info.output is UNKNOWN
    assert h.invoked["cas"] == 2  # the failed cas was invoked, then dropped
    text = '{:type :invoke, :f :read, :value nil, :process 4}\n'
    (open_,) = parse_jepsen_edn(text).ops
    assert (open_.ret, open_.output, open_.call) == (None, UNKNOWN, 0)


def test_keywords_become_strings_in_independent_values() -> None:
    h = jepsen("independent.edn")
    assert [(o.f, o.value, o.output) for o in h.ops] == [
        ("write", ["x", 1], ["x", 1]), ("write", ["y", 7], ["y", 7]),
        ("read", ["x", None], ["x", 1]), ("cas", ["y", [7, 8]], ["y", [7, 8]]),
        ("read", ["y", None], ["y", 7])]
    h2 = parse_jepsen_edn('{:type :invoke :f :cas :value [1 [2 3]] :process 0}\n'
                          '{:type :ok :f :cas :value [1 [2 3]] :process 0}')
    assert h2.ops[0].value == [1, [2, 3]] and not h2.timed  # no :time: event order
    assert (h2.ops[0].call, h2.ops[0].ret) == (0, 1)


def test_both_layouts_read_the_same_history() -> None:
    lines = (DATA / "register-stale.edn").read_text().splitlines()
    per_line = "\n".join(ln.strip().lstrip("[").rstrip("]") for ln in lines[1:])
    a, b = jepsen("register-stale.edn"), parse_jepsen_edn(per_line)
    assert len(a.ops) == 3 and a.events == 6
    assert [(o.f, o.value, o.output, o.call, o.ret) for o in a.ops] == \
        [(o.f, o.value, o.output, o.call, o.ret) for o in b.ops]


# --- verdicts --------------------------------------------------------------------------------

def test_linearizable_register_is_valid() -> None:
    assert check(jepsen("register-ok.edn"), "register").valid is True


def test_stale_read_after_a_completed_write_is_not_linearizable() -> None:
    r = check(jepsen("register-stale.edn"), "register")
    assert r.valid is False
    assert r.witness["failed_op"]["f"] == "read" and r.witness["failed_op"]["output"] == 1


def test_cas_register_needs_the_info_write_and_drops_the_failed_cas() -> None:
    assert check(jepsen("cas-register.edn"), "cas-register").valid is True
    # were the failed cas [0 9] a completed "compare failed", it could not linearize (the
    # value was 0 then); were the info write dropped, cas 3->4 could not succeed
    text = (DATA / "cas-register.edn").read_text()
    no_info = text.replace(":type :info, :f :write", ":type :fail, :f :write")
    assert check(parse_jepsen_edn(no_info), "cas-register").valid is False


def test_independent_history_names_the_bad_key() -> None:
    r = check(jepsen("independent.edn"), "kv")
    assert r.valid is False
    assert r.witness["part"] == repr("y")
    assert {p.key: p.valid for p in r.parts} == {"x": True, "y": False}


def test_the_format_is_offered() -> None:
    assert "jepsen-edn" in FORMATS


# --- malformed histories ---------------------------------------------------------------------

def test_malformed_file_names_the_line() -> None:
    with pytest.raises(HistoryFormatError, match=r"^line 3, column 1: not EDN: a map with an odd"):
        jepsen("malformed.edn")


@pytest.mark.parametrize(("text", "error"), [
    ('{:type :invoke :f :read :process 0}\n{:type :ok :f :read :value 1 :process 0',
     "line 2, column 40: not EDN: the text ended inside the map opened at line 2"),
    ('{:type :invoke :f :read :process 0}\n[1 2]', "line 2: an op must be a map"),
    ('{:type :done :f :read :process 0}', "line 1: :type is :done"),
    ('\n{:f :read :process 0}', "line 2: :type is None"),
    ('{:type :invoke :f :read}', "line 1: op has no :process"),
    ('{:type :invoke :f 3 :process 0}', "line 1: :f is 3"),
    ('{:type :ok :f :read :value 1 :process 0}', "line 1: :ok completion for process 0 with no open"),
    ('{:type :invoke :f :read :process 0}\n{:type :invoke :f :read :process 0}',
     "line 2: process 0 invoked again while its op from line 1 is still open"),
    ('{:type :invoke :f :read :process [0]}', "line 1: :process"),
])
def test_malformed_ops_name_the_line(text: str, error: str) -> None:
    with pytest.raises(HistoryFormatError) as e:
        parse_jepsen_edn(text)
    assert str(e.value).startswith(error), str(e.value)


# --- the command line ------------------------------------------------------------------------

def test_command_line_exit_codes(capsys, tmp_path) -> None:
    ok = ["--format", "jepsen-edn", "--model", "register", str(DATA / "register-ok.edn")]
    assert main(ok) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    html = tmp_path / "w.html"
    bad = ["--format", "jepsen-edn", "--model", "kv", "--html", str(html), str(DATA / "independent.edn")]
    assert main(bad) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and out["witness"]["part"] == "'y'" and "<svg" in html.read_text()
    assert main(["--format", "jepsen-edn", str(DATA / "malformed.edn")]) == 3
    cap = capsys.readouterr()
    assert json.loads(cap.out)["error"].startswith("line 3, column 1: not EDN")
    assert "line 3" in cap.err


def test_map_values_keep_their_keys_and_values():
    # maps written and read back must compare entry by entry, vector keys included
    def edn(written: str, got: str) -> bool | str:
        text = (f"{{:type :invoke :f :write :value {written} :process 0}}\n"
                f"{{:type :ok :f :write :value {written} :process 0}}\n"
                "{:type :invoke :f :read :value nil :process 1}\n"
                f"{{:type :ok :f :read :value {got} :process 1}}\n")
        return check(parse_jepsen_edn(text), "register").valid

    assert edn("{:a 1 :b 2}", "{:b 2 :a 1}") is True
    assert edn("{:a 1 :b 2}", "{:a 2 :b 2}") is False
    assert edn("{:a 1 :b 2}", "{:a 1 :b 3}") is False
    assert edn("{[1 2] :x}", "{[1 2] :x}") is True
    assert edn("{[1 2] :x}", "{[1 3] :x}") is False


def test_unicode_escapes_in_characters_and_strings_and_signed_numbers():
    assert loads(r"[\u0041 \u00E9 \uabcd \newline \x]") == ["A", "é", "\uabcd", "\n", "x"]
    assert loads(r'"\u00E9-\u00e9-\u12AB"') == "é-é-\u12ab"
    assert loads("\\\n") == "\n"  # a backslash then a newline is the newline character
    for bad in (r"\foo", r"\abcde", r'"\q0041"'):
        with pytest.raises(EdnError):
            loads(bad)
    assert loads("[-1.5 +2 -3]") == [-1.5, 2, -3]
    assert loads("X1") == Symbol("X1")
