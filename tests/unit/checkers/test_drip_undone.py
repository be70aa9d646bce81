"""A DRiP initiator killed between its commit decision and the fsync of it (chaos seed 4,
line5 kills during the commit phase): it journaled ``decide`` and ``apply`` for u48 (k1 v2),
restarted holding v1 and released its own lock as never committed. No other node applied it,
the client got no answer. Neither the 2PC nor the liveness checker may call that a lost commit;
the same journal without the restart release still is one."""

from __future__ import annotations

from typing import Any

from checkers import liveness
from checkers.drip_undone import drop_undone
from checkers.twopc import check
from tests.unit.checkers.test_liveness import _ev, _history, _test
from tests.unit.drip.test_twopc_evidence import committed, kinds, obs, update

VOTE = {"type": "vote", "uid": "u48", "key": "k1", "initiator": "n1", "vote": "yes",
        "syncing": False}
DECIDE = {"type": "decide", "uid": "u48", "key": "k1", "outcome": "commit", "version": 2,
          "voters": ["n1", "n2"], "no_voters": [], "missing": [], "epoch": 0,
          "required": ["n1", "n2"]}
APPLY = {"type": "apply", "uid": "u48", "key": "k1", "value": 48, "version": 2,
         "initiator": "n1", "via": "update", "from": None}
START = {"type": "start", "fresh": False, "state": "sync", "epoch": 0}
SYNCED = [{"type": "sync-done"}, {"type": "state", "state": "active"}]
RESTART_RELEASE = {"type": "release", "uid": "u48", "key": "k1", "why": "restart"}
KV = {"k1": {"value": 1, "version": 1, "uid": "u1"}}


def journals(released: bool) -> dict[str, list[dict[str, Any]]]:
    """u1 (k1 v1) committed everywhere first, then u48 as in the run."""
    n1 = [*committed("u1", "k1", 1, 1), dict(VOTE, **{"from": None}), DECIDE, APPLY, START,
          *([RESTART_RELEASE] if released else []), *SYNCED]
    n2 = [*committed("u1", "k1", 1, 1), dict(VOTE, **{"from": "n1"}),
          {"type": "release", "uid": "u48", "key": "k1", "why": "expired"}]
    return {"n1": n1, "n2": n2}


def test_a_decision_released_on_restart_is_no_commit() -> None:
    h = update(0, 0, "u1", "k1", 1) + update(2, 0, "u48", "k1", 48, outcome="info")
    r = check({}, h, obs(journals(released=True), KV))
    assert r.valid is True, r.explain()
    r = check({}, h, obs(journals(released=False), KV))
    assert sorted(set(kinds(r))) == ["lost-after-apply", "missing-commit"], r.explain()


def test_liveness_expects_no_node_to_get_an_undone_decision() -> None:
    def node(evs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"events": [_ev(1.0 + 0.1 * i, e["type"], **{k: v for k, v in e.items()
                                                             if k != "type"})
                           for i, e in enumerate(evs)], "state": {}}

    t, h = _test("drip"), _history(10.0, 15.0)
    for released, valid in ((True, True), (False, False)):
        j = journals(released)
        r = liveness.check(t, h, {"nodes": {"n1": node(j["n1"]), "n2": node(j["n2"]),
                                            "n3": node(j["n2"])}})
        assert r.valid is valid, (released, r.anomalies)


def test_only_what_precedes_the_restart_release_is_dropped() -> None:
    later = dict(APPLY, via="sync")  # the same uid learned again afterwards stays
    evs = [DECIDE, APPLY, START, RESTART_RELEASE, later]
    assert drop_undone(evs) == [START, RESTART_RELEASE, later]
    assert drop_undone([DECIDE, APPLY]) == [DECIDE, APPLY]
