"""The broadcast workload's optional mix: identical payloads from several senders, repeats
of one sender's text, ephemerals; all off by default (the plain unique payloads)."""

from __future__ import annotations

import pytest

from harness.suites.sds import mixed_op


def ops(n: int, **kw: int) -> list[dict]:
    last: dict = {}
    return [mixed_op(k, k % 3, k, last, **kw) for k in range(1, n + 1)]


def test_off_by_default_every_op_is_a_unique_send() -> None:
    out = ops(40)
    assert {o["f"] for o in out} == {"send"}
    assert len({o["value"] for o in out}) == 40


def test_identical_payloads_come_from_several_senders() -> None:
    out = ops(39, identical=2)  # groups of four: n = 8k .. 8k+6
    shared = [(k % 3, o["value"]) for k, o in enumerate(out, 1) if o["value"].startswith("same:")]
    assert len(shared) == 19
    by_text: dict[str, set[int]] = {}
    for proc, text in shared:
        by_text.setdefault(text, set()).add(proc)
    assert all(len(procs) > 1 for procs in by_text.values()), by_text


def test_a_repeat_is_the_same_senders_previous_text() -> None:
    last: dict = {}
    first = mixed_op(1, "p", 1, last, repeat=2)
    again = mixed_op(2, "p", 2, last, repeat=2)
    assert again == first == {"f": "send", "value": "cp:1:00000001"}


def test_ephemerals_are_mixed_in() -> None:
    out = ops(30, ephemeral=3)
    assert sum(o["f"] == "ephemeral" for o in out) == 10


def test_a_bad_option_is_refused_with_the_rule() -> None:
    from harness.spec import TestSpec
    from harness.suites import sds

    spec = TestSpec(name="x", protocol=sds.PROTOCOL, nodes=3, options={"repeat_every": -1})
    with pytest.raises(ValueError, match="repeat_every must be a whole number"):
        sds._generator(spec)
