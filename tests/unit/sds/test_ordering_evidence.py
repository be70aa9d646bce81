"""A torn journal line of a type the journal-based ordering rules read (send, deliver) leaves
those rules unknown, never a silent pass; the state-based rules are not affected."""

from __future__ import annotations

from checkers import ordering
from tests.unit.sds.test_ordering_checker import child, good


def test_a_torn_deliver_event_makes_the_journal_rules_unknown() -> None:
    h, obs = good()
    assert ordering.check({}, h, obs).valid is True
    obs["nodes"]["n2"]["missing"] = [{"what": "event", "type": "deliver",
                                      "detail": "events.jsonl line 4: unreadable (torn write?)"}]
    r = ordering.check({}, h, obs)
    for leaf in ("causal-delivery", "no-duplicates", "lamport-unique"):
        assert child(r, leaf).valid == "unknown", leaf
    for leaf in ("common-order", "acked-not-lost"):
        assert child(r, leaf).valid is True, leaf
