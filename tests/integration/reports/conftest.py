"""Report integration tests import ``report_builders`` (shared with the unit tests) and
``report_cdp`` (this folder) by plain name, under any import mode."""

import sys
from pathlib import Path

import pytest

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parents[1] / "unit" / "reports"))

from node_builders import protocol_store  # noqa: E402
from report_builders import bad_store, real_run  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real chaos runs (a good and a stale kv run), hand-made bad histories and protocol
    runs with node evidence: one store per test module."""
    s = tmp_path_factory.mktemp("store")
    runs = {"ok": real_run(s, "kv", 1), "stale": real_run(s, "kv-stale", 2, stale=True)}
    runs.update(bad_store(s))
    runs.update(protocol_store(s))
    runs["store"] = s
    return runs
