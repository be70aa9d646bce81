"""Lifeguard-style suspicion, probe order and local stalls, driven by hand-made sequences on
one `SwimCore` (no simulator): which member we probe, whose pings we answer and which
confirmations arrive when are all chosen by the test."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from nodes.swim import codec as c
from nodes.swim.codec import NodeInfo, Update, UpdateKind
from nodes.swim.core import Emit, Options, Send, State, SwimCore

OPTS = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4, suspicion_min_mult=2,
               suspicion_k=2)
HI, LO = 4.0, 2.0  # n <= 10: max(1, log10 n) = 1
ONE_CONFIRMATION = HI - (HI - LO) * math.log(2) / math.log(3)


class Node:
    """Member 1 of a group 1..n, every other member alive at generation 0; the test
    decides which of them answer our probes."""

    def __init__(self, n: int = 10, opts: Options = OPTS, seed: int = 0) -> None:
        self.core = SwimCore(1, 0, {i: ("127.0.0.1", 1000 + i) for i in range(2, n + 1)}, [],
                             opts, random.Random(seed))
        self.now = 0.0
        self.victim: int | None = None
        self.effects = list(self.core.start(0.0))
        self.deliver(2, c.PingRequest(2, 1, 0, c.Payload(0, (), tuple(
            NodeInfo(i, 0) for i in range(2, n + 1)))), at=0.1)
        assert self.core.n == n

    def deliver(self, frm: int, msg: c.Message, at: float | None = None) -> None:
        if at is not None:
            self.now = at
        self.effects += self.core.on_message(frm, msg, self.now)

    def run_until(self, t: float, answers: Callable[[int], bool] = lambda _m: True,
                  step: float = 0.01) -> None:
        """Advance time, answering our probes of every member ``answers`` approves."""
        start, steps = self.now, max(1, math.ceil((t - self.now) / step - 1e-9))
        for i in range(1, steps + 1):
            self.now = t if i == steps else start + i * step
            out = self.core.on_timer("tick", self.now)
            self.effects += out
            for e in out:
                if (isinstance(e, Send) and isinstance(e.msg, c.PingRequest) and e.msg.ttl == 0
                        and e.msg.target == e.to and e.msg.payload.seq and answers(e.to)):
                    self.deliver(e.to, c.PingResponse(1, e.to, 0, c.Payload(
                        e.msg.payload.seq, (), (NodeInfo(e.to, 0),))))

    def events(self, type_: str, **match: object) -> list[dict[str, object]]:
        return [e.fields for e in self.effects if isinstance(e, Emit) and e.type == type_
                and all(e.fields.get(k) == v for k, v in match.items())]

    def state(self, m: int) -> State:
        return self.core.members[m].state

    def suspect_note(self, about: int, by: int, gen: int = 0) -> c.PingRequest:
        """A one-way gossip ping from ``by`` saying it suspects ``about`` itself."""
        return c.PingRequest(by, 1, 0, c.Payload(0, (Update(UpdateKind.SUSPECT,
                                                           NodeInfo(about, gen), by),)))

    def first_probe_fails(self) -> tuple[int, float]:
        """Let the member our first probe goes to stay silent: returns it and the time our
        suspicion of it started (the end of that probe's period)."""
        self.run_until(1.0, answers=lambda _m: False)  # the first probe goes out at 1.0
        victim = self.victim = self.core._probe.target  # type: ignore[union-attr]
        self.run_silent(2.0)
        assert self.events("suspect", member=victim, local=True)
        return victim, self.now

    def run_silent(self, t: float) -> None:
        """``run_until`` with the member of ``first_probe_fails`` never answering."""
        self.run_until(t, answers=lambda m: m != self.victim)


def test_timeout_formula() -> None:
    core = Node(10).core
    assert core.suspicion_timeout() == pytest.approx(HI)
    assert core.suspicion_timeout(1) == pytest.approx(ONE_CONFIRMATION)
    assert core.suspicion_timeout(2) == pytest.approx(LO)
    assert core.suspicion_timeout(7) == pytest.approx(LO)  # never below the minimum
    big = Node(30).core
    assert big.suspicion_timeout() == pytest.approx(4 * math.log10(30))
    assert big.suspicion_timeout(2) == pytest.approx(2 * math.log10(30))
    # k is capped by who could confirm: in 3 members only one other can
    assert Node(3).core.suspicion_timeout(1) == pytest.approx(LO)
    # ... and with nobody able to confirm, a suspicion always waits the maximum
    assert Node(2).core.suspicion_timeout(5) == pytest.approx(HI)


def test_lone_suspicion_waits_the_full_time() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.run_silent(t0 + HI - 0.05)
    assert node.state(victim) is State.SUSPECT  # long past the minimum: no one confirmed
    node.run_silent(t0 + HI + 0.02)
    assert node.state(victim) is State.DEAD
    (dead,) = node.events("dead", member=victim, local=True)
    assert dead["confirmations"] == 0


def test_confirmations_shrink_the_timeout_logarithmically() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.run_silent(t0 + 0.5)
    node.deliver(3, node.suspect_note(victim, by=3))
    assert node.core.members[victim].suspect_deadline == pytest.approx(t0 + ONE_CONFIRMATION)
    node.run_silent(t0 + 1.2)
    node.deliver(4, node.suspect_note(victim, by=4))
    assert node.core.members[victim].suspect_deadline == pytest.approx(t0 + LO)
    node.run_silent(t0 + LO - 0.05)
    assert node.state(victim) is State.SUSPECT
    node.run_silent(t0 + LO + 0.02)
    assert node.state(victim) is State.DEAD
    assert node.events("dead", member=victim, local=True)[0]["confirmations"] == 2
    assert [e["confirmations"] for e in node.events("suspect-confirmation")] == [1, 2]
    # the verdict went straight to every other member
    told = {e.to for e in node.effects if isinstance(e, Send) and any(
        u.kind is UpdateKind.DEAD and u.node.id == victim for u in e.msg.payload.updates)}
    assert told >= set(range(2, 11)) - {victim}


def test_a_late_confirmation_kills_at_once() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.run_silent(t0 + 2.9)
    node.deliver(3, node.suspect_note(victim, by=3))  # deadline t0 + 2.74: already past
    node.run_silent(t0 + 2.91)
    assert node.state(victim) is State.DEAD


def test_confirmations_count_distinct_independent_suspecters_only() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.run_silent(t0 + 0.2)
    node.deliver(3, node.suspect_note(victim, by=3))
    node.deliver(3, node.suspect_note(victim, by=3))  # the same member again
    node.deliver(5, node.suspect_note(victim, by=3))  # its suspicion relayed by another
    node.deliver(6, node.suspect_note(victim, by=1))  # our own suspicion coming back
    node.deliver(victim, node.suspect_note(victim, by=victim))  # the suspect "confirming"
    other = next(i for i in (9, 10) if i != victim)
    node.deliver(7, c.PingRequest(7, 1, 0, c.Payload(0, (Update(  # relayed by 7: counts
        UpdateKind.SUSPECT, NodeInfo(victim, 0), other),), ())))
    m = node.core.members[victim]
    assert m.suspecters == {3, other}
    node.run_silent(t0 + 0.3)
    # a suspicion at an older generation than we hold is no confirmation
    node.deliver(9, c.PingRequest(9, 1, 0, c.Payload(0, (Update(
        UpdateKind.ALIVE, NodeInfo(victim, 1), victim),), ())))
    assert node.state(victim) is State.ALIVE
    node.deliver(4, node.suspect_note(victim, by=4, gen=0))
    assert node.state(victim) is State.ALIVE and not m.suspecters


def test_refutation_resets_the_confirmations() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.deliver(3, node.suspect_note(victim, by=3))
    node.deliver(4, node.suspect_note(victim, by=4))
    node.deliver(victim, c.PingRequest(victim, 1, 0, c.Payload(0, (Update(
        UpdateKind.ALIVE, NodeInfo(victim, 1), victim),), ())))
    assert node.state(victim) is State.ALIVE
    # a fresh suspicion at the new generation starts from a lone one again
    node.deliver(3, node.suspect_note(victim, by=3, gen=1))
    assert node.state(victim) is State.SUSPECT
    m = node.core.members[victim]
    assert m.suspecters == {3} and m.suspect_deadline is None  # hearsay: not timed
    node.run_silent(t0 + 10)
    assert node.state(victim) is State.DEAD  # our own probe confirmed it, then it expired
    conf = node.events("suspect-confirmed", member=victim)
    assert conf and conf[0]["confirmations"] == 1


def test_hearsay_is_probed_next_and_our_failure_confirms_it_to_the_accuser() -> None:
    node = Node(10)
    node.run_until(0.5)
    node.deliver(3, node.suspect_note(7, by=3))
    assert node.state(7) is State.SUSPECT
    assert node.core.members[7].suspect_deadline is None  # hearsay never kills alone
    node.run_until(1.0, answers=lambda m: m != 7)
    assert node.core._probe is not None and node.core._probe.target == 7  # probed first
    node.run_until(2.0, answers=lambda m: m != 7)
    (conf,) = node.events("suspect-confirmed", member=7)
    assert conf["confirmations"] == 1
    assert node.core.members[7].suspect_deadline == pytest.approx(2.0 + ONE_CONFIRMATION)
    to_accuser = [e for e in node.effects if isinstance(e, Send) and e.to == 3 and any(
        u.kind is UpdateKind.SUSPECT and u.node.id == 7 and u.origin == 1
        for u in e.msg.payload.updates)]
    assert to_accuser  # our suspicion, with us as origin: a confirmation for its timer


def test_hearsay_cleared_by_our_probe_never_times() -> None:
    node = Node(10)
    node.run_until(0.5)
    node.deliver(3, node.suspect_note(7, by=3))
    node.run_until(20.0)  # 7 answers (and would refute the notice our probe carries)
    assert not node.events("dead", member=7)
    assert not node.events("suspect-confirmed", member=7)


def test_local_suspicion_asks_indirect_k_members_for_confirmation() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    asked = {e.to for e in node.effects if isinstance(e, Send) and e.msg.payload.seq == 0
             and any(u.kind is UpdateKind.SUSPECT and u.node.id == victim and u.origin == 1
                     for u in e.msg.payload.updates)}
    assert len(asked) == OPTS.indirect_k and victim not in asked


def test_a_local_stall_makes_the_probe_inconclusive() -> None:
    node = Node(10)
    node.run_until(1.0, answers=lambda _m: False)
    victim = node.core._probe.target  # type: ignore[union-attr]
    # our process stops right after sending the probe and runs again 3 s later: the answer
    # never got read in time, which says nothing about the member
    node.now = 4.2
    node.effects += node.core.on_timer("tick", node.now)
    assert node.events("stall")
    assert not node.events("suspect", member=victim)
    assert node.core.counters.probes_inconclusive == 1


def test_a_stall_postpones_an_expired_suspicion_by_one_probe_timeout() -> None:
    node = Node(10)
    victim, t0 = node.first_probe_fails()
    node.now = t0 + HI + 3  # stopped across the deadline
    node.effects += node.core.on_timer("tick", node.now)
    assert node.state(victim) is State.SUSPECT
    # a buffered refutation read now still saves it
    node.deliver(victim, c.PingRequest(victim, 1, 0, c.Payload(0, (Update(
        UpdateKind.ALIVE, NodeInfo(victim, 1), victim),), ())))
    node.run_until(node.now + 1.0)
    assert node.state(victim) is State.ALIVE


def test_stalest_order_skips_members_we_just_heard_from() -> None:
    node = Node(4)
    node.run_until(0.9)
    for m in (2, 3):  # 2 and 3 probe us; 4 only sends one-way gossip (seq 0)
        node.deliver(m, c.PingRequest(m, 1, 0, c.Payload(7, (), ())), at=0.9)
    node.deliver(4, c.PingRequest(4, 1, 0, c.Payload(0, (), ())), at=0.9)
    node.run_until(1.0)
    assert node.core._probe is not None and node.core._probe.target == 4


def test_stalest_order_probes_everyone_within_n_minus_1_periods() -> None:
    node = Node(10, seed=3)
    targets = []
    for p in range(1, 10):
        node.run_until(float(p))
        targets.append(node.core._probe.target)  # type: ignore[union-attr]
    assert sorted(targets) == list(range(2, 11))


def test_options_validation() -> None:
    with pytest.raises(ValueError):
        Options.from_dict({"suspicion_min_mult": 5})
    with pytest.raises(ValueError):
        Options.from_dict({"probe_order": "random"})
    assert Options.from_dict({"probe_order": "round-robin"}).probe_order == "round-robin"


# ------------------------------------------------------------------ whole groups (simulated)


def test_ten_members_all_dead_well_under_memberlist() -> None:
    from harness.sim.swim import SwimSim as Sim

    whole, alls = [], []
    for seed in range(12):
        s = Sim(10, OPTS, seed=seed)
        s.run_for(10)
        victim = 2 + seed % 9
        s.run_for(random.Random(seed).uniform(0, 1))
        t0 = s.now
        s.crash(victim)
        s.run_for(15)
        acc = min(e.t for e in s.of("suspect", member=victim, local=True))
        dead_by = {e.node: e.t for e in s.of("dead", member=victim)}
        assert set(dead_by) == set(s.ids) - {victim}
        whole.append(math.floor(acc - t0 + 1e-9))
        alls.append(max(dead_by.values()) - t0)
        assert len(s.of("dead", member=victim, local=True)) >= 1
    assert sum(alls) / len(alls) < 4.5  # memberlist: 6.0 s with the same settings
    assert sum(whole) / len(whole) < 1.58  # the SWIM paper's e/(e-1)


def test_a_short_pause_is_not_a_death_and_a_long_one_is_refuted() -> None:
    from harness.sim.swim import SwimSim as Sim

    s = Sim(10, OPTS, seed=3)  # a seed whose schedule probes 5 within the short pause
    s.run_for(10)
    s.pause(5)
    s.run_for(2.0)  # suspected, confirmed, but back before even the minimum runs out
    s.resume(5)
    s.run_for(10)
    assert s.of("suspect", member=5) and not s.of("dead", member=5)
    assert s.converged()
    s.pause(5)
    s.run_for(8.0)  # confirmed everywhere: dead after about the minimum
    assert s.of("dead", member=5, local=True)
    s.resume(5)
    s.run_for(15)
    assert s.converged() and s.of("refute")


def test_a_one_way_cut_is_a_lone_suspicion_and_waits_the_full_time() -> None:
    from harness.sim.swim import SwimSim as Sim

    s = Sim(10, OPTS, seed=4, bugs=("no-indirect-probes",))
    s.run_for(10)
    s.net.cut |= {(1, 2)}  # 1's datagrams to 2 vanish: 2's probes of 1 go unanswered
    s.run_for(30)
    assert s.of("suspect", member=1, by=2, local=True)  # only 2 can suspect 1
    assert not s.of("suspect-confirmation", member=1)  # nobody else can confirm it
    for d in s.of("dead", member=1, local=True):
        assert d["confirmations"] == 0
    for d in [e for e in s.events if e.type == "dead" and e.fields.get("member") == 1
              and e.fields.get("local")]:  # never sooner than the maximum
        start = max(e.t for e in s.events if e.type == "suspect" and e.node == d.node
                    and e.fields.get("member") == 1 and e.t <= d.t)
        assert d.t - start >= HI - 1e-6
