"""The six planted ordering violations of issue 24, each a core bug mode caught by its own
ordering leaf on the simulator (5 nodes, loss, duplication, jitter), with the correct core on
the same seed as the control: every leaf valid (``acked-not-lost`` has no client history
here) and, for SDS-R, the message reaches every live node."""

from __future__ import annotations

from typing import Any

import pytest

from checkers import ordering
from harness.sim.sds import SdsSim
from tests.unit.sds.test_sds_core import FAST

NAMES = [f"n{i}" for i in range(5)]


def bursts(bug: str | None, seed: int) -> SdsSim:
    """Each node in turn sends 30 messages in one millisecond (Lamport times run ahead of the
    wall clock), then every other node sends one right after receiving part of the burst."""
    net = SdsSim(NAMES, FAST, seed=seed, loss=0.1, dup=0.1, jitter_ms=5,
                 bugs={n: [bug] for n in NAMES} if bug else None)
    for r, burster in enumerate(NAMES):
        for j in range(30):
            net.send(burster, f"{burster}:{r}:{j}")
        net.run_ms(10)
        for n in NAMES:
            if n != burster:
                net.send(n, f"{n}:after:{r}")
        net.run_ms(40)
    net.run_ms(20_000)  # quiesce: the network is whole, resends and syncs settle
    return net


def sdsr_only(bug: str | None, seed: int) -> tuple[SdsSim, str]:
    """Only n1 gets n0's message, then n0 crashes for good: only SDS-R (n1 answering the
    others' repair requests for a dependency they hold back on) can heal."""
    net = SdsSim(NAMES, FAST, seed=seed, jitter_ms=5,
                 bugs={n: [bug] for n in NAMES} if bug else None)
    net.partition(NAMES[:2], NAMES[2:])
    mid = net.send("n0", "only n1 got this")
    net.run_ms(100)
    net.crash("n0")
    net.heal()
    for i in range(5):
        net.send("n1", f"n1 after {i}")
        net.run_ms(50)
    net.run_ms(20_000)
    return net, mid


def verdicts(net: SdsSim) -> dict[str, Any]:
    r = ordering.check({}, [], net.observations())
    return {c.checker: c for c in r.children}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("bug,leaf,kind", [
    ("no-lamport-update", "lamport-rules", "lamport-not-updated"),
    ("ties-descending-id", "log-order", "log-not-sorted"),
    ("empty-history", "causal-history", "empty-causal-history"),
    ("acks-ignored", "buffers-drain", "buffer-not-drained"),
    ("bloom-ignored", "buffers-drain", "buffer-not-drained"),
])
def test_a_bug_mode_is_caught_by_its_leaf_and_the_correct_core_is_valid(
        bug: str, leaf: str, kind: str, seed: int) -> None:
    bad = verdicts(bursts(bug, seed))[leaf]
    assert bad.valid is False and kind in {a.kind for a in bad.anomalies}, bad.explain()
    good = verdicts(bursts(None, seed))
    assert good.pop("acked-not-lost").valid == "unknown"  # no client history on the simulator
    for name, c in good.items():
        assert c.valid is True, (name, c.explain())


def test_no_lamport_update_logs_dependencies_after_their_dependents() -> None:
    assert verdicts(bursts("no-lamport-update", 0))["log-order"].valid is False


def test_acks_ignored_leaves_own_messages_in_the_outgoing_buffer() -> None:
    c = verdicts(bursts("acks-ignored", 0))["buffers-drain"]
    assert {a.witness["buffer"] for a in c.anomalies} == {"outgoing_buffer"}


@pytest.mark.parametrize("seed", [0, 1])
def test_sds_r_switched_off_leaves_a_crashed_senders_message_silently_absent(seed: int) -> None:
    net, mid = sdsr_only("no-repair", seed)
    c = verdicts(net)["same-set"]
    assert c.valid is False
    absent = {a.witness["node"] for a in c.anomalies if mid in a.witness.get("ids", [])}
    assert absent == {"n2", "n3", "n4"}
    net, mid = sdsr_only(None, seed)  # the control: n1 repairs the others
    assert all(mid in log for log in net.logs().values())
    # n0 has no final state: the leaves that need every state are unknown, none is violated
    assert all(c.valid is not False for c in verdicts(net).values())
