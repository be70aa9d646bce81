"""Hypothesis searches send / loss / partition / time sequences on the simulated network for
one that breaks an SDS invariant: logs sorted by (Lamport, id), no duplicates, causal
delivery at every step, and identical complete logs once the network heals."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from harness.sim.sds import SdsSim
from nodes.sds.core import SdsOptions

NODES = ["a", "b", "c", "d"]
FAST = SdsOptions(resend_unacked_ms=300, resend_possibly_ms=900, sync_interval_ms=300,
                  t_min_ms=100, t_max_ms=600)


class SdsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.net = SdsSim(NODES, FAST, seed=1, jitter_ms=20)
        self.sent: set[str] = set()
        self.n = 0
        self.have: dict[str, set[str]] = {n: set() for n in NODES}
        self.checked = 0

    @invariant()
    def causal_delivery(self) -> None:
        """Every entry entered a log after the entries its causal history names."""
        for e in self.net.events[self.checked:]:
            if e.type in ("send", "deliver"):
                missing = [d for d in e.fields["deps"] if d not in self.have[e.node]]
                assert not missing, f"{e.node} delivered {e.fields['id'][:8]} before {missing}"
                self.have[e.node].add(e.fields["id"])
        self.checked = len(self.net.events)

    @rule(node=st.sampled_from(NODES))
    def send(self, node: str) -> None:
        self.n += 1
        self.sent.add(self.net.send(node, f"{node}:{self.n}:h"))

    @rule(ms=st.integers(1, 400))
    def run(self, ms: int) -> None:
        self.net.run_ms(ms)

    @rule(p=st.sampled_from([0.0, 0.1, 0.3, 0.6]))
    def loss(self, p: float) -> None:
        self.net.loss = p

    @rule(a=st.sampled_from(NODES), b=st.sampled_from(NODES))
    def cut(self, a: str, b: str) -> None:
        if a != b:
            self.net.partition([a], [b])

    @rule()
    def heal(self) -> None:
        self.net.heal()

    @invariant()
    def logs_sorted_without_duplicates(self) -> None:
        for n, c in self.net.cores.items():
            keys = [(m.lamport_timestamp, m.message_id) for m in c.ordered_log()]
            assert keys == sorted(keys) and len(set(keys)) == len(keys), n

    def teardown(self) -> None:
        self.net.heal()
        self.net.loss = 0.0
        self.net.run_ms(20_000)
        logs = self.net.logs()
        for n, log in logs.items():
            assert set(log) == self.sent, f"{n} lacks {len(self.sent - set(log))} messages"
            assert log == logs[NODES[0]]


TestSds = SdsMachine.TestCase
TestSds.settings = settings(max_examples=15, stateful_step_count=25, deadline=None)
