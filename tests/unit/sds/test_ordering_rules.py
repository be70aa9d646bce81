"""The ordering rules one path at a time: which journal events each rule reads, a Lamport
time seen only in a final log, every pair of logs counted, all inversions counted."""

from __future__ import annotations

import copy

from checkers import ordering
from tests.unit.sds.test_ordering_checker import child, entry, ev, good


def test_a_message_delivered_twice_or_sent_then_delivered_is_a_duplicate() -> None:
    for first in ("send", "deliver"):
        h, obs = good()
        obs["nodes"]["n2"]["events"] = [ev(0, first, "b", 2, "n2"),
                                        ev(1, "deliver", "b", 2, "n2")]
        c = child(ordering.check({}, h, obs), "no-duplicates")
        assert c.valid is False and c.anomalies[0].kind == "duplicate-delivery", first


def test_two_lamports_between_a_delivery_and_a_final_log_entry() -> None:
    h, obs = good()
    obs["nodes"]["n2"]["state"]["log"][0]["lamport"] = 9  # a's entry, delivered at lamport 1
    c = child(ordering.check({}, h, obs), "lamport-unique")
    assert c.valid is False
    assert c.anomalies[0].witness["seen"]["9"] == {"node": "n2", "in": "final log"}
    h, obs = good()
    obs["nodes"]["n2"]["events"][1]["lamport"] = 9  # the delivery itself disagrees
    assert child(ordering.check({}, h, obs), "lamport-unique").valid is False
    h, obs = good()
    obs["nodes"]["n2"]["state"]["log"][0]["lamport"] = None  # no time: nothing to compare
    assert child(ordering.check({}, h, obs), "lamport-unique").valid is True


def test_every_pair_of_logs_counts_toward_what_was_compared() -> None:
    logs = {"n1": [entry("a", 1, "n1"), entry("b", 2, "n1")],
            "n2": [entry("a", 1, "n1"), entry("b", 2, "n1")],
            "n3": [entry("z", 9, "n3")]}  # shares nothing with the others: compared last
    anomalies, compared = ordering.check_common_order(logs)
    assert anomalies == [] and compared == 2


def test_every_inversion_is_counted_and_the_first_is_the_witness() -> None:
    a = [entry(x, k, "n1") for k, x in enumerate("abcd")]
    logs = {"n1": a, "n2": [a[1], a[0], a[3], a[2]]}
    (anomaly,), compared = ordering.check_common_order(copy.deepcopy(logs))
    assert compared == 4 and anomaly.witness["inversions"] == 2
    assert (anomaly.witness["first"]["id"], anomaly.witness["second"]["id"]) == ("a", "b")
