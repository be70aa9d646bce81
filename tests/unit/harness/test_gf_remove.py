"""Garlic Farm's ``remove-server`` op (harness/gf_remove.py: the sim's ``remove`` as an
administrator's RemoveServer to the (next) leader) and how the faults checker reads it. The
connections are stand-ins for this logic alone, answering as a Raft node would; the real op
runs in tests/integration/harness/test_run_from_sim_gf_member.py."""

from __future__ import annotations

import asyncio
from typing import Any

from checkers import faults
from harness import gf_remove
from harness.gf_remove import Hold, fresh_leader, remove_server
from nodes.garlicfarm.codec import MsgType, Response


class Node:
    """One node's connection: who leads is set by the test as time goes by (``script``:
    the probe number from which it leads, with its term); a leader takes a removal from its
    ``takes_from``-th one on (a correct leader refuses until its term's entry commits)."""

    def __init__(self, name: str, script: list[tuple[int, int]], takes_from: int = 1) -> None:
        self.name, self.script, self.takes_from = name, script, takes_from
        self.probes = 0
        self.removals: list[int] = []

    def leads(self) -> int | None:
        term = None
        for since, t in self.script:
            if self.probes >= since:
                term = t
        return term

    async def request(self, msg: Any, timeout: float) -> Response:
        if msg.type == MsgType.CLIENT_REQUEST:
            self.probes += 1
            term = self.leads()
            return Response(MsgType.APPEND_ENTRIES_RESPONSE, 0, 0, term or 0, 0, term is not None)
        self.removals.append(self.probes)
        ok = self.leads() is not None and len(self.removals) >= self.takes_from
        return Response(MsgType.REMOVE_SERVER_RESPONSE, 0, 0, self.leads() or 0, 0, ok)


IDS = {f"n{i}": i for i in range(1, 6)}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_fresh_leader_is_one_whose_commit_holds_an_entry_of_an_older_term() -> None:
    log = [{"index": 1, "term": 1}, {"index": 2, "term": 3}]
    assert fresh_leader({"role": "leader", "term": 3, "commit_index": 1, "log": log})
    assert not fresh_leader({"role": "leader", "term": 3, "commit_index": 2, "log": log})
    assert not fresh_leader({"role": "follower", "term": 3, "commit_index": 1, "log": log})
    assert not fresh_leader(None)
    # the commit in the snapshot: its last term says
    assert fresh_leader({"role": "leader", "term": 4, "commit_index": 5, "log": [],
                         "snapshot": {"last_index": 5, "last_term": 2}})


def test_next_leader_waits_past_a_stale_one_and_holds_the_new_one_while_it_asks(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(gf_remove, "POLL_S", 0.001)
    stale = Node("n2", [(0, 1)])  # the isolated old leader, still sure it leads
    new = Node("n4", [(5, 2)])  # elected at its fifth probe
    other = Node("n3", [])
    log: list[Any] = []

    async def cut(lead: str, gone: str) -> list[Any]:
        log.append(("cut", lead, gone, new.removals[:]))
        return [(lead, "n3")]

    async def removed(lead: str, sid: int) -> bool:
        assert sid == 3
        log.append(("read", lead))
        return len(log) >= 3

    async def release(flows: list[Any]) -> None:
        log.append(("release", flows))

    conns = {"n2": stale, "n3": other, "n4": new}
    # the op's n1 is down here: the member the new leader reaches instead (the cluster's pick)
    out = run(remove_server(conns, IDS, lambda lead: "n3", next_leader=True, wait_s=5.0,
                            fresh=lambda n: _false(), hold=Hold(cut, removed, release)))
    assert out["accepted"] is True and not out["late"], out
    assert out["terms_leading_at_start"] == [1]
    assert [a[:3] for a in out["attempts"]] == [["n4", 2, True]]
    assert stale.removals == [] and new.removals == [5]  # asked the moment it was seen
    # cut before the request, given back once the change shows in its state
    assert out["removed"] == "n3" and out["server"] == 3
    assert log == [("cut", "n4", "n3", []), ("read", "n4"), ("read", "n4"),
                   ("release", [("n4", "n3")])]
    assert out["held"]["leader"] == "n4" and out["held"]["cut"] == [["n4", "n3"]]


async def _false() -> bool:
    return False


async def _true() -> bool:
    return True


def test_a_refusing_leader_is_asked_again_without_the_hold(monkeypatch: Any) -> None:
    monkeypatch.setattr(gf_remove, "POLL_S", 0.001)
    monkeypatch.setattr(gf_remove, "RETRY_S", 0.005)
    lead = Node("n1", [(0, 3)], takes_from=3)  # correct: refuses twice (nothing committed)
    cuts: list[str] = []

    async def cut(n: str, gone: str) -> list[Any]:
        cuts.append(n)
        return [(n, "n2")]

    out = run(remove_server({"n1": lead}, IDS, lambda n: "n5", next_leader=True, wait_s=5.0,
                            fresh=lambda n: _true(),
                            hold=Hold(cut, lambda n, s: _false(), lambda f: _false())))
    assert [a[2] for a in out["attempts"]] == [False, False, True], out
    assert cuts == ["n1"] and out["held"]["for_s"] >= 0  # a refusal gives its links back


def test_no_new_leader_in_time_asks_the_leader_of_the_moment_and_says_late(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(gf_remove, "POLL_S", 0.001)
    lead = Node("n1", [(0, 3)])  # committed already (not fresh): no new leader comes
    out = run(remove_server({"n1": lead}, IDS, lambda n: "n2", next_leader=True, wait_s=0.02,
                            fresh=lambda n: _false()))
    assert out["late"] is True and out["accepted"] is True and "held" not in out, out
    nobody = run(remove_server({"n1": Node("n1", [])}, IDS, lambda n: "n2", next_leader=False,
                               wait_s=0.02))
    assert nobody["accepted"] is False and "within 0.02 s" in nobody["error"]


def test_the_faults_checker_counts_a_remove_server_as_membership_applied() -> None:
    def hist(error: str | None) -> list[dict[str, Any]]:
        done = {"process": "nemesis", "type": "info", "f": "remove-server",
                "value": {"node": "n1"}, **({"error": error} if error else {})}
        return [{"process": "nemesis", "type": "invoke", "f": "remove-server",
                 "value": {"node": "n1"}}, done]

    ok = faults.check({"nemesis": "sim replay"}, hist(None), {})
    assert ok.valid is True and ok.stats["applied"] == {"membership": 1}
    bad = faults.check({"nemesis": "sim replay"}, hist("no leader took it"), {})
    assert bad.stats["applied"] == {}


def test_a_leader_is_never_asked_to_remove_itself() -> None:
    """sync-loop seed 4's two ``remove a=0`` (server 1) met real runs where n1 led: it refused
    each for the op's whole 2 s wait, and the partitions after fell past the time limit. The
    sim removed a member its leader reached: so does the op, whether or not it watched."""
    from harness.gf_remove import removal_target

    up = ["n1", "n2", "n3", "n4", "n5"]
    for watched in (False, True):
        assert removal_target("n1", "n1", up, frozenset(), watched) == "n2"
        assert removal_target("n3", "n1", up, frozenset(), watched) == "n3"
    cut = frozenset({("n1", "n3"), ("n3", "n1")})
    # cut off from the leader: another member only for a watched removal (as before)
    assert removal_target("n3", "n1", up, cut, True) == "n2"
    assert removal_target("n3", "n1", up, cut, False) == "n3"
    assert removal_target("n1", "n1", ["n1"], frozenset(), False) == "n1"  # nobody else
