"""The Result model every checker returns: what results.json holds and reads back, what a
person reads (explain), worst-wins composition, and the crash-is-unknown rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkers.result import (
    Anomaly,
    Result,
    cap,
    compose,
    examined_text,
    run_checker,
    worst,
)


def tree() -> Result:
    bad = Result("vote-safety", False, [Anomaly("double-vote", f"n{i} voted twice", {"n": i})
                                         for i in range(7)],
                 stats={"votes": 9}, note="7 anomalies", examined={"votes": 9, "terms": 3})
    unsure = Result("log-matching", "unknown", note="n2: no final state", examined={"logs": 0})
    good = Result("election-safety", True, examined={"leaders": 2})
    inner = compose("raft", [good, unsure, bad])
    return compose("all", [Result("stats", True, examined={"invocations": 4}), inner])


def test_to_json_and_back_keeps_everything() -> None:
    t = tree()
    d = json.loads(json.dumps(t.to_json()))
    assert d["checker"] == "all" and d["valid"] is False and d["note"] == "" and d["examined"] == {}
    raft = d["children"][1]
    assert [c["checker"] for c in raft["children"]] == ["election-safety", "log-matching",
                                                        "vote-safety"]
    back = Result.from_json(d)
    assert back == t
    assert back.find("raft.vote-safety").anomalies[3] == Anomaly("double-vote", "n3 voted twice",
                                                                 {"n": 3})
    assert back.find("raft.log-matching").examined == {"logs": 0}


def test_from_json_fills_what_an_old_results_file_lacks() -> None:
    r = Result.from_json({"checker": "x", "valid": True})
    assert r == Result("x", True) and r.examined == {} and r.anomalies == [] and r.children == []
    assert Result.from_json({"checker": "x", "valid": True, "examined": None}).examined == {}


def test_find_and_leaves_walk_dotted_paths() -> None:
    t = tree()
    assert t.find("raft").checker == "raft" and t.find("raft.nope") is None
    assert t.find("nope.vote-safety") is None
    assert [p for p, _ in t.leaves()] == ["stats", "raft.election-safety", "raft.log-matching",
                                          "raft.vote-safety"]
    assert [p for p, _ in t.find("raft").leaves("raft.")] == [p for p, _ in t.leaves()][1:]


def test_explain_shows_only_what_is_not_valid_with_counts_and_a_limit() -> None:
    assert tree().explain(limit=2) == "\n".join([
        "all: valid=False",
        "  raft: valid=False",
        "    log-matching: valid=unknown [logs=0] (n2: no final state)",
        "    vote-safety: valid=False [votes=9 terms=3] (7 anomalies)",
        "      - [double-vote] n0 voted twice",
        "      - [double-vote] n1 voted twice",
        "      ... 5 more anomalies",
    ])
    assert tree().find("raft.vote-safety").explain().count("- [double-vote]") == 5


@pytest.mark.parametrize(("vs", "want"), [
    ([True, True], True), ([True, "unknown"], "unknown"), (["unknown", False, True], False),
    ([], True),
])
def test_worst_wins(vs: list[Any], want: Any) -> None:
    assert worst(vs) == want
    assert compose("c", [Result(str(i), v) for i, v in enumerate(vs)]).valid == want


def test_examined_text_keeps_the_order_given() -> None:
    assert examined_text({"ops": 120, "keys": 4}) == "ops=120 keys=4"
    assert examined_text({}) == ""


def test_cap_keeps_the_first_of_each_kind() -> None:
    xs = [Anomaly("a", str(i)) for i in range(5)] + [Anomaly("b", "x")]
    assert [a.message for a in cap(xs, 2)] == ["0", "1", "x"]
    assert len(cap([Anomaly("a", str(i)) for i in range(25)])) == 20


def test_run_checker_names_times_and_turns_a_crash_into_unknown() -> None:
    seen: list[Any] = []

    def fine(test: dict[str, Any], ops: list[dict[str, Any]], obs: dict[str, Any]) -> Result:
        seen.append((test, ops, obs))
        return Result("whatever", True, stats={"elapsed_s": 9.0})

    r = run_checker("mine", fine, {"t": 1}, [{"f": "x"}], {"o": 2})
    assert r.checker == "mine" and r.valid is True and r.stats["elapsed_s"] == 9.0
    assert seen == [({"t": 1}, [{"f": "x"}], {"o": 2})]

    def boom(test: dict[str, Any], ops: list[dict[str, Any]], obs: dict[str, Any]) -> Result:
        raise KeyError("node")

    r = run_checker("mine", boom, {}, [], {})
    assert r.checker == "mine" and r.valid == "unknown"
    assert r.note == "checker crashed: KeyError: 'node'"
    assert "raise KeyError" in r.stats["traceback"] and r.stats["elapsed_s"] >= 0
