"""Hypothesis searches fault schedules (partitions, crashes, client load) for Raft safety bugs."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.garlicfarm import core as C
from nodes.garlicfarm.codec import LogEntry, MsgType, Request, ValueType
from tests.unit.garlicfarm.simnet import Net, restart

IDS = [1, 2, 3, 4, 5]

action = st.one_of(
    st.tuples(st.just("run"), st.floats(0.05, 1.0)),
    st.tuples(st.just("write"), st.sampled_from(IDS)),
    st.tuples(st.just("partition"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("heal"), st.none()),
    st.tuples(st.just("restart"), st.sampled_from(IDS)),
)


def check_safety(net: Net, terms_leaders: dict, committed: dict):
    for i, n in net.nodes.items():
        c = n.core
        if c.role == C.Role.LEADER:
            assert terms_leaders.setdefault(c.term, i) == i, f"two leaders in term {c.term}"
        for idx, e in n.applied:
            prev = committed.setdefault(idx, e)
            assert prev == e, f"node {i} applied a different entry at {idx}"


@settings(max_examples=25, deadline=None)
@given(st.lists(action, min_size=5, max_size=25), st.integers(0, 10**6))
def test_raft_safety_under_random_faults(actions, seed):
    net = Net(IDS, seed=seed)
    terms_leaders: dict = {}
    committed: dict = {}
    acked: dict[int, bytes] = {}
    counter = 0
    for kind, arg in actions:
        if kind == "run":
            end = net.now + arg
            while net.now < end:
                net.step(0.02)
                check_safety(net, terms_leaders, committed)
        elif kind == "write":
            counter += 1
            v = json.dumps({"w": counter}).encode()
            tok = ("client", counter)
            req = Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=(LogEntry(0, ValueType.APPLICATION, v),))
            net.run(arg, net.nodes[arg].core.on_request(req, tok, net.now))
            acked[counter] = v
        elif kind == "partition":
            net.partition(set(arg), set(IDS) - set(arg))
        elif kind == "heal":
            net.heal()
        elif kind == "restart":
            restart(net, arg)
        check_safety(net, terms_leaders, committed)
    net.heal()
    net.run_for(4)
    check_safety(net, terms_leaders, committed)
    # every acknowledged write is committed, at the index the leader told the client
    for (_, k), r in net.replies.items():
        if r is not None and r.accepted:
            assert committed[r.next_index - 1].value == acked[k]
    # liveness after healing: everyone converges on the same committed prefix
    lead = net.wait_leader()
    top = net.nodes[lead].core.commit
    net.run_for(1)
    for n in net.nodes.values():
        assert n.core.commit >= top
