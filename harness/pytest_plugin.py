"""pytest plugin (pytest11 entry point): the ``chaos`` marker, options and fixtures.

- ``chaos_run(spec, expect=True)``: run a TestSpec with the session's options applied
  (backend, seed, time, Toxiproxy URL); fails the test with the witness and the run dir when
  the verdict is not what was expected. ``expect="raft.vote-safety"`` demands that exactly
  that checker (a dotted path into the result tree) reports invalid: how bug-mode tests prove
  a checker catches its bug.
- ``chaos_cluster(spec)``: an async context manager giving a started cluster (nodes, proxies,
  nemesis via ``cluster.nemesis_invoke``), with a history writer in its run dir.

``pytest -m chaos`` selects exactly the chaos tests; ``-m "not chaos or smoke"`` is the
default test command's unit + bounded smoke set.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from checkers.result import Result


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("chaos", "chaos tests (chaos-harness)")
    from harness.backends import BACKENDS

    g.addoption("--backend", default="local",
                help=f"where nodes run: {', '.join(BACKENDS)} (default: local)")
    g.addoption("--toxiproxy-url", default=None, help="use this Toxiproxy server instead of our own")
    g.addoption("--chaos-seed", type=int, default=None, help="seed for every chaos test (replay)")
    g.addoption("--chaos-time", type=float, default=None,
                help="time limit (s) for every chaos test, overriding each test's own")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a chaos test against real nodes (pytest -m chaos)")
    config.addinivalue_line("markers", "smoke: a bounded chaos test that the default test command runs too")


@dataclass(frozen=True)
class ChaosOptions:
    backend: str
    toxiproxy_url: str | None
    seed: int | None
    time: float | None

    def apply(self, spec: Any) -> Any:
        spec.backend = self.backend
        if self.seed is not None:
            spec.seed = self.seed
        if self.time is not None:
            spec.time_limit = self.time
        return spec


@pytest.fixture(scope="session")
def chaos_options(request: pytest.FixtureRequest) -> ChaosOptions:
    c = request.config
    return ChaosOptions(c.getoption("--backend"), c.getoption("--toxiproxy-url"),
                        c.getoption("--chaos-seed"), c.getoption("--chaos-time"))


def find(result: Result, path: str) -> Result | None:
    """The sub-result at a dotted checker path ("raft.vote-safety"), or None."""
    return result.find(path)


@pytest.fixture
def chaos_run(chaos_options: ChaosOptions, tmp_path_factory: pytest.TempPathFactory
              ) -> Callable[..., Any]:
    from harness.runner import run

    def _run(spec: Any, expect: bool | str = True) -> Any:
        chaos_options.apply(spec)
        if spec.store is None:
            spec.store = str(tmp_path_factory.mktemp("store"))
        res = run(spec, toxiproxy_url=chaos_options.toxiproxy_url)
        where = f"run dir: {res.run_dir.path} (seed {res.seed}; rerun with --chaos-seed {res.seed})"
        if expect is True:
            if res.valid is not True:
                pytest.fail(f"expected a valid run, got valid={res.valid}\n{res.result.explain()}\n{where}",
                            pytrace=False)
        else:
            sub = find(res.result, expect) if isinstance(expect, str) else res.result
            if sub is None:
                pytest.fail(f"no checker {expect!r} in the result\n{where}", pytrace=False)
            elif sub.valid is not False:
                pytest.fail(f"expected {expect if isinstance(expect, str) else 'the run'} to be invalid, "
                            f"got valid={sub.valid}\n{res.result.explain()}\n"
                            f"{sub.checker} stats: {json.dumps(sub.stats, default=str)[:2000]}\n{where}",
                            pytrace=False)
        return res

    return _run


@pytest.fixture
def chaos_cluster(chaos_options: ChaosOptions, tmp_path: Any) -> Callable[..., Any]:
    from harness.cluster import open_cluster
    from harness.history import HistoryWriter
    from harness.store import new_run

    @contextlib.asynccontextmanager
    async def _open(spec: Any) -> AsyncIterator[Any]:
        chaos_options.apply(spec)
        rd = new_run(spec.name, tmp_path / "store")
        async with open_cluster(spec, rd, toxiproxy_url=chaos_options.toxiproxy_url) as c:
            with HistoryWriter(rd.history) as h:
                c.history = h
                yield c

    return _open
