"""checkers.twopc on simulated runs and hand-made evidence: valid runs pass, each violation
is reported with a readable witness."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from harness.sim.drip import DripSim
from tests.unit.golden import Golden

RING4 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n1", "n4")]


def history_for(sim: DripSim, ops: list[tuple[str, str, Any, str]]) -> list[dict[str, Any]]:
    """invoke/complete pairs for (node, key, value, uid), outcomes from the sim."""
    h: list[dict[str, Any]] = []
    for p, (node, key, value, uid) in enumerate(ops):
        h.append({"index": len(h), "process": p, "type": "invoke", "f": "update",
                  "value": [key, value, uid], "node": node})
    for p, (node, key, value, uid) in enumerate(ops):
        d = sim.outcome(uid)
        t = "info" if d is None else ("ok" if d.status == 200 else "fail")
        h.append({"index": len(h), "process": p, "type": t, "f": "update",
                  "value": [key, value, uid], "node": node,
                  **({"error": d.body.get("error")} if d and d.status != 200 else {})})
    return h


def kinds(r) -> set[str]:
    return {a.kind for a in r.anomalies}


def run_ops(sim: DripSim, ops: list[tuple[str, str, Any, str]]) -> list[dict[str, Any]]:
    for node, key, value, uid in ops:
        sim.update(node, key, value, uid)
    sim.run_for(25)
    return history_for(sim, ops)


OPS = [("n1", "k", "a", "ua"), ("n3", "k", "b", "ub"), ("n2", "j", 1, "uc")]


def test_a_correct_run_is_valid(golden: Golden) -> None:
    sim = DripSim(RING4)
    h = run_ops(sim, OPS)
    r = check({}, h, sim.observations())
    golden(r)
    assert r.valid is True, r.explain()
    assert r.stats["committed"] >= 1


def test_forget_in_progress_is_caught_as_conflicting_commits(golden: Golden) -> None:
    sim = DripSim(RING4, bugs={"forget-in-progress"})
    h = run_ops(sim, OPS)
    r = check({}, h, sim.observations())
    golden(r)
    assert r.valid is False and "conflicting-commits" in kinds(r)
    a = next(a for a in r.anomalies if a.kind == "conflicting-commits")
    assert "ua" in a.message + str(a.witness) and "ub" in a.message + str(a.witness)


def test_partial_vote_is_caught(golden: Golden) -> None:
    sim = DripSim(RING4, bugs={"commit-partial-vote"})
    sim.pause("n3")
    sim.run_for(3)  # a heartbeat round without n3
    h = run_ops(sim, [("n1", "k", 1, "u1")])
    sim.resume("n3")
    sim.run_for(0)
    r = check({}, h, sim.observations())
    golden(r)
    assert "commit-without-all-yes" in kinds(r)
    assert "['n3'] never voted yes" in r.anomalies[0].message


def test_skip_sync_is_caught(golden: Golden) -> None:
    sim = DripSim([("n1", "n2")], bugs={"skip-sync"})
    h = run_ops(sim, [("n1", "k", 1, "u1")])
    sim.restart("n2")
    sim.run_for(0)
    r = check({}, h, sim.observations())
    golden(r)
    assert "sync-skipped" in kinds(r)
    assert "restarted with data" in r.anomalies[0].message


def _obs(events: dict[str, list[dict[str, Any]]], kv: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"nodes": {n: {"events": [{"seq": i, "t": 0, **e} for i, e in enumerate(evs)],
                          "state": {"state": "active", "kv": kv.get(n, {})}, "missing": []}
                      for n, evs in events.items()}}


def _apply(uid: str, key: str, value: Any, version: int) -> dict[str, Any]:
    return {"type": "apply", "uid": uid, "key": key, "value": value, "version": version}


UPD = [{"index": 0, "process": 0, "type": "invoke", "f": "update", "value": ["k", 1, "u1"]},
       {"index": 1, "process": 0, "type": "fail", "f": "update", "value": ["k", 1, "u1"],
        "error": "aborted: voted no: ['n2']"}]


def test_an_aborted_update_that_is_visible_somewhere(golden: Golden) -> None:
    kv = {"k": {"value": 1, "version": 1, "uid": "u1"}}
    r = check({}, UPD, _obs({"n1": [_apply("u1", "k", 1, 1)], "n2": []}, {"n1": kv, "n2": kv}))
    golden(r)
    assert "failed-update-visible" in kinds(r)


def test_an_update_nobody_invoked_and_a_wrong_value(golden: Golden) -> None:
    kv = {"k": {"value": 9, "version": 1, "uid": "zz"}}
    r = check({}, [], _obs({"n1": [_apply("zz", "k", 9, 1)]}, {"n1": kv}))
    golden(r)
    assert "unknown-update" in kinds(r)
    h = [dict(UPD[0]), dict(UPD[1], type="ok")]
    r = check({}, h, _obs({"n1": [_apply("u1", "k", 2, 1)]},
                          {"n1": {"k": {"value": 2, "version": 1, "uid": "u1"}}}))
    golden(r)
    assert "wrong-value" in kinds(r)


def _vote(uid: str, vote: str = "yes") -> dict[str, Any]:
    return {"type": "vote", "uid": uid, "key": "k", "vote": vote, "syncing": False}


def _commit(uid: str, missing: list[str]) -> dict[str, Any]:
    return {"type": "decide", "uid": uid, "key": "k", "outcome": "commit", "version": 1,
            "voters": sorted({"n1", "n2"} - set(missing)), "no_voters": [], "missing": missing}


def test_a_commit_before_every_yes_arrived_is_caught_even_if_the_yes_was_cast(golden: Golden) -> None:
    """n2 voted yes, but its vote was lost on the way: n1 committed on what it had. The result
    happens to match all-yes, the rule was still broken (a no could have been lost as well)."""
    h = [dict(UPD[0]), dict(UPD[1], type="ok")]
    kv = {"k": {"value": 1, "version": 1, "uid": "u1"}}
    evs = {"n1": [_vote("u1"), _commit("u1", ["n2"]), _apply("u1", "k", 1, 1)],
           "n2": [_vote("u1"), _apply("u1", "k", 1, 1)]}
    r = check({}, h, _obs(evs, {"n1": kv, "n2": kv}))
    golden(r)
    assert kinds(r) == {"commit-without-all-yes"}
    assert "decided without a vote from ['n2']" in r.anomalies[0].message
    # the same evidence with every vote in hand is a pass
    evs["n1"][1] = _commit("u1", [])
    assert golden(check({}, h, _obs(evs, {"n1": kv, "n2": kv}))).valid is True


def test_missing_commit_divergence_and_lost_data(golden: Golden) -> None:
    h = [dict(UPD[0]), dict(UPD[1], type="ok")]
    kv = {"k": {"value": 1, "version": 1, "uid": "u1"}}
    r = check({}, h, _obs({"n1": [_apply("u1", "k", 1, 1)], "n2": [_apply("u1", "k", 1, 1)]},
                          {"n1": kv, "n2": {}}))
    golden(r)
    assert {"missing-commit", "divergent-stores", "lost-after-apply"} <= kinds(r)
    a = next(a for a in r.anomalies if a.kind == "missing-commit")
    assert a.witness["final_versions"] == {"n2": [0, None]}


def test_missing_evidence_is_unknown_not_valid(golden: Golden) -> None:
    obs = _obs({"n1": []}, {})
    obs["nodes"]["n2"] = {"events": [], "state": None,
                          "missing": [{"what": "state", "type": None, "detail": "no state.json"}]}
    assert golden(check({}, [], obs)).valid == "unknown"


def test_a_run_in_which_nothing_committed_is_unknown_not_valid(golden: Golden) -> None:
    """No violation, but no evidence of safety either: the verdict must not be a pass."""
    sim = DripSim(RING4)
    sim.run_for(5)
    h = [{"index": 0, "process": 0, "type": "invoke", "f": "update", "value": ["k", 1, "u1"],
          "node": "n1"},
         {"index": 1, "process": 0, "type": "fail", "f": "update", "value": ["k", 1, "u1"],
          "node": "n1", "error": "aborted: no vote from ['n4']"}]
    r = check({}, h, sim.observations())
    golden(r)
    assert r.stats["committed"] == 0
    assert r.valid == "unknown" and "nothing to judge" in r.note, r.explain()
