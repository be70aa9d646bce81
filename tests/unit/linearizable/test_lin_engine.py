"""Engine features on hand-made histories: info semantics, fail removal, timing, budgets,
P-compositionality, witnesses."""

from __future__ import annotations

from checkers.linearizable import Budget, check, from_ops
from checkers.linearizable.engine import SLICE
from tests.unit.golden import Golden
from tests.unit.linearizable.helpers import hist


def v(model, events, **kw):
    return check(from_ops(events), model, **kw).valid


# -- hand-made histories that must fail ------------------------------------------------------

def test_stale_read_fails_and_the_witness_names_it(golden: Golden):
    h = hist((0, "invoke", "write", 1), (0, "ok", "write", 1),
             (0, "invoke", "write", 2), (0, "ok", "write", 2),
             (1, "invoke", "read", None), (1, "ok", "read", 1))
    r = check(from_ops(h), "register")
    golden(r)
    assert r.valid is False
    w = r.witness
    assert w["failed_op"]["f"] == "read" and w["failed_op"]["output"] == 1
    assert w["prefix_len"] == 2 and w["state"] == "2"
    assert "Cannot linearize: process 1: read -> 1" in w["text"]


def test_new_old_inversion_fails():
    # p1 sees the concurrent write's 1, then p2 (starting after p1 returned) sees the old None
    h = hist((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1),
             (2, "invoke", "read", None), (2, "ok", "read", None), (0, "ok", "write", 1))
    assert v("register", h) is False


def test_concurrent_read_may_see_either_value():
    for seen in (None, 1):
        h = hist((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", seen),
                 (0, "ok", "write", 1))
        assert v("register", h) is True


def test_cas_on_a_value_never_written_fails():
    h = hist((0, "invoke", "write", 1), (0, "ok", "write", 1),
             (1, "invoke", "cas", [7, 8]), (1, "ok", "cas", [7, 8]))
    assert v("cas-register", h) is False


# -- info and fail -------------------------------------------------------------------------

def test_passes_only_because_an_info_write_took_effect_late():
    # the write's client gave up (info) before p1 read the old value; p2 later reads 1:
    # the write must take effect after p1's read, i.e. after its own info completion
    h = hist((0, "invoke", "write", 1), (0, "info", "write", 1),
             (1, "invoke", "read", None), (1, "ok", "read", None),
             (2, "invoke", "read", None), (2, "ok", "read", 1))
    assert v("register", h) is True
    # the same with a real completion where the info was: now the read of None is stale
    h[1]["type"] = "ok"
    assert v("register", h) is False


def test_passes_only_if_the_info_op_never_took_effect():
    # a cas from 5 can never succeed (the register never holds 5): were the engine to require
    # every info op to linearize somewhere, this valid history would be rejected
    h = hist((0, "invoke", "cas", [5, 6]), (0, "info", "cas", [5, 6]),
             (1, "invoke", "write", 1), (1, "ok", "write", 1),
             (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert v("cas-register", h) is True


def test_an_invocation_left_open_at_the_end_is_open_ended():
    h = hist((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert v("register", h) is True


def test_fail_ops_are_removed():
    h = hist((0, "invoke", "write", 1), (0, "fail", "write", 1),
             (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert v("register", h) is False
    h[3]["value"] = None
    assert v("register", h) is True


def test_nemesis_ops_are_skipped(golden: Golden):
    h = hist(("nemesis", "invoke", "start-partition", {"a": 1}), (0, "invoke", "write", 1),
             ("nemesis", "info", "start-partition", {"a": 1}), (0, "ok", "write", 1),
             (0, "invoke", "read", None), (0, "ok", "read", 1))
    r = check(from_ops(h), "register")
    golden(r)
    assert r.valid is True and r.ops == 2


def test_empty_history_is_linearizable():
    assert v("register", []) is True


# -- timed and event-ordered histories -----------------------------------------------------

def test_timed_history_uses_times_not_file_order():
    # in file order the read follows the write's completion; by time they overlap
    h = hist((0, 0, "invoke", "write", 1), (10, 0, "ok", "write", 1),
             (5, 1, "invoke", "read", None), (6, 1, "ok", "read", None), timed=True)
    assert from_ops(h).timed
    assert v("register", h) is True
    for op in h:
        del op["time"]  # now event-ordered: the read of None comes after the write returned
    assert not from_ops(h).timed
    assert v("register", h) is False


def test_equal_times_count_as_concurrent():
    h = hist((0, 0, "invoke", "write", 1), (10, 0, "ok", "write", 1),
             (10, 1, "invoke", "read", None), (12, 1, "ok", "read", None), timed=True)
    assert v("register", h) is True
    h[2]["time"] = 11
    assert v("register", h) is False


# -- budgets and P-compositionality --------------------------------------------------------

def hard(n: int = 13, key=None):
    """n concurrent writes, then a read of a value never written: every order is explored."""
    def val(x):
        return x if key is None else [key, x]
    ev = [(p, "invoke", "write", val(p)) for p in range(n)]
    ev += [(p, "ok", "write", val(p)) for p in range(n)]
    ev += [(n, "invoke", "read", val(None)), (n, "ok", "read", val(99))]
    return hist(*ev)


def test_time_budget_gives_unknown_not_a_pass(golden: Golden):
    r = check(from_ops(hard()), "register", Budget(time_s=0.0, memory_mb=None))
    golden(r)
    assert r.valid == "unknown" and "time budget" in r.note
    assert r.explored > 0


def test_memory_budget_gives_unknown_not_a_crash(golden: Golden):
    r = check(from_ops(hard()), "register", Budget(time_s=None, memory_mb=1))
    golden(r)
    assert r.valid == "unknown" and "memory budget" in r.note
    assert r.parts[0].memo > 0


def test_small_hard_history_is_decided_within_budget(golden: Golden):
    r = check(from_ops(hard(8)), "register")
    golden(r)
    assert r.valid is False and r.explored > 1000


def test_stops_at_the_first_failing_part_while_a_hard_part_is_still_open(golden: Golden):
    # the failing part is the bigger one, so smallest-first alone would not find it first
    ev = []
    for i in range(30):
        ev += [(100, "invoke", "write", ["b", i]), (100, "ok", "write", ["b", i])]
    ev += [(100, "invoke", "read", ["b", None]), (100, "ok", "read", ["b", 3])]
    r = check(from_ops(hard(16, key="a") + hist(*ev)), "kv", Budget(time_s=30))
    golden(r)
    assert r.valid is False and r.failed.key == "b"
    hard_part = next(p for p in r.parts if p.key == "a")
    assert hard_part.valid is None and "first failing part" in hard_part.note
    assert 0 < hard_part.explored <= SLICE  # it got one slice, then the failing part ended it


def test_memory_budget_abandons_the_biggest_part_and_keeps_checking_the_rest(golden: Golden):
    ok = hist((100, "invoke", "write", ["b", 1]), (100, "ok", "write", ["b", 1]))
    r = check(from_ops(hard(14, key="a") + ok), "kv", Budget(time_s=30, memory_mb=2))
    golden(r)
    by_key = {p.key: p for p in r.parts}
    assert by_key["b"].valid is True
    assert by_key["a"].valid == "unknown"
    assert r.valid == "unknown"
