"""checkers.ordering on hand-made observations: each property fails on its own bad case with a
readable witness, passes on a good run, and is unknown (never a pass) without evidence."""

from __future__ import annotations

import copy
from typing import Any

from checkers import ordering
from tests.unit.golden import Golden


def ev(seq: int, type_: str, mid: str, lamport: int, sender: str, deps=(), t: float = 0.0,
       **kw: Any) -> dict[str, Any]:
    return {"seq": seq, "t": t, "type": type_, "id": mid, "lamport": lamport, "sender": sender,
            "deps": list(deps), "payload": f"p-{mid}", **kw}


def entry(mid: str, lamport: int, sender: str) -> dict[str, Any]:
    return {"id": mid, "lamport": lamport, "sender": sender, "payload": f"p-{mid}", "deps": []}


def good() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """n1 sends a then c (c depends on a), n2 sends b; both nodes hold a, b, c in one order."""
    log = [entry("a", 1, "n1"), entry("b", 2, "n2"), entry("c", 3, "n1")]
    n1 = [ev(0, "send", "a", 1, "n1", t=10.0), ev(1, "deliver", "b", 2, "n2", t=10.1),
          ev(2, "send", "c", 3, "n1", ["a", "b"], t=10.2)]
    n2 = [ev(0, "send", "b", 2, "n2", t=10.05), ev(1, "deliver", "a", 1, "n1", t=10.02),
          ev(2, "deliver", "c", 3, "n1", ["a", "b"], t=10.25)]
    drained = {"incoming_buffer": [], "outgoing_buffer": [], "repair": {"outgoing": []}}
    obs = {"nodes": {"n1": {"events": n1, "state": {"log": copy.deepcopy(log), "io": {
        "datagrams_sent": 4}, **copy.deepcopy(drained)}, "missing": []},
        "n2": {"events": n2, "state": {"log": copy.deepcopy(log), "io": {"datagrams_sent": 2},
                                       **copy.deepcopy(drained)}, "missing": []}}}
    history = [{"index": 0, "process": 0, "type": "invoke", "f": "send", "value": "p-a",
                "node": "n1"},
               {"index": 1, "process": 0, "type": "ok", "f": "send",
                "value": {"v": "p-a", "id": "a", "lamport": 1}, "node": "n1"}]
    return history, obs


def child(res, name: str):
    return next(c for c in res.children if c.checker == name)


def test_good_run_is_valid_with_stats(golden: Golden) -> None:
    h, obs = good()
    r = ordering.check({}, h, obs)
    golden(r)
    assert r.valid is True, r.explain()
    assert r.stats["deliveries"] == 3 and r.stats["sends_ok"] == 1
    assert r.stats["delivery_latency_ms"]["max"] == 50.0
    assert r.stats["datagrams_per_delivered_entry"] == 2.0


def test_causal_violation(golden: Golden) -> None:
    h, obs = good()
    n2 = obs["nodes"]["n2"]["events"]
    n2[1], n2[2] = n2[2], n2[1]  # c delivered before a
    r = ordering.check({}, h, obs)
    golden(r)
    c = child(r, "causal-delivery")
    assert c.valid is False and c.anomalies[0].witness["missing_deps"] == ["a"]
    assert "n2 delivered c" in c.anomalies[0].message


def test_order_differs(golden: Golden) -> None:
    h, obs = good()
    log = obs["nodes"]["n2"]["state"]["log"]
    log[0], log[1] = log[1], log[0]
    c = child(golden(ordering.check({}, h, obs)), "common-order")
    assert c.valid is False
    w = c.anomalies[0].witness
    assert w["nodes"] == ["n1", "n2"] and (w["first"]["id"], w["second"]["id"]) == ("a", "b")


def test_acked_send_lost_and_not_converged(golden: Golden) -> None:
    h, obs = good()
    obs["nodes"]["n2"]["state"]["log"] = [e for e in obs["nodes"]["n2"]["state"]["log"]
                                          if e["id"] != "a"]
    r = ordering.check({}, h, obs)
    golden(r)
    lost = child(r, "acked-not-lost")
    assert lost.valid is False and lost.anomalies[0].witness["missing_at"] == ["n2"]
    conv = child(r, "convergence")
    assert conv.valid is False and conv.anomalies[0].witness["id"] == "a"


def test_duplicate_delivery(golden: Golden) -> None:
    h, obs = good()
    obs["nodes"]["n2"]["events"].append(ev(3, "deliver", "a", 1, "n1"))
    c = child(golden(ordering.check({}, h, obs)), "no-duplicates")
    assert c.valid is False and c.anomalies[0].kind == "duplicate-delivery"


def test_one_id_two_lamports(golden: Golden) -> None:
    h, obs = good()
    obs["nodes"]["n1"]["events"].append(ev(3, "resend", "a", 7, "n1"))
    c = child(golden(ordering.check({}, h, obs)), "lamport-unique")
    assert c.valid is False and set(c.anomalies[0].witness["seen"]) == {"1", "7"}


def test_missing_state_is_unknown_not_valid(golden: Golden) -> None:
    h, obs = good()
    obs["nodes"]["n2"]["state"] = None
    r = ordering.check({}, h, obs)
    golden(r)
    assert r.valid == "unknown"
    assert child(r, "convergence").valid == "unknown"


def test_no_observations_is_unknown(golden: Golden) -> None:
    h, _ = good()
    assert golden(ordering.check({}, h, {"nodes": {}})).valid == "unknown"


def test_an_entry_held_twice_in_a_final_log(golden: Golden) -> None:
    h, obs = good()
    log = obs["nodes"]["n1"]["state"]["log"]
    log.append(dict(log[0]))
    c = child(golden(ordering.check({}, h, obs)), "no-duplicates")
    assert [a.kind for a in c.anomalies] == ["duplicate-in-log"]
    assert c.anomalies[0].witness == {"node": "n1", "id": "a"}
    assert c.anomalies[0].message == "n1's final log holds a 2 times"


def test_an_acked_send_only_its_gone_node_had_died_with_it() -> None:
    """n3 acked p-d (logged it) and was killed for good before anyone got it: no live node can
    get it, so it is not a loss of theirs. Once a live node holds it, every live node owes it;
    and with n3 merely missing (not gone) it is lost as before."""
    h, obs = good()
    h.append({"index": 2, "process": 1, "type": "ok", "f": "send",
              "value": {"v": "p-d", "id": "d", "lamport": 4}, "node": "n3"})
    obs["nodes"]["n3"] = {"events": [ev(0, "send", "d", 4, "n3", t=10.3)], "state": None,
                          "gone": True, "missing": []}
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert lost.valid is True and lost.stats["ok_sends_died_with_gone"] == 1, lost
    obs["nodes"]["n1"]["state"]["log"].append(entry("d", 4, "n3"))
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert lost.valid is False and lost.anomalies[0].witness["missing_at"] == ["n2"]
    obs["nodes"]["n1"]["state"]["log"].pop()
    obs["nodes"]["n3"]["gone"] = False
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert [a.witness["missing_at"] for a in lost.anomalies] == [["n1", "n2"]]


def test_a_repair_only_a_gone_node_could_answer_may_wait_until_the_node_gives_it_up() -> None:
    """n3 sent d, then e (e depends on d); d reached nobody, e reached n2, and n3 was killed
    for good. n2 holds e waiting for d and asks a repair of d that nobody live can answer:
    SDS-R bounds repair (T_max), so a correct node keeps both until its ``lost_after_ms`` and
    then journals them ``lost``. Younger they are excused; older, or d held by a live node
    (it could serve it), or n3 not gone, they are a buffer that never drains."""
    h, obs = good()
    obs["nodes"]["n3"] = {"events": [ev(0, "send", "d", 4, "n3", t=10.3),
                                     ev(1, "send", "e", 5, "n3", ["d"], t=10.4)],
                          "state": None, "gone": True, "missing": []}
    st = obs["nodes"]["n2"]["state"]
    st["lost_after_ms"] = 10_000
    st["incoming_buffer"] = [{"id": "e", "lamport": 5, "sender": "n3", "missing": ["d"],
                              "age_ms": 3_000}]
    st["repair"]["outgoing"] = [{"id": "d", "sender": "n3", "t_req_in_ms": 200,
                                 "age_ms": 2_900}]
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert drain.valid is True and drain.stats["entries_waiting_on_gone"] == 2, drain.explain()

    st["repair"]["outgoing"][0]["age_ms"] = 10_001  # past the bound: should be journaled lost
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert drain.valid is False
    assert [a.witness["buffer"] for a in drain.anomalies] == ["repair.outgoing"]
    st["repair"]["outgoing"][0]["age_ms"] = 2_900

    obs["nodes"]["n1"]["state"]["log"].append(entry("d", 4, "n3"))  # n1 could serve d
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert sorted(a.witness["buffer"] for a in drain.anomalies) == [
        "incoming_buffer", "repair.outgoing"]
    obs["nodes"]["n1"]["state"]["log"].pop()

    obs["nodes"]["n3"]["gone"] = False  # merely down: it comes back and answers
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert drain.valid is False and len(drain.anomalies) == 2


def _gone_sender_d() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """good() plus n3, killed for good after sending p-d (acknowledged) that no final log holds."""
    h, obs = good()
    h.append({"index": 2, "process": 1, "type": "ok", "f": "send",
              "value": {"v": "p-d", "id": "d", "lamport": 4}, "node": "n3"})
    obs["nodes"]["n3"] = {"events": [ev(0, "send", "d", 4, "n3", t=10.3)], "state": None,
                          "gone": True, "missing": []}
    return h, obs


def test_an_acked_send_is_excused_only_when_every_holder_the_journals_name_is_gone() -> None:
    """p-d reached n4 too (its journal delivers it), and n4 was killed for good as well: every
    holder is gone, so it is excused. If the journal shows the live n2 delivered it, n2 could
    have re-armed or relayed it and its own final log lost it: a failure naming the holders."""
    h, obs = _gone_sender_d()
    obs["nodes"]["n4"] = {"events": [ev(0, "deliver", "d", 4, "n3", t=10.35)], "state": None,
                          "gone": True, "missing": []}
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert lost.valid is True and lost.stats["ok_sends_died_with_gone"] == 1, lost.explain()

    obs["nodes"]["n2"]["events"].append(ev(3, "deliver", "d", 4, "n3", t=10.4))
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert lost.valid is False and "ok_sends_died_with_gone" not in lost.stats
    [a] = lost.anomalies
    assert a.kind == "acked-send-lost" and a.witness["missing_at"] == ["n1", "n2"]
    assert a.witness["held_by"] == ["n2", "n3", "n4"]
    assert "although live nodes ['n2'] held it" in a.message


def test_with_a_live_journal_unread_a_send_only_gone_nodes_held_is_unknown() -> None:
    """Without n2's journal nobody can tell whether n2 once held p-d: neither excused nor a
    loss, the leaf is unknown and says why."""
    h, obs = _gone_sender_d()
    obs["nodes"]["n2"]["events"] = None
    lost = child(ordering.check({}, h, obs), "acked-not-lost")
    assert lost.valid == "unknown" and not lost.anomalies
    assert any("journals of ['n2'] are unread" in g for g in lost.stats["missing_evidence"])


def test_a_repair_a_live_holder_could_answer_is_not_excused() -> None:
    """n2 waits on d, which n3 (gone) sent; n1's journal delivered d, so a live node held it
    (and its final log lost it): the waiting entry is a buffer that never drains."""
    h, obs = _gone_sender_d()
    st = obs["nodes"]["n2"]["state"]
    st["lost_after_ms"] = 10_000
    st["repair"]["outgoing"] = [{"id": "d", "sender": "n3", "t_req_in_ms": 200, "age_ms": 900}]
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert drain.valid is True and drain.stats["entries_waiting_on_gone"] == 1
    obs["nodes"]["n1"]["events"].append(ev(3, "deliver", "d", 4, "n3", t=10.4))
    drain = child(ordering.check({}, h, obs), "buffers-drain")
    assert drain.valid is False
    assert [a.witness["buffer"] for a in drain.anomalies] == ["repair.outgoing"]


def test_an_entry_may_outlive_the_give_up_bound_by_one_tick() -> None:
    """The node gives up at its ticks (``tick_ms`` in its state): read between the bound and the
    next tick, an entry waiting on what only gone nodes held is still excused; one tick past
    the bound it is a failure to give up."""
    h, obs = _gone_sender_d()
    st = obs["nodes"]["n2"]["state"]
    st.update(lost_after_ms=10_000, tick_ms=50)
    st["repair"]["outgoing"] = [{"id": "d", "sender": "n3", "t_req_in_ms": 0, "age_ms": 10_050}]
    assert child(ordering.check({}, h, obs), "buffers-drain").valid is True
    st["repair"]["outgoing"][0]["age_ms"] = 10_051
    assert child(ordering.check({}, h, obs), "buffers-drain").valid is False
    del st["tick_ms"]  # a state without it: the bound alone
    st["repair"]["outgoing"][0]["age_ms"] = 10_001
    assert child(ordering.check({}, h, obs), "buffers-drain").valid is False
