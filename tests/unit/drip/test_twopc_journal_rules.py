"""The 2PC rules read off each node's own journal (issue 23 item 5): an abort binds every
node whatever the client saw, a syncing node votes yes (4.6), an inactive node takes no part
(4.7), and a late vote response never reopens a decision (4.5.1). Each history here passed the
checker before its rule existed; each has a legal twin that must stay valid."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.drip.test_twopc_evidence import NODES, committed, kinds, obs, update
from tests.unit.drip.test_twopc_rules import kv


def decide(uid: str, outcome: str, version: int = 1) -> dict[str, Any]:
    return {"type": "decide", "uid": uid, "key": "k", "outcome": outcome, "version": version,
            "reason": None if outcome == "commit" else "timeout", "voters": list(NODES),
            "missing": []}


def vote(uid: str, v: str = "yes", syncing: bool = False, hop: str | None = "n1"
         ) -> dict[str, Any]:
    return {"type": "vote", "uid": uid, "key": "k", "vote": v, "syncing": syncing,
            "from": hop, "reason": "syncing" if v == "no" else None}


def state(s: str) -> dict[str, Any]:
    return {"type": "state", "state": s, "reason": "test"}


def with_a_commit(h: list[dict[str, Any]], evs: dict[str, list[dict[str, Any]]]) -> Any:
    """Judge ``evs`` alongside one clean commit of key j, so that a legal run is valid (a run
    without any commit is "unknown": nothing to judge)."""
    h = h + update(10, 9, "u9", "j", 9)
    evs = {n: evs.get(n, []) + committed("u9", "j", 9, 1) for n in NODES}
    return check({}, h, obs(evs, {"j": {"value": 9, "version": 1, "uid": "u9"}}))


def test_an_aborted_update_that_nodes_applied_is_caught_when_the_client_saw_info() -> None:
    h = update(0, 0, "u1", "k", 1, outcome="info")
    applied = committed("u1", "k", 1, 1)
    r = check({}, h, obs({"n1": [*applied[:2], decide("u1", "abort"), applied[2]],
                          "n2": applied}, kv(k=(1, 1, "u1"))))
    assert kinds(r) == ["aborted-update-applied"], r.explain()
    w = r.anomalies[0].witness
    assert w["decide"]["node"] == "n1" and [a["node"] for a in w["applied"]] == ["n1", "n2"]
    # the same client outcome with a commit decision is legal
    ok = check({}, h, obs({"n1": [*applied[:2], decide("u1", "commit"), applied[2]],
                           "n2": applied}, kv(k=(1, 1, "u1"))))
    assert ok.valid is True, ok.explain()


def test_a_failed_client_outcome_is_reported_once_not_twice() -> None:
    h = update(0, 0, "u1", "k", 1, outcome="fail")
    applied = committed("u1", "k", 1, 1)
    r = check({}, h, obs({"n1": [decide("u1", "abort"), *applied], "n2": applied},
                         kv(k=(1, 1, "u1"))))
    assert kinds(r) == ["failed-update-visible"], r.explain()


def test_a_syncing_node_that_votes_no_breaks_4_6() -> None:
    h = update(0, 0, "u1", "k", 1, outcome="fail")
    evs = {"n1": [vote("u1", hop=None), decide("u1", "abort")],
           "n2": [state("sync"), vote("u1", "no", syncing=True), state("active")]}
    r = check({}, h, obs(evs))
    assert kinds(r) == ["syncing-voted-no"], r.explain()
    assert r.anomalies[0].witness["vote"]["node"] == "n2"
    # an active node may vote no (the key is in progress there)
    evs["n2"] = [vote("u1", "no")]
    ok = with_a_commit(h, evs)
    assert ok.valid is True, ok.explain()


def test_an_inactive_node_neither_votes_nor_applies() -> None:
    h = update(0, 0, "u1", "k", 1)
    done = committed("u1", "k", 1, 1)
    r = check({}, h, obs({"n1": done, "n2": [state("inactive"), *done, state("sync"),
                                             {"type": "sync-done"}, state("active")]},
                         kv(k=(1, 1, "u1"))))
    assert kinds(r) == ["inactive-participated", "inactive-participated"], r.explain()
    assert [a.witness["inactive"]["seq"] for a in r.anomalies] == [0, 0]
    assert "vote" in r.anomalies[0].witness and "apply" in r.anomalies[1].witness
    # after a restart (a start event) or a sync back to active, it takes part again
    back = [state("inactive"), {"type": "start", "fresh": True, "state": "active"}, *done]
    again = [state("inactive"), state("sync"), {"type": "sync-done"}, state("active"), *done]
    for evs in (back, again):
        ok = check({}, h, obs({"n1": done, "n2": evs}, kv(k=(1, 1, "u1"))))
        assert ok.valid is True, ok.explain()


def test_a_late_vote_that_reopens_a_decision_is_caught() -> None:
    """The initiator aborted, then a late yes came in and it committed after all: every node
    applied, the stores agree, and only the journal order shows the late vote was acted on."""
    h = update(0, 0, "u1", "k", 1, outcome="info")
    late = {"type": "late-vote", "uid": "u1", "from": "n2", "vote": "yes"}
    apply = {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1}
    evs = {"n1": [vote("u1", hop=None), decide("u1", "abort"), late, decide("u1", "commit"),
                  apply],
           "n2": [vote("u1"), apply]}
    r = check({}, h, obs(evs, kv(k=(1, 1, "u1"))))
    assert kinds(r) == ["late-vote-acted-on"], r.explain()
    w = r.anomalies[0].witness
    assert (w["late_vote"]["seq"], w["decide"]["seq"], w["decide"]["outcome"]) == (2, 3, "commit")
    # a late vote after the one decision, with nothing after it, is ignored as it should be
    evs = {"n1": evs["n1"][:3], "n2": [vote("u1")]}
    ok = with_a_commit(h, evs)
    assert ok.valid is True, ok.explain()


def test_a_message_taken_twice_without_a_counter_reset_breaks_4_4() -> None:
    """n2 took n1's vote request (counter 7) by two paths and passed it on both times."""
    h = update(0, 0, "u1", "k", 1)
    done = committed("u1", "k", 1, 1)

    def taken(via: str, counter: int, reset: bool = False) -> dict[str, Any]:
        return {**vote("u1", hop=via), "initiator": "n1", "counter": counter, "reset": reset}

    def judge(n2: list[dict[str, Any]]) -> Any:
        return check({"nodes": ["n1", "n2", "n3"]}, h,
                     obs({"n1": done, "n2": n2 + done[1:]}, kv(k=(1, 1, "u1"))))

    r = judge([taken("n1", 7), taken("n3", 7)])
    assert kinds(r) == ["propagated-twice"], r.explain()
    w = r.anomalies[0].witness
    assert (w["initiator"], w["counter"], w["first"]["seq"], w["again"]["seq"]) == ("n1", 7, 0, 1)
    # a commit reusing a vote's counter is the same message taken twice too
    commit = {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1,
              "initiator": "n1", "via": "update", "from": "n1", "counter": 7}
    assert kinds(check({}, h, obs({"n1": done, "n2": [taken("n1", 7), commit]},
                                  kv(k=(1, 1, "u1"))))) == ["propagated-twice"]
    # a reset that starts the counter over is no repeat, but one far from the wrap-around
    # is item 5's poisoning (test_a_counter_beyond_the_window_or_an_early_reset_breaks_item_5)
    assert kinds(judge([taken("n1", 7), taken("n3", 7, reset=True)])) == [
        "counter-out-of-window"]
    # legal: a counter overtaken in flight, a sync batch's apply (no counter of its own), and
    # the initiator's own vote
    for n2 in ([taken("n1", 8), taken("n1", 7)],
               [taken("n1", 7), {"type": "sync-start", "source": "n1"},
                {**commit, "via": "sync", "counter": None}],
               [{**taken("n1", 7), "from": None}, taken("n1", 7)]):
        ok = judge(n2)
        assert ok.valid is True, (n2, ok.explain())


def test_a_counter_beyond_the_window_or_an_early_reset_breaks_item_5() -> None:
    """n2 took n1's messages; one far-ahead counter (or a reset far from the wrap-around)
    would make every real later one of n1 a duplicate (issue 26 item 5)."""
    h = update(0, 0, "u1", "k", 1)
    done = committed("u1", "k", 1, 1)
    window, top = 2**20, 2**64 - 1

    def taken(counter: int, reset: bool = False) -> dict[str, Any]:
        return {**vote("u1", hop="n1"), "initiator": "n1", "counter": counter, "reset": reset}

    def judge(n2: list[dict[str, Any]]) -> Any:
        return check({"nodes": ["n1", "n2", "n3"]}, h,
                     obs({"n1": done, "n2": n2 + done[1:]}, kv(k=(1, 1, "u1"))))

    r = judge([taken(7), taken(top - 1)])
    assert kinds(r) == ["counter-out-of-window"], r.explain()
    w = r.anomalies[0].witness
    assert (w["initiator"], w["taken"]["counter"], w["highest"]["counter"]) == ("n1", top - 1, 7)
    assert kinds(judge([taken(7), taken(7 + window + 1)])) == ["counter-out-of-window"]
    assert kinds(judge([taken(7), taken(3, reset=True)])) == ["counter-out-of-window"]
    # legal: exactly the window ahead, a wrap-around reset, the first counter of an initiator,
    # and a counter far ahead after the initiator's own signed heartbeat moved the mark
    rebase = {"type": "counter-rebase", "peer": "n1", "counter": 2**30}
    for n2 in ([taken(7), taken(7 + window)], [taken(top - 10), taken(3, reset=True)],
               [taken(2**40)], [taken(7), rebase, taken(2**30 + 5)]):
        ok = judge(n2)
        assert ok.valid is True, (n2, ok.explain())


def test_counters_taken_by_aborts_commits_of_applied_updates_and_sync_batches_count() -> None:
    """An abort (a commit of an update applied here already, a sync batch) takes its
    initiator's counter with no vote or apply of its own, and moves the window as a vote does
    (`counter-taken`). Chaos seed 6 (session 47): forged aborts in a compromised n1's name
    lifted n4's window twice within it; n4 then rightly took n1's real counter 2,064,542,
    which the checker, reading votes and applies only, judged 1.4 M ahead of 659,594."""
    h = update(0, 0, "u1", "k", 1)
    done = committed("u1", "k", 1, 1)
    window = 2**20

    def taken(counter: int) -> dict[str, Any]:
        return {**vote("u1", hop="n1"), "initiator": "n1", "counter": counter, "reset": False}

    def by(via: str, counter: int) -> dict[str, Any]:
        return {"type": "counter-taken", "uid": "a1", "initiator": "n1", "from": "n3",
                "counter": counter, "reset": False, "via": via}

    def judge(n2: list[dict[str, Any]]) -> Any:
        return check({"nodes": ["n1", "n2", "n3"]}, h,
                     obs({"n1": done, "n2": n2 + done[1:]}, kv(k=(1, 1, "u1"))))

    far = 7 + window
    # without the abort's word the real counter looks out of the window (the old verdict)
    assert kinds(judge([taken(7), taken(far + window)])) == ["counter-out-of-window"]
    for via in ("abort", "commit-of-applied", "sync-batch"):
        ok = judge([taken(7), by(via, far), taken(far + window)])
        assert ok.valid is True, (via, ok.explain())
        # and a node that took an abort beyond its window is caught by the same rule
        bad = judge([taken(7), by(via, far + 1)])
        assert kinds(bad) == ["counter-out-of-window"], (via, bad.explain())
        assert bad.anomalies[0].witness["taken"]["type"] == "counter-taken"


def test_a_version_beyond_the_bound_breaks_item_2() -> None:
    """A version of 2^63-1 locks its key: the next update overflows (issue 26 item 2)."""
    h = update(0, 0, "u1", "k", 1)
    huge = 2**63 - 1
    r = with_a_commit(h, {"n1": [vote("u1"), decide("u1", "commit", huge),
                                 {"type": "release", "uid": "u1", "key": "k"}],
                          "n2": committed("u1", "k", 1, huge)})
    assert "version-out-of-bounds" in kinds(r), r.explain()
    found = [a for a in r.anomalies if a.kind == "version-out-of-bounds"]
    assert len(found) == 2 and {a.witness.get("decide", a.witness.get("apply"))["version"]
                                for a in found} == {huge}
    ok = with_a_commit(h, {"n1": [vote("u1"), decide("u1", "commit", 2**63 - 2),
                                  {"type": "release", "uid": "u1", "key": "k"}],
                           "n2": committed("u1", "k", 1, 2**63 - 2)})
    assert "version-out-of-bounds" not in kinds(ok), ok.explain()
