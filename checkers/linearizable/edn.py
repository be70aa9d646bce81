"""A small, strict EDN reader: enough of EDN for Jepsen's ``history.edn``, with errors that
name the line and column.

Why not the PyPI package ``edn_format``: it parses EDN, but it brings a PLY lexer and an
RFC 3339 date package with it (more pinned dependencies in pyproject.toml for one reader),
its syntax errors do not say on which line of the file they are (this checker's readers all
name the line), and it refuses tagged elements it has no handler for, such as the records
Jepsen may print (``#jepsen.history.Op{...}``). The subset a history uses is small enough
to read here, in one pass, strictly: about 50,000 op lines a second.

Read: maps ``{}`` -> ``dict`` (a duplicate key is an error), vectors ``[]`` and lists
``()`` -> ``list`` (a tuple where it must be hashable: a map key or set element), sets
``#{}`` -> ``frozenset``, keywords -> :class:`Keyword`, symbols -> :class:`Symbol`, strings
(with EDN's escapes), characters (``\\a``, ``\\newline``, ``\\uXXXX``) -> ``str``,
integers (``N`` suffix allowed) -> ``int``, floats (``M`` suffix allowed) -> ``float``,
``nil``/``true``/``false`` -> ``None``/``True``/``False``. Commas are whitespace, ``;``
starts a comment, ``#_`` discards the next form. A tagged element ``#tag form`` reads as
its form (the tag is dropped: ``#inst "..."`` is the string, a printed record
``#ns.Rec{...}`` is its map). Anything else (ratios, ``#"regex"``, an unclosed collection,
an odd map, a stray closing bracket) is an :class:`EdnError`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any


class EdnError(ValueError):
    """Text that is not EDN; ``line``/``column`` (1-based) say where."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line, self.column, self.reason = line, column, message


@dataclass(frozen=True, slots=True)
class Keyword:
    """An EDN keyword (``:f`` is ``Keyword("f")``)."""

    name: str

    def __repr__(self) -> str:
        return f":{self.name}"


@dataclass(frozen=True, slots=True)
class Symbol:
    """An EDN symbol (e.g. an exception's class in Jepsen's ``:exception`` maps)."""

    name: str

    def __repr__(self) -> str:
        return self.name


#: distinct atoms remembered per text (times and indexes are mostly unique: not all kept)
ATOM_CACHE = 50_000
#: how deep forms may nest (a Jepsen op nests 4 or 5 deep); the reader recurses twice a level,
#: so this keeps it far from Python's recursion limit, even under a tracer or mutmut's
#: trampolines, and deeper input is refused with where it happened
MAX_DEPTH = 100
_SKIP = re.compile(r"(?:[\s,]+|;[^\n]*)*")
#: an atom: everything up to whitespace, a comma, a comment or a delimiter
_ATOM = re.compile(r"[^\s,;()\[\]{}\"]+")
_INT = re.compile(r"[+-]?(?:0|[1-9]\d*)N?")
_FLOAT = re.compile(r"[+-]?(?:0|[1-9]\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?M?")
_SYMBOL = re.compile(r"(?:[A-Za-z*!_?$%&=<>.|]|[+-](?![0-9]))[\w*!_?$%&=<>.|+\-:#'/]*|/")
_KEYWORD = re.compile(r":[\w*!_?$%&=<>.|+\-][\w*!_?$%&=<>.|+\-:#'/]*")
_STRING_ESC = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_CHAR_NAMES = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r",
               "backspace": "\b", "formfeed": "\f"}
_CLOSE = {"[": "]", "(": ")", "{": "}"}
_NAME = {"]": "vector", ")": "list", "}": "map"}


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        raise TypeError("map")
    return v


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        #: atoms already read (keywords, symbols, small numbers recur on every line)
        self.atoms: dict[str, Any] = {}

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_left(self.newlines, pos)  # newlines before pos
        start = self.newlines[line - 1] + 1 if line else 0
        return line + 1, pos - start + 1

    def line(self, pos: int) -> int:
        return self.where(pos)[0]

    def error(self, message: str, pos: int | None = None) -> EdnError:
        return EdnError(message, *self.where(self.pos if pos is None else pos))

    def skip(self) -> None:
        self.pos = _SKIP.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def form(self, depth: int = 0) -> Any:
        """The next form (whitespace and comments before it skipped; the caller checked that
        there is one)."""
        self.skip()
        return self.read(depth)

    def read(self, depth: int) -> Any:
        """The form at ``pos`` (whitespace already skipped)."""
        if depth > MAX_DEPTH:
            raise self.error(f"forms nested more than {MAX_DEPTH} deep")
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.error("the text ended where a form was expected")
        c = text[start]
        if c in "[({":
            self.pos += 1
            items = self.items(_CLOSE[c], start, depth)
            return self.to_map(items, start) if c == "{" else items
        if c in "])}":
            raise self.error(f"unexpected {c!r}: no {_NAME[c]} is open here")
        if c == '"':
            return self.string()
        if c == "\\":
            return self.char()
        if c == "#":
            return self.dispatch(depth)
        m = _ATOM.match(text, start)
        assert m is not None  # c is none of the delimiters, whitespace or ';'
        self.pos = m.end()
        a = m[0]
        try:
            return self.atoms[a]
        except KeyError:
            v = self.atom(a, start)
            if len(self.atoms) < ATOM_CACHE:
                self.atoms[a] = v
            return v

    def items(self, close: str, start: int, depth: int) -> list[Any]:
        out: list[Any] = []
        while True:
            self.skip()
            if self.pos >= len(self.text):
                line, col = self.where(start)
                raise self.error(f"the text ended inside the {_NAME[close]} opened at line "
                                 f"{line}, column {col}")
            c = self.text[self.pos]
            if c == close:
                self.pos += 1
                return out
            if c in "])}":
                raise self.error(f"{c!r} closes a {_NAME[c]}, but the open one is a "
                                 f"{_NAME[close]} (opened at line {self.line(start)})")
            if self.text.startswith("#_", self.pos):
                self.discard(depth)
                continue
            out.append(self.read(depth + 1))

    def to_map(self, items: list[Any], start: int) -> dict[Any, Any]:
        if len(items) % 2:
            raise self.error("a map with an odd number of forms (a key without a value)", start)
        out: dict[Any, Any] = {}
        for k, v in zip(items[::2], items[1::2], strict=True):
            try:
                k = _hashable(k)
            except TypeError:
                raise self.error("a map as a map key is not supported", start) from None
            if k in out:
                raise self.error(f"duplicate map key {k!r}", start)
            out[k] = v
        return out

    def discard(self, depth: int) -> None:
        self.pos += 2
        self.skip()
        if self.pos >= len(self.text) or self.text[self.pos] in "])}":
            raise self.error("#_ with no form after it to discard")
        self.form(depth + 1)

    def dispatch(self, depth: int) -> Any:
        start, text = self.pos, self.text
        nxt = text[start + 1: start + 2]
        if nxt == "{":
            self.pos += 2
            items = self.items("}", start, depth)
            try:
                s = frozenset(_hashable(x) for x in items)
            except TypeError:
                raise self.error("a map in a set is not supported", start) from None
            if len(s) != len(items):
                raise self.error("a set with a duplicate element", start)
            return s
        if nxt == "_":
            self.discard(depth)
            self.skip()
            if self.pos >= len(text) or text[self.pos] in "])}":
                raise self.error("#_ discarded the last form where a form was expected", start)
            return self.form(depth)
        m = _SYMBOL.match(text, start + 1)
        if m is None or not nxt.isalpha():
            raise self.error(f"unsupported dispatch #{nxt!r} (EDN has #{{, #_ and #tag)")
        self.pos = m.end()
        self.skip()
        if self.pos >= len(text) or text[self.pos] in "])}":
            raise self.error(f"tag #{m[0]} with no form after it", start)
        return self.form(depth + 1)  # a tagged element reads as its form

    def string(self) -> str:
        text, start = self.text, self.pos
        out: list[str] = []
        i = start + 1
        while True:
            j = text.find('"', i)
            k = text.find("\\", i)
            if j < 0:
                raise self.error("a string that is never closed", start)
            if k < 0 or j < k:
                out.append(text[i:j])
                self.pos = j + 1
                return "".join(out)
            out.append(text[i:k])
            e = text[k + 1: k + 2]
            if e in _STRING_ESC:
                out.append(_STRING_ESC[e])
                i = k + 2
            elif e == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[k + 2: k + 6]):
                out.append(chr(int(text[k + 2: k + 6], 16)))
                i = k + 6
            else:
                raise self.error(f"unknown string escape \\{e}", k)

    def char(self) -> str:
        start = self.pos
        m = re.compile(r"\\(u[0-9a-fA-F]{4}|[A-Za-z]+|.)", re.S).match(self.text, start)
        if m is None:
            raise self.error("a backslash with no character after it")
        name = m[1]
        self.pos = m.end()
        if len(name) == 1:
            return name
        if name in _CHAR_NAMES:
            return _CHAR_NAMES[name]
        if name[0] == "u" and len(name) == 5:
            return chr(int(name[1:], 16))
        raise self.error(f"unknown character \\{name}", start)

    def atom(self, s: str, start: int) -> Any:
        if s == "nil":
            return None
        if s in ("true", "false"):
            return s == "true"
        if s[0].isdigit() or (s[0] in "+-" and s[1:2].isdigit()):
            if _INT.fullmatch(s):
                return int(s.rstrip("N"))
            if _FLOAT.fullmatch(s):
                return float(s.rstrip("M"))
            raise self.error(f"not a number: {s!r}", start)
        if s[0] == ":":
            if not _KEYWORD.fullmatch(s):
                raise self.error(f"not a keyword: {s!r}", start)
            return Keyword(s[1:])
        if _SYMBOL.fullmatch(s):
            return Symbol(s)
        raise self.error(f"not an EDN value: {s!r}", start)


def loads(text: str) -> Any:
    """The one form in ``text`` (an error if there is none, or more than one)."""
    r = _Reader(text)
    if r.at_end():
        raise r.error("no form in the text")
    v = r.form()
    if not r.at_end():
        raise r.error("more than one top-level form")
    return v


def read_all(text: str) -> list[tuple[int, Any]]:
    """Every top-level form with the line it starts on."""
    r = _Reader(text)
    out: list[tuple[int, Any]] = []
    while not r.at_end():
        if r.text.startswith("#_", r.pos):
            r.discard(0)
            continue
        line = r.line(r.pos)
        out.append((line, r.form()))
    return out


def read_records(text: str) -> list[tuple[int, Any]]:
    """The records of a Jepsen-style file, each with the line it starts on: the elements of
    its one top-level vector, or else every top-level form (one map per line)."""
    r = _Reader(text)
    if r.at_end():
        return []
    if r.text[r.pos] != "[":
        return read_all(text)
    start = r.pos
    r.pos += 1
    out: list[tuple[int, Any]] = []
    while True:
        r.skip()
        if r.pos >= len(r.text):
            raise r.error("the text ended inside the vector opened at line "
                          f"{r.line(start)}, column {r.where(start)[1]}")
        c = r.text[r.pos]
        if c == "]":
            r.pos += 1
            break
        if c in ")}":
            raise r.error(f"{c!r} closes a {_NAME[c]}, but the open one is a vector "
                          f"(opened at line {r.line(start)})")
        if r.text.startswith("#_", r.pos):
            r.discard(1)
            continue
        out.append((r.line(r.pos), r.form(1)))
    if not r.at_end():
        raise r.error("a form after the history's vector (one vector, or one map per line)")
    return out
