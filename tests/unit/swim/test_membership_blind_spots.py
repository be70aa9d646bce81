"""The blind spots of the first four membership checks (issue 25), each on hand-made evidence
that the four pass (asserted here: none of them is False) and that one new leaf must flag;
and the evidence with the rule kept, where that leaf passes."""

from __future__ import annotations

from typing import Any

from checkers.membership import check as check_membership
from checkers.result import is_not_exercised
from tests.unit.swim.test_membership_checker import (
    NODES,
    S,
    child,
    ev,
    hist,
    joined_group,
    obs,
    state,
    test_desc,
)

OLD = ("convergence", "accuracy", "completeness", "dissemination")


def only(res: Any, leaf: str) -> Any:
    """The leaf, after checking that the four first checks passed this evidence."""
    for name in OLD:
        assert child(res, name).valid is not False, (name, child(res, name).explain())
    return child(res, leaf)


def with_events(extra: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The joined group, each member tracking every other, plus ``extra``."""
    out = joined_group()
    for n in NODES[1:]:
        out[n] += [ev(1.2, "joined", member=i + 1, gen=0, via=1)
                   for i, m in enumerate(NODES) if m != n]
    for n, evs in extra.items():
        out[n] = out.get(n, []) + evs
    return out


def client(t: float, f: str, node: str) -> list[dict[str, Any]]:
    return [{"process": 1, "type": t_, "f": f, "value": {"node": node}, "time": int(t * S) + d}
            for t_, d in (("invoke", 0), ("ok", 1000))]


def test_a_healthy_member_dead_everywhere_by_gossip_is_flagged() -> None:
    forged = {n: [ev(20, "dead", member=4, gen=0, by=9, local=False),
                  ev(40, "alive", member=4, gen=1, prev="dead", via=4)] for n in NODES[:3]}
    leaf = only(check_membership(test_desc(), hist(), obs(with_events(forged))),
                "gossip-accuracy")
    assert leaf.valid is False and leaf.stats["violations"] == 3
    assert leaf.anomalies[0].witness["member"] == "n4"
    # the same gossip behind n1's own (excused: n4 was paused) verdict is founded
    real = {**forged, "n1": [ev(19.5, "dead", member=4, gen=0, by=1, local=True)]}
    paused = hist((10, "pause", {"nodes": ["n4"]}), (15, "resume", {"nodes": ["n4"]}))
    assert child(check_membership(test_desc(), paused, obs(with_events(real))),
                 "gossip-accuracy").valid is True


def test_a_member_that_ignored_a_leave_and_found_the_leaver_dead_is_flagged() -> None:
    h = hist()
    h[2:2] = client(10, "leave", "n4")
    e = {"n1": [ev(10.5, "left", member=4, gen=0)], "n2": [ev(10.5, "left", member=4, gen=0)],
         "n3": [ev(13, "suspect", member=4, gen=0, by=3, local=True),
                ev(17, "dead", member=4, gen=0, by=3, local=True)]}
    st = {n: state(n, [m for m in NODES[:3] if m != n], dead=["n4"]) for n in NODES[:3]}
    st["n4"] = state("n4", [], left=True)
    leaf = only(check_membership(test_desc(), h, obs(with_events(e), st)), "leave")
    assert leaf.valid is False
    assert [a.kind for a in leaf.anomalies] == ["dead-not-left"]
    assert leaf.anomalies[0].witness["node"] == "n3"
    e["n3"] = [ev(10.5, "left", member=4, gen=0)]
    assert child(check_membership(test_desc(), h, obs(with_events(e), st)),
                 "leave").valid is True


def test_an_undetected_crash_and_an_unsuspected_pause_are_flagged() -> None:
    crash = hist((10, "kill", {"nodes": ["n4"]}), (16, "restart", {"nodes": ["n4"]}))
    leaf = only(check_membership(test_desc(), crash, obs(with_events({}))), "detection")
    assert leaf.valid is False and leaf.anomalies[0].kind == "undetected-crash"
    pause = hist((10, "pause", {"nodes": ["n4"]}), (50, "resume", {"nodes": ["n4"]}))
    leaf = only(check_membership(test_desc(), pause, obs(with_events({}))), "detection")
    assert leaf.valid is False and leaf.anomalies[0].kind == "undetected-pause"
    seen = {"n2": [ev(12, "suspect", member=4, gen=0, by=2, local=True)]}
    assert child(check_membership(test_desc(), pause, obs(with_events(seen))),
                 "detection").valid is True
    # a pause shorter than the 4 s suspicion timeout need not be noticed
    short = hist((10, "pause", {"nodes": ["n4"]}), (13, "resume", {"nodes": ["n4"]}))
    leaf = child(check_membership(test_desc(), short, obs(with_events({}))), "detection")
    assert is_not_exercised(leaf) and "not exercised" in leaf.note


def test_two_disjoint_pairs_are_not_one_group() -> None:
    st = {"n1": state("n1", ["n2"], capacity=2), "n2": state("n2", ["n1"], capacity=2),
          "n3": state("n3", ["n4"], capacity=2), "n4": state("n4", ["n3"], capacity=2)}
    leaf = only(check_membership(test_desc(), hist(), obs(with_events({}), st)), "connectivity")
    assert leaf.valid is False and leaf.stats["components"] == 2
    st["n2"] = state("n2", ["n1", "n3"], capacity=2)
    assert child(check_membership(test_desc(), hist(), obs(with_events({}), st)),
                 "connectivity").valid is True


def test_a_live_member_that_never_refutes_a_suspicion_is_flagged() -> None:
    e = {"n1": [ev(10, "suspect", member=4, gen=0, by=1, local=True)]}
    leaf = only(check_membership(test_desc(), hist(), obs(with_events(e))), "refutation")
    assert leaf.valid is False and leaf.anomalies[0].witness["member"] == "n4"
    e["n4"] = [ev(11, "refute", gen=1, was="suspect", by=1)]
    assert child(check_membership(test_desc(), hist(), obs(with_events(e))),
                 "refutation").valid is True


def test_dissemination_cost_over_its_bound_is_flagged() -> None:
    st = {n: state(n, [m for m in NODES if m != n]) for n in NODES}
    st["n2"]["stats"] = {"datagrams_out": 6000, "bytes_out": 600_000}
    limits = test_desc(swim_max_msgs_per_member_period=10,
                       swim_max_bytes_per_member_period=1000)
    leaf = only(check_membership(limits, hist(), obs(with_events({}), st)), "cost")
    assert leaf.valid is False
    assert {a.witness["node"] for a in leaf.anomalies} == {"n2"}
    assert child(check_membership(limits, hist(), obs(with_events({}))), "cost").valid is True
    # no counters reported: nothing to judge
    st = {n: {**state(n, [m for m in NODES if m != n]), "stats": {}} for n in NODES}
    assert child(check_membership(limits, hist(), obs(with_events({}), st)),
                 "cost").valid == "unknown"


def test_ids_follow_the_node_numbering_not_the_sorted_names() -> None:
    """At 10 nodes sorted names put n10 second: id 10 must still be n10, not n9."""
    names = [f"n{i}" for i in range(1, 11)]
    h = hist((10, "kill", {"nodes": ["n10"]}))
    nodes = {}
    for i, n in enumerate(names, 1):
        evs = [ev(0, "start", gen=0), ev(0.5, "join-ok", seed=None if i == 1 else 1, gen=0)]
        if n == "n1":
            evs += [ev(13, "suspect", member=10, gen=0, by=1, local=True),
                    ev(17, "dead", member=10, gen=0, by=1, local=True)]
        nodes[n] = {"events": evs, "state": None}
    res = check_membership({"options": {"period_s": 1.0, "suspicion_mult": 4}}, h,
                           {"nodes": nodes})
    acc = child(res, "accuracy")
    assert acc.valid is True and acc.stats["false_positives"] == 0, acc.explain()
    assert child(res, "detection").valid is True


def test_latency_on_one_link_excuses_only_deaths_across_it() -> None:
    """n1 declares n2 dead while only the n3-n4 link is slow: not excused."""
    e = {"n1": [ev(10, "suspect", member=2, gen=0, by=1, local=True),
                ev(14, "dead", member=2, gen=0, by=1, local=True)]}
    far = hist((9, "start-latency", {"ms": 500, "flows": [["n3", "n4"], ["n4", "n3"]]}),
               (20, "stop-latency", {}))
    acc = child(check_membership(test_desc(), far, obs(with_events(e))), "accuracy")
    assert acc.valid is False and acc.stats["false_positives"] == 1
    near = hist((9, "start-latency", {"ms": 500, "flows": [["n1", "n2"], ["n2", "n1"]]}),
                (20, "stop-latency", {}))
    assert child(check_membership(test_desc(), near, obs(with_events(e))),
                 "accuracy").valid is True
    # no links named: every link was slow
    every = hist((9, "start-latency", {"ms": 500}), (20, "stop-latency", {}))
    assert child(check_membership(test_desc(), every, obs(with_events(e))),
                 "accuracy").valid is True


def test_a_cut_excuses_only_pairs_on_different_sides() -> None:
    """n4 is cut off; n1 (on the majority side, with n2) declaring n2 dead is not excused."""
    iso = [[a, "n4"] for a in NODES[:3]] + [["n4", a] for a in NODES[:3]]
    cut = hist((9, "start-partition", {"cut": iso}), (20, "stop-partition", {}))
    e = {"n1": [ev(10, "suspect", member=2, gen=0, by=1, local=True),
                ev(14, "dead", member=2, gen=0, by=1, local=True)]}
    acc = child(check_membership(test_desc(), cut, obs(with_events(e))), "accuracy")
    assert acc.valid is False and acc.anomalies[0].witness["member"] == "n2"
    across = {"n1": [ev(10, "suspect", member=4, gen=0, by=1, local=True),
                     ev(14, "dead", member=4, gen=0, by=1, local=True)]}
    assert child(check_membership(test_desc(), cut, obs(with_events(across))),
                 "accuracy").valid is True


def test_a_refused_generation_claim_is_not_a_generation_the_node_held() -> None:
    """A node journals the forged generations it refused (``refused-generation``); that is not
    a generation it held, so a later death at the real generation is not stale (the hostile
    nemesis made correct nodes fail here before)."""
    deaths = {"n1": [ev(12, "refused-generation", member=4, gen=2**32 - 1, held=0, by=2),
                     ev(19.5, "dead", member=4, gen=0, by=1, local=True)],
              "n2": [ev(12, "refused-generation", member=4, gen=2**32 - 1, held=0, by=3),
                     ev(20, "dead", member=4, gen=0, by=1, local=False)]}
    paused = hist((10, "pause", {"nodes": ["n4"]}), (15, "resume", {"nodes": ["n4"]}))
    leaf = child(check_membership(test_desc(), paused, obs(with_events(deaths))),
                 "gossip-accuracy")
    assert leaf.valid is True, leaf.explain()
