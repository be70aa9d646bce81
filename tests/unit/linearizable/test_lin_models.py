"""Each model on small sequential and concurrent histories, valid and invalid."""

from __future__ import annotations

import pytest

from checkers.linearizable import UNKNOWN, ModelError, check, from_ops, get_model
from checkers.linearizable.models import MODELS, CasRegister, Model
from tests.unit.golden import Golden
from tests.unit.linearizable.helpers import hist


def verdict(model, *events, **kw):
    return check(from_ops(hist(*events, **kw)), model).valid


def seq(*ops):
    """A sequential history: each (process 0) op invokes and completes before the next."""
    ev = []
    for f, v, out in ops:
        ev += [(0, "invoke", f, v), (0, "ok", f, out)]
    return ev


def test_register_read_your_write():
    assert verdict("register", *seq(("write", 1, 1), ("read", None, 1))) is True
    assert verdict("register", *seq(("write", 1, 1), ("read", None, 2))) is False
    assert verdict("register", *seq(("read", None, None))) is True  # initial value is None


def test_register_rejects_cas_with_a_clear_error():
    with pytest.raises(ModelError, match="cas-register"):
        check(from_ops(hist(*seq(("cas", [1, 2], True)))), "register")


def test_cas_register_with_and_without_keys():
    assert verdict("cas-register", *seq(("write", 1, 1), ("cas", [1, 2], [1, 2]),
                                       ("read", None, 2))) is True
    assert verdict("cas-register", *seq(("write", ["k", 1], ["k", 1]),
                                       ("cas", ["k", [1, 2]], ["k", [1, 2]]),
                                       ("read", ["k", None], ["k", 2]))) is True
    # a cas that succeeded although the register held something else
    assert verdict("cas-register", *seq(("write", 1, 1), ("cas", [5, 2], [5, 2]))) is False


def test_cas_compare_failed_output_constrains_the_state():
    m = CasRegister()
    assert m.step(1, ("c", 1, 2), False)[0] is False
    assert m.step(3, ("c", 1, 2), False) == (True, 3)
    assert m.step(1, ("c", 1, 2), UNKNOWN) == (True, 2)


def test_kv_partitions_per_key_and_fails_on_one_key(golden: Golden):
    ok = seq(("write", ["a", 1], ["a", 1]), ("write", ["b", 2], ["b", 2]),
             ("read", ["a", None], ["a", 1]), ("read", ["b", None], ["b", 2]))
    r = check(from_ops(hist(*ok)), "kv")
    golden(r)
    assert r.valid is True and len(r.parts) == 2
    bad = ok + seq(("read", ["b", None], ["b", 1]))
    r = check(from_ops(hist(*bad)), "kv")
    golden(r)
    assert r.valid is False and r.failed.key == "b"


def test_kv_with_porcupine_initial_and_append():
    m = get_model("kv", initial="")
    assert verdict(m, *seq(("append", ["k", "x"], None), ("append", ["k", "y"], None),
                           ("read", ["k", None], ["k", "xy"]))) is True
    assert verdict(m, *seq(("append", ["k", "x"], None), ("read", ["k", None], ["k", "yx"]))) is False


def test_append_list():
    assert verdict("append", *seq(("append", "a", {"v": "a", "index": 3}), ("append", "b", "b"),
                                  ("read", None, ["a", "b"]))) is True
    assert verdict("append", *seq(("append", "a", "a"), ("append", "b", "b"),
                                  ("read", None, ["b", "a"]))) is False


def test_set():
    assert verdict("set", *seq(("add", 1, 1), ("add", 2, 2), ("read", None, [2, 1]))) is True
    assert verdict("set", *seq(("add", 1, 1), ("read", None, []))) is False


def test_queue_fifo_and_empty():
    assert verdict("queue", *seq(("enqueue", 1, None), ("enqueue", 2, None),
                                 ("dequeue", None, 1), ("dequeue", None, 2),
                                 ("dequeue", None, None))) is True
    assert verdict("queue", *seq(("enqueue", 1, None), ("enqueue", 2, None),
                                 ("dequeue", None, 2))) is False
    # concurrent enqueues may be ordered either way
    assert verdict("queue", (0, "invoke", "enqueue", 1), (1, "invoke", "enqueue", 2),
                   (0, "ok", "enqueue", 1), (1, "ok", "enqueue", 2),
                   (0, "invoke", "dequeue", None), (0, "ok", "dequeue", 2)) is True


def test_unique_ids_partitioned_by_id(golden: Golden):
    good = seq(("generate", None, 1), ("generate", None, 2), ("generate", None, 3))
    r = check(from_ops(hist(*good)), "unique-ids")
    golden(r)
    assert r.valid is True and len(r.parts) == 3
    r = check(from_ops(hist(*seq(("generate", None, 1), ("generate", None, 1)))), "unique-ids")
    golden(r)
    assert r.valid is False and r.failed.key == 1


def test_all_named_models_construct():
    for name in MODELS:
        assert isinstance(get_model(name), Model)
    with pytest.raises(ModelError, match="unknown model"):
        get_model("nope")


def test_a_user_model_needs_no_engine_change():
    class Counter(Model):
        name = "counter"

        def init(self):
            return 0

        def step(self, state, input, output):
            f, v = input
            if f == "add":
                return True, state + v
            return output is UNKNOWN or output == state, state

    m = Counter()
    assert verdict(m, *seq(("add", 2, None), ("add", 3, None), ("read", None, 5))) is True
    assert verdict(m, *seq(("add", 2, None), ("read", None, 3))) is False


def test_map_and_set_values_compare_by_content():
    # values read back as JSON maps (or EDN sets) must compare by their items, not by shape
    for written, same, other in (({"a": 1, "b": [1]}, {"b": [1], "a": 1}, {"a": 2, "b": [1]}),
                                 (frozenset({1, 2}), {2, 1}, {1, 3})):
        for got, ok in ((same, True), (other, False)):
            h = hist((0, "invoke", "write", written), (0, "ok", "write", written),
                     (1, "invoke", "read", None), (1, "ok", "read", got))
            assert check(from_ops(h), "register").valid is ok, (written, got)


def test_a_cas_whose_compare_failed_is_valid_only_where_the_value_differs():
    assert verdict("cas-register", *seq(("write", 1, 1), ("cas", [2, 3], False),
                                        ("read", None, 1))) is True
    assert verdict("cas-register", *seq(("write", 2, 2), ("cas", [2, 3], False))) is False


def test_a_cas_value_that_is_not_a_pair_is_a_model_error():
    with pytest.raises(ModelError):
        verdict("cas-register", *seq(("cas", [1, 2, 3], True)))


def test_a_set_read_left_open_constrains_nothing():
    assert verdict("set", (0, "invoke", "add", 1), (0, "ok", "add", 1),
                   (1, "invoke", "read", None), (1, "info", "read", None)) is True


def test_an_append_to_the_initial_empty_register_starts_from_the_empty_string():
    assert verdict("register", *seq(("append", "x", "x"), ("append", "y", "y"),
                                    ("read", None, "xy"))) is True
