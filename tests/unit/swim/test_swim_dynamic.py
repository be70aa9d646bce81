"""Dynamic members (issue 25, item 5): a node outside the others' start-up address books
joins through a seed; every member books it from its own token-proven JoinReq."""

from __future__ import annotations

import dataclasses
import random

import pytest

from harness.sim.swim import SwimSim as Sim
from nodes.swim import codec as c
from nodes.swim import join_token
from nodes.swim.core import MAX_DYNAMIC, Options, SwimCore

SECRET = "s3cret"
DYN = Options(period_s=1.0, probe_timeout_s=0.5, suspicion_mult=4, join_token=SECRET,
              dynamic_members=True)


def test_a_sixth_node_outside_the_books_joins_mid_run_and_everyone_learns_it() -> None:
    s = Sim(5, DYN, seed=3, late=[6])
    s.run_for(8)
    assert s.converged(set(range(1, 6)))
    s.boot(6)
    s.run_for(10)
    assert s.converged(set(range(1, 7)))
    assert all(s.cores[i].addresses[6] == ("127.0.0.1", 10006) for i in range(1, 6))
    assert {e.node for e in s.of("introduced", member=6)} == {1, 2, 3, 4, 5}
    assert not s.of("dead") and not s.of("suspect")
    s.crash(2)  # a restart forgets what it booked: 6 introduces itself again
    s.run_for(3)
    s.restart(2)
    s.run_for(10)
    assert s.converged(set(range(1, 7)))
    assert len([e for e in s.of("introduced", member=6) if e.node == 2]) == 2
    s.crash(6)  # and it is then an ordinary member: its death is detected everywhere
    s.run_for(20)
    assert all(s.states(i)[6] == "dead" for i in range(1, 6))


def test_without_dynamic_members_the_stranger_stays_outside() -> None:
    s = Sim(5, dataclasses.replace(DYN, dynamic_members=False), seed=3, late=[6])
    s.run_for(8)
    s.boot(6)
    s.run_for(10)
    assert all(6 not in s.states(i) for i in range(1, 6))
    assert not [e for e in s.of("join-ok") if e.node == 6] and not s.of("introduced")
    assert s.cores[1].counters.refused["unknown-address"] > 0  # its JoinReqs, refused


def test_only_a_token_proven_join_req_books_a_stranger() -> None:
    seed = SwimCore(1, 0, {2: ("h", 2)}, [], DYN, random.Random(0))
    seed.start(0.0)
    addr = ("10.9.9.9", 7000)
    plain = c.JoinReq(c.NodeInfo(9, 0))
    assert seed.introduce(plain, addr) is None  # no proof
    wrong = join_token.signed("other", plain)
    assert seed.introduce(wrong, addr) is None  # another secret's proof
    assert seed.introduce(c.PingRequest(9, 1, 0), addr) is None  # only a JoinReq
    moved = join_token.signed(SECRET, c.JoinReq(c.NodeInfo(2, 0)))
    assert seed.introduce(moved, addr) is None  # a booked id is never moved
    assert seed.addresses[2] == ("h", 2) and 9 not in seed.addresses
    good = join_token.signed(SECRET, plain)
    assert seed.introduce(good, addr) == 9 and seed.addresses[9] == addr


def test_the_number_of_dynamic_members_is_bounded() -> None:
    seed = SwimCore(1, 0, {}, [], DYN, random.Random(0))
    seed.start(0.0)
    for x in range(100, 100 + MAX_DYNAMIC):
        assert seed.introduce(join_token.signed(SECRET, c.JoinReq(c.NodeInfo(x, 0))),
                              ("h", x)) == x
    assert seed.introduce(join_token.signed(SECRET, c.JoinReq(c.NodeInfo(5, 0))), ("h", 5)) \
        is None


def test_dynamic_members_need_a_join_token() -> None:
    with pytest.raises(ValueError, match="dynamic_members needs a join_token"):
        Options.from_dict({"dynamic_members": True})
