"""The ``last-send`` op (harness/last_send.py: a gone node's last words in a real replay) and
how the checkers read its completion: an acknowledged send of that node, and a fault that was
or was not applied. The client and the states are stand-ins for this logic alone; the real
op runs in tests/integration/harness/test_run_from_sim_steps.py."""

from __future__ import annotations

import asyncio
from typing import Any

from checkers import faults
from checkers.ordering import Holding, _ok_sends, check_acked
from harness.last_send import holds, last_send
from harness.spec import DefiniteFailure


class Client:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.sent: list[Any] = []

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        if self.refuse:
            raise DefiniteFailure("channel full")
        self.sent.append(op)
        return {"type": "ok", "value": {"v": op["value"], "id": "m1", "lamport": 7}}


def states_after(polls: int, holders: set[str]):
    """States in which ``holders`` log m1 from the ``polls``-th read on."""
    reads = []

    async def states(names: list[str]) -> dict[str, Any]:
        reads.append(names)
        return {n: {"log": [{"id": "m1"}] if n in holders and len(reads) >= polls else []}
                for n in names}
    return states, reads


def test_it_sends_once_at_the_node_and_waits_until_its_reach_holds_it() -> None:
    c = Client()
    states, reads = states_after(3, {"n2", "n3"})
    v = asyncio.run(last_send(c, "n1", ["n2", "n3"], "last:n1", states))
    assert c.sent == [{"f": "send", "value": "last:n1"}]
    assert v["sent"] == {"v": "last:n1", "id": "m1", "lamport": 7}
    assert v["held_by"] == ["n2", "n3"] and "error" not in v
    assert len(reads) == 3 and reads[0] == ["n2", "n3"]  # only the reach is read


def test_a_peer_that_never_holds_it_or_a_refused_send_is_an_error() -> None:
    states, _ = states_after(1, {"n2"})
    v = asyncio.run(last_send(Client(), "n1", ["n2", "n3"], "x", states, timeout_s=0.2))
    assert v["held_by"] == ["n2"] and "['n3'] did not hold n1's last send" in v["error"]
    assert v["sent"]["id"] == "m1"  # acknowledged all the same: the checkers judge it
    v = asyncio.run(last_send(Client(refuse=True), "n1", ["n2"], "x", states))
    assert "sent" not in v and "channel full" in v["error"]
    assert not holds(None, "m1") and holds({"log": [{"id": "m1"}]}, "m1")


def completion(error: str | None = None) -> dict[str, Any]:
    v = {"node": "n1", "reach": ["n2"], "sent": {"v": "last:n1", "id": "m1"},
         "held_by": ["n2"]}
    return {"process": "nemesis", "type": "info", "f": "last-send", "value": v, "index": 3,
            **({"error": error} if error else {})}


def test_the_checkers_count_its_send_as_acknowledged_at_the_node_and_lost_if_unrepaired() -> None:
    history = [{"process": "nemesis", "type": "invoke", "f": "last-send",
                "value": {"node": "n1", "reach": ["n2"]}, "index": 2}, completion()]
    ((payload, op),) = _ok_sends(history)
    assert payload == "last:n1" and op["node"] == "n1" and op["value"]["id"] == "m1"
    logs = {"n2": [{"id": "m1", "payload": "last:n1"}], "n3": []}  # n1 gone, n3 never got it
    h = Holding(frozenset({"n1"}), [], {"m1": {"n1", "n2"}}, {"last:n1": {"n1", "n2"}})
    (lost,), gaps = check_acked(history, logs, h, set())
    assert lost.kind == "acked-send-lost" and lost.witness["missing_at"] == ["n3"] and not gaps
    logs["n3"] = [{"id": "m1", "payload": "last:n1"}]  # repaired by n2
    assert check_acked(history, logs, h, set()) == ([], [])


def test_a_last_send_that_failed_leaves_the_faults_unproven() -> None:
    inv = {"process": "nemesis", "type": "invoke", "f": "last-send", "value": {"node": "n1"}}
    ok = faults.check({"nemesis": "sim replay"}, [inv, completion()], {})
    assert ok.valid is True and ok.stats["applied"] == {"last-send": 1}
    bad = faults.check({"nemesis": "sim replay"}, [inv, completion("['n2'] did not hold")], {})
    assert bad.valid == "unknown" and "last-send: never applied" in bad.note
