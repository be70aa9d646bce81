"""Log Matching at a snapshot's edge: the entry at a node's snapshot index belongs to its
snapshot (Garlic Farm's dump lists its log from ``snapshot + 1``), so an apply event at
exactly that index does not put it back into the log the check reads."""

from __future__ import annotations

from checkers.raft import log_matching
from tests.unit.checkers.gf_builders import commits_and_applies, entry, node, state


def test_an_apply_at_the_snapshot_index_stays_in_the_snapshot() -> None:
    log = [entry(i, 1, f"x{i}") for i in range(1, 6)]
    obs = {"nodes": {f"n{k}": node(commits_and_applies(log), state(k, log[3:], snapshot=(3, 1)))
                     for k in (1, 2)}}
    res = log_matching({}, [], obs)
    assert res.valid is True
    # entries 4 and 5 on each node; the applies of 1-3 (3 is the snapshot index) are the
    # snapshot's and are not compared
    assert res.examined["entries"] == 4
    assert res.examined["entries_compared"] == 2  # one pair, indexes 4 and 5
