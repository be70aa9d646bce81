"""The terminal text of a linearizability witness: a long prefix is elided, the concurrent
list is capped at twelve, open-ended ops say so, and the failing op says why it cannot fit."""

from __future__ import annotations

from typing import Any

from checkers.linearizable.witness import TEXT_PREFIX, witness_text


def op(i: int, ok: bool = True, ret: Any = 5) -> dict[str, Any]:
    return {"process": i, "describe": f"write {i}", "call": i, "ret": ret, "state_after": str(i),
            "from_state": {"ok": ok, "state_after": str(i) if ok else None}}


def witness(prefix: int, concurrent: int, timed: bool = False, part: Any = None,
            fits: bool = False) -> dict[str, Any]:
    return {"part": part, "timed": timed, "prefix_len": prefix,
            "prefix": [op(i) for i in range(prefix)], "state": "7",
            "failed_op": {**op(99, ok=fits, ret=None), "describe": "read -> 3"},
            "concurrent": [op(100 + i, ok=i % 2 == 0, ret=None if i == 0 else 200)
                           for i in range(concurrent)],
            "concurrent_total": concurrent}


def test_a_long_witness_is_elided_and_capped() -> None:
    text = witness_text(witness(TEXT_PREFIX + 3, 15, timed=True, part="k"), "nil").splitlines()
    assert text[0] == "Not linearizable (part k): no order of the operations agrees with the model."
    assert text[1] == "(positions are times; [call .. return])"
    assert text[2] == f"Longest linearizable prefix: {TEXT_PREFIX + 3} op(s), from initial state nil:"
    assert text[3] == "  ... 3 earlier op(s)"
    assert text[4] == "    4. process 3: write 3  [3 .. 5]  => 3"
    i = text.index("State reached: 7")
    assert text[i + 1] == "Cannot linearize: process 99: read -> 3  [99 .. open (info)]"
    assert text[i + 2] == ("  from the state reached it is impossible, and no concurrent op can "
                           "be placed before it to make it fit.")
    assert text[i + 3] == "Concurrent ops not linearized (what each would do from the state reached):"
    assert text[i + 4] == "  process 100: write 100  [100 .. open (info)]  => 100"
    assert text[i + 5] == "  process 101: write 101  [101 .. 200]  => impossible here"
    assert text[i + 16] == "  ... 3 more" and len(text) == i + 17


def test_a_short_witness_shows_everything() -> None:
    text = witness_text(witness(2, 0, fits=True), "0").splitlines()
    assert text[1] == "(positions are event numbers; [call .. return])"
    assert "earlier op(s)" not in "\n".join(text) and text[3] == "    1. process 0: write 0  [0 .. 5]  => 0"
    assert text[-1] == ("  from the state reached it would be fine, but no concurrent op can be "
                        "placed before it to make it fit.")
    assert not any(line.startswith("Concurrent") for line in text)
