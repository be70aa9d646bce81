"""committed-not-lost on the paths a healthy cluster never takes: an entry committed but held
by no final log, one held somewhere but by no node bound to hold it, and entries compacted into
a snapshot whose apply events or snapshot term disagree with what was committed."""

from __future__ import annotations

from typing import Any

from checkers.raft import committed_not_lost
from tests.unit.checkers.gf_builders import commits_and_applies, entry, ev, node, state
from tests.unit.golden import Golden

LOG = [entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "c")]


def cluster(**nodes: Any) -> dict[str, Any]:
    return {"nodes": nodes}


def test_committed_by_someone_held_by_no_final_log(golden: Golden) -> None:
    """n1 journaled committing index 3, then every final log (none up to date, no leader)
    ends at 2: the entry is gone from everywhere."""
    o = cluster(n1=node(commits_and_applies(LOG), state(1, LOG[:2], commit_index=1)),
                n2=node([], state(2, LOG[:2], commit_index=1)))
    r = golden(committed_not_lost({}, [], o))
    lost = [a for a in r.anomalies if a.witness["node"] == "(every node)"]
    assert r.valid is False and [a.kind for a in lost] == ["committed-entry-lost"]
    assert lost[0].witness["indexes"] == [[3, 3]] and lost[0].witness["first"]["term"] == 1
    assert lost[0].message.startswith("(every node): 1 committed entries lost, first index 3")


def test_held_somewhere_but_by_no_node_bound_to_hold_it_is_unverified(golden: Golden) -> None:
    o = cluster(n1=node(commits_and_applies(LOG), state(1, LOG, commit_index=2)),
                n2=node([], state(2, LOG[:2], commit_index=2)))
    r = golden(committed_not_lost({}, [], o))
    assert r.valid == "unknown" and r.stats["unverified"] == 1
    assert r.note.startswith("no violation found, but evidence is missing: 1 committed indexes "
                             "found but not verified")


def test_a_snapshot_that_replaced_a_committed_entry(golden: Golden) -> None:
    """n2 compacted index 3 into its snapshot; its apply event (or its snapshot term) says
    the entry there was not the one n1 committed."""
    other = entry(3, 2, "z")
    applied = [ev("apply", index=3, term=2, digest=other["digest"], kind="app", data=None)]
    o = cluster(n1=node(commits_and_applies(LOG), state(1, LOG, role="leader")),
                n2=node(applied, state(2, [], commit_index=3, snapshot=(3, 1))))
    r = golden(committed_not_lost({}, [], o))
    over = [a for a in r.anomalies if a.witness["node"] == "n2"]
    assert [a.kind for a in over] == ["committed-entry-overwritten"]
    assert over[0].witness["first"]["found"] == {"applied_digests": [other["digest"]]}
    o["nodes"]["n2"] = node([], state(2, [], commit_index=3, snapshot=(3, 2)))
    r = golden(committed_not_lost({}, [], o))
    over = [a for a in r.anomalies if a.witness["node"] == "n2"]
    assert over[0].witness["first"]["found"] == {"snapshot_term": 2}
    o["nodes"]["n2"] = node([], state(2, [], commit_index=3, snapshot=(3, 1)))
    r = committed_not_lost({}, [], o)
    assert r.valid is True and r.stats["compacted"] == 3, r.explain()
