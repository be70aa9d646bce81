"""nodes.common.fastjson: orjson's speed, the standard library's acceptance (plus the refusal
of non-finite numbers), values that come back exactly."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.common import fastjson

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-2**80, max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(_json_values)
@settings(max_examples=300, deadline=None)
def test_values_come_back_exactly_and_the_standard_library_reads_the_same(v: object) -> None:
    raw = fastjson.dumps(v)
    assert fastjson.loads(raw) == v
    assert json.loads(raw) == v  # any JSON reader gets the same value


@given(st.binary(max_size=40) | _json_values.map(lambda v: json.dumps(v).encode()))
@settings(max_examples=400, deadline=None)
def test_what_is_accepted_is_what_json_accepts(raw: bytes) -> None:
    try:
        want = json.loads(raw)
    except (ValueError, RecursionError):
        with pytest.raises((ValueError, RecursionError)):
            fastjson.loads(raw)
        return
    if _non_finite(want):
        with pytest.raises(ValueError):
            fastjson.loads(raw)
    else:
        assert fastjson.loads(raw) == want


def _non_finite(v: object) -> bool:
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, list):
        return any(_non_finite(x) for x in v)
    if isinstance(v, dict):
        return any(_non_finite(x) for x in v.values())
    return False


@pytest.mark.parametrize("raw", [b"18446744073709551616", b"-9223372036854775809",
                                 b'{"version": 123456789012345678901234567890}'])
def test_integers_beyond_64_bits_stay_exact_integers(raw: bytes) -> None:
    # orjson alone reads these as floats: 18446744073709551616 -> 1.8446744073709552e+19
    assert fastjson.loads(raw) == json.loads(raw)
    assert type(fastjson.loads(raw)) is type(json.loads(raw))


@pytest.mark.parametrize("raw", [b"NaN", b"[Infinity]", b'{"v": -Infinity}', b"1e400",
                                 b"[-1e999]"])
def test_non_finite_numbers_are_refused_as_malformed(raw: bytes) -> None:
    with pytest.raises(ValueError, match="not JSON|out of range"):
        fastjson.loads(raw)


def test_dataclasses_and_unknown_types_go_to_default_as_with_json() -> None:
    from dataclasses import dataclass

    @dataclass
    class D:
        x: int

    assert fastjson.dumps({"d": D(1), "s": {1}}, default=repr) == \
        json.dumps({"d": D(1), "s": {1}}, default=repr, separators=(",", ":")).encode()
    with pytest.raises(TypeError):
        fastjson.dumps({"d": D(1)})


_no_float_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**80, max_value=2**80) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(_no_float_values)
@settings(max_examples=300, deadline=None)
def test_canonical_is_json_sorted_compact_form_without_floats(v: object) -> None:
    """Digests of older nodes (``json.dumps`` canonical form) still match, floats aside."""
    want = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert fastjson.canonical(v) == want.encode("utf-8", "surrogatepass")


@given(_json_values)
@settings(max_examples=300, deadline=None)
def test_canonical_depends_on_the_value_only(v: object) -> None:
    """Both ends of a digest encode the value each decoded: key order and a trip through
    the wire must not change the bytes."""
    again = fastjson.loads(fastjson.dumps(v))
    assert fastjson.canonical(again) == fastjson.canonical(v)
    if isinstance(v, dict):
        assert fastjson.canonical(dict(reversed(list(v.items())))) == fastjson.canonical(v)
