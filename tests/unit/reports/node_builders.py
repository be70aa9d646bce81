"""Hand-made protocol runs for the report's registry re-run: a run dir with test.json naming a
registered protocol and workload, a history, node journals and final states, and a stored
verdict (results.json) that claims what the harness "decided" at run time.

Each ``*_bad`` run breaks exactly one property its protocol checker proves, while its stored
verdict says ``True``: the report must re-run the checker, find the violation, and flag the
disagreement. The evidence shapes follow the checkers' own unit tests (docs/contracts.md).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checkers.result import Result, compose

Obs = dict[str, dict[str, Any]]
MS = 1_000_000


def write_run(store: Path, test: str, run_id: str, desc: dict[str, Any],
              history: list[dict[str, Any]], nodes: Obs | None,
              stored: dict[str, bool | str] | None) -> Path:
    """``nodes``: name -> {"events": [...], "state": {...} | None}; None: no nodes/ at all."""
    d = store / test / run_id
    d.mkdir(parents=True)
    (d / "test.json").write_text(json.dumps({"name": test, "status": "complete", "seed": 5,
                                             "nemesis": "none", **desc}))
    t = 0
    lines = []
    for i, op in enumerate(history):
        t = op.get("time", t + MS)
        lines.append(json.dumps({"time": t, **op, "index": i}))
    (d / "history.jsonl").write_text("".join(x + "\n" for x in lines))
    for name, n in (nodes or {}).items():
        nd = d / "nodes" / name
        nd.mkdir(parents=True)
        evs = [{"seq": i, "t": 1000.0 + i, **e} for i, e in enumerate(n.get("events", []))]
        (nd / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
        if n.get("state") is not None:
            (nd / "state.json").write_text(json.dumps(n["state"]))
    if stored is not None:
        top = compose("all", [Result(k, v) for k, v in stored.items()])
        (d / "results.json").write_text(json.dumps({"valid": top.valid, "seed": 5,
                                                    "result": top.to_json()}))
    return d


# --------------------------------------------------------------------------- Garlic Farm


def gf_state(num_id: int, log: list[dict[str, Any]], role: str = "follower", term: int = 1
             ) -> dict[str, Any]:
    last = max((e["index"] for e in log), default=0)
    return {"id": f"n{num_id}", "num_id": num_id, "role": role, "term": term,
            "voted_for": 1, "leader": None, "commit_index": last, "last_applied": last,
            "snapshot": {"last_index": 0, "last_term": 0}, "log": copy.deepcopy(log),
            "servers": [1, 2, 3], "kv": {}, "metals": None, "bugs": []}


def gf_entry(index: int, v: str, term: int = 1) -> dict[str, Any]:
    return {"index": index, "term": term, "kind": "app", "digest": f"d{index}-{term}-{v}",
            "data": {"op": "append", "v": v}}


def kv_history() -> list[dict[str, Any]]:
    """A linearizable register history on one key."""
    return [
        {"process": 0, "type": "invoke", "f": "write", "value": ["k0", 1], "node": "n1"},
        {"process": 0, "type": "ok", "f": "write", "value": ["k0", 1], "node": "n1"},
        {"process": 1, "type": "invoke", "f": "read", "value": ["k0", None], "node": "n2"},
        {"process": 1, "type": "ok", "f": "read", "value": ["k0", 1], "node": "n2"},
    ]


def raft_two_leaders() -> Obs:
    """n1 and n2 both journal leadership of term 1: Raft's election safety is broken."""
    log = [gf_entry(1, "a")]
    nodes: Obs = {}
    for k in (1, 2, 3):
        evs = [{"type": "start", "term": 0, "voted_for": None, "last_index": 0},
               {"type": "role", "role": "follower", "term": 1, "leader": None}]
        if k in (1, 2):
            evs.append({"type": "role", "role": "leader", "term": 1, "leader": k})
        nodes[f"n{k}"] = {"events": evs, "state": gf_state(k, log)}
    return nodes


def append_lost() -> tuple[list[dict[str, Any]], Obs]:
    """b was acknowledged at index 2, but every node's committed log ends at index 1."""
    h = [{"process": 0, "type": "invoke", "f": "append", "value": "a", "node": "n1"},
         {"process": 0, "type": "ok", "f": "append", "value": {"v": "a", "index": 1},
          "node": "n1"},
         {"process": 0, "type": "invoke", "f": "append", "value": "b", "node": "n1"},
         {"process": 0, "type": "ok", "f": "append", "value": {"v": "b", "index": 2},
          "node": "n1"}]
    log = [gf_entry(1, "a")]
    e = log[0]
    nodes: Obs = {}
    for k in (1, 2, 3):  # a whole Raft story, so that only the append checker objects
        role = "leader" if k == 1 else "follower"
        state = gf_state(k, log, role=role)
        state["metals"] = {"publisher": 1, "as_of_index": 1}
        leading = [{"type": "leader-log", "term": 1, "last_index": 0, "snapshot_index": 0,
                    "runs": []}] if k == 1 else []
        nodes[f"n{k}"] = {"events": [
            {"type": "start", "term": 0},
            {"type": "role", "role": role, "term": 1, "leader": 1}, *leading,
            {"type": "vote", "term": 1, "candidate": 1, "granted": True},
            {"type": "commit", "index": 1, "term": 1, "digest": e["digest"]},
            {"type": "apply", "index": 1, "term": 1, "digest": e["digest"], "kind": "app",
             "data": e["data"]}], "state": state}
    return h, nodes


# --------------------------------------------------------------------------- DRiP


def drip_failed_update_visible() -> tuple[list[dict[str, Any]], Obs]:
    """The client saw u1 abort, yet n1 applied it (2PC atomicity)."""
    h = [{"process": 0, "type": "invoke", "f": "update", "value": ["k", 1, "u1"], "node": "n1"},
         {"process": 0, "type": "fail", "f": "update", "value": ["k", 1, "u1"], "node": "n1",
          "error": "aborted: voted no: ['n2']"}]
    kv = {"k": {"value": 1, "version": 1, "uid": "u1"}}
    apply = {"type": "apply", "uid": "u1", "key": "k", "value": 1, "version": 1}
    nodes = {"n1": {"events": [apply], "state": {"state": "active", "kv": kv}},
             "n2": {"events": [], "state": {"state": "active", "kv": kv}}}
    return h, nodes


# --------------------------------------------------------------------------- SDS


def _sds_ev(type_: str, mid: str, lamport: int, sender: str, deps: tuple[str, ...] = (),
            t: float = 10.0) -> dict[str, Any]:
    return {"type": type_, "t": t, "id": mid, "lamport": lamport, "sender": sender,
            "deps": list(deps), "payload": f"p-{mid}"}


def sds_run(causal_violation: bool) -> tuple[list[dict[str, Any]], Obs]:
    """n1 sends a then c (c depends on a and b), n2 sends b. With ``causal_violation`` n2
    delivers c before a."""
    log = [{"id": m, "lamport": lam, "sender": s, "payload": f"p-{m}", "deps": []}
           for m, lam, s in (("a", 1, "n1"), ("b", 2, "n2"), ("c", 3, "n1"))]
    n1 = [_sds_ev("send", "a", 1, "n1"), _sds_ev("deliver", "b", 2, "n2"),
          _sds_ev("send", "c", 3, "n1", ("a", "b"))]
    n2 = [_sds_ev("send", "b", 2, "n2"), _sds_ev("deliver", "a", 1, "n1"),
          _sds_ev("deliver", "c", 3, "n1", ("a", "b"))]
    if causal_violation:
        n2[1], n2[2] = n2[2], n2[1]
    h = [{"process": 0, "type": "invoke", "f": "send", "value": "p-a", "node": "n1"},
         {"process": 0, "type": "ok", "f": "send", "value": {"v": "p-a", "id": "a", "lamport": 1},
          "node": "n1"}]
    drained = {"incoming_buffer": [], "outgoing_buffer": [], "repair": {"outgoing": []}}
    nodes = {n: {"events": evs, "state": {"log": copy.deepcopy(log), **copy.deepcopy(drained)}}
             for n, evs in (("n1", n1), ("n2", n2))}
    return h, nodes


# --------------------------------------------------------------------------- SWIM

SWIM_NODES = ["n1", "n2", "n3", "n4"]
S = 1_000_000_000


def swim_view_missing_member() -> tuple[dict[str, Any], list[dict[str, Any]], Obs]:
    """n1's final view calls the live n4 dead: membership did not converge."""
    ids = {n: i + 1 for i, n in enumerate(SWIM_NODES)}

    def view(name: str, alive: list[str], dead: list[str] = ()) -> dict[str, Any]:
        ms = [{"id": ids[n], "name": n, "gen": 0, "state": "alive"} for n in alive]
        ms += [{"id": ids[n], "name": n, "gen": 0, "state": "dead"} for n in dead]
        return {"id": name, "members": ms, "capacity": 0, "left": False}

    states = {n: view(n, [m for m in SWIM_NODES if m != n]) for n in SWIM_NODES}
    states["n1"] = view("n1", ["n2", "n3"], dead=["n4"])
    h = [{"process": 0, "type": "invoke", "f": "clock-sync", "value": None, "time": 0},
         {"process": 0, "type": "ok", "f": "clock-sync", "value": {"mono": 1000.0, "wall": 0},
          "time": 0},
         {"process": 0, "type": "invoke", "f": "noop", "value": None, "time": 60 * S}]
    nodes = {n: {"events": [{"type": "start", "gen": 0, "t": 1.7e9, "mono": 1000.0}],
                 "state": states[n]} for n in SWIM_NODES}
    desc = {"nodes": SWIM_NODES, "options": {"period_s": 1.0, "suspicion_mult": 4}}
    return desc, h, nodes


# --------------------------------------------------------------------------- a store


def protocol_store(store: Path) -> dict[str, Path]:
    """One bad run per protocol checker (stored verdict: all true), one good run, one run
    with no node evidence at all, and one of a protocol the registry does not know."""
    out: dict[str, Path] = {}
    gf = {"protocol": "garlicfarm", "workload": "kv", "nodes": ["n1", "n2", "n3"]}
    out["raft"] = write_run(store, "gf-kv", "20261121T010000-000001", gf, kv_history(),
                            raft_two_leaders(), {"linearizable": True, "raft": True})
    h, nodes = append_lost()
    out["append"] = write_run(store, "gf-append", "20261121T020000-000002",
                              {**gf, "workload": "append"}, h, nodes,
                              {"append": True, "raft": True})
    h, nodes = drip_failed_update_visible()
    out["2pc"] = write_run(store, "drip", "20261121T030000-000003",
                           {"protocol": "drip", "workload": "registry", "nodes": ["n1", "n2"]},
                           h, nodes, {"2pc": True})
    sds = {"protocol": "sds", "workload": "broadcast", "nodes": ["n1", "n2"]}
    h, nodes = sds_run(causal_violation=True)
    out["ordering"] = write_run(store, "sds", "20261121T040000-000004", sds, h, nodes,
                                {"ordering": True})
    h, nodes = sds_run(causal_violation=False)
    # journal times are 1000 + seq (write_run): a slow but complete spread, judged as such
    good = {**sds, "started_wall": 1000.0, "collect_s": 100.0,
            "options": {"liveness_bound_s": 50.0}}
    out["sds-good"] = write_run(store, "sds", "20261121T050000-000005", good, h, nodes,
                                {"ordering": True, "liveness": True})
    desc, h, nodes = swim_view_missing_member()
    out["membership"] = write_run(store, "swim", "20261121T060000-000006",
                                  {"protocol": "swim", "workload": "membership", **desc}, h,
                                  nodes, {"membership": True})
    out["no-evidence"] = write_run(store, "drip", "20261121T070000-000007",
                                   {"protocol": "drip", "nodes": ["n1", "n2"]},
                                   drip_failed_update_visible()[0], None, {"2pc": True})
    out["unknown-protocol"] = write_run(store, "mystery", "20261121T080000-000008",
                                        {"protocol": "mystery"}, kv_history(), None,
                                        {"whatever": True})
    return out
