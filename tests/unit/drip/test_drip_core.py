"""DripCore driven directly on a simulated network: votes, commits, counters, state, sync."""

from __future__ import annotations

from pathlib import Path

import pytest
from drip_sim import Sim

from nodes.drip import codec
from nodes.drip.core import CoreConfig, DripCore, Unavailable
from nodes.drip.entitlement import key_ownership
from nodes.drip.store import Store

LINE4 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4")]
RING4 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n1", "n4")]


def types(sim: Sim, n: str, t: str) -> list[dict]:
    return [e for e in sim.events[n] if e["type"] == t]


def test_update_commits_on_every_node_with_votes_from_beyond_the_direct_peers() -> None:
    sim = Sim(LINE4)
    sim.update("n1", "k", 7, "u1")
    sim.run()
    assert sim.done["u1"].committed
    assert all(sim.value(n, "k") == 7 for n in sim.ids)
    (dec,) = types(sim, "n1", "decide")
    assert dec["outcome"] == "commit" and dec["voters"] == ["n1", "n2", "n3", "n4"]
    (v4,) = types(sim, "n4", "vote")
    assert v4["vote"] == "yes" and v4["from"] == "n3"  # n4 is two hops beyond n1's peers
    assert all(not sim.cores[n].locks for n in sim.ids)


def test_versions_grow_per_key_and_the_highest_wins_everywhere() -> None:
    sim = Sim(RING4)
    for i, n in enumerate(["n1", "n3", "n2"]):
        sim.update(n, "k", i, f"u{i}")
        sim.run()
    assert [sim.cores[n].store.get("k").version for n in sim.ids] == [3, 3, 3, 3]
    assert {sim.value(n, "k") for n in sim.ids} == {2}


def test_concurrent_updates_of_one_key_never_both_commit() -> None:
    sim = Sim(RING4)
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")  # both lock k before any vote travels
    sim.run(until=10)
    assert not (sim.done["ua"].committed and sim.done["ub"].committed)
    assert "in progress" in str(types(sim, "n3", "vote")[-1]["reason"]) or \
        any(e["vote"] == "no" for n in sim.ids for e in types(sim, n, "vote"))


def test_an_abort_frees_the_voters_locks_at_once() -> None:
    """Without the abort message a voter holds the key until its lock TTL (3 s): every update
    of a hot key in that window is refused."""
    sim = Sim(RING4)
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")
    sim.run(until=1)  # well within lock_ttl_s
    aborted = [u for u in ("ua", "ub") if not sim.done[u].committed]
    assert aborted
    assert all(c.locks.get("k") not in aborted for c in sim.cores.values())
    assert any(str(e["why"]).startswith("aborted by") for n in sim.ids
               for e in types(sim, n, "release"))
    sim.update("n2", "k", "c", "uc")  # the key is free again everywhere
    sim.run(until=2)
    assert sim.done["uc"].committed


def test_forwarders_answer_before_the_initiator_gives_up_when_a_link_below_hangs() -> None:
    """Ring n1..n5, the n1-n5 link swallows requests: n4's vote reaches everyone by other
    paths, but n1 and n5 each wait on the other. They must answer their senders before n4's
    timeout (DRiP-Vote-Budget-Ms), or every update aborts while the link hangs."""
    ring5 = [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n5"), ("n5", "n1")]
    sim = Sim(ring5)
    sim.hang |= {("n1", "n5"), ("n5", "n1")}
    sim.update("n4", "k", "v", "u1")
    sim.run(until=5)
    assert sim.done["u1"].committed, sim.done["u1"]
    assert all(sim.value(n, "k") == "v" for n in ("n2", "n3", "n4"))


def test_forget_in_progress_bug_lets_both_commit() -> None:
    sim = Sim(RING4, bugs=frozenset({"forget-in-progress"}))
    sim.update("n1", "k", "a", "ua")
    sim.update("n3", "k", "b", "ub")
    sim.run(until=10)
    assert sim.done["ua"].committed and sim.done["ub"].committed


def test_votes_route_around_a_cut_link() -> None:
    sim = Sim(RING4)
    sim.cut |= {("n1", "n2"), ("n2", "n1")}
    sim.heartbeat_round()
    assert sim.cores["n1"].peer_up["n2"] is False
    sim.update("n1", "k", 1, "u1")
    sim.run(until=5)
    assert sim.done["u1"].committed
    assert sim.value("n2", "k") == 1  # through n4 -> n3 -> n2


def test_an_unreachable_member_aborts_the_update_instead_of_splitting() -> None:
    sim = Sim(RING4)
    sim.down.add("n3")
    sim.heartbeat_round()
    sim.update("n1", "k", 1, "u1")
    sim.run(until=5)
    assert not sim.done["u1"].committed
    assert "n3" in sim.done["u1"].detail["error"]
    assert all(sim.value(n, "k") is None for n in ("n1", "n2", "n4"))


def test_partial_vote_bug_commits_without_a_member() -> None:
    sim = Sim(RING4, bugs=frozenset({"commit-partial-vote"}))
    sim.down.add("n3")
    sim.heartbeat_round()
    sim.update("n1", "k", 1, "u1")
    sim.run(until=5)
    assert sim.done["u1"].committed
    assert types(sim, "n1", "decide")[0]["missing"] == ["n3"]


def test_timeout_aborts_and_late_responses_change_nothing() -> None:
    sim = Sim([("n1", "n2")])
    sim.update("n1", "k", 1, "u1")
    held = list(sim.queue)
    sim.queue.clear()
    sim.run(until=5)  # the vote timer fires: no response came
    assert not sim.done["u1"].committed
    sim.queue.extend(held)  # the request arrives now; n2's "yes" is late
    sim.run(until=5)
    assert types(sim, "n1", "late-vote")
    assert sim.value("n1", "k") is None and sim.value("n2", "k") is None


def test_seen_counters_stop_propagation_and_reset_starts_a_new_epoch() -> None:
    c = DripCore("n2", ["n1", "n3"], Store(":memory:"))
    c.on_start(0)
    v = codec.Voting("n1", 10, False, codec.Update("u1", "k", 1))
    first = c.on_voting("n1", v, 0)
    assert any(getattr(e, "to", None) == "n3" for e in first)  # forwarded
    again = c.on_voting("n3", v, 0)
    (resp,) = again
    assert resp.msg.duplicate and resp.to == "n3"
    assert c._seen("n1", 9, False) is False  # overtaken by 10, still new once
    assert c._seen("n1", 9, False) is True
    assert c._seen("n1", 0, True) is False  # wrapped: reset flag makes 0 new
    assert c._seen("n1", 0, True) is True  # the same reset seen again on another path
    assert c._seen("n1", 1, False) is False


def test_own_counter_wraps_with_the_reset_flag(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.sqlite3")
    s.save_counters([("__self__", 2**64 - 1, None)])
    c = DripCore("n1", ["n2"], s)
    c.on_start(0)
    assert c.counter == 2**64 - 1
    eff = c.client_update(codec.Update("u1", "k", 1), 0)
    (send,) = [e for e in eff if hasattr(e, "msg")]
    assert send.msg.counter == 0 and send.msg.reset is True


def test_losing_every_peer_makes_a_node_inactive_then_it_syncs_back() -> None:
    sim = Sim(LINE4)
    sim.down.add("n1")  # n1 is n2's other neighbour; isolate n2 from n3 too
    sim.cut |= {("n2", "n3"), ("n3", "n2")}
    sim.heartbeat_round()
    assert sim.cores["n2"].state == "inactive"
    with pytest.raises(Unavailable, match="inactive"):  # an inactive node refuses updates
        sim.cores["n2"].on_voting("n3", codec.Voting("n3", 1, False, codec.Update("x", "k", 1)), 0)
    sim.cut.clear()
    sim.heartbeat_round()
    assert sim.cores["n2"].state == "sync"
    sim.heartbeat_round()
    sim.run(until=1)
    assert sim.cores["n2"].state == "active"
    kinds = [e["type"] for e in sim.events["n2"]]
    assert kinds.index("sync-done") < len(kinds) - 1 - kinds[::-1].index("state")


def test_dropped_commits_are_owed_and_recovered_by_sync() -> None:
    sim = Sim(LINE4)
    sim.update("n1", "k", 1, "u1")
    # the vote completes, then n4's link goes before the commit reaches it
    while not sim.done:
        sim.deliver_one()
    sim.cut |= {("n3", "n4"), ("n4", "n3")}
    sim.heartbeat_round()
    sim.run(until=1)
    assert sim.value("n4", "k") is None and "n4" in sim.cores["n3"].store.owed()
    sim.cut.clear()
    sim.heartbeat_round()  # n4 went inactive (its only peer) -> sync; also told it is owed
    sim.heartbeat_round()
    sim.run(until=2)
    assert sim.value("n4", "k") == 1 and sim.cores["n4"].state == "active"


def test_commits_learned_by_sync_travel_on_down_a_line() -> None:
    """n1 commits, its link to n2 goes before the commit leaves: n2 learns it only by sync,
    and must pass it on (n3, n4 are beyond n2; n1's dropped queue never reaches them)."""
    sim = Sim(LINE4)
    sim.update("n1", "k", 1, "u1")
    while not sim.done:
        sim.deliver_one()
    sim.cut |= {("n1", "n2"), ("n2", "n1")}
    sim.heartbeat_round()
    sim.run(until=1)
    assert [sim.value(n, "k") for n in ("n2", "n3", "n4")] == [None, None, None]
    sim.cut.clear()
    for i in range(6):
        sim.heartbeat_round()
        sim.run(until=2 + i)
    assert [sim.value(n, "k") for n in ("n1", "n2", "n3", "n4")] == [1, 1, 1, 1]
    assert any("learned commits by sync" in e["why"] for e in types(sim, "n2", "owe-sync"))


def test_restart_keeps_committed_data_and_syncs_before_going_active(tmp_path: Path) -> None:
    sim = Sim(LINE4, root=tmp_path)
    sim.update("n1", "k", 1, "u1")
    sim.run()
    sim.cores["n4"].store.close()
    sim.down.add("n4")
    sim.heartbeat_round()
    sim.boot("n4")
    assert sim.cores["n4"].state == "sync" and sim.value("n4", "k") == 1
    sim.heartbeat_round()
    sim.run(until=1)
    assert sim.cores["n4"].state == "active"
    assert types(sim, "n4", "sync-done")


def test_skip_sync_bug_goes_active_at_once(tmp_path: Path) -> None:
    sim = Sim([("n1", "n2")], bugs=frozenset({"skip-sync"}), root=tmp_path)
    sim.update("n1", "k", 1, "u1")
    sim.run()
    sim.cores["n2"].store.close()
    sim.boot("n2")
    assert sim.cores["n2"].state == "active"


def test_ownership_policy_votes_no_for_another_owner() -> None:
    c = DripCore("n2", ["n1"], Store(":memory:"), CoreConfig(), policy=key_ownership)
    c.on_start(0)
    c.store.apply_commit(codec.Update("u0", "+1555", "route-a", "carrierA"), 1, [])
    eff = c.on_voting("n1", codec.Voting("n1", 1, False,
                                        codec.Update("u1", "+1555", "route-b", "carrierB")), 0)
    (resp,) = [e for e in eff if hasattr(e, "msg")]
    assert resp.msg.yes is False
    (vote,) = [e for e in eff if getattr(e, "type", "") == "vote"]
    assert "owned by 'carrierA'" in vote.fields["reason"]
