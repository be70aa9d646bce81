"""The ANTACID ordering checker with two zones: each zone's CSNs, SSNs, acked updates and
convergence are judged apart (ARS orders nothing across zones), and a fault in one zone is
reported in that zone."""

from __future__ import annotations

import copy
from typing import Any

from checkers import csn_order
from tests.unit.antacid.test_csn_order_checker import A, B, grp, state

ZA, ZB = "za", "zb"


def zone_run(zone: str, primary: str, other: str, first: str) -> tuple[dict[str, Any], list[Any]]:
    """One zone's nodes and history: ``primary`` commits CSNs 2..4 (submissions from
    ``first`` then the other server: the GlobalSubmitIDs differ between the zones), the
    other two apply them."""
    second = B if first == A else A
    commits = [grp("commit", 2, first, 1, [f"{zone}.a"]), grp("commit", 3, second, 1,
                                                                [f"{zone}.b"]),
               grp("commit", 4, first, 2, [f"{zone}.a", f"{zone}.c"])]
    final = state(4, {f"{zone}.a": 4, f"{zone}.b": 3, f"{zone}.c": 4})
    tag = {"zone": zone}
    nodes = {primary: {"events": [{"type": "start", "primary": True, "last_csn": 0, **tag},
                                  *[{**e, **tag} for e in commits]], "state": final}}
    for n in ("n1", "n2", "n3"):
        if n != primary:
            nodes[n] = {"events": [{"type": "start", "primary": False, "last_csn": 0, **tag},
                                   *[{**e, "type": "apply", **tag} for e in commits]],
                        "state": final}
    history = [{"index": 0, "process": 0, "f": "submit", "type": "ok",
                "value": {"server": first, "incarn": 1, "ssn": 1, "csn": 2, **tag}},
               {"index": 1, "process": 1, "f": "submit", "type": "ok",
                "value": {"server": second, "incarn": 1, "ssn": 1, "csn": 3, **tag}},
               {"index": 2, "process": 0, "f": "read", "type": "ok", "node": other,
                "value": {**state(2, {f"{zone}.a": 2}), **tag}}]
    return nodes, history


def two_zones() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Zone za: primary n1; zone zb: primary n2. Same CSNs and SSNs, other GlobalSubmitIDs
    and documents per zone: one zone-blind order would be full of conflicts."""
    na, ha = zone_run(ZA, "n1", "n3", A)
    nb, hb = zone_run(ZB, "n2", "n3", B)
    nodes = {}
    for n in ("n1", "n2", "n3"):
        nodes[n] = {"events": na[n]["events"] + nb[n]["events"],
                    "state": {**na[n]["state"], "zone": ZA,
                              "zones": {ZA: na[n]["state"], ZB: nb[n]["state"]}}}
    return {"primaries": {ZA: "n1", ZB: "n2"}}, ha + hb, {"nodes": nodes}


def test_two_correct_zones_are_valid_each_on_its_own() -> None:
    r = csn_order.check(*two_zones())
    assert r.valid is True, r.explain()
    assert r.stats["zones"] == [ZA, ZB]
    assert r.find("csn-order").examined["groups"] == 18  # 3 CSNs x 3 nodes x 2 zones
    assert r.find("acked-present").examined["acked"] == 4


def test_the_same_run_judged_zone_blind_would_be_invalid() -> None:
    test, history, obs = two_zones()
    for o in obs["nodes"].values():  # drop every zone tag: one CSN order for both zones
        o["events"] = [{k: v for k, v in e.items() if k != "zone"} for e in o["events"]]
        o["state"] = {k: v for k, v in o["state"].items() if k != "zones"}
    for op in history:
        op["value"].pop("zone")
    r = csn_order.check({"primary": "n1"}, history, obs)
    assert r.find("csn-order").valid is False  # the evidence that per-zone judging matters


def test_a_gap_in_one_zone_is_reported_in_that_zone() -> None:
    test, history, obs = two_zones()
    ev = obs["nodes"]["n3"]["events"]
    skip = next(i for i, e in enumerate(ev) if e.get("zone") == ZB and e.get("csn") == 3)
    del ev[skip]
    r = csn_order.check(test, history, obs)
    bad = r.find("csn-order")
    assert bad.valid is False and bad.anomalies[0].witness["zone"] == ZB
    assert bad.anomalies[0].message.startswith("zone zb: n3 took CSN 4 after 2")


def test_ssn_order_is_per_server_and_zone() -> None:
    test, history, obs = two_zones()
    # n3 applies zone zb's SSNs of B out of order (SSN 2 before 1); zone za untouched
    ev = obs["nodes"]["n3"]["events"]
    i = next(i for i, e in enumerate(ev) if e.get("zone") == ZB and e.get("csn") == 2)
    ev[i] = {**ev[i], "ssn": 3}
    r = csn_order.check(test, history, obs)
    assert r.find("ssn-order").valid is False
    assert {a.witness["zone"] for a in r.find("ssn-order").anomalies} == {ZB}


def test_convergence_and_acked_per_zone() -> None:
    test, history, obs = two_zones()
    behind = copy.deepcopy(obs["nodes"]["n3"]["state"]["zones"][ZB])
    behind["last_csn"] = 3
    behind["docs"][f"{ZB}.a"]["csn"] = 2
    behind["docs"].pop(f"{ZB}.c")
    obs["nodes"]["n3"]["state"]["zones"][ZB] = behind
    history.append({"index": 9, "process": 2, "f": "submit", "type": "ok",
                    "value": {"server": B, "incarn": 1, "ssn": 2, "csn": 4, "zone": ZB}})
    r = csn_order.check(test, history, obs)
    conv, acked = r.find("convergence"), r.find("acked-present")
    assert conv.valid is False and conv.anomalies[0].witness["zone"] == ZB
    assert acked.valid is False and [a.witness["zone"] for a in acked.anomalies] == [ZB]
    assert acked.anomalies[0].witness["nodes"] == ["n3"]  # n3 holds CSN 4 of zone za


def test_availability_names_the_zone_whose_primary_is_down() -> None:
    test, history, obs = two_zones()
    obs["nodes"]["n2"]["state"] = None
    r = csn_order.check(test, history, obs)
    av = r.find("availability")
    assert av.valid == "unknown"
    assert "zone zb: primary n2 was down at the end" in av.note
    assert "zone za" not in av.note
