"""``harness.log`` in every run dir: the harness loggers' records of that run, INFO and up,
the file handler gone afterwards (failed runs included), and other handlers unaffected."""

from __future__ import annotations

import logging

import pytest

from harness import generators as g
from harness.runner import run
from harness.spec import TestSpec, Workload
from harness.store import runs


class Chatty:
    """An in-process register whose ops log at INFO and WARNING."""

    node = None

    def __init__(self, addr, process):
        self.process = process

    async def invoke(self, op):
        logging.getLogger("harness.test").info("info from op %s", op["f"])
        logging.getLogger("harness.test").warning("warning from op %s", op["f"])
        return {"type": "ok", "value": 1}

    async def close(self):
        pass


class Broken:
    """A generator that breaks after two ops: a harness bug ends the run."""

    def __init__(self):
        self.n = 0

    def op(self, ctx):
        self.n += 1
        if self.n > 2:
            raise RuntimeError("the generator blew up")
        return {"f": "read"}


def spec(tmp_path, broken: bool = False) -> TestSpec:
    gen = (lambda s: Broken()) if broken else (lambda s: g.limit(4, g.repeat({"f": "read"})))
    wl = Workload(client=Chatty, generator=gen, checkers={})
    return TestSpec(name="logged", workload=wl, concurrency=1, seed=1, time_limit=5,
                    store=str(tmp_path / "store"))


class Seen(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def root_handler():
    """A handler on the root logger at WARNING, as the CLI's stderr without -v."""
    root = logging.getLogger()
    seen, level = Seen(), root.level
    root.addHandler(seen)
    root.setLevel(logging.WARNING)
    yield seen
    root.removeHandler(seen)
    root.setLevel(level)


def harness_logger_state():
    lg = logging.getLogger("harness")
    return lg.level, lg.propagate, list(lg.handlers)


def test_a_run_dir_holds_the_harness_log_of_that_run(tmp_path, root_handler):
    before = harness_logger_state()
    r = run(spec(tmp_path))
    text = r.run_dir.harness_log.read_text()
    assert f"INFO harness.runner: run {r.run_dir.path} seed=1" in text
    for phase in ("running workload and nemesis", "healing", "checking"):
        assert f"phase: {phase}" in text
    assert "INFO harness.test: info from op read" in text
    assert "WARNING harness.test: warning from op read" in text
    assert "run complete: 8 ops recorded" in text and "verdict: " in text
    # the handler is gone: a second run's records are not in the first run's file
    assert harness_logger_state() == before
    r2 = run(spec(tmp_path))
    assert r.run_dir.harness_log.read_text() == text
    assert str(r2.run_dir.path) in r2.run_dir.harness_log.read_text()
    # the root handler saw what it would have without the run log: warnings, no INFO
    got = [(rec.levelname, rec.name) for rec in root_handler.records]
    assert ("WARNING", "harness.test") in got
    assert not [x for x in got if x[0] == "INFO"], got


def test_a_failed_run_still_closes_its_log_with_the_reason(tmp_path, root_handler):
    before = harness_logger_state()
    with pytest.raises(RuntimeError, match="blew up"):
        run(spec(tmp_path, broken=True))
    assert harness_logger_state() == before
    (rd,) = list(runs(tmp_path / "store"))
    text = rd.harness_log.read_text()
    assert "ERROR harness.runner: run ended by RuntimeError: the generator blew up" in text
    assert "Traceback" in text and "run failed: 4 ops recorded" in text
    # the traceback went to the file only: the CLI says what failed in its own words
    assert not [r for r in root_handler.records if r.levelno >= logging.ERROR]


def test_a_logger_level_set_below_the_run_log_still_reaches_its_handlers(tmp_path,
                                                                          root_handler):
    """caplog.set_level(INFO, logger="harness.test") and the like keep working."""
    lg = logging.getLogger("harness.test")
    lg.setLevel(logging.INFO)
    try:
        run(spec(tmp_path))
    finally:
        lg.setLevel(logging.NOTSET)
    assert ("INFO", "harness.test") in [(r.levelname, r.name) for r in root_handler.records]
