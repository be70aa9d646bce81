"""Property: whatever datagrams arrive, in any order and at any time, the core never raises,
never lowers its own generation, never tracks itself, and keeps within its capacity."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.swim import codec as c
from nodes.swim.core import LIVE_STATES, Options, SwimCore

ids = st.integers(1, 6)
infos = st.builds(c.NodeInfo, ids, st.integers(0, 5))
updates = st.builds(c.Update, st.sampled_from(list(c.UpdateKind)), infos, ids)
payloads = st.builds(c.Payload, st.integers(0, 3), st.lists(updates, max_size=4).map(tuple),
                     st.lists(infos, max_size=3).map(tuple))
messages = st.one_of(
    st.builds(c.JoinReq, infos, st.sampled_from([b"", b"t"]), st.just(b""), payloads),
    st.builds(c.JoinAck, infos, payloads),
    st.builds(c.JoinNak, st.just(c.domain_tag("swim")), st.sampled_from([7115, 7116]),
              st.sampled_from(["", "t"])),
    st.builds(c.JoinRedirect, st.just(c.Address.of("127.0.0.1", 1)),
              st.just(c.domain_tag("swim")), st.just(7118),
              st.sampled_from(["node:2", "node:9", "x"])),
    st.builds(c.Leave, infos),
    st.builds(c.PingRequest, ids, ids, st.integers(0, 2), payloads),
    st.builds(c.PingResponse, ids, ids, st.integers(0, 2), payloads),
    st.builds(c.Broadcast, infos),
)
steps = st.lists(st.tuples(messages, st.one_of(st.none(), ids), st.floats(0, 2)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps, st.integers(0, 3), st.booleans())
def test_core_survives_any_datagrams(script, capacity, founder) -> None:
    addrs = {i: ("127.0.0.1", 1000 + i) for i in range(2, 7)}
    core = SwimCore(1, 0, addrs, [] if founder else [2], Options(capacity=capacity),
                    random.Random(0))
    now = 0.0
    core.start(now)
    gen = core.gen
    for msg, frm, dt in script:
        now += dt
        core.on_message(frm, msg, now)
        core.on_timer("tick", now)
        assert core.gen >= gen
        gen = core.gen
        assert 1 not in core.members
        live = [m for m in core.members.values() if m.state in LIVE_STATES]
        assert capacity == 0 or len(live) <= capacity
