"""Large values are journaled as a SHA-256 and a size (nodes/drip/journalvalue.py), and the
2PC checker still tells a right value from a wrong one by that digest."""

from __future__ import annotations

from typing import Any

from checkers.twopc import check, value_digest
from harness.sim.drip import DripSim
from nodes.drip.journalvalue import JOURNAL_VALUE_BYTES, value_fields

BIG = "x" * (64 * 1024)
OTHER = "y" * (64 * 1024)  # the same size, another value


def test_small_values_and_members_stay_whole_large_ones_become_a_digest() -> None:
    assert value_fields("k", {"route": 1}) == {"value": {"route": 1}}
    assert value_fields("k", 7) == {"value": 7}
    assert value_fields("drip:members", {"members": ["n"] * 5000})["value"]["members"]
    f = value_fields("k", BIG)
    assert "value" not in f and f["value_bytes"] == len(BIG) + 2
    assert f["value_sha256"] == value_digest(BIG) != value_digest(OTHER)
    nested = {"b": ["é" * JOURNAL_VALUE_BYTES], "a": 1}  # key order and non-ASCII: canonical
    assert value_fields("k", nested)["value_sha256"] == value_digest({"a": 1, "b": nested["b"]})


def _history(value: Any) -> list[dict[str, Any]]:
    return [{"index": 0, "process": 0, "type": "invoke", "f": "update", "value": ["k", value, "u1"]},
            {"index": 1, "process": 0, "type": "ok", "f": "update", "value": ["k", value, "u1"]}]


def _obs(applied: dict[str, Any]) -> dict[str, Any]:
    kv = {"k": {"value": BIG, "version": 1, "uid": "u1"}}
    return {"nodes": {n: {"events": [{"seq": 0, "t": 0, "type": "apply", "uid": "u1", "key": "k",
                                      "version": 1, **f}],
                          "state": {"state": "active", "kv": kv}, "missing": []}
                      for n, f in applied.items()}}


def test_the_checker_accepts_digests_of_the_clients_value() -> None:
    f = value_fields("k", BIG)
    r = check({}, _history(BIG), _obs({"n1": f, "n2": f}))
    assert r.valid is True, r.explain()


def test_the_checker_flags_a_digest_of_another_value_as_wrong_value() -> None:
    r = check({}, _history(BIG), _obs({"n1": value_fields("k", BIG),
                                      "n2": value_fields("k", OTHER)}))
    assert r.valid is False
    (a,) = [a for a in r.anomalies if a.kind == "wrong-value"]
    assert "n2" in a.message and value_digest(OTHER) in a.message
    assert len(a.message) < 1000  # digests in the message, not 64 KiB values


def test_a_simulated_mesh_journals_large_values_as_digests_and_checks_valid() -> None:
    sim = DripSim([("n1", "n2"), ("n2", "n3")])
    sim.update("n1", "k", BIG, "u1")
    sim.run_for(10)
    assert sim.outcome("u1").status == 200
    h = _history(BIG)
    applies = [e for n in ("n1", "n2", "n3") for e in sim.events_of(n, "apply")
               if e["uid"] == "u1"]
    assert len(applies) == 3 and all("value" not in e and e["value_sha256"] == value_digest(BIG)
                                     for e in applies)
    r = check({}, h, sim.observations())
    assert r.valid is True, r.explain()
    h[0]["value"] = h[1]["value"] = ["k", OTHER, "u1"]  # the client asked for another value
    assert "wrong-value" in {a.kind for a in check({}, h, sim.observations()).anomalies}
