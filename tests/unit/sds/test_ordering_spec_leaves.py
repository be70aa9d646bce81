"""The ordering leaves that read the spec's own rules, each on a hand-made run the six older
leaves (causal-delivery ... lamport-unique) all pass: the log order by (Lamport, id) and the
sender's causal history, the causal history itself, the Lamport update on delivery, drained
buffers after the heal, and one set everywhere with nothing phantom or silently lost."""

from __future__ import annotations

from typing import Any

from checkers import ordering
from tests.unit.sds.test_ordering_checker import child, entry, ev, good

OLD = ("causal-delivery", "common-order", "acked-not-lost", "no-duplicates", "convergence",
       "lamport-unique")


def caught(h: list[dict[str, Any]], obs: dict[str, Any], leaf: str) -> ordering.Result:
    r = ordering.check({}, h, obs)
    for name in OLD:  # today's checker passed every one of these runs
        assert child(r, name).valid is True, (name, child(r, name).explain())
    c = child(r, leaf)
    assert c.valid is False, c.explain()
    return c


def logs(obs: dict[str, Any], log: list[dict[str, Any]]) -> None:
    for n in obs["nodes"].values():
        n["state"]["log"] = [dict(e) for e in log]


def test_the_good_run_passes_every_new_leaf() -> None:
    h, obs = good()
    r = ordering.check({}, h, obs)
    assert r.valid is True, r.explain()


def test_logs_that_agree_but_are_not_sorted_by_lamport_then_id() -> None:
    h, obs = good()
    logs(obs, [entry("b", 2, "n2"), entry("a", 1, "n1"), entry("c", 3, "n1")])
    c = caught(h, obs, "log-order")
    assert c.anomalies[0].kind == "log-not-sorted"
    assert (c.anomalies[0].witness["first"]["id"], c.anomalies[0].witness["second"]["id"]) == (
        "b", "a")


def set_lamport(obs: dict, mid: str, lamport: int) -> None:
    """Give message ``mid`` another Lamport time in every journal that names it."""
    for n in obs["nodes"].values():
        for e in n["events"]:
            if e["id"] == mid:
                e["lamport"] = lamport


def test_equal_lamports_ordered_by_descending_id() -> None:
    h, obs = good()
    set_lamport(obs, "b", 1)
    logs(obs, [entry("b", 1, "n2"), entry("a", 1, "n1"), entry("c", 3, "n1")])
    assert caught(h, obs, "log-order").anomalies[0].kind == "log-not-sorted"


def test_a_dependency_from_the_senders_history_logged_after_its_dependent() -> None:
    """n1 sent c naming b, but c's Lamport time is below b's, so sorted logs put c before b;
    the receiver n2 reports c with no dependencies, which is all the old leaves read."""
    h, obs = good()
    n1, n2 = obs["nodes"]["n1"]["events"], obs["nodes"]["n2"]["events"]
    n1[1]["lamport"] = n2[0]["lamport"] = 5  # b
    n2[2]["deps"] = []  # the receiver's report
    logs(obs, [entry("a", 1, "n1"), entry("c", 3, "n1"), entry("b", 5, "n2")])
    c = caught(h, obs, "log-order")
    assert c.anomalies[0].kind == "dependency-after-dependent"
    assert c.anomalies[0].witness["dependency"] == "b"


def test_a_send_with_an_empty_causal_history() -> None:
    h, obs = good()
    obs["nodes"]["n1"]["events"][2]["deps"] = []
    obs["nodes"]["n2"]["events"][2]["deps"] = []
    c = caught(h, obs, "causal-history")
    assert c.anomalies[0].kind == "empty-causal-history" and c.anomalies[0].witness["id"] == "c"


def test_a_send_whose_lamport_time_ignores_a_delivery() -> None:
    """n1 delivered b at Lamport 2, then sent c at 2: its clock never took b's time."""
    h, obs = good()
    set_lamport(obs, "c", 2)
    logs(obs, [entry("a", 1, "n1"), entry("b", 2, "n2"), entry("c", 2, "n1")])
    c = caught(h, obs, "lamport-rules")
    assert c.anomalies[0].kind == "lamport-not-updated"
    assert c.anomalies[0].witness["earlier"] == {"id": "b", "lamport": 2}


def test_an_outgoing_buffer_left_full_after_the_heal() -> None:
    h, obs = good()
    obs["nodes"]["n2"]["state"]["outgoing_buffer"] = [{"id": "b", "lamport": 2}]
    c = caught(h, obs, "buffers-drain")
    assert c.anomalies[0].witness["buffer"] == "outgoing_buffer"
    assert c.anomalies[0].witness["ids"] == ["b"]


def test_buffers_never_reported_are_unknown() -> None:
    h, obs = good()
    for n in obs["nodes"].values():
        for k in ("incoming_buffer", "outgoing_buffer", "repair"):
            del n["state"][k]
    assert child(ordering.check({}, h, obs), "buffers-drain").valid == "unknown"


def test_a_phantom_id_logged_everywhere_but_never_sent() -> None:
    h, obs = good()
    logs(obs, [entry("a", 1, "n1"), entry("b", 2, "n2"), entry("c", 3, "n1"),
               entry("z", 4, "n1")])
    assert caught(h, obs, "same-set").anomalies[0].kind == "phantom-id"


def test_a_crashed_senders_message_silently_absent_unless_journaled_lost() -> None:
    """n3 (crashed for good, no observations) sent d; n1 holds it, n2 does not."""
    h, obs = good()
    obs["nodes"]["n1"]["state"]["log"].append(entry("d", 4, "n3"))
    c = caught(h, obs, "same-set")
    assert c.anomalies[0].kind == "silently-absent"
    assert c.anomalies[0].witness == {"node": "n2", "ids": ["d"], "count": 1}
    obs["nodes"]["n2"]["events"].append(ev(3, "lost", "d", 4, "n3"))
    assert child(ordering.check({}, h, obs), "same-set").valid is True
