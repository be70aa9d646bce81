"""checkers.liveness on hand-made histories and journals: a node that stops applying after the
heal, a wedged joiner that keeps retrying, a run too short to judge, and the correct cases."""

from __future__ import annotations

from typing import Any

import pytest

from checkers import liveness

WALL = 1000.0  # test.started_wall: history time 0 on the nodes' clock


def _test(protocol: str, **options: Any) -> dict[str, Any]:
    return {"protocol": protocol, "nodes": ["n1", "n2", "n3"], "started_wall": WALL,
            "options": {"liveness_bound_s": 2.0, **options}}


def _history(heal_s: float, end_s: float) -> list[dict[str, Any]]:
    """A partition, the final heal-all completing at ``heal_s``, a last client op at ``end_s``."""
    ns = 1_000_000_000
    return [
        {"process": "nemesis", "type": "invoke", "f": "start-partition", "time": 1 * ns},
        {"process": "nemesis", "type": "info", "f": "start-partition", "time": 1 * ns + 10},
        {"process": "nemesis", "type": "invoke", "f": "heal-all", "time": int(heal_s * ns) - 10},
        {"process": "nemesis", "type": "info", "f": "heal-all", "time": int(heal_s * ns)},
        {"process": 0, "type": "invoke", "f": "read", "time": int(end_s * ns) - 10},
        {"process": 0, "type": "ok", "f": "read", "time": int(end_s * ns)},
    ]


def _ev(t: float, type_: str, **kw: Any) -> dict[str, Any]:
    return {"t": WALL + t, "type": type_, **kw}


def _raft_node(applied: list[tuple[float, int]], state: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    evs = []
    for t, i in applied:
        evs += [_ev(t, "commit", index=i, term=1), _ev(t, "apply", index=i, term=1)]
    return {"events": evs, "state": state if state is not None else {"role": "follower"}}


def _raft_obs(**nodes: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": nodes}


STEADY = [(0.5 * k, k) for k in range(1, 30)]  # one entry every half second up to 14.5 s


def test_raft_all_nodes_keep_applying_is_valid() -> None:
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node(STEADY))
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.valid is True, r.explain()
    assert r.examined["items"] > 0 and r.stats["stuck_nodes"] == []


def test_raft_node_that_stops_applying_after_the_heal_is_caught() -> None:
    stalled = [(t, i) for t, i in STEADY if t < 11.0]  # applies up to 10.5 s, then nothing
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node(stalled))
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.valid is False
    assert r.stats["stuck_nodes"] == ["n3"]
    assert {a.kind for a in r.anomalies} == {"no-progress"}
    assert r.anomalies[0].witness["got"] is None


def _client_ops(h: list[dict[str, Any]], outcomes: list[tuple[float, str]]
                ) -> list[dict[str, Any]]:
    """``h`` without its last read, plus one write per (invoke time, outcome), each completing
    0.5 s later."""
    ns = 1_000_000_000
    h = [op for op in h if op["process"] != 0]
    ops = [op for i, (t, out) in enumerate(outcomes)
           for op in ({"process": 10 + i, "type": "invoke", "f": "write", "time": int(t * ns)},
                      {"process": 10 + i, "type": out, "f": "write", "time": int((t + .5) * ns)})]
    return sorted(h + ops, key=lambda o: o["time"])


def test_raft_cluster_wedged_whole_serves_no_client_after_the_heal_is_caught() -> None:
    """Every node took a term it can never pass: nothing commits after it, so no item is late
    anywhere, and only the clients show it (no-term-bound under hostile on every node)."""
    early = [(t, i) for t, i in STEADY if t < 6.0]
    obs = _raft_obs(n1=_raft_node(early), n2=_raft_node(early), n3=_raft_node(early))
    wedged = _client_ops(_history(10.0, 15.0), [(12.5 + 0.3 * k, "info") for k in range(4)])
    r = liveness.check(_test("garlicfarm"), wedged, obs)
    assert r.valid is False, r.explain()
    assert [a.kind for a in r.anomalies] == ["no-service-after-heal"]
    assert r.anomalies[0].witness["completed"] == 4
    # one success after the heal, too few ops to judge, or only ops invoked before heal +
    # bound (a timeout of an op sent into the partition): not flagged
    for outcomes in ([(12.5, "info"), (12.8, "ok"), (13.1, "fail")],
                     [(12.5, "info"), (12.8, "fail")],
                     [(10.5, "info"), (11.0, "info"), (11.5, "info")]):
        h = _client_ops(_history(10.0, 15.0), outcomes)
        assert liveness.check(_test("garlicfarm"), h, obs).valid is True
    # no live majority (two of three gone): Raft owes no service
    t = {**_test("garlicfarm"), "nodes": ["n1", "n2", "n3", "n4", "n5", "n6"]}
    assert liveness.check(t, wedged, obs).valid is True


def test_raft_wedged_joiner_in_a_retry_loop_is_caught() -> None:
    """A joiner that loops on SyncLog: many join/sync events, an empty log, no apply."""
    loop = [_ev(0.01 * k, "join-start") for k in range(1500)]
    wedged = {"events": loop, "state": {"role": "follower", "joining": True, "last_applied": 0}}
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=wedged)
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.valid is False and r.stats["stuck_nodes"] == ["n3"]


def test_raft_late_catch_up_beyond_the_bound_is_caught() -> None:
    """Behind at the heal, caught up only 4 s later with a 2 s bound."""
    late = [(t, i) for t, i in STEADY if t < 5.0] + [(14.0, 29)]
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node(late))
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.valid is False
    assert r.anomalies[0].witness["got"] == 14.0


def test_raft_snapshot_install_counts_as_holding_its_indexes() -> None:
    snap = {"events": [_ev(10.5, "snapshot", last_index=29, last_term=1, installed_from=1)],
            "state": {"role": "follower"}}
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=snap)
    assert liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs).valid is True


def test_removed_and_unreachable_nodes_are_not_required_to_progress() -> None:
    stalled = [(t, i) for t, i in STEADY if t < 3.0]
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY),
                    n3=_raft_node(stalled, {"role": "follower", "removed": True}))
    assert liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs).valid is True
    obs["nodes"]["n3"] = {"events": [], "state": None}  # never started: not required
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.stats["live_nodes"] == ["n1", "n2"] and r.valid is True
    obs["nodes"]["n3"] = _raft_node(stalled, {})
    obs["nodes"]["n3"]["state"] = None  # ran, but its state could not be collected
    r = liveness.check(_test("garlicfarm"), _history(10.0, 15.0), obs)
    assert r.valid == "unknown" and "n3: no final state" in r.note


def test_run_ending_too_soon_after_the_heal_is_unknown_never_valid() -> None:
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node([]))
    r = liveness.check(_test("garlicfarm"), _history(14.0, 15.0), obs)
    assert r.valid == "unknown"
    assert "too soon" in r.note


def test_default_raft_bound_comes_from_the_election_timeout_and_heartbeat() -> None:
    t = {"protocol": "garlicfarm", "options": {"election_timeout_ms": [300, 600],
                                                 "heartbeat_ms": 75}}
    assert liveness.bound_of(t, "garlicfarm") == pytest.approx(3 * 0.6 + 4 * 0.075)


def test_missing_started_wall_is_unknown() -> None:
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node(STEADY))
    t = _test("garlicfarm")
    del t["started_wall"]
    r = liveness.check(t, _history(10.0, 15.0), obs)
    assert r.valid == "unknown" and "started_wall" in r.note


def _sds_node(ids: list[tuple[float, str]], own: bool = False) -> dict[str, Any]:
    return {"events": [_ev(t, "send" if own else "deliver", id=i) for t, i in ids],
            "state": {"log_len": len(ids)}}


def test_sds_node_that_stops_delivering_is_caught_and_catch_up_is_valid() -> None:
    msgs = [(0.3 * k, f"m{k}") for k in range(40)]
    ok = _sds_node(msgs)
    caught_up = _sds_node([(t if t < 5 or t > 10 else 10.5, i) for t, i in msgs])
    stopped = _sds_node([(t, i) for t, i in msgs if t < 8.0])
    t, h = _test("sds"), _history(10.0, 15.0)
    assert liveness.check(t, h, {"nodes": {"n1": _sds_node(msgs, own=True), "n2": ok,
                                           "n3": caught_up}}).valid is True
    r = liveness.check(t, h, {"nodes": {"n1": _sds_node(msgs, own=True), "n2": ok,
                                        "n3": stopped}})
    assert r.valid is False and r.stats["stuck_nodes"] == ["n3"]


def test_sds_messages_only_a_node_killed_for_good_held_are_not_the_others_stall() -> None:
    """n1 sends m0..m39 and the others deliver all but m37..m39, which n1 logged and then died
    with (killed for good, gone): no live node ever had them, so no one is behind. A message
    a live node holds is still owed to every live node; and n1 merely without a final state
    (not gone) leaves the verdict unknown, as before."""
    msgs = [(0.3 * k, f"m{k}") for k in range(40)]
    got = _sds_node(msgs[:-3])
    dead = {**_sds_node(msgs, own=True), "state": None, "gone": True}
    t, h = _test("sds"), _history(10.0, 15.0)
    r = liveness.check(t, h, {"nodes": {"n1": dead, "n2": got, "n3": got}})
    assert r.valid is True and r.stats["died_with_gone"] == 3, r.explain()
    assert r.stats["live_nodes"] == ["n2", "n3"]
    r = liveness.check(t, h, {"nodes": {"n1": dead, "n2": _sds_node(msgs), "n3": got}})
    assert r.valid is False and r.stats["stuck_nodes"] == ["n3"]
    assert sorted(a.witness["item"] for a in r.anomalies) == ["m37", "m38", "m39"]
    r = liveness.check(t, h, {"nodes": {"n1": {**dead, "gone": False}, "n2": got, "n3": got}})
    assert r.valid is not True


def test_drip_node_missing_a_committed_update_is_caught() -> None:
    ups = [(0.5 * k, f"u{k}") for k in range(26)]

    def node(xs: list[tuple[float, str]]) -> dict[str, Any]:
        return {"events": [_ev(t, "apply", uid=u, key="k0") for t, u in xs], "state": {}}

    t, h = _test("drip"), _history(10.0, 15.0)
    assert liveness.check(t, h, {"nodes": {"n1": node(ups), "n2": node(ups),
                                           "n3": node(ups)}}).valid is True
    r = liveness.check(t, h, {"nodes": {"n1": node(ups), "n2": node(ups),
                                        "n3": node(ups[:-3])}})
    assert r.valid is False
    assert sorted(a.witness["item"] for a in r.anomalies) == ["u23", "u24", "u25"]


def test_drip_update_superseded_before_a_node_synced_is_held_by_the_newer_version() -> None:
    """Line5 kill run (batch on): n1 went from k4 v1 to v3 and never applied u65 (v2), which
    a sync could not carry once v3 existed; that node is not behind. One that stays at v1 is."""
    def node(*xs: tuple[float, str, int]) -> dict[str, Any]:
        return {"events": [_ev(t, "apply", uid=u, key="k4", version=v) for t, u, v in xs],
                "state": {}}

    full = node((1.0, "u41", 1), (9.0, "u65", 2), (11.0, "u94", 3))
    t, h = _test("drip"), _history(10.0, 15.0)
    r = liveness.check(t, h, {"nodes": {"n1": full, "n2": full,
                                        "n3": node((1.0, "u41", 1), (11.5, "u94", 3))}})
    assert r.valid is True, r.anomalies
    r = liveness.check(t, h, {"nodes": {"n1": full, "n2": full, "n3": node((1.0, "u41", 1))}})
    assert r.valid is False
    assert sorted(a.witness["item"] for a in r.anomalies) == ["u65", "u94"]


def _swim_state(alive: list[str]) -> dict[str, Any]:
    return {"members": [{"name": n, "state": "alive"} for n in alive]}


ALL = ("n1", "n2", "n3")


def test_swim_convergence_judged_only_after_the_bound() -> None:
    views = {n: {"events": [_ev(0.1, "start")],
                 "state": _swim_state([m for m in ALL if m != n])} for n in ALL}
    t = _test("swim")
    assert liveness.check(t, _history(10.0, 15.0), {"nodes": views}).valid is True
    r = liveness.check(t, _history(14.0, 15.0), {"nodes": views})
    assert r.valid == "unknown" and "too soon" in r.note
    views["n3"]["state"] = _swim_state([])  # n3 never heard back from the others
    r = liveness.check(t, _history(10.0, 15.0), {"nodes": views})
    assert r.valid is False


def test_unknown_protocol_is_unknown() -> None:
    r = liveness.check({"protocol": "paxos"}, [], {"nodes": {}})
    assert r.valid == "unknown" and "paxos" in r.note


def test_quiet_window_ends_at_collect_time_not_at_the_last_op() -> None:
    """A workload without final ops: the heal-all is the last op; the quiesce that follows is
    in ``test["collect_s"]``, and it is what gives the check its window."""
    obs = _raft_obs(n1=_raft_node(STEADY), n2=_raft_node(STEADY), n3=_raft_node(STEADY))
    h = [o for o in _history(10.0, 15.0) if o["process"] == "nemesis"]
    assert liveness.check(_test("garlicfarm"), h, obs).valid == "unknown"
    r = liveness.check({**_test("garlicfarm"), "collect_s": 13.0}, h, obs)
    assert r.valid is True and r.stats["end_s"] == 13.0


def _ars_node(zones: dict[str, list[tuple[float, int]]], primary_of: str = "") -> dict[str, Any]:
    evs = [_ev(t, "commit" if z == primary_of else "apply", csn=c, zone=z)
           for z, pts in zones.items() for t, c in pts]
    return {"events": sorted(evs, key=lambda e: e["t"]), "state": {"docs": {}, "last_csn": 0}}


def test_antacid_csns_are_items_per_zone() -> None:
    """Zone a's CSN 20 held does not stand for zone b's CSN 20: a node stuck in zone b is
    caught although its zone-a CSNs pass every zone-b number (zone-blind, it would pass)."""
    za = [(0.5 * k, k + 1) for k in range(1, 30)]
    zb = [(0.5 * k, k + 1) for k in range(1, 12)]  # zone b commits until 5.5 s
    obs = {"nodes": {"n1": _ars_node({"a": za, "b": zb}, "a"),
                     "n2": _ars_node({"a": za, "b": zb}, "b"),
                     "n3": _ars_node({"a": za, "b": zb[:6]})}}  # n3: zone b stops at CSN 7
    # zone b's last commits come after the heal so they are due within the run
    obs["nodes"]["n2"]["events"] += [_ev(10.5, "commit", csn=13, zone="b")]
    obs["nodes"]["n1"]["events"] += [_ev(10.6, "apply", csn=13, zone="b")]
    r = liveness.check(_test("antacid"), _history(10.0, 15.0), obs)
    assert r.valid is False and r.stats["stuck_nodes"] == ["n3"]
    assert {a.witness["item"] for a in r.anomalies} == {f"b#{c}" for c in range(8, 14)}
    obs["nodes"]["n3"]["events"] += [_ev(11.0, "apply", csn=c, zone="b") for c in range(8, 14)]
    r = liveness.check(_test("antacid"), _history(10.0, 15.0), obs)
    assert r.valid is True, r.explain()
