"""Membership with an exit and new nodes that sync (issue 23): a membership change is an
update of the reserved key, agreed by 2PC among the members that stay; heartbeat bodies
teach no members; a node joining with a fresh data directory syncs before it is active."""

from __future__ import annotations

from harness.sim.drip import DripSim
from nodes.drip.codec import Heartbeat
from nodes.drip.core import MEMBERS_KEY, DripCore, Inbound

FULL4 = [(a, b) for a in ("n1", "n2", "n3", "n4") for b in ("n1", "n2", "n3", "n4") if a < b]


def test_a_dead_member_blocks_updates_until_it_is_decommissioned() -> None:
    sim = DripSim(FULL4)
    sim.crash("n4")
    sim.run_for(3)
    sim.update("n1", "k", 1, "u1")
    sim.run_for(5)
    assert sim.outcome("u1") is not None and not sim.committed("u1")  # all-yes: n4 missing
    sim.members("n2", "m1", remove=["n4"])
    sim.run_for(5)
    assert sim.committed("m1"), sim.outcome("m1")
    for n in ("n1", "n2", "n3"):
        assert sim.core(n).members == {"n1", "n2", "n3"} and sim.core(n).epoch == 1
        (ev,) = [e for e in sim.events_of(n, "members") if e["via"] == "update"]
        assert ev["removed"] == ["n4"] and ev["epoch"] == 1
        assert sim.stored(n).kv[MEMBERS_KEY].value == ["n1", "n2", "n3"]  # durable
    sim.update("n3", "k", 2, "u2")
    sim.run_for(5)
    assert sim.committed("u2")
    dec = [e for e in sim.events_of("n3", "decide") if e["uid"] == "u2"][0]
    assert dec["epoch"] == 1 and dec["required"] == ["n1", "n2", "n3"]
    assert all(sim.value(n, "k") == 2 for n in ("n1", "n2", "n3"))
    sim.restart("n1")  # the agreed membership survives a restart
    sim.run_for(5)
    assert sim.core("n1").members == {"n1", "n2", "n3"}


def test_a_membership_change_needs_every_staying_member() -> None:
    sim = DripSim(FULL4)
    sim.crash("n3")
    sim.run_for(3)
    sim.members("n1", "m1", remove=["n4"])  # n3 stays but is down: no agreement
    sim.run_for(5)
    assert sim.outcome("m1") is not None and not sim.committed("m1")
    assert all(sim.core(n).epoch == 0 for n in ("n1", "n2", "n4"))


def test_clients_cannot_write_the_membership_key() -> None:
    sim = DripSim(FULL4)
    sim.update("n1", MEMBERS_KEY, ["n1"], "u1")
    sim.run_for(1)
    a = sim.outcome("u1")
    assert a is not None and a.status == 400
    assert sim.core("n1").members == {"n1", "n2", "n3", "n4"}


def test_a_bogus_id_in_a_heartbeat_changes_nothing() -> None:
    core = DripCore("n1", ["n2"], mesh_members=["n1", "n2"])
    core.start(0.0)
    out = core.on_message(Inbound("n2", 1), Heartbeat("n2", "active", ("n2", "ghost"), False),
                          0.1)
    assert core.members == {"n1", "n2"}
    assert not [e for e in out if getattr(e, "type", None) == "members"]


def test_a_bogus_id_in_a_heartbeat_does_not_block_the_mesh() -> None:
    sim = DripSim(FULL4)
    sim.run_for(1)
    sim.core("n2").on_message(Inbound("n3", 1), Heartbeat("n3", "active", ("ghost",), False),
                              sim.now)
    sim.update("n2", "k", 1, "u1")
    sim.run_for(3)
    assert sim.committed("u1")


def test_a_new_node_syncs_every_key_before_it_is_active() -> None:
    sim = DripSim(FULL4)
    for i in range(30):
        sim.update(f"n{1 + i % 4}", f"k{i}", i, f"u{i}")
        sim.run_for(0.2)
    assert all(sim.committed(f"u{i}") for i in range(30))
    sim.members("n1", "m1", add=["n5"])
    sim.run_for(3)
    assert sim.committed("m1")
    sim.join("n5", ["n1", "n2"])
    sim.run_for(0.0)
    (start,) = sim.events_of("n5", "start")
    assert start["state"] == "sync" and start["join"]
    sim.run_for(5)
    assert sim.core("n5").state == "active"
    assert {k: i.value for k, i in sim.core("n5").d.kv.items() if k != MEMBERS_KEY} == \
        {f"k{i}": i for i in range(30)}
    assert sim.core("n5").members == {"n1", "n2", "n3", "n4", "n5"}  # learned with the store
    assert sim.core("n5").epoch == 1
    states = [e["state"] for e in sim.events_of("n5", "state")]
    assert states == ["active"]  # sync, then active; never active before the sync ended
    (done,) = sim.events_of("n5", "sync-done")
    assert done["source"] in ("n1", "n2")


def _decommissioned_run() -> tuple[DripSim, list[dict], dict]:
    from tests.unit.drip.test_twopc_checker import history_for

    sim = DripSim(FULL4)
    sim.crash("n4")
    sim.run_for(3)
    sim.members("n2", "m1", remove=["n4"])
    sim.run_for(5)
    ops = [("n1", "k", 1, "u1"), ("n3", "j", 2, "u2")]
    for node, key, value, uid in ops:
        sim.update(node, key, value, uid)
    sim.run_for(5)
    assert sim.committed("u1") and sim.committed("u2")
    return sim, history_for(sim, ops), sim.observations()


def test_the_checker_judges_each_decision_against_the_membership_in_force() -> None:
    from checkers.twopc import check

    _, h, obs = _decommissioned_run()
    r = check({}, h, obs)
    assert not [a for a in r.anomalies if a.kind in ("commit-without-all-yes",
                                                      "unknown-update")], r.explain()
    # the same commit judged at epoch 0 (n4 still a member) lacks n4's yes
    for ev in obs["nodes"]["n1"]["events"]:
        if ev["type"] == "decide" and ev["uid"] == "u1":
            ev["epoch"] = 0
    r = check({}, h, obs)
    bad = [a for a in r.anomalies if a.kind == "commit-without-all-yes"]
    assert bad and "u1" in bad[0].message and "n4" in bad[0].message


def test_the_checker_still_needs_every_staying_member() -> None:
    from checkers.twopc import check

    _, h, obs = _decommissioned_run()
    obs["nodes"]["n2"]["events"] = [ev for ev in obs["nodes"]["n2"]["events"]
                                    if not (ev["type"] == "vote" and ev["uid"] == "u2")]
    r = check({}, h, obs)
    bad = [a for a in r.anomalies if a.kind == "commit-without-all-yes"]
    assert bad and "u2" in bad[0].message and "n2" in bad[0].message


def test_the_checker_needs_one_member_set_per_epoch() -> None:
    from checkers.twopc import check

    _, h, obs = _decommissioned_run()
    r = check({}, h, obs)
    assert not r.anomalies, r.explain()  # "unknown" only: n4 is dead, so it left no state
    views = [(n, ev) for n, o in obs["nodes"].items() for ev in o["events"]
             if ev["type"] == "members" and ev.get("epoch") == 1]
    assert {n for n, _ in views} == {"n1", "n2", "n3"}  # every staying member took epoch 1
    views[-1][1]["members"] = ["n1", "n2", "n3", "n4"]  # one node's epoch 1 kept n4
    r = check({}, h, obs)
    bad = [a for a in r.anomalies if a.kind == "membership-disagreement"]
    assert r.valid is False and len(bad) == 1, r.explain()
    assert "epoch 1" in bad[0].message and views[-1][0] in bad[0].message
    assert len(bad[0].witness["views"]) == len(views)


def test_a_node_the_first_change_added_was_no_epoch_0_member() -> None:
    """A node added at run time leaves evidence, but the decisions before its add needed no
    yes of it; once the first agreed change names it in ``added`` it is judged from then on."""
    from checkers.twopc import check
    from tests.unit.drip.test_twopc_checker import history_for

    sim = DripSim([("n1", "n2"), ("n1", "n3"), ("n2", "n3")])
    ops = [("n1", "k", 1, "u1")]
    sim.update("n1", "k", 1, "u1")
    sim.run_for(3)
    assert sim.committed("u1")
    h, obs = history_for(sim, ops), sim.observations()
    four = ["n1", "n2", "n3", "n4"]
    for n in ("n1", "n2", "n3"):
        obs["nodes"][n]["events"].append({"seq": 10**6, "t": 99.0, "type": "members", "epoch": 1,
                                          "members": four, "added": ["n4"], "removed": [],
                                          "via": "update"})
    obs["nodes"]["n4"] = {"events": [
        {"seq": 0, "t": 100.0, "type": "start", "fresh": True, "join": True, "state": "sync",
         "members": four, "epoch": 0},
        {"seq": 1, "t": 101.0, "type": "members", "epoch": 1, "members": four, "added": [],
         "removed": [], "via": "sync"}], "state": None, "missing": []}
    r = check({}, h, obs)
    assert not [a for a in r.anomalies if a.kind == "commit-without-all-yes"], r.explain()
    for n in ("n1", "n2", "n3"):  # not added by an agreed change: an epoch-0 member after all
        obs["nodes"][n]["events"][-1]["added"] = []
    bad = [a for a in check({}, h, obs).anomalies if a.kind == "commit-without-all-yes"]
    assert bad and "u1" in bad[0].message and "n4" in bad[0].message
