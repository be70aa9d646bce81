"""The Garlic Farm hostile driver's own bookkeeping (nodes/garlicfarm/hostile_driver.py): whom
it poses as, what it reads from a node's state. Its sends are tested against real nodes in
tests/integration/garlicfarm/test_gf_hostile.py."""

from __future__ import annotations

import random

import pytest

from faults.hostile import Target
from nodes.garlicfarm.hostile_driver import driver, refusals


def _configs(join: set[str] = frozenset()) -> dict[str, dict]:
    return {f"n{i}": {"num_id": i, "options": {"tls": False, "password": "pw",
                                                **({"join": True} if f"n{i}" in join else {})}}
            for i in (1, 2, 3)}


def test_the_driver_poses_only_as_initial_members_with_their_credentials() -> None:
    targets = [Target(f"n{i}", i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)]
    d = driver(targets, random.Random(1), _configs(join={"n3"}))
    assert sorted(d.members) == [1, 2]  # n3 starts outside the cluster: attacked, not posed as
    assert [t.node for t in d.targets] == ["n1", "n2", "n3"]
    assert d.members[1].password == "pw" and d.members[1].ctx is None  # tls: false
    assert d.rate == 200.0 and d.takes_skip
    with pytest.raises(ValueError, match="no initial member"):
        driver(targets, random.Random(1), _configs(join={"n1", "n2", "n3"}))


def test_refusals_name_the_core_and_the_wire_apart() -> None:
    state = {"refused": {"counter-out-of-range": 3},
             "wire_refused": {"digest-refused": 2, "bad-frame": 1}, "term": 4}
    assert refusals(state) == {"core:counter-out-of-range": 3, "wire:bad-frame": 1,
                               "wire:digest-refused": 2}
    assert refusals({}) == {}
