"""A flood of refusals grows a counter, not the journal; peer text is cut before it is kept."""

from __future__ import annotations

from nodes.common.refusals import MAX_DETAIL, Refusals, clip


def test_each_window_journals_at_most_per_window_and_then_says_what_it_skipped() -> None:
    r = Refusals(window=10.0, per_window=2)
    got = [r.note("bad-token", t) for t in (0.0, 1.0, 2.0, 3.0, 9.9)]
    assert [g is not None for g in got] == [True, True, False, False, False]
    again = r.note("bad-token", 10.0)
    assert again is not None and again["unjournaled_before"] == 3 and again["total"] == 6
    assert r.note("replayed", 10.5) is not None  # reasons have windows of their own
    assert r.snapshot() == {"bad-token": 6, "replayed": 1}


def test_counts_can_be_a_dict_the_node_already_reports() -> None:
    stats: dict[str, int] = {}
    r = Refusals(window=1, per_window=5, counts=stats)
    for _ in range(7):
        r.note("unknown-address", 3)
    assert stats == {"unknown-address": 7}


def test_peer_text_is_clipped() -> None:
    ev = Refusals().note("malformed", 0.0, error="x" * 65_536, peer="n2")
    assert ev is not None and len(ev["error"]) < MAX_DETAIL + 20 and ev["peer"] == "n2"
    assert clip("short") == "short"
