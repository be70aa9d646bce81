"""The node's append-only event journal (docs/contracts.md section 3).

One JSON object a line in ``data_dir/events.jsonl``, written and flushed per event.
``seq`` counts from 0 across restarts: on reopen the file is scanned, a torn last line
(a crash mid-write) is cut off, and numbering continues after the last whole event. The cut
is never silent: the first event after it is ``journal-repaired`` (its byte count and the
event type sniffed from the fragment), which the checkers read as a gap in the evidence.
An in-memory tail answers ``GET /admin/events`` cheaply; older ranges are read from disk.
The file keeps every event whole (the checkers read it); what ``since`` answers, from the tail
or the file, has each field whose JSON is over ``ELIDE_BYTES`` replaced by a marker
``{"elided_bytes": N, "sha256": hex}`` (the digest of that field's JSON as the file holds it),
so the tail's memory stays bounded by count, not by value size (a DRiP joiner's ``apply``
events carry every value it learned by sync).

Errors a node handles without dying are journaled too (:meth:`Journal.node_error`), so a
peer's garbage or a record the node could not read is evidence a person and a checker see.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nodes.common import effects, fastjson
from nodes.common.clock import Clock

Event = dict[str, Any]

_TYPE_RE = re.compile(rb'"type"\s*:\s*"([A-Za-z_-]+)"')

#: a field whose JSON is longer than this is elided from the in-memory tail and from ``since``
ELIDE_BYTES = 4096
#: events the in-memory tail keeps for ``since`` (older ones are read from the file; the
#: harness reads the file). A node journals several events per operation and a refusal per
#: hostile request: a tail of 50,000 (the default before session 45) filled over a long run
#: and held ~25-40 MB (DRiP, issue 26) or ~27 MB (garlicfarm under 30 clients)
TAIL_EVENTS = 2_000
#: and at most this many bytes of their JSON: an event's fields vary (elided past
#: ``ELIDE_BYTES`` each), so a count alone bounds the tail only by the largest event
TAIL_BYTES = 1 << 20


def _dumps(v: Any) -> bytes:
    return fastjson.dumps(v, default=repr)


def elided(ev: Event, line_bytes: int, limit: int = ELIDE_BYTES) -> Event:
    """``ev`` with each field over ``limit`` bytes of JSON replaced by a size+digest marker.
    ``line_bytes`` (the event's JSON length) skips the per-field work for small events."""
    if line_bytes <= limit:
        return ev
    out: Event = {}
    for k, v in ev.items():
        raw = _dumps(v) if k not in ("seq", "t", "type") else b""
        if len(raw) > limit:
            out[k] = {"elided_bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
        else:
            out[k] = v
    return out


class Journal:
    """Append-only JSON-lines journal with a continuous ``seq`` and an in-memory tail."""

    def __init__(self, path: Path | str, clock: Clock, tail_size: int = TAIL_EVENTS,
                 tail_bytes: int | None = TAIL_BYTES) -> None:
        """``tail_size`` events at most in memory, and (``tail_bytes``) at most that many
        bytes of their JSON: events vary in size (a refusal's detail, an elided value), so a
        count alone bounds the tail's memory only by the largest event times the count."""
        self.path = Path(path)
        self.clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tail: deque[Event] = deque(maxlen=tail_size)
        self._sizes: deque[int] = deque(maxlen=tail_size)  # JSON bytes of each tail event
        self.tail_bytes = tail_bytes
        self._bytes = 0  # of the events in the tail
        self.torn_bytes = 0
        self.torn_type: str | None = None
        self.next_seq = self._recover()
        self._f = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        self._holding = 0  # `held` blocks open: their events reach the file at its end
        if self.torn_bytes:
            self.emit("journal-repaired", file=self.path.name, bytes=self.torn_bytes,
                      fragment_type=self.torn_type)

    def _recover(self) -> int:
        """Scan the file a line at a time (memory bounded by the longest event, not the file:
        a DRiP joiner's journal holds every value it synced), refill the tail, and cut a torn
        last line. The first line that is not a whole event ends the scan."""
        if not self.path.exists():
            return 0
        good = 0
        next_seq = 0
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                try:
                    ev = json.loads(line)
                    if not isinstance(ev, dict) or not isinstance(ev.get("seq"), int):
                        raise ValueError("not an event")
                except ValueError:
                    break
                next_seq = ev["seq"] + 1
                self._keep(ev, len(line) - 1)
                good += len(line)
            size = f.seek(0, os.SEEK_END)
            if good < size:
                f.seek(good)
                m = _TYPE_RE.search(f.read(4096))
                self.torn_type = m.group(1).decode() if m else None
                self.torn_bytes = size - good
        if self.torn_bytes:
            with open(self.path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        return next_seq

    def emit(self, type_: str, **fields: Any) -> Event:
        """Append one event (stamped with seq and the node's skewable wall time) and flush."""
        ev: Event = {"seq": self.next_seq, "t": round(self.clock.wall(), 6), "type": type_}
        ev.update(fields)
        line = _dumps(ev) + b"\n"
        self._f.write(line)
        if not self._holding:
            self._f.flush()
        self.next_seq += 1
        self._keep(ev, len(line) - 1)
        return ev

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The events emitted inside reach the file in one write at the end, not one each: a
        runtime turn emits several (a DRiP update ~17 over its five nodes) and performs none
        of its effects before the turn ends, so the file still holds each event before
        anything it describes is seen outside the node. The in-memory tail has them at once."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding:
                self._f.flush()

    def _keep(self, ev: Event, line_bytes: int) -> None:
        """Put ``ev`` (elided) last in the tail; forget the oldest past either bound."""
        kept = elided(ev, line_bytes)
        size = line_bytes if kept is ev else len(_dumps(kept))
        if len(self._tail) == self._tail.maxlen:
            self._bytes -= self._sizes[0]  # the append below pushes it out
        self._tail.append(kept)
        self._sizes.append(size)
        self._bytes += size
        if self.tail_bytes is not None:
            while self._bytes > self.tail_bytes and len(self._tail) > 1:
                self._tail.popleft()
                self._bytes -= self._sizes.popleft()

    def node_error(self, where: str, error: BaseException | str, *, evidence: bool,
                   logger: logging.Logger | None = None) -> Event:
        """Log and journal an error the node survives. ``evidence``: the node's own journal or
        state may now lack something the checkers rely on (an unreadable durable record, an
        entry it could not decode or apply), so checkers reading this node say unknown; False
        for refused input that changed nothing (a peer's malformed frame)."""
        ev = effects.node_error(where, error, evidence=evidence)
        (logger or logging.getLogger("node")).warning("%s: %s", where, ev.fields["error"])
        return self.emit(ev.type, **ev.fields)

    @property
    def tail_events(self) -> int:
        """Events held in memory now (the rest are on disk only)."""
        return len(self._tail)

    def since(self, seq: int, limit: int = 10_000) -> tuple[list[Event], int]:
        """Events with ``seq >= seq`` (at most ``limit``) and the seq to ask for next, large
        fields elided (:func:`elided`) whether they come from the tail or the file."""
        seq = max(0, seq)
        if self._tail and seq >= self._tail[0]["seq"]:
            out = [e for e in self._tail if e["seq"] >= seq][:limit]
        else:
            out = []
            with open(self.path, "rb") as f:
                for line in f:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        break
                    if ev["seq"] >= seq:
                        out.append(elided(ev, len(line)))
                        if len(out) >= limit:
                            break
        nxt = out[-1]["seq"] + 1 if out else min(seq, self.next_seq)
        return out, nxt

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            self._f.close()
