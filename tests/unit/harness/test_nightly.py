"""The nightly's pure parts: the night's seed, reading the retry and outcome files, and the
next night's retries from tonight's two sessions (harness.nightly)."""

from __future__ import annotations

import random

import pytest

from harness.nightly import (
    NightlyError,
    Outcome,
    Outcomes,
    Retry,
    choose_seed,
    combine,
    next_retries,
    outcomes_json,
    parse_outcomes,
    parse_retries,
    parse_seed,
    retries_json,
)


def test_a_given_seed_is_the_nights_seed_else_a_random_one_in_range() -> None:
    assert choose_seed("42") == 42
    assert choose_seed(" 7 ") == 7
    drawn = {choose_seed(None, random.Random(i)) for i in range(50)}
    assert len(drawn) == 50 and all(1 <= s < 2**31 for s in drawn)
    assert choose_seed("", random.Random(1)) == choose_seed(None, random.Random(1))


@pytest.mark.parametrize("bad,why", [("x", "not a seed"), ("1.5", "not a seed"),
                                     ("0", "out of range"), (str(2**31), "out of range")])
def test_a_bad_seed_says_what_to_give(bad: str, why: str) -> None:
    with pytest.raises(NightlyError, match=why):
        parse_seed(bad, "--seed")


def test_retry_file_round_trips_and_bad_ones_say_what_to_do() -> None:
    rs = [Retry("t.py::a", 5, "n1", ("/s/a/1",)), Retry("t.py::b[x]", None, "n2")]
    assert parse_retries(retries_json(rs), "f") == rs
    with pytest.raises(NightlyError, match="not JSON.*delete it"):
        parse_retries("{", "f")
    with pytest.raises(NightlyError, match="expected"):
        parse_retries("[]", "f")
    with pytest.raises(NightlyError, match=r"tests\[0\] needs a \"nodeid\""):
        parse_retries('{"tests": [{"seed": 1}]}', "f")
    with pytest.raises(NightlyError, match="not a whole number"):
        parse_retries('{"tests": [{"nodeid": "a", "seed": "7"}]}', "f")


def test_outcomes_round_trip() -> None:
    o = Outcomes([Outcome("a", "failed", 3, ("/r",)), Outcome("b", "passed", None)], ["gone"])
    assert parse_outcomes(outcomes_json(o), "f") == o


def test_a_tests_phases_combine_worst_first_with_the_seed_its_run_recorded() -> None:
    setup = Outcome("a", "passed", 9)
    call = Outcome("a", "failed", 9, ("/r1", "/r2"))
    teardown = Outcome("a", "passed", 9, ("/r1",))
    assert combine([setup, call, teardown]) == Outcome("a", "failed", 9, ("/r1", "/r2"))
    assert combine([Outcome("a", "skipped", None)]).outcome == "skipped"
    assert combine([Outcome("a", "passed", None), Outcome("a", "passed", 4)]).seed == 4


def test_next_retries_keep_still_failing_drop_fixed_and_gone_add_new() -> None:
    old = [Retry("still", 1, "n1", ("/old",)), Retry("fixed", 2, "n1"),
           Retry("gone", 3, "n1"), Retry("untried", 4, "n1"), Retry("skipped", 5, "n1")]
    replayed = Outcomes([Outcome("still", "failed", 1, ("/new",)), Outcome("fixed", "passed", 2),
                         Outcome("skipped", "skipped", 5)], missing=["gone"])
    night = Outcomes([Outcome("still", "failed", 99), Outcome("fresh", "failed", 99, ("/f",)),
                      Outcome("ok", "passed", 99), Outcome("fixed", "passed", 99)])
    up = next_retries(old, replayed, night, "n2")
    assert up.retries == [Retry("still", 1, "n1", ("/new",)), Retry("untried", 4, "n1"),
                          Retry("skipped", 5, "n1"), Retry("fresh", 99, "n2", ("/f",))]
    assert [r.nodeid for r in up.fixed] == ["fixed"]
    assert [r.nodeid for r in up.dropped_missing] == ["gone"]
    text = up.summary()
    assert "retries for the next night: 4" in text
    assert "still failing: still (seed 1, since n1)" in text and "new: fresh (seed 99)" in text


def test_a_retry_session_that_did_not_run_keeps_every_retry() -> None:
    old = [Retry("a", 1, "n1")]
    up = next_retries(old, Outcomes(), Outcomes([Outcome("b", "failed", 7)]), "n2")
    assert up.retries == [Retry("a", 1, "n1"), Retry("b", 7, "n2")]
    assert up.untried == [Retry("a", 1, "n1")]
