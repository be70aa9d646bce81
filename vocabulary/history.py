"""Histories: the Jepsen-shaped record of what clients and the nemesis did.

Written as JSON lines, appended and flushed as each op happens, so a harness that dies
mid-run still leaves a readable history. Reading tolerates a torn last line and reports it:
the history is then marked incomplete, never silently shortened. The op shape is in
docs/contracts.md section 1.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

Op = dict[str, Any]

OP_TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"


class HistoryError(ValueError):
    """A history file that cannot be read as a history (not merely cut short)."""


class HistoryWriter:
    """Appends ops to ``history.jsonl``; each op is flushed before ``append`` returns."""

    def __init__(self, path: Path | str, t0_ns: int | None = None) -> None:
        self.path = Path(path)
        self._f: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.t0_ns = time.monotonic_ns() if t0_ns is None else t0_ns
        self.count = 0
        self._dumps = json.JSONEncoder(separators=(",", ":"), default=repr).encode

    def now(self) -> int:
        """Nanoseconds since the run started (monotonic)."""
        return time.monotonic_ns() - self.t0_ns

    def append(self, op: Op) -> Op:
        """Stamp ``index`` (and ``time`` if absent), write, flush; returns the stamped op."""
        op["index"] = self.count
        if "time" not in op:
            op["time"] = self.now()
        self._f.write(self._dumps(op) + "\n")
        self._f.flush()
        self.count += 1
        return op

    def sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            self.sync()
            self._f.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class History:
    ops: list[Op]
    #: False when the file ended in a torn line (the writer died mid-op)
    complete: bool = True
    problems: list[str] = field(default_factory=list)

    def client_ops(self) -> list[Op]:
        return [o for o in self.ops if o.get("process") != NEMESIS]

    def nemesis_ops(self) -> list[Op]:
        return [o for o in self.ops if o.get("process") == NEMESIS]


def read_history(path: Path | str) -> History:
    """Read a history file; a torn final line marks it incomplete, a corrupt middle is an error."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError as e:
        raise HistoryError(f"{p}: no history file; was the run started? ({e})") from None
    lines = raw.split(b"\n")
    ops: list[Op] = []
    problems: list[str] = []
    complete = True
    last = len(lines) - 1
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            op = json.loads(line)
        except ValueError:
            if n == last:  # no trailing newline: the writer died mid-line
                complete = False
                problems.append(f"line {n + 1}: torn final line ({len(line)} bytes) dropped")
                continue
            raise HistoryError(
                f"{p}:{n + 1}: not JSON; the history is corrupt in the middle, not just cut short"
            ) from None
        if not isinstance(op, dict) or op.get("type") not in OP_TYPES:
            raise HistoryError(f"{p}:{n + 1}: not an op (need a JSON object with a type in {OP_TYPES})")
        ops.append(op)
    return History(ops=ops, complete=complete, problems=problems)


@dataclass(frozen=True)
class Pair:
    """One operation: its invocation, its completion (None when the history ended first),
    and where each sits in the history (list positions)."""

    invoke: Op
    complete: Op | None
    at: int
    done_at: int | None

    @property
    def outcome(self) -> str | None:
        """``ok``, ``fail`` or ``info``; None when it never completed."""
        return None if self.complete is None else self.complete.get("type")


def pairs(ops: Iterable[Op]) -> list[Pair]:
    """Every invocation with its completion, in invocation order: the one pairing rule every
    checker and report reads a history by. A completion belongs to its process's open
    invocation; a process that invokes again left the previous one open-ended; a completion
    with no open invocation belongs to nothing. Nemesis ops pair the same way (one process)."""
    out: list[Pair] = []
    open_: dict[Any, int] = {}
    for pos, op in enumerate(ops):
        proc = op.get("process")
        if op.get("type") == "invoke":
            open_[proc] = len(out)
            out.append(Pair(op, None, pos, None))
            continue
        k = open_.pop(proc, None)
        if k is not None:
            out[k] = Pair(out[k].invoke, op, out[k].at, pos)
    return out
