"""Final views under a peer capacity (spec: a node tracks at most ``capacity`` members), and
torn journals: the paths a full, healthy group never takes."""

from __future__ import annotations

from typing import Any

from checkers.membership import check as check_membership
from checkers.membership import check_convergence
from tests.unit.golden import Golden
from tests.unit.swim.test_membership_checker import NODES, hist, obs, state, test_desc


def view(name: str, alive: list[str], capacity: int = 0, left: bool = False) -> dict[str, Any]:
    return state(name, alive, capacity=capacity, left=left)


def test_a_partial_view_within_capacity_is_fine_but_not_a_departed_member(golden: Golden) -> None:
    states = {"n1": view("n1", ["n2"], capacity=1),            # 1 of 3: allowed
              "n2": view("n2", ["n3", "n4"], capacity=2),
              "n3": view("n3", ["n4", "n1"], capacity=2),
              "n4": view("n4", ["n1", "n2", "n3"], capacity=2)}  # over its capacity
    r = golden(check_convergence(states, NODES, set(NODES)))
    assert r.valid is False
    assert [(a.kind, a.witness["node"]) for a in r.anomalies] == [("over-capacity", "n4")]
    assert r.anomalies[0].witness == {"node": "n4", "capacity": 2, "view": ["n1", "n2", "n3"]}
    states["n2"] = view("n2", [], left=True)  # n2 left: n1 still holds it as alive
    r = golden(check_convergence(states, NODES, set(NODES)))
    assert ("view-mismatch", "n1") in [(a.kind, a.witness["node"]) for a in r.anomalies]
    a = next(a for a in r.anomalies if a.witness["node"] == "n1")
    assert a.message == "n1 holds non-live members as alive: ['n2']" and a.witness["extra"] == ["n2"]


def test_anomalies_are_capped_at_twenty_and_all_are_counted(golden: Golden) -> None:
    names = [f"m{i:02d}" for i in range(24)]
    states = {n: {"id": n, "members": [], "capacity": 0, "left": False} for n in names}
    r = golden(check_convergence(states, names, set(names)))
    assert len(r.anomalies) == 20 and r.stats["violations"] == 48  # a mismatch and an orphan each


def test_a_node_without_a_final_state_is_neither_required_nor_forbidden() -> None:
    states: dict[str, Any] = {n: view(n, [m for m in NODES if m not in (n, "n4")]) for n in NODES}
    states["n4"] = None
    r = check_convergence(states, NODES, set(NODES))
    assert r.valid == "unknown" and r.note == "no final state from ['n4']"
    assert check_convergence(states, NODES, {"n1", "n2", "n3"}).valid is True  # never started


def test_a_node_killed_for_good_must_be_dead_or_left_in_every_view() -> None:
    """n4 gone for good: no final state by design, so no gap; the others converged to it
    being dead (not in their alive set). One still holding it alive has not converged."""
    states: dict[str, Any] = {n: view(n, [m for m in NODES if m not in (n, "n4")]) for n in NODES}
    states["n4"] = None
    r = check_convergence(states, NODES, set(NODES), gone=["n4"])
    assert r.valid is True and r.stats["live"] == ["n1", "n2", "n3"], r
    states["n2"] = view("n2", ["n1", "n3", "n4"])
    r = check_convergence(states, NODES, set(NODES), gone=["n4"])
    assert r.valid is False
    assert [(a.kind, a.witness["node"], a.witness["extra"]) for a in r.anomalies] == [
        ("view-mismatch", "n2", ["n4"])]
    # merely unreachable at the end (not gone): neither required nor forbidden, as before
    assert check_convergence(states, NODES, set(NODES)).valid == "unknown"


def test_a_torn_journal_makes_every_journal_check_unknown(golden: Golden) -> None:
    o = obs()
    o["nodes"]["n3"]["missing"] = [{"what": "event", "type": None, "detail": "torn line 7"}]
    r = golden(check_membership(test_desc(), hist(), o))
    judged = [c for c in r.children if c.checker not in ("convergence", "connectivity", "cost") and not c.stats.get("vacuous")]
    assert judged and all(c.valid == "unknown" and c.note == "journal gaps: n3: torn line 7"
                          for c in judged), r.explain()


def test_the_timing_options_come_from_the_test_then_the_node_then_defaults(golden: Golden) -> None:
    """period and suspicion multiplier: the test's options win, else what the node says it
    ran with (its start event), else SWIM's defaults; they set every window."""
    o = obs()
    o["nodes"]["n1"]["events"][0]["options"] = {"period_s": 0.5, "suspicion_mult": 6,
                                                "capacity": 2}
    bare = {"nodes": NODES}
    r = golden(check_membership(bare, hist(), o))
    assert {k: v for k, v in r.stats.items() if k != "unexercised"} == {
        "alignment": "clock-sync", "period_s": 0.5, "suspicion_timeout_s": 3.0, "nodes": 4,
        "duration_s": 60.0}
    comp = next(c for c in r.children if c.checker == "completeness")
    assert comp.stats["window_s"] == 8.0  # 6 * 0.5 + 10 * 0.5
    r = check_membership(test_desc(), hist(), o)  # the test says 1.0 s and 4
    assert (r.stats["period_s"], r.stats["suspicion_timeout_s"]) == (1.0, 4.0)
    r = check_membership({"nodes": NODES}, hist(), obs())
    assert (r.stats["period_s"], r.stats["suspicion_timeout_s"]) == (1.0, 4.0)


def test_the_top_note_names_every_invalid_check() -> None:
    st = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n1"] = state("n1", ["n2"])  # n3, n4 missing from n1's view
    r = check_membership(test_desc(swim_max_dissemination_periods=0.1), hist(), obs(states=st))
    assert r.valid is False and r.note.startswith("invalid: convergence")
