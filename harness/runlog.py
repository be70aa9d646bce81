"""A run's own log: ``<run dir>/harness.log`` holds the ``harness`` loggers' records, at INFO
and above, for as long as the run lasts.

The file handler is attached when the run starts and removed when it ends, however it ends.
For the file to get INFO records whatever the process configured (the CLI logs WARNING to
stderr unless -v), the ``harness`` logger is lowered to INFO for the run and stops
propagating; a forwarding handler passes on to the parent loggers exactly the records they
would have had before (by each record's logger's level as configured), so stderr, pytest's
caplog and any other handler see no difference.

Runs overlapping in one process (threads) share the arrangement: each run's file gets the
records of every run open at the time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = "harness"
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
DATEFMT = "%Y-%m-%dT%H:%M:%S"

_lock = threading.Lock()
_open: list[logging.Handler] = []
_saved: dict[str, object] = {}


class _Forward(logging.Handler):
    """Passes a record on to the parent loggers' handlers if it would have reached them with
    the ``harness`` logger as it was configured before the run."""

    def __init__(self, level: int, parent: logging.Logger) -> None:
        super().__init__()
        self.saved_level = level  # the harness logger's own level before the run
        self.parent = parent

    def _threshold(self, name: str) -> int:
        lg: logging.Logger | None = logging.getLogger(name)
        while lg is not None:
            level = self.saved_level if lg.name == ROOT else lg.level
            if level:
                return level
            lg = lg.parent  # type: ignore[assignment]
        return logging.WARNING

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < self._threshold(record.name):
            return
        lg: logging.Logger | None = self.parent
        while lg is not None:  # what Logger.callHandlers does above ``harness``
            for h in lg.handlers:
                if record.levelno >= h.level:
                    h.handle(record)
            if not lg.propagate:
                break
            lg = lg.parent  # type: ignore[assignment]


@contextmanager
def run_log(path: Path) -> Iterator[logging.Handler]:
    """Record the ``harness`` loggers into ``path`` while the block runs; yields the file
    handler (``to_file`` writes a record to it alone)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
    lg = logging.getLogger(ROOT)
    with _lock:
        if not _open:
            fwd = _Forward(lg.level, lg.parent)  # type: ignore[arg-type]
            _saved.update(level=lg.level, propagate=lg.propagate, forward=fwd)
            if lg.propagate:
                lg.addHandler(fwd)
                lg.propagate = False
            if lg.getEffectiveLevel() > logging.INFO:
                lg.setLevel(logging.INFO)
        _open.append(handler)
        lg.addHandler(handler)
    try:
        yield handler
    finally:
        with _lock:
            lg.removeHandler(handler)
            _open.remove(handler)
            if not _open:
                lg.removeHandler(_saved["forward"])  # type: ignore[arg-type]
                lg.setLevel(_saved["level"])  # type: ignore[arg-type]
                lg.propagate = bool(_saved["propagate"])
                _saved.clear()
        handler.close()


def to_file(handler: logging.Handler, logger: str, level: int, msg: str,
            exc_info: bool = False) -> None:
    """A record for the run's file only (e.g. the traceback of a run that failed, which the
    CLI already reports in its own words on stderr)."""
    import sys

    lg = logging.getLogger(logger)
    record = lg.makeRecord(lg.name, level, __file__, 0, msg, (),
                           sys.exc_info() if exc_info else None)
    handler.handle(record)
