"""The EDN reader's less travelled paths, pinned on hand-made text: ``#_`` in every position
it is handled in, tagged elements, the nesting limit on each path that counts depth, symbols
that begin with a letter also used in delimiter tests, and the errors at the end of the text
(an :class:`EdnError` that names where, never an IndexError or TypeError)."""

from __future__ import annotations

import pytest

from checkers.linearizable.edn import MAX_DEPTH, EdnError, Symbol, loads, read_all, read_records


def nest(k: int) -> str:
    """``k`` empty vectors, each inside the next."""
    return "[" * k + "]" * k


def nested_value(k: int) -> list:
    v: list = []
    for _ in range(k - 1):
        v = [v]
    return v


def test_discard_in_every_position_drops_exactly_one_form() -> None:
    assert loads("[1 #_ 2]") == [1]                  # the last form of a collection
    assert loads("[#_ Xa 1]") == [1]                 # a discarded symbol
    assert loads("#_ 1 2") == 2                      # at the top of one form
    assert loads("#_ 1 Xa") == Symbol("Xa")
    assert loads("#t #_ 1 2") == 2                   # after a tag
    assert read_all("#_ 0 1") == [(1, 1)]            # the first of several top-level forms
    assert read_all("1 #_ 2") == [(1, 1)]            # the last of them
    assert read_all("1\n#_ 2\n3") == [(1, 1), (3, 3)]
    assert read_records("[#_ 0 {:a 1}]") == [(1, {loads(":a"): 1})]


@pytest.mark.parametrize("text", ["[1 #_", "#_ 1", "#t #_ 1", "[#t #_ 1]", "#_", "[1 #_ ]"])
def test_a_discard_with_nothing_left_is_an_edn_error(text: str) -> None:
    with pytest.raises(EdnError):
        loads(text)


def test_symbols_that_start_with_x_are_symbols_everywhere() -> None:
    assert loads("Xy") == Symbol("Xy")
    assert loads("[Xa Xb]") == [Symbol("Xa"), Symbol("Xb")]
    assert loads("[#inst Xa]") == [Symbol("Xa")]
    assert read_records("[Xa]") == [(1, Symbol("Xa"))]


def test_tags_read_as_their_form() -> None:
    assert loads("#x 1") == 1                        # a one-letter tag
    assert loads('#inst "2026"') == "2026"
    assert loads("#a.b{:k 1}") == {loads(":k"): 1}


@pytest.mark.parametrize("text", ["#+a 1", "#.a 1", "#\u00e9 1", "#1 2", "#inst", "[#inst]"])
def test_bad_or_empty_tags_are_edn_errors(text: str) -> None:
    with pytest.raises(EdnError):
        loads(text)


@pytest.mark.parametrize("text", ["#{1 2", "[{:a 1}", "[\n{:a 1}", "[{:a 1} )"])
def test_unclosed_collections_are_edn_errors(text: str) -> None:
    with pytest.raises(EdnError):
        loads(text)
    with pytest.raises(EdnError):
        read_records(text)


def test_a_record_vector_right_after_its_bracket() -> None:
    assert read_records("[{:a 1}]") == [(1, {loads(":a"): 1})]
    assert read_records("[1 2]") == [(1, 1), (1, 2)]
    with pytest.raises(EdnError, match="a form after the history's vector"):
        read_records("[1]2")                         # right after the closing bracket


# each path that reads a form counts its depth; a top-level form's outermost bracket is at
# depth 0, so MAX_DEPTH + 1 brackets fit; a form under a tag, a discard or the history's
# vector starts one level down (a discarded record two)
DEPTH_PATHS = [
    ("{}", loads, MAX_DEPTH + 1),
    ("#t {}", loads, MAX_DEPTH),
    ("[#_ {} 1]", loads, MAX_DEPTH),
    ("#_ {} 1", loads, MAX_DEPTH),
    ("#_ {} 1", read_all, MAX_DEPTH),
    ("[{}]", read_records, MAX_DEPTH),
    ("[#_ {} 1]", read_records, MAX_DEPTH - 1),
]


@pytest.mark.parametrize(("wrap", "reader", "most"), DEPTH_PATHS)
def test_nesting_limit_on_every_path_that_counts_depth(wrap, reader, most) -> None:
    reader(wrap.format(nest(most)))
    with pytest.raises(EdnError, match="nested more than"):
        reader(wrap.format(nest(most + 1)))
    assert loads(nest(most)) == nested_value(most)
