"""nodes.common.fastinit: a frozen dataclass's __dict__-writing __init__ builds the very
objects the dataclass's own __init__ does, and is only installed where it can."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.common import effects
from nodes.common.fastinit import fast_frozen_init
from nodes.drip import admit, codec, core, records


def _by_both(cls: type, *args: Any, **kw: Any) -> tuple[Any, Any]:
    new = cls(*args, **kw)
    old = object.__new__(cls)
    cls.__dataclass_init__(old, *args, **kw)
    return new, old


@fast_frozen_init
@dataclass(frozen=True)
class Sample:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int | None = field(default=None, compare=False)
    e: int = field(default=5, init=False)
    f: dict[str, int] = field(default_factory=dict, init=False)


@given(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=3),
       st.none() | st.integers())
def test_the_same_object_as_the_dataclass_init_builds(a: int, b: str, c: list[int],
                                                       d: int | None) -> None:
    for args, kw in (((a,), {}), ((a, b), {}), ((a,), {"c": c}), ((), {"a": a, "b": b, "c": c,
                                                                        "d": d})):
        new, old = _by_both(Sample, *args, **kw)
        assert new.__dict__ == old.__dict__ and new == old
        assert list(new.__dict__) == list(old.__dict__)  # same field order too
    assert Sample(a).c is not Sample(a).c  # a fresh default each time, as the factory gives


def test_what_the_dataclass_provides_is_untouched() -> None:
    s = Sample(1, "x", [2], 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.a = 2  # type: ignore[misc]
    assert dataclasses.replace(s, a=9) == Sample(9, "x", [2], 3)
    assert pickle.loads(pickle.dumps(s)) == s
    assert repr(s) == "Sample(a=1, b='x', c=[2], d=3, e=5, f={})"
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Sample(1, e=3)  # type: ignore[call-arg]


def test_classes_it_cannot_mirror_keep_their_generated_init() -> None:
    @dataclass(frozen=True, slots=True)
    class Slots:
        a: int

    @dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class Var:
        a: int
        b: InitVar[int] = 0

    @dataclass(frozen=True, kw_only=True)
    class Kw:
        a: int

    @dataclass
    class Mutable:
        a: int

    for cls in (Slots, Post, Var, Kw, Mutable):
        init = cls.__init__
        assert fast_frozen_init(cls).__init__ is init, cls


HOT = [codec.Update, codec.Voting, codec.VoteResponse, codec.Commit, codec.Abort, codec.Batch,
       codec.HttpRequest, records.Lock, records.Counters, records.Applied, records.Delivered,
       core.Inbound, core.Outcome, core.Answer, admit.Refusal, effects.Send, effects.Persist,
       effects.Emit, effects.SetTimer, effects.Reply]


def test_the_hot_message_record_and_effect_types_have_it() -> None:
    for cls in HOT:
        assert "__dataclass_init__" in cls.__dict__ and cls.__init__ is not \
            cls.__dataclass_init__, cls


ids = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)
updates = st.builds(codec.Update, ids, ids, st.integers() | st.text(max_size=4),
                    st.none() | ids, st.none() | st.integers(0, 99))


@given(st.one_of(
    updates,
    st.builds(codec.Voting, ids, st.integers(0, 9), st.booleans(), updates,
              st.none() | ids, st.none() | st.integers(0, 99)),
    st.builds(codec.VoteResponse, ids, st.booleans(), st.none() | ids,
              st.none() | st.integers(0, 9), st.none() | ids,
              st.lists(ids, max_size=3).map(tuple), st.lists(ids, max_size=2).map(tuple),
              st.integers(0, 9), st.booleans(),
              st.lists(st.tuples(ids, ids), max_size=2).map(tuple)),
    st.builds(codec.Commit, ids, st.integers(0, 9), st.booleans(), updates,
              st.integers(0, 9), st.none() | ids),
    st.builds(admit.Refusal, st.integers(400, 599), ids, ids),
    st.builds(effects.Emit, ids, st.dictionaries(ids, st.integers(), max_size=2)),
))
def test_drip_objects_are_built_as_before(m: Any) -> None:
    """Every init field of a real DRiP object, given back to both __init__s, builds equal
    objects (compare=False fields such as a message's token included)."""
    kw = {f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.init}
    new, old = _by_both(type(m), **kw)
    assert new.__dict__ == old.__dict__ == m.__dict__
    if not isinstance(m, effects.Emit | admit.Refusal):  # (a dict field: unhashable)
        assert hash(new) == hash(old)
    req = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)
           if f.init and f.default is dataclasses.MISSING
           and f.default_factory is dataclasses.MISSING}
    new, old = _by_both(type(m), **req)  # the defaults
    assert new.__dict__ == old.__dict__
