"""Garlic Farm chaos tests: the correct node is valid under every fault, with a minimum of ok
ops, every requested fault applied and every leaf's evidence non-empty; each bug mode is
caught by the exact leaf named for it (nodes/garlicfarm/harness.py), and a correct-node
control on the same seed and schedule clears that leaf. Smoke tests (also marked ``smoke``)
run on every CI submission; the rest are the nightly ``pytest -m chaos`` suite."""

from __future__ import annotations

from functools import partial

import pytest

from faults import schedules as sch
from harness.nemesis_generator import Faults, from_schedule
from harness.spec import TestSpec
from harness.suites.garlicfarm import PROTOCOL

pytestmark = pytest.mark.chaos

#: ok client ops per second of time limit every run must reach: the workloads offer ~50/s,
#: and 3-node smoke runs under partitions, kills and pauses measured 30-42/s on 2 cores
MIN_OK_PER_S = 5


def gf(name: str, *, nodes: int = 5, workload: str = "kv", nemesis: str = "none",
       interval: float = 3.0, time_limit: float = 20.0, seed: int = 1, bugs: list[str] | None = None,
       schedule=None, concurrency: int | None = None, op_timeout: float = 5.0,
       kill_for_good: dict[str, float] | None = None, **options) -> TestSpec:
    sched = dict(nemesis=from_schedule(schedule), nemesis_desc="explicit") \
        if schedule is not None else dict(faults=Faults(nemesis, interval))
    return TestSpec(name=f"gf-{name}", protocol=PROTOCOL, workload=workload, nodes=nodes,
                    **sched, time_limit=time_limit, seed=seed,
                    concurrency=concurrency or nodes, bugs=bugs or [], options=options,
                    op_timeout=op_timeout, kill_for_good=dict(kill_for_good or {}))


# ---------------------------------------------------------------- smoke (every CI run)

@pytest.mark.smoke
def test_smoke_kv_partitions_and_kills(chaos_run):
    chaos_run(gf("smoke-kv", nodes=3, nemesis="partition,kill", interval=2.0, time_limit=10),
              min_ok=MIN_OK_PER_S * 10)


@pytest.mark.smoke
def test_smoke_append_leader_kill(chaos_run):
    chaos_run(gf("smoke-append", nodes=3, workload="append", nemesis="kill-leader,pause",
                 interval=2.0, time_limit=10), min_ok=MIN_OK_PER_S * 10)


@pytest.mark.smoke
def test_smoke_bug_local_reads_is_caught(chaos_run):
    isolate = sch.op("start-partition", {"shape": "isolate", "node": "leader"})
    steps = [(1.5, isolate), (5.0, sch.op("stop-partition")), (1.0, isolate), (5.0, sch.op("stop-partition"))]
    # a write to the cut-off leader gives up after 1 s (op_timeout), so its threads go back
    # to reading while the majority side, under a new leader, moves the same keys on
    chaos_run(partial(gf, "smoke-bug-local-reads", nodes=5, schedule=steps, time_limit=13,
                      concurrency=10, op_timeout=1.0, bugs=["local-reads"]),
              expect="linearizable", min_ok=MIN_OK_PER_S * 13)


# ---------------------------------------------------------------- correct node, nightly

@pytest.mark.parametrize("nemesis", [
    "partition-halves", "partition-isolate-leader", "partition-majorities-ring", "partition-bridge",
    "partition-one-way", "kill-leader", "kill", "pause", "pause-leader", "latency", "clock-skew",
    "partition,kill,pause,latency",
])
def test_kv_five_nodes(chaos_run, nemesis):
    chaos_run(gf(f"kv-{nemesis}", nemesis=nemesis, time_limit=25), min_ok=MIN_OK_PER_S * 25)


@pytest.mark.parametrize("nemesis", ["partition,kill", "kill-leader"])
def test_kv_three_nodes(chaos_run, nemesis):
    chaos_run(gf(f"kv3-{nemesis}", nodes=3, nemesis=nemesis, time_limit=20),
              min_ok=MIN_OK_PER_S * 20)


@pytest.mark.parametrize("nemesis", ["partition,kill-leader", "pause-leader,partition-majorities-ring"])
def test_append_five_nodes(chaos_run, nemesis):
    chaos_run(gf(f"append-{nemesis}", workload="append", nemesis=nemesis, time_limit=25),
              min_ok=MIN_OK_PER_S * 25)


def test_kv_node_killed_for_good_with_partitions(chaos_run):
    """n1 killed for good (never restarted, not even by the final heal) while partitions come
    and go: the four survivors keep a majority of five, and every checker judges them without
    n1 (it owes no final state), valid."""
    res = chaos_run(gf("kv-gone", nodes=5, nemesis="partition", interval=2.0, time_limit=12,
                       kill_for_good={"n1": 3.0}), min_ok=MIN_OK_PER_S * 12)
    assert (res.run_dir.path / "nodes/n1/gone.json").is_file()
    assert res.result.find("liveness").stats["live_nodes"] == ["n2", "n3", "n4", "n5"]


def test_kv_random_kills_with_compaction(chaos_run):
    """Small snapshot threshold: restarted nodes catch up through chunked InstallSnapshot."""
    chaos_run(gf("kv-compaction", nemesis="kill,kill-leader", time_limit=25, snapshot_threshold=50),
              min_ok=MIN_OK_PER_S * 25)


def test_membership_change_during_partitions(chaos_run):
    """n4 joins (AddServer -> JoinCluster -> SyncLog/InstallSnapshot) while n3 is cut off,
    then leaves (RemoveServer -> LeaveCluster) while n3 is cut off again (n3 cannot lead then:
    its log misses what was committed while it was away)."""
    import json

    steps = [(1.0, sch.op("start-partition", {"shape": "isolate", "node": "n3"})),
             (0.5, sch.op("join", {"node": "n4"})),
             (4.0, sch.op("stop-partition")),
             (2.0, sch.op("start-partition", {"shape": "isolate", "node": "n3"})),
             (0.5, sch.op("leave", {"node": "n4"})),
             (4.0, sch.op("stop-partition"))]
    res = chaos_run(gf("membership", nodes=4, schedule=steps, time_limit=16, concurrency=3,
                       snapshot_threshold=100, late_nodes=["n4"]), min_ok=MIN_OK_PER_S * 16)
    def events(n: str) -> list[dict]:
        path = res.run_dir.path / "nodes" / n / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    mine = {e["type"] for e in events("n4")}
    assert {"join-invited", "left-cluster"} <= mine, f"n4 did not join and leave: {sorted(mine)}"
    led = [e for n in ("n1", "n2", "n3") for e in events(n) if e.get("server") == 4]
    assert {"join-complete", "leave-complete"} <= {e["type"] for e in led}, led


# ---------------------------------------------------------------- bug modes must be caught
# Each runs the buggy spec, then the same spec with bugs=[] (the plugin's control): the named
# leaf must be invalid in the first and valid, with evidence, in the second.

def test_bug_commit_without_majority_is_caught(chaos_run):
    """An isolated leader acknowledges writes it committed alone; the majority's new leader
    overwrites them, and later reads do not see acknowledged writes."""
    chaos_run(partial(gf, "bug-commit-without-majority", nemesis="partition-isolate-leader",
                      time_limit=15, bugs=["commit-without-majority"]),
              expect="linearizable", min_ok=MIN_OK_PER_S * 15)


def test_bug_commit_without_majority_loses_appends(chaos_run):
    chaos_run(partial(gf, "bug-cwm-append", workload="append", nemesis="partition-isolate-leader",
                      time_limit=15, bugs=["commit-without-majority"]),
              expect="append", anomaly="lost-append", min_ok=MIN_OK_PER_S * 15)


def test_bug_local_reads_is_caught(chaos_run):
    chaos_run(partial(gf, "bug-local-reads", nemesis="partition-isolate-leader,partition-halves",
                      time_limit=15, bugs=["local-reads"]),
              expect="linearizable", min_ok=MIN_OK_PER_S * 15)


def test_bug_forget_vote_is_caught(chaos_run):
    """Kill and restart nodes during elections: a node that forgets its vote votes twice."""
    steps = []
    for _ in range(8):
        steps += [(0.8, sch.op("kill", {"node": "leader"})), (0.3, sch.op("kill", {"node": "random"})),
                  (0.2, sch.op("restart", None))]
    chaos_run(partial(gf, "bug-forget-vote", schedule=steps, time_limit=15, bugs=["forget-vote"],
                      election_timeout_ms=[150, 300]),
              expect="raft.vote-safety", min_ok=MIN_OK_PER_S * 15)


def test_bug_ack_before_fsync_is_caught(chaos_run):
    """Kill every node at once: acknowledged appends that were never synced are gone."""
    steps = []
    for _ in range(4):
        steps += [(2.0, sch.op("kill", {"node": "all"})), (0.5, sch.op("restart", None))]
    chaos_run(partial(gf, "bug-ack-before-fsync", workload="append", schedule=steps, time_limit=12,
                      bugs=["ack-before-fsync"]),
              expect="append", anomaly="lost-append", min_ok=MIN_OK_PER_S * 12)



def test_bug_unsafe_config_change_is_caught(chaos_run):
    """A new leader whose first entry cannot commit for seconds, and n4 asking to join then.
    n3 is down while the log grows (killed, not cut off: an isolated n3 that led would stay
    a stale leader and could take n4's AddServer itself); then the links towards n3 are
    throttled to 2 KB/s, the leader is killed and n3 restarted: the survivor (longer log)
    wins with n3's small vote, but its first entry commits only once n3 has received the
    whole missing log. The buggy leader appends n4's configuration in that window; the
    correct one refuses AddServer until its entry commits. Caught on seeds 1 and 2, the
    control refusing AddServer until then; ~2 min for both runs, so nightly only."""
    to_n3 = [["n1", "n3"], ["n2", "n3"]]
    steps = [(1.0, sch.op("kill", {"node": "n3"})),
             (8.0, sch.op("start-bandwidth", {"kbps": 2, "links": to_n3, "one_way": True})),
             (0.2, sch.op("kill", {"node": "leader"})),
             (0.0, sch.op("restart", {"node": "n3"})),
             (0.0, sch.op("join", {"node": "n4"})),
             (8.0, sch.op("stop-bandwidth")),
             (0.5, sch.op("restart", None))]
    chaos_run(partial(gf, "bug-unsafe-config-change", nodes=4, schedule=steps, time_limit=22,
                      concurrency=3, late_nodes=["n4"], rate=10, bugs=["unsafe-config-change"]),
              expect="raft.membership-safety", anomaly="config-change-before-term-commit",
              min_ok=MIN_OK_PER_S * 4)



def _events(res, node: str) -> list[dict]:
    import json

    path = res.run_dir.path / "nodes" / node / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_elections_under_high_latency(chaos_run):
    """500 ms each way (a 1 s round trip; a TLS + Digest connect takes several) against
    election timeouts of 3-7 s and 1 s heartbeats: a leader is elected under the latency,
    and once it is killed the other two elect another within the 12 s it stays down, and
    appends commit; it restarts once the latency is gone. Before the peer link dropped
    superseded requests (and let a connect take twice the minimum election timeout), each
    stale RequestVote cost a round trip ahead of the current one and no term ended with a
    leader while the latency was on (docs/garlicfarm.md, "Latency")."""
    import json

    steps = [(0.2, sch.op("start-latency", {"ms": 500})),
             (14.0, sch.op("kill", {"node": "leader"})),
             (12.0, sch.op("stop-latency")),
             (0.5, sch.op("restart", None))]
    # the run ends ~3 s after the heal: liveness judges within 2.5 s (the default bound,
    # 3 x 7 s, would judge nothing). rpc_timeout 3 s (3 round trips): with the default,
    # 2 x 7 s, the leader's link to the restarted node stayed stuck past the run's end
    res = chaos_run(gf("latency-elections", nodes=3, workload="append", schedule=steps,
                       time_limit=34, concurrency=3, rate=10, election_timeout_ms=[3000, 7000],
                       heartbeat_ms=1000, rpc_timeout_ms=3000, liveness_bound_s=2.5),
                    min_ok=MIN_OK_PER_S * 4)
    test = json.loads((res.run_dir.path / "test.json").read_text())
    hist = [json.loads(line) for line in (res.run_dir.path / "history.jsonl").read_text().splitlines()]
    at = {h["f"]: test["started_wall"] + h["time"] / 1e9 for h in hist
          if h.get("process") == "nemesis" and h["type"] == "info"}
    leaders = sorted((e["t"], n) for n in ("n1", "n2", "n3") for e in _events(res, n)
                     if e["type"] == "role" and e["role"] == "leader")
    killed = [n for t, n in leaders if t < at["kill"]][-1:]
    assert killed, f"no leader before the kill: {leaders}"
    later = [(t, n) for t, n in leaders if at["kill"] < t < at["restart"] and n != killed[0]]
    assert later, f"no new leader while {killed[0]} was down under latency: {leaders}"


def test_bug_sync_loop_is_caught_by_liveness(chaos_run):
    """n4 joins a 3-node cluster under load while n3 is briefly cut off; with ``sync-loop`` it acknowledges every SyncLog
    pack without applying it (issue 22's joiner behind a JRaft leader), so it loops with an
    empty log while every safety leaf passes: the liveness leaf names it (``no-progress``),
    with a correct-node control on the same seed in which n4 catches up."""
    res = chaos_run(partial(gf, "bug-sync-loop-liveness", nodes=4, time_limit=10, concurrency=3,
                            schedule=[(0.5, sch.op("start-partition", {"shape": "isolate", "node": "n3"})),
                                      (0.5, sch.op("join", {"node": "n4"})),
                                      (1.0, sch.op("stop-partition"))], late_nodes=["n4"],
                            bugs=["sync-loop"]),
                    expect="liveness", anomaly="no-progress", min_ok=MIN_OK_PER_S * 10)
    leaf = res.result.find("liveness")
    assert {a.witness["node"] for a in leaf.anomalies} == {"n4"}, leaf.anomalies[:3]


# ---------------------------------------------------------------- hostile members (issue 27)

def test_kv_five_nodes_hostile_with_partition(chaos_run):
    """The real hostile fault (nodes/garlicfarm/hostile_driver.py) at every node every half
    second, while the leader is cut off and the group heals: nodes/garlicfarm/hostile.py's
    messages on members' authenticated links (TLS and Digest with the run's credentials), the
    outsider kinds also without credentials. The cluster stays valid and keeps committing;
    every node is alive at the end (its final state read) and refused at each layer: no
    connection without credentials got through (a 401 or a failed TLS handshake each), the
    counters past the bound were refused by the core, the bad frames by the server."""
    import json

    from nodes.garlicfarm.hostile import OUTSIDER

    steps = [(1.0, sch.op("start-hostile", {"interval_s": 0.5})),
             (2.0, sch.op("start-partition", {"shape": "isolate", "node": "leader"})),
             (5.0, sch.op("stop-partition")),
             (1.0, sch.op("start-partition", {"shape": "halves"})),
             (4.0, sch.op("stop-partition")),
             (2.0, sch.op("stop-hostile"))]
    res = chaos_run(gf("kv-hostile-partition", schedule=steps, time_limit=18),
                    min_ok=MIN_OK_PER_S * 18)
    hostile = json.loads(res.run_dir.test_json.read_text())["hostile"]
    print("sent (refused): " + ", ".join(f"{n} {h['sent']} ({h['refused']})"
                                         for n, h in hostile.items()))
    assert sorted(hostile) == [f"n{i}" for i in range(1, 6)], hostile
    for node, h in hostile.items():
        assert h["refused"] is not None, f"{node}: no final state (the node died?)"
        assert h["sent"] >= 3 * 18, (node, h)  # at least three whole bursts
        for kind, seen in h["outcome"].items():
            if "@" in kind:  # without credentials: refused at the door, every time
                assert set(seen) == {"refused-digest" if kind.endswith("@no-digest")
                                     else "refused-tls"}, (node, kind, seen)
        assert {k.partition("@")[0] for k in h["by_kind"] if "@" in k} == set(OUTSIDER), h
        for reason in ("core:counter-out-of-range", "wire:digest-refused", "wire:bad-frame",
                       "wire:response-frame"):
            assert h["refused"].get(reason, 0) > 0, (node, reason, h["refused"])
    live = res.result.find("liveness").stats["live_nodes"]
    assert sorted(live) == [f"n{i}" for i in range(1, 6)], live


def test_bug_no_term_bound_is_caught_by_liveness(chaos_run, request):
    """Bug ``no-term-bound`` (the counter bound the simulator's hostile search found missing):
    n3 is cut off from its peers while the real hostile fault sends it RequestVote and
    AppendEntries at term 2^64-1 on a member's authenticated link. With the bug n3 takes that
    term, and its next election asks for 2^64, which no message can carry: after the heal it
    can neither campaign nor answer, so it never gets the indexes the others commit and the
    liveness leaf names it (``no-progress``). Cut off, it cannot hand the term on to the others
    (a wedge of the whole cluster commits nothing, so no index is left unheld). The
    correct-node control on the same seed and schedule is valid, commits, applies both faults,
    and n3 refused the out-of-range counters in its core."""
    import json
    from pathlib import Path

    steps = [(1.0, sch.op("start-partition", {"shape": "isolate", "node": "n3"})),
             (0.5, sch.op("start-hostile", {"interval_s": 0.5, "nodes": ["n3"]})),
             (3.0, sch.op("stop-hostile")),
             (0.5, sch.op("stop-partition"))]
    res = chaos_run(partial(gf, "bug-no-term-bound", nodes=3, schedule=steps, time_limit=12,
                            seed=3, bugs=["no-term-bound"]),
                    expect="liveness", anomaly="no-progress", min_ok=MIN_OK_PER_S * 12)
    leaf = res.result.find("liveness")
    assert {a.witness["node"] for a in leaf.anomalies} == {"n3"}, leaf.anomalies[:3]
    runs = [Path(v) for k, v in request.node.user_properties if k == "run_dir"]
    assert len(runs) == 2 and runs[0] == res.run_dir.path, runs
    for run, control in zip(runs, (False, True), strict=True):
        hostile = json.loads((run / "test.json").read_text())["hostile"]
        print(f"{run.name}: sent (refused) " + ", ".join(
            f"{n} {h['sent']} ({h['refused']})" for n, h in hostile.items()))
        assert [n for n, h in hostile.items() if h["sent"]] == ["n3"], hostile
        core = hostile["n3"]["refused"].get("core:counter-out-of-range", 0)
        assert (core > 0) == control, hostile["n3"]  # the buggy core refuses none
