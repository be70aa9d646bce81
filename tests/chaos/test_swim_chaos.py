"""SWIM chaos tests: real node processes on loopback, every datagram through the UDP relay.

Two are also ``smoke`` (bounded, run on every submission): a correct 5-node group under a
kill and 10% loss, and the ``no-refutation`` bug caught by the convergence check. The rest
are nightly (``pytest -m chaos``): 10- and 30-node groups, pauses, 30% loss, partitions and
heals, a member leaving, a member joining during a partition, capacity, each bug mode,
encryption with a key rotation mid-run and a wrong-key node.

Correct runs must apply every fault they request and show evidence in every leaf (SWIM's
only client ops are the clock-sync and planned leaves/joins, so ``min_ok`` counts those).
Each bug mode names the ``membership`` leaf that catches it; the plugin reruns the same seed
and schedule with correct nodes (the thresholds unchanged), where that leaf must be valid.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from faults import schedules as sch
from harness.cluster import open_cluster
from harness.nemesis_generator import from_schedule
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.swim import PROTOCOL
from nodes.swim.crypto import fingerprint, parse_key
from tests.waiting import eventually

FAST = {"period_s": 0.2, "probe_timeout_s": 0.1, "suspicion_mult": 4}
#: ok client ops of a run without planned leaves/joins: the clock-sync (SWIM has no others)
CLOCK_SYNC = 1


def swim_spec(name: str, nodes: int, steps: list[tuple[float, dict[str, Any]]], *,
              time_limit: float, options: dict[str, Any] | None = None,
              bugs: list[str] | None = None, quiesce_s: float = 3.0, seed: int = 3) -> TestSpec:
    return TestSpec(name=name, protocol=PROTOCOL, nodes=nodes, concurrency=nodes,
                    nemesis=from_schedule(sch.explicit(steps)) if steps else None,
                    nemesis_desc=",".join(o["f"] for _, o in steps) or "none",
                    time_limit=time_limit, quiesce_s=quiesce_s, bugs=list(bugs or []),
                    options={**FAST, **(options or {})}, seed=seed)


def op(f: str, value: Any = None) -> dict[str, Any]:
    return sch.op(f, value)


def figures(res: Any) -> dict[str, Any]:
    m = next(c for c in res.result.children if c.checker == "membership")
    return {c.checker: c.stats for c in m.children}


# ----------------------------------------------------------------------------- smoke


@pytest.mark.chaos
@pytest.mark.smoke
def test_swim_smoke_kill_and_loss(chaos_run: Any) -> None:
    spec = swim_spec("swim-smoke", 5, [
        (2.0, op("kill", {"node": "n3"})), (4.0, op("restart", {"node": "n3"})),
        (1.0, op("start-loss", {"p": 0.1})), (4.0, op("stop-loss")),
    ], time_limit=12, options={"swim_max_first_detection_periods": 4.0,
                               "swim_max_all_dead_s": 3.0})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    f = figures(res)
    assert f["completeness"]["judged"] == 1
    assert f["accuracy"]["false_positives"] == 0


@pytest.mark.chaos
@pytest.mark.smoke
def test_swim_smoke_bug_no_refutation(chaos_run: Any) -> None:
    """n4's 0.7 s pause gets it suspected; resumed, it cannot refute, so the suspicion ripens
    into a death and its peers' final views leave out a live member."""
    build = partial(swim_spec, "swim-smoke-bug", 5, [
        (2.0, op("pause", {"node": "n4"})), (0.7, op("resume", {"node": "n4"})),
    ], time_limit=7, bugs=["no-refutation"])
    chaos_run(build, expect="membership.convergence")


# ----------------------------------------------------------------------------- nightly


@pytest.mark.chaos
def test_swim_10_nodes_kills_pauses_partitions(chaos_run: Any) -> None:
    spec = swim_spec("swim-10", 10, [
        (2.0, op("kill", {"node": "n4"})), (5.0, op("restart", {"node": "n4"})),
        (2.0, op("pause", {"node": "n7"})), (0.6, op("resume", {"node": "n7"})),
        (2.0, op("start-partition", {"shape": "halves"})), (5.0, op("stop-partition")),
        (2.0, op("pause", {"node": "n2"})), (5.0, op("resume", {"node": "n2"})),
    ], time_limit=30, quiesce_s=5, options={"swim_max_first_detection_periods": 4.0})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_member_killed_for_good_is_dead_in_every_view(chaos_run: Any) -> None:
    """n3 killed for good (the final heal leaves it down, ``gone``): it owes no final view,
    and every survivor must end with it dead, not alive; its crash, lasting to the end, is
    judged for completeness."""
    spec = swim_spec("swim-gone", 5, [(2.0, op("kill", {"node": "n3", "for_good": True}))],
                     time_limit=10)
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert (res.run_dir.path / "nodes/n3/gone.json").is_file()
    f = figures(res)
    assert f["convergence"]["live"] == ["n1", "n2", "n4", "n5"]
    assert f["completeness"]["judged"] >= 1


@pytest.mark.chaos
def test_swim_partition_heals_with_a_join_token(chaos_run: Any) -> None:
    """Every JoinReq proves the token, reconnects across the healed cut included: they once
    went without it, were refused, and the halves never merged again. (The kill after the
    heal gives the dissemination leaf a death to measure: deaths across a cut are excused.)"""
    spec = swim_spec("swim-token", 6, [
        (2.0, op("start-partition", {"shape": "halves"})), (6.0, op("stop-partition")),
        (4.0, op("kill", {"node": "n3"})), (3.0, op("restart", {"node": "n3"})),
    ], time_limit=24, quiesce_s=5, options={"join_token": "s3cret-of-this-run"})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert len(figures(res)["convergence"]["live"]) == 6


@pytest.mark.chaos
def test_swim_30_nodes_kill_and_loss(chaos_run: Any) -> None:
    spec = swim_spec("swim-30", 30, [
        (3.0, op("kill", {"node": ["n5", "n17"]})), (8.0, op("restart")),
        (2.0, op("start-loss", {"p": 0.1})), (8.0, op("stop-loss")),
    ], time_limit=30, quiesce_s=6, options={"period_s": 0.5, "probe_timeout_s": 0.25,
                                            "swim_max_first_detection_periods": 4.0})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_heavy_loss_stays_accurate(chaos_run: Any) -> None:
    # 30% loss on every link: a round trip fails half the time. Indirect probes, the
    # accuser's nudges and direct refutation keep false deaths rare; the figure is reported.
    spec = swim_spec("swim-loss30", 5, [(2.0, op("start-loss", {"p": 0.3})),
                                        (20.0, op("stop-loss"))],
                     time_limit=24, options={"swim_max_fp_per_member_hour": 400})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert figures(res)["accuracy"]["false_suspicions"] > 0  # the fault really bit


@pytest.mark.chaos
def test_swim_leave_and_join_during_partition(chaos_run: Any) -> None:
    spec = swim_spec("swim-leave-join", 6, [
        (4.0, op("start-partition", {"shape": "explicit",
                                     "groups": [["n1", "n2", "n3"], ["n4", "n5", "n6"]]})),
        (6.0, op("stop-partition")),
    ], time_limit=18, quiesce_s=5,
        options={"swim_plan": [[2.0, "leave", "n6"], [3.0, "leave", "n5"],
                               [7.0, "join", "n5"]]})
    res = chaos_run(spec, min_ok=4)  # the clock-sync and the three planned leaves/joins
    assert figures(res)["convergence"]["live"] == ["n1", "n2", "n3", "n4", "n5"]


@pytest.mark.chaos
def test_swim_dynamic_member_joins_mid_run(chaos_run: Any) -> None:
    """n6 has no address in any other node's config (``late_unbooked``): started mid-run, it
    joins through n1 with the token's proof, every member books it from its own JoinReq, and
    the group converges on six (issue 25: members are not predetermined); n2, killed and
    restarted after, forgot it and is introduced to it again."""
    spec = swim_spec("swim-dynamic", 6, [(3.0, op("join", {"node": "n6"})),
                                         (4.0, op("kill", {"node": "n2"})),
                                         (3.0, op("restart", {"node": "n2"}))],
                     time_limit=16, quiesce_s=4,
                     options={"join_token": "s3cret-of-this-run", "dynamic_members": True,
                              "late_nodes": ["n6"], "late_unbooked": True})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert len(figures(res)["convergence"]["live"]) == 6
    for n in ("n1", "n2", "n3", "n4", "n5"):
        config = json.loads((res.run_dir.path / "nodes" / n / "config.json").read_text())
        assert "peer" not in config["peers"]["n6"]  # named, no address
        lines = (res.run_dir.path / "nodes" / n / "events.jsonl").read_text().splitlines()
        assert any(json.loads(x)["type"] == "introduced" for x in lines), n


@pytest.mark.chaos
def test_swim_capacity_respected(chaos_run: Any) -> None:
    spec = swim_spec("swim-capacity", 6, [(3.0, op("kill", {"node": "n6"})),
                                          (4.0, op("restart", {"node": "n6"}))],
                     time_limit=12, quiesce_s=4, options={"capacity": 3})
    chaos_run(spec, min_ok=CLOCK_SYNC)


@pytest.mark.chaos
def test_swim_bug_no_indirect_probes_caught(chaos_run: Any) -> None:
    """Without indirect probes a lost ping or ack is a suspicion: under 10% loss more false
    suspicions than the threshold, which correct nodes (the control) stay under."""
    build = partial(swim_spec, "swim-bug-indirect", 5, [(2.0, op("start-loss", {"p": 0.1})),
                                                       (15.0, op("stop-loss"))],
                    time_limit=18, bugs=["no-indirect-probes"],
                    options={"swim_max_false_suspicions_per_member_hour": 1000})
    chaos_run(build, expect="membership.accuracy")


@pytest.mark.chaos
def test_swim_bug_no_gossip_retransmit_caught(chaos_run: Any) -> None:
    # members still learn a joiner when it probes them (every message names its sender), so
    # the group converges; what the bug breaks is speed: a join takes ~n periods, not ~log n
    # (the control, correct nodes on the same start-up, spreads every join within 5 periods)
    build = partial(swim_spec, "swim-bug-gossip", 10, [], time_limit=12,
                    bugs=["no-gossip-retransmit"],
                    options={"period_s": 0.5, "probe_timeout_s": 0.25,
                             "swim_max_dissemination_periods": 5.0})
    chaos_run(build, expect="membership.dissemination")


@pytest.mark.chaos
def test_swim_bug_ignore_capacity_caught(chaos_run: Any) -> None:
    build = partial(swim_spec, "swim-bug-capacity", 6, [], time_limit=8, bugs=["ignore-capacity"],
                    options={"capacity": 2})
    chaos_run(build, expect="membership.convergence", anomaly="over-capacity")


@pytest.mark.chaos
def test_swim_bug_no_refutation_caught_under_loss(chaos_run: Any) -> None:
    """A member falsely suspected under 20% loss cannot refute: it is declared dead while
    alive, and the final views leave it out (convergence). Accuracy fires too, but a false
    death under heavy loss is something correct members may also do (the 30% loss test
    raises ``swim_max_fp_per_member_hour``); refuting, and so converging, is what the bug
    takes away."""
    build = partial(swim_spec, "swim-bug-refute-loss", 5, [(2.0, op("start-loss", {"p": 0.2})),
                                                          (10.0, op("stop-loss"))],
                    time_limit=14, bugs=["no-refutation"])
    chaos_run(build, expect="membership.convergence")


@pytest.mark.chaos
def test_swim_fault_free_ten_minutes_no_false_positive(chaos_run: Any) -> None:
    # the accuracy target: 10 members, memberlist's settings, 10 minutes, no faults
    spec = swim_spec("swim-quiet-10min", 10, [], time_limit=600, quiesce_s=5,
                     options={"period_s": 1.0, "probe_timeout_s": 0.5,
                              "swim_max_fp_per_member_hour": 0,
                              "swim_max_false_suspicions_per_member_hour": 0})
    res = chaos_run(spec, min_ok=CLOCK_SYNC)
    assert figures(res)["accuracy"]["member_hours"] > 1.6


@pytest.mark.chaos
def test_swim_bug_ignore_leave_caught(chaos_run: Any) -> None:
    """Members that drop Leave (and LEFT gossip) keep probing the leaver, suspect it and
    declare it dead: the leave leaf wants it recorded ``left``."""
    build = partial(swim_spec, "swim-bug-ignore-leave", 5, [], time_limit=8,
                    bugs=["ignore-leave"], options={"swim_plan": [[2.0, "leave", "n5"]]})
    chaos_run(build, expect="membership.leave", anomaly="dead-not-left", min_ok=2)


@pytest.mark.chaos
def test_swim_bug_never_suspect_paused_caught(chaos_run: Any) -> None:
    """A 3 s pause (several suspicion timeouts at 0.2 s periods) nobody suspects."""
    build = partial(swim_spec, "swim-bug-never-suspect", 5, [
        (2.0, op("pause", {"node": "n3"})), (3.0, op("resume", {"node": "n3"})),
    ], time_limit=8, bugs=["never-suspect-paused"])
    chaos_run(build, expect="membership.detection", anomaly="undetected-pause")


@pytest.mark.chaos
def test_swim_bug_unbounded_gossip_caught(chaos_run: Any) -> None:
    """Every update on every message: a member of 10 sends several times the bytes per
    period that correct members send (about 73 vs 280 bytes on the simulator)."""
    build = partial(swim_spec, "swim-bug-unbounded-gossip", 10, [], time_limit=10,
                    bugs=["unbounded-gossip"],
                    options={"swim_max_bytes_per_member_period": 150})
    chaos_run(build, expect="membership.cost", anomaly="dissemination-cost")


# ----------------------------------------------------------------------------- encryption

OLD_KEY, NEW_KEY = "0f" * 32, "a5" * 16  # AES-256 then AES-128: the ring takes both


def rotation(nodes: list[str], at: float, step_s: float) -> list[list[Any]]:
    """memberlist's rotation on every node: install the new key, make it primary once every
    node holds it, remove the old one once every node seals with the new."""
    return [[at + i * step_s, f, n, key] for i, (f, key) in enumerate(
        [("key-install", NEW_KEY), ("key-use", NEW_KEY), ("key-remove", OLD_KEY)])
        for n in nodes]


def refused(res: Any, nodes: list[str]) -> dict[str, int]:
    return {n: json.loads((res.run_dir.node_dir(n) / "state.json").read_text())
            ["stats"]["refused_decrypt"] for n in nodes}


@pytest.mark.chaos
def test_swim_encrypted_with_rotation_mid_run(chaos_run: Any) -> None:
    """Every datagram sealed; a partition around the rotation, then kills (a restarted node
    keeps the rotated ring from its keyring.json) and a pause. Correct nodes never refuse a
    datagram: each step reaches every node before the next. No node may be down during a key
    operation (it would miss it, as in memberlist); ``swim_plan`` times count from the
    cluster's start and the nemesis's from the workload's, which begins 5-10 s later on this
    machine, so the kills come well after the rotation's last step whatever the start-up."""
    nodes = [f"n{i}" for i in range(1, 6)]
    spec = swim_spec("swim-encrypted", 5, [
        (4.0, op("start-partition", {"shape": "halves"})), (6.0, op("stop-partition")),
        (3.0, op("kill", {"node": "n3"})), (1.5, op("restart", {"node": "n3"})),
        (2.0, op("kill", {"node": "n2"})), (1.5, op("restart", {"node": "n2"})),
        (1.0, op("pause", {"node": "n5"})), (0.6, op("resume", {"node": "n5"})),
    ], time_limit=26, quiesce_s=4,
        options={"keyring": [OLD_KEY], "swim_plan": rotation(nodes, 10.0, 1.5)})
    res = chaos_run(spec, min_ok=CLOCK_SYNC + 3 * len(nodes))
    assert len(figures(res)["convergence"]["live"]) == 5
    for n in nodes:
        st = json.loads((res.run_dir.node_dir(n) / "state.json").read_text())
        assert st["keys"] == [fingerprint(parse_key(NEW_KEY))], (n, st["keys"])
    assert refused(res, nodes) == dict.fromkeys(nodes, 0)


@pytest.mark.chaos
def test_swim_wrong_key_node_is_refused(tmp_path: Path) -> None:
    """n4 holds another key: its seed n1 refuses (and counts) its JoinReqs, and it never
    becomes a member anywhere while n1-n3 converge among themselves; given the group's key
    at run time (install, use), it joins."""
    spec = TestSpec(name="swim-wrong-key", protocol=PROTOCOL, nodes=4, seed=5,
                    store=str(tmp_path),
                    options={**FAST, "keyring": [OLD_KEY],
                             "node_keyrings": {"n4": [NEW_KEY]}})

    async def body() -> None:
        async with open_cluster(spec, new_run(spec.name, tmp_path)) as cl:
            async def states() -> dict[str, Any]:
                return {n: await cl.admin(n, "GET", "/admin/state") for n in cl.nodes}

            async def settled() -> bool:
                st = await states()
                good = ["n1", "n2", "n3"]
                return (all(st[n]["alive"] == sorted(set(good) - {n}) for n in good)
                        and st["n1"]["stats"]["refused_decrypt"] > 0)

            assert await eventually(settled, 20), {n: (s["alive"], s["joined"], s["stats"]) for n, s in (await states()).items()}
            await asyncio.sleep(2.0)  # and it stays out
            st = await states()
            assert st["n4"]["alive"] == [] and not st["n4"]["joined"], st["n4"]
            for n in ("n1", "n2", "n3"):
                assert "n4" not in [m["name"] for m in st[n]["members"]], st[n]["members"]
            # n1, n4's seed, refused every JoinReq; journaled once per period, not per datagram
            events = (await cl.admin("n1", "GET", "/admin/events"))["events"]
            logged = [e for e in events if e["type"] == "refused-decrypt"]
            assert 1 <= len(logged) < st["n1"]["stats"]["refused_decrypt"], logged
            assert sum(e["count"] for e in logged) <= st["n1"]["stats"]["refused_decrypt"]
            # the primary cannot be removed; a straggler given the group's key gets in
            async with aiohttp.ClientSession() as http:
                async def keys(n: str, op_: str, key: str) -> tuple[int, Any]:
                    async with http.post(cl.admin_url(n) + "/swim/keys",
                                         json={"op": op_, "key": key}) as r:
                        return r.status, await r.json()

                status, got = await keys("n1", "remove", OLD_KEY)
                assert status == 400 and "primary" in got["error"], got
                assert (await keys("n4", "install", OLD_KEY))[0] == 200
                assert (await keys("n4", "use", OLD_KEY))[1]["keys"][0] == \
                    fingerprint(parse_key(OLD_KEY))

            async def all_in() -> bool:
                st = await states()
                return all(st[n]["alive"] == sorted(set(cl.nodes) - {n}) for n in cl.nodes)

            assert await eventually(all_in, 20), {n: s["alive"] for n, s in
                                                  (await states()).items()}

    asyncio.run(body())
