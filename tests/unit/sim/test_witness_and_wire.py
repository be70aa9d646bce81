"""`witness_of` (every target's witness entries from a checker's verdict) and an immutable
wire's decoded-frame memo (the run's bytes are those of decoding every hop)."""

from __future__ import annotations

import hashlib

from checkers.result import Anomaly, Result
from harness.sim import garlicfarm
from harness.sim.driver import Wire
from harness.sim.garlicfarm import GfSim, app_entry
from harness.sim.search import witness_of
from nodes.garlicfarm.codec import MsgType, Request


def test_witness_of_names_each_failing_leaf_and_never_drops_a_failure() -> None:
    bad = Result("leaf-a", False, [Anomaly("k1", "m1", {"x": 1})])
    good = Result("leaf-b", True)
    deep = Result("mid", False, children=[Result("leaf-c", False, [Anomaly("k2", "m2")])])
    top = Result("top", False, children=[bad, good, deep])
    assert witness_of(top) == [
        {"checker": "leaf-a", "kind": "k1", "message": "m1", "witness": {"x": 1}},
        {"checker": "leaf-c", "kind": "k2", "message": "m2", "witness": {}}]
    assert witness_of(Result("top", True, children=[good])) == []
    assert witness_of(Result("unknown", "unknown")) == []
    silent = witness_of(Result("silent", False, note="summary"))
    assert len(silent) == 1 and silent[0]["checker"] == "silent" and "message" in silent[0]


def _trace(wire: Wire) -> tuple[str, int]:
    saved = garlicfarm.WIRE
    garlicfarm.WIRE = wire
    try:
        sim = GfSim([1, 2, 3, 4, 5], seed=2)
    finally:
        garlicfarm.WIRE = saved
    lead = sim.wait_leader()
    for k in range(20):
        sim.client_request(lead, Request(MsgType.CLIENT_REQUEST, 0, 0, 0,
                                         entries=(app_entry(k),)))
        sim.run_for(0.25)
    return hashlib.sha256(sim.trace_bytes()).hexdigest(), len(sim.applied(lead))


def test_an_immutable_wire_runs_the_same_bytes_as_decoding_every_hop() -> None:
    memo = Wire(garlicfarm.codec.encode, garlicfarm.codec.decode, immutable=True)
    plain = Wire(garlicfarm.codec.encode, garlicfarm.codec.decode)
    assert garlicfarm.WIRE.immutable
    assert _trace(memo) == _trace(plain)
    assert _trace(plain)[1] == 20
