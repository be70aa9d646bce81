"""Hypothesis searches fault schedules (partitions, crashes, client load) for Raft safety bugs."""

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.sim.garlicfarm import GfSim, app_entry
from nodes.garlicfarm import raft as R
from nodes.garlicfarm.codec import MsgType, Request

IDS = [1, 2, 3, 4, 5]

action = st.one_of(
    st.tuples(st.just("run"), st.floats(0.05, 1.0)),
    st.tuples(st.just("write"), st.sampled_from(IDS)),
    st.tuples(st.just("partition"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("heal"), st.none()),
    st.tuples(st.just("restart"), st.sampled_from(IDS)),
)


def check_safety(sim: GfSim, terms_leaders: dict, committed: dict, seen: list) -> None:
    for i in sim.ids:
        c = sim.raft(i)
        if c.role == R.Role.LEADER:
            assert terms_leaders.setdefault(c.term, i) == i, f"two leaders in term {c.term}"
    new, seen[0] = sim.of("apply")[seen[0]:], len(sim.of("apply"))
    for e in new:
        prev = committed.setdefault(e.fields["index"], e.fields["digest"])
        assert prev == e.fields["digest"], f"node {e.node} applied a different entry at {e.fields['index']}"


@settings(max_examples=25, deadline=None)
@given(st.lists(action, min_size=5, max_size=25), st.integers(0, 10**6))
def test_raft_safety_under_random_faults(actions, seed):
    sim = GfSim(IDS, seed=seed)
    terms_leaders: dict = {}
    committed: dict = {}
    seen = [0]
    acked: dict[int, str] = {}
    for kind, arg in actions:
        if kind == "run":
            end = sim.now + arg
            while sim.now < end:
                sim.run_for(0.02)
                check_safety(sim, terms_leaders, committed, seen)
        elif kind == "write":
            v = f"w{len(acked)}"
            acked[sim.client_request(arg, Request(MsgType.CLIENT_REQUEST, 0, 0, 0,
                                                  entries=(app_entry(v),)))] = v
        elif kind == "partition":
            sim.partition(set(arg), set(IDS) - set(arg))
        elif kind == "heal":
            sim.heal()
        elif kind == "restart":
            sim.restart(arg)
            sim.run_until(sim.now)
        check_safety(sim, terms_leaders, committed, seen)
    sim.heal()
    sim.run_for(4)
    check_safety(sim, terms_leaders, committed, seen)
    # every acknowledged write is committed, at the index the leader told the client
    applied = {e.fields["index"]: e.fields["data"] for e in sim.of("apply")}
    for tok, v in acked.items():
        r = sim.replies.get(tok)
        if r is not None and r.accepted:
            assert applied[r.next_index - 1] == v
    # liveness after healing: everyone converges on the same committed prefix
    lead = sim.wait_leader()
    top = sim.raft(lead).commit
    sim.run_for(1)
    for i in sim.ids:
        assert sim.raft(i).commit >= top
