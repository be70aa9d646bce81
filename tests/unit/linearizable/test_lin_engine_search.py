"""The WGL search's own invariants, on hand-made histories: pruning that must not fire, a
search resumed step by step, the entry points' input shapes, the unbounded budget.

Each test names the engine detail it pins (mutation testing found them unpinned, issue 14).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checkers.linearizable import Budget, check, from_ops
from checkers.linearizable.engine import Search, _Bits
from checkers.linearizable.history import Operation
from checkers.linearizable.models import get_model
from tests.unit.linearizable.helpers import hist
from tests.unit.linearizable.test_lin_engine import hard
from tests.unit.linearizable.test_lin_property import FAST, SPECS, histories, oracle, to_history


def test_a_write_of_the_current_value_is_not_forced_first():
    # after the first write the register holds 1; the long write of 1 must still be free to
    # take effect after the write of 2, or the read of 1 cannot be explained
    h = hist((0, "invoke", "write", 1), (0, "ok", "write", 1),
             (1, "invoke", "write", 1),
             (2, "invoke", "write", 2), (2, "ok", "write", 2),
             (3, "invoke", "read", None), (3, "ok", "read", 1),
             (1, "ok", "write", 1))
    assert check(from_ops(h), "register").valid is True


def test_an_op_impossible_at_the_start_is_still_tried_later():
    # the read of 1 is the first op and fails from the initial state; the search must not
    # count it as linearized (its bit) while it looks at the write
    h = hist((0, "invoke", "read", None), (1, "invoke", "write", 1), (1, "ok", "write", 1),
             (0, "ok", "read", 1))
    assert check(from_ops(h), "register").valid is True
    h[-1]["value"] = 2
    assert check(from_ops(h), "register").valid is False


def test_check_takes_a_raw_harness_history_and_a_list_of_operations():
    h = hist((0, "invoke", "write", 1), (0, "ok", "write", 1),
             (1, "invoke", "read", None), (1, "ok", "read", 2))
    assert check(h, "register").valid is False
    ops = from_ops(h).ops
    assert isinstance(ops[0], Operation)
    assert check(list(ops), "register").valid is False
    assert check(list(ops), "register").timed is False  # bare positions are not times
    h[-1]["value"] = 1
    assert check(h, "register").valid is True
    assert check(list(from_ops(h).ops), "register").valid is True


def test_unbounded_budget_decides_a_history_longer_than_a_slice():
    r = check(from_ops(hard(9)), "register", Budget(time_s=None, memory_mb=None))
    assert r.valid is False and r.explored > 4000


def test_bits_without_a_table_are_the_same_one_bit_ints():
    bits = _Bits()
    assert [bits[i] for i in (0, 1, 5, 20000)] == [1 << i for i in (0, 1, 5, 20000)]


def test_the_witness_says_whether_positions_are_times():
    timed = hist((0, 0, "invoke", "write", 1), (1, 0, "ok", "write", 1),
                 (2, 1, "invoke", "read", None), (3, 1, "ok", "read", 2), timed=True)
    r = check(from_ops(timed), "register")
    assert r.valid is False and r.timed is True and r.witness["timed"] is True
    for op in timed:
        del op["time"]
    r = check(from_ops(timed), "register")
    assert r.valid is False and r.timed is False and r.witness["timed"] is False


def test_a_part_left_undecided_by_the_time_budget_is_counted_unknown():
    r = check(from_ops(hard()), "register", Budget(time_s=0.0, memory_mb=None))
    assert r.valid == "unknown"
    assert r.stats()["parts"] == 1 and r.stats()["parts_unknown"] == 1


@FAST
@given(st.sampled_from(SPECS).flatmap(lambda spec: st.tuples(st.just(spec), histories(spec))),
       st.data())
def test_a_search_resumed_one_step_at_a_time_agrees_with_brute_force(case, data):
    spec, gen = case
    seen = [o for o in gen if o.f in spec.observers() and o.ret is not None]
    if seen and data.draw(st.booleans()):
        op = data.draw(st.sampled_from(seen))
        op.output = data.draw(st.sampled_from(spec.others(op)))
    ops = from_ops(to_history(gen)).ops
    s = Search(ops, get_model(spec.model))
    v = None
    for _ in range(2000):  # these histories (at most 9 ops) take under 100 steps
        v = s.run(1)
        if v is not None:
            break
    assert v is oracle(gen, spec)
    assert s.verdict is v and s.run(1) is v


def test_a_witness_failing_at_the_first_op_shows_the_initial_state():
    h = hist((0, "invoke", "dequeue", None), (0, "ok", "dequeue", 1))
    r = check(from_ops(h), "queue")
    assert r.valid is False and r.witness["state"] == "()"
    assert r.witness["failed_op"]["from_state"]["ok"] is False


def test_lifting_a_return_that_is_last_leaves_the_last_ops_links_alone():
    # the write of 2's return is the list's last entry when it is linearized first; relinking
    # and lifting it must not touch the links of the last op's return (entry 2n, the write of
    # 3), or a later lift of that op leaves it reachable and a valid order is missed:
    # read None, write 3, write 2, write 2 is the only order, and it is valid
    ops = [Operation(0, 0, "write", 2, None, 1, 10), Operation(1, 1, "read", None, None, 3, 12),
           Operation(2, 2, "write", 2, None, 5, 13), Operation(3, 3, "write", 3, None, 6, 9)]
    assert Search(ops, get_model("register")).run(10_000) is True
