"""The 2pc leaf says what it examined and is unknown when nothing was invoked or committed."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check
from tests.unit.golden import Golden


def _obs(events: dict[str, list[dict[str, Any]]], kv: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": {n: {"events": [{"seq": i, "t": 0, **e} for i, e in enumerate(evs)],
                          "state": {"state": "active", "kv": kv}, "missing": []}
                      for n, evs in events.items()}}


def _update(kind: str) -> dict[str, Any]:
    return {"index": 0 if kind == "invoke" else 1, "process": 0, "type": kind, "f": "update",
            "value": ["k", 1, "u1"], "node": "n1"}


def test_empty_history_and_journals_is_unknown_naming_updates(golden: Golden) -> None:
    r = check({}, [], _obs({"n1": [], "n2": []}, {}))
    golden(r)
    assert r.valid == "unknown" and "updates=0" in r.note, r.explain()
    assert r.examined == {"updates": 0, "commits": 0, "votes": 0, "decisions": 0,
                          "nodes_with_state": 2}


def test_updates_that_all_aborted_are_unknown_naming_commits(golden: Golden) -> None:
    votes = [{"type": "vote", "uid": "u1", "key": "k", "vote": "no"}]
    decide = {"type": "decide", "uid": "u1", "key": "k", "outcome": "abort", "version": 1}
    r = check({}, [_update("invoke"), dict(_update("fail"), error="aborted")],
              _obs({"n1": votes + [decide], "n2": votes}, {}))
    golden(r)
    assert r.valid == "unknown" and "commits=0" in r.note and "updates" not in r.note
    assert r.examined["votes"] == 2 and r.examined["decisions"] == 1


def test_a_committed_update_is_counted(golden: Golden) -> None:
    kv = {"k": {"value": 1, "version": 1, "uid": "u1"}}
    yes = {"type": "vote", "uid": "u1", "key": "k", "vote": "yes", "syncing": False}
    decide = {"type": "decide", "uid": "u1", "key": "k", "outcome": "commit", "version": 1,
              "voters": ["n1", "n2"], "no_voters": [], "missing": []}
    apply = {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1}
    r = check({}, [_update("invoke"), _update("ok")],
              _obs({"n1": [yes, decide, apply], "n2": [yes, apply]}, kv))
    golden(r)
    assert r.valid is True, r.explain()
    assert r.examined == {"updates": 1, "commits": 1, "votes": 2, "decisions": 1,
                          "nodes_with_state": 2}
