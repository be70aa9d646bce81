"""Which runs a report selector names: store/latest is followed, the store's own link is not
counted twice."""

from __future__ import annotations

from reports.discover import find_runs
from tests.unit.reports.report_builders import real_run


def test_latest_link_is_followed_and_never_double_counted(tmp_path):
    store = tmp_path / "store"
    real_run(store, seed=1)
    second = real_run(store, seed=2)
    assert len(find_runs(store)) == 2  # the store's "latest" link does not add a third
    latest = find_runs(store, [str(store / "latest")])
    assert len(latest) == 1 and latest[0].path == str(second.resolve())
    assert len(find_runs(store, [str(store / "latest"), str(second)])) == 1
