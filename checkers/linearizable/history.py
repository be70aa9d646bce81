"""Histories as the engine sees them: operations with a call and (maybe) a return position.

Three sources are read into the same :class:`Operation` list:

- the harness ``history.jsonl`` shape (docs/contracts.md section 1), timed when every client
  op carries a ``time``, otherwise ordered by position in the file;
- Porcupine's etcd Jepsen logs (``porcupine-etcd``), event-ordered;
- Porcupine's key-value EDN logs (``porcupine-kv``), event-ordered;
- Jepsen's own ``history.edn`` (``jepsen-edn``, read by :mod:`checkers.linearizable.edn`),
  timed when every client op carries a ``:time``, otherwise event-ordered.

Promises: ``fail`` ops are dropped (they certainly did not happen); ``info`` ops and calls
still open when the history ends get ``ret=None`` (open-ended: they may take effect at any
point after their call, or never). Nemesis ops are skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.linearizable.edn import EdnError, Keyword, Symbol, read_records
from vocabulary.history import NEMESIS, HistoryError, pairs, read_history


class _Unknown:
    """The output of an operation whose completion was never seen (``info``)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "?"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


class HistoryFormatError(ValueError):
    """A history that cannot be read in the format it was said to be in."""


@dataclass(slots=True)
class Operation:
    """One client operation: what was asked, what came back, and when.

    ``call``/``ret`` are positions on one ordering axis: nanoseconds for timed histories,
    event numbers for event-ordered ones. ``ret is None`` means open-ended (``info``).
    """

    id: int
    process: Any
    f: str
    value: Any
    output: Any
    call: float
    ret: float | None
    index: int | None = None
    ret_index: int | None = None
    node: str | None = None

    @property
    def status(self) -> str:
        return "info" if self.ret is None else "ok"

    def brief(self) -> dict[str, Any]:
        """A JSON-able summary for witnesses."""
        return {
            "id": self.id, "process": self.process, "f": self.f, "value": self.value,
            "output": None if self.output is UNKNOWN else self.output, "status": self.status,
            "call": self.call, "ret": self.ret, "index": self.index, "ret_index": self.ret_index,
            "node": self.node,
        }


@dataclass
class LinHistory:
    """Operations plus how their positions were obtained (``timed`` or event order)."""

    ops: list[Operation]
    timed: bool
    #: events read (lines / ops), for stats
    events: int = 0
    #: invocations per function, the dropped (``fail``) ones included: a function that was
    #: invoked but never completed ``ok`` is one the check could not test
    invoked: Counter[str] = field(default_factory=Counter)


def from_ops(history: Iterable[dict[str, Any]]) -> LinHistory:
    """Pair a harness history (list of op dicts) into operations, per process.

    A completion belongs to the process's open invocation. ``fail`` drops the operation,
    ``info`` or no completion leaves it open-ended. Times are used when every client op has
    a numeric ``time``; otherwise the order of the list is the order of events.
    """
    client = [o for o in history if o.get("process") != NEMESIS]
    timed = bool(client) and all(isinstance(o.get("time"), int | float) for o in client)
    ops: list[Operation] = []
    invoked: Counter[str] = Counter()
    for p in pairs(client):
        o = p.invoke
        invoked[str(o.get("f"))] += 1
        if p.outcome == "fail":
            continue  # certainly did not happen
        op = Operation(id=len(ops), process=o.get("process"), f=o.get("f"), value=o.get("value"),
                       output=UNKNOWN, call=o["time"] if timed else p.at, ret=None,
                       index=o.get("index", p.at), node=o.get("node"))
        if p.complete is not None and p.outcome == "ok":
            c = p.complete
            op.output = c.get("value")
            op.ret = c["time"] if timed else p.done_at
            op.ret_index = c.get("index", p.done_at)
        ops.append(op)  # info or no completion: open-ended
    return LinHistory(ops=ops, timed=timed, events=len(client), invoked=invoked)


def read_jsonl(path: str | Path) -> LinHistory:
    """Read the harness ``history.jsonl`` (a torn last line is tolerated by the reader)."""
    try:
        return from_ops(read_history(path).ops)
    except HistoryError as e:  # missing, or corrupt in the middle: this reader's one error
        raise HistoryFormatError(str(e)) from e


_ETCD = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*?)\s*$")
_NUM = re.compile(r"^-?\d+$")
_PAIR = re.compile(r"^\[(-?\d+)\s+(-?\d+)\]$")


def parse_porcupine_etcd(text: str) -> LinHistory:
    """Porcupine's etcd Jepsen logs: one CAS register, event-ordered.

    ``:fail :cas`` is Jepsen's "compare failed": a completed cas whose output is ``False``
    (it constrains the register), not a dropped op. ``:fail :read :timed-out`` is dropped
    (a read that may or may not have happened cannot change the register). ``:info`` leaves
    the call open-ended.
    """
    ops: list[Operation] = []
    open_: dict[int, Operation] = {}
    dropped: set[int] = set()
    events = 0
    for n, m in _matched_lines(text, _ETCD, "an etcd Jepsen log line"):
        events += 1
        proc, typ, f, raw = int(m[1]), m[2], m[3], m[4]
        if typ == "invoke":
            if f == "read":
                value: Any = None
            elif f == "write":
                value = _int(raw, n)
            else:
                pm = _PAIR.match(raw)
                if pm is None:
                    raise HistoryFormatError(f"line {n + 1}: cas value {raw!r} is not [from to]")
                value = [int(pm[1]), int(pm[2])]
            op = Operation(id=len(ops), process=proc, f=f, value=value, output=UNKNOWN,
                           call=n, ret=None, index=n)
            ops.append(op)
            open_[proc] = op
            continue
        op = open_.pop(proc, None)  # type: ignore[assignment]
        if op is None:
            raise HistoryFormatError(f"line {n + 1}: completion for process {proc} with no call")
        if typ == "info":
            continue
        if typ == "fail" and f != "cas":
            dropped.add(id(op))
            continue
        op.ret, op.ret_index = n, n
        if f == "read":
            op.output = None if raw == "nil" else _int(raw, n)
        elif f == "write":
            op.output = None
        else:
            op.output = typ == "ok"
    kept = [op for op in ops if id(op) not in dropped]
    for i, op in enumerate(kept):
        op.id = i
    return LinHistory(ops=kept, timed=False, events=events, invoked=Counter(op.f for op in ops))


def _matched_lines(text: str, rx: re.Pattern[str], what: str) -> Iterator[tuple[int, re.Match[str]]]:
    """(0-based line number, match) for each non-blank line; a line that does not match is a
    HistoryFormatError naming it."""
    for n, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        m = rx.match(line)
        if m is None:
            raise HistoryFormatError(f"line {n + 1}: not {what}: {line!r}")
        yield n, m


def _int(raw: str, n: int) -> int:
    if not _NUM.match(raw):
        raise HistoryFormatError(f"line {n + 1}: expected an integer, got {raw!r}")
    return int(raw)


_KV = re.compile(
    r'^\{:process (\d+), :type :(invoke|ok), :f :(get|put|append), :key "(.*?)", :value (nil|"(.*)")\}\s*$'
)
_KV_F = {"get": "read", "put": "write", "append": "append"}


def parse_porcupine_kv(text: str) -> LinHistory:
    """Porcupine's key-value EDN logs (get/put/append per key), event-ordered.

    Mapped onto the harness KV shape: ``get`` -> ``read [k, null]`` with output ``[k, v]``,
    ``put`` -> ``write [k, v]``, ``append`` -> ``append [k, v]``.
    """
    ops: list[Operation] = []
    open_: dict[int, Operation] = {}
    events = 0
    for n, m in _matched_lines(text, _KV, "a Porcupine kv line"):
        events += 1
        proc, typ, f, key, val = int(m[1]), m[2], _KV_F[m[3]], m[4], m[6]
        if typ == "invoke":
            op = Operation(id=len(ops), process=proc, f=f,
                           value=[key, None if f == "read" else val], output=UNKNOWN,
                           call=n, ret=None, index=n)
            ops.append(op)
            open_[proc] = op
            continue
        op = open_.pop(proc, None)  # type: ignore[assignment]
        if op is None:
            raise HistoryFormatError(f"line {n + 1}: completion for process {proc} with no call")
        op.ret, op.ret_index = n, n
        op.output = [key, val if val is not None else ""] if f == "read" else None
    return LinHistory(ops=ops, timed=False, events=events, invoked=Counter(op.f for op in ops))


_JEPSEN_TYPES = ("invoke", "ok", "fail", "info")


def _plain(v: Any) -> Any:
    """An EDN value as the harness shape: keywords and symbols -> their names, vectors,
    lists and sets -> lists, maps -> dicts of the same."""
    if isinstance(v, Keyword | Symbol):
        return v.name
    if isinstance(v, list | tuple | frozenset):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain_key(k): _plain(x) for k, x in v.items()}
    return v


def _plain_key(k: Any) -> Any:
    return tuple(_plain_key(x) for x in k) if isinstance(k, tuple) else _plain(k)


def parse_jepsen_edn(text: str) -> LinHistory:
    """Jepsen's ``history.edn``: one op map per line, or one vector of op maps.

    Ops are ``{:type :invoke|:ok|:fail|:info, :f F, :value V, :process P, :time T, ...}``;
    keywords become strings (``:write`` -> ``"write"``, ``[:x 3]`` -> ``["x", 3]``), so
    single-register values, ``cas`` ``[old new]`` and jepsen.independent's ``[key v]``
    tuples reach the models in the shape the other readers give them. Nemesis ops
    (``:process :nemesis``) are skipped. Pairing is Jepsen's, per process and strict: a
    completion must answer its process's open invocation, and a process must not invoke
    while its previous op is open (Jepsen gives a crashed process a new number). Then the
    harness rules apply (:func:`from_ops`): ``:fail`` did not happen, ``:info`` and
    never-completed calls are open-ended, a read's value is its ``:ok`` completion's
    (``nil``: the initial value). Times are used when every client op has an integer
    ``:time``. Anything else is a HistoryFormatError naming the line.
    """
    try:
        records = read_records(text)
    except EdnError as e:
        raise HistoryFormatError(f"line {e.line}, column {e.column}: not EDN: {e.reason}") from e
    client: list[dict[str, Any]] = []
    open_: dict[Any, int] = {}
    for line, rec in records:
        if not isinstance(rec, dict):
            raise HistoryFormatError(f"line {line}: an op must be a map, got {rec!r}")
        typ, proc = rec.get(Keyword("type")), rec.get(Keyword("process"))
        if proc == Keyword(NEMESIS):
            continue
        if not (isinstance(typ, Keyword) and typ.name in _JEPSEN_TYPES):
            raise HistoryFormatError(
                f"line {line}: :type is {typ!r}, not one of :invoke :ok :fail :info")
        if Keyword("process") not in rec:
            raise HistoryFormatError(f"line {line}: op has no :process")
        f = rec.get(Keyword("f"))
        if not isinstance(f, Keyword | Symbol | str):
            raise HistoryFormatError(f"line {line}: :f is {f!r}, not a keyword")
        try:
            hash(proc)
        except TypeError:
            raise HistoryFormatError(f"line {line}: :process {proc!r} is not a process id") from None
        if typ.name == "invoke":
            if proc in open_:
                raise HistoryFormatError(
                    f"line {line}: process {proc!r} invoked again while its op from line "
                    f"{open_[proc]} is still open")
            open_[proc] = line
        elif open_.pop(proc, None) is None:
            raise HistoryFormatError(
                f"line {line}: :{typ.name} completion for process {proc!r} with no open invocation")
        op: dict[str, Any] = {"type": typ.name, "f": _plain(f), "process": _plain(proc),
                              "value": _plain(rec.get(Keyword("value")))}
        t, index = rec.get(Keyword("time")), rec.get(Keyword("index"))
        if isinstance(t, int) and not isinstance(t, bool):
            op["time"] = t
        if isinstance(index, int) and not isinstance(index, bool):
            op["index"] = index
        client.append(op)
    return from_ops(client)


FORMATS = ("jsonl", "jepsen-edn", "porcupine-etcd", "porcupine-kv")


def read_file(path: str | Path, fmt: str = "jsonl") -> LinHistory:
    """Read a history file in one of :data:`FORMATS`."""
    if fmt == "jsonl":
        return read_jsonl(path)
    text = Path(path).read_text()
    if fmt == "jepsen-edn":
        return parse_jepsen_edn(text)
    if fmt == "porcupine-etcd":
        return parse_porcupine_etcd(text)
    if fmt == "porcupine-kv":
        return parse_porcupine_kv(text)
    raise HistoryFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
