"""Each membership leaf says what it examined and is unknown when it had nothing to judge:
no final views, no journals, nothing seen spreading. Completeness with no crash is not
exercised (unknown, with the reason); the run stays valid on its exercised leaves (correct
no-kill chaos runs judge accuracy) and lists it."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.membership import check as check_membership
from checkers.result import is_not_exercised
from tests.unit.golden import Golden
from tests.unit.swim.test_membership_checker import (
    NODES,
    child,
    hist,
    joined_group,
    kill_events,
    obs,
    state,
    test_desc,
)


def empty() -> dict[str, Any]:
    """Nodes the harness knew of, with no journal and no final state."""
    return {"nodes": {n: {"events": [], "state": None} for n in NODES}}


@pytest.mark.parametrize(("leaf", "reason"), [
    ("convergence", "no node's final view was captured"),
    ("accuracy", "no node journal"),
    ("completeness", "no node journal"),
    ("dissemination", "no node journal"),
])
def test_empty_journals_and_views_are_unknown(leaf: str, reason: str, golden: Golden) -> None:
    r = child(check_membership(test_desc(), hist(), empty()), leaf)
    golden(r)
    assert r.valid == "unknown" and reason in r.note, r.note
    assert r.stats.get("vacuous") is True


def test_no_live_member_at_the_end_is_unknown_convergence(golden: Golden) -> None:
    gone = {n: state(n, [], left=True) for n in NODES}
    r = child(check_membership(test_desc(), hist(), obs(states=gone)), "convergence")
    golden(r)
    assert r.valid == "unknown" and "no live member" in r.note
    assert r.examined == {"final_views": 4, "live": 0}


def test_no_join_and_no_death_makes_dissemination_not_exercised(golden: Golden) -> None:
    res = check_membership(test_desc(), hist(), obs())
    r = child(res, "dissemination")
    golden(r)
    assert is_not_exercised(r), r.note
    assert r.note == "not exercised: no join through a seed and no death to spread"
    assert "dissemination" in res.stats["unexercised"]
    assert r.examined == {"journals": 4, "joins": 0, "deaths": 0, "spreads": 0}


def test_no_crash_makes_completeness_not_exercised_and_the_run_still_valid(
        golden: Golden) -> None:
    res = check_membership(test_desc(), hist(), obs(joined_group()))
    r = child(res, "completeness")
    golden(r)
    assert is_not_exercised(r) and r.note == "not exercised: no node crashed"
    assert res.valid is True and "completeness" in res.stats["unexercised"]
    for leaf in ("leave", "detection", "refutation", "gossip-accuracy"):  # nothing of theirs
        assert is_not_exercised(child(res, leaf)) and leaf in res.stats["unexercised"]
    assert r.examined == {"journals": 4, "crashes": 0, "judged": 0, "detected": 0}


def test_examined_counts_of_a_judged_crash(golden: Golden) -> None:
    h = hist((20, "kill", {"nodes": ["n4"]}), (40, "restart", {"nodes": ["n4"]}))
    e = joined_group()
    for n, evs in kill_events(["n1", "n2", "n3"]).items():
        e[n] = e[n] + evs
    res = check_membership(test_desc(), h, obs(e))
    golden(res)
    assert res.valid is True, res.explain()
    seen = {path: leaf.examined for path, leaf in res.leaves()}
    assert seen == {
        "convergence": {"final_views": 4, "live": 4},
        # n2's local suspicion and death of n4 (n1's and n3's deaths are hearsay)
        "accuracy": {"journals": 4, "suspicions": 1, "deaths": 1},
        "completeness": {"journals": 4, "crashes": 1, "judged": 1, "detected": 1},
        # three joins reached n1; n4's death spread to n1 and n3
        "dissemination": {"journals": 4, "joins": 3, "deaths": 1, "spreads": 4},
        # n1's and n3's hearsay deaths; the 20 s crash; n2's suspicion of the crashed n4
        # (not a live member: refutation not judged)
        "gossip-accuracy": {"journals": 4, "gossip_deaths": 2},
        "leave": {"journals": 4, "leaves": 0},
        "detection": {"journals": 4, "outages": 1},
        "refutation": {"journals": 4, "suspicions": 0},
        "connectivity": {"final_views": 4, "live": 4},
        "cost": {"members_with_counters": 4},
    }
