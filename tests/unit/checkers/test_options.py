"""Checkers read the options the nodes ran with, not only those the test gave."""

from __future__ import annotations

import pytest

from checkers import liveness
from checkers.options import option
from harness.spec import TestSpec
from harness.suites.garlicfarm import PROTOCOL


def test_node_options_are_the_protocols_defaults_under_the_tests_own() -> None:
    d = TestSpec("t", protocol=PROTOCOL, options={"heartbeat_ms": 40}).describe()
    assert d["options"] == {"heartbeat_ms": 40}
    assert d["node_options"] == {**PROTOCOL.default_options, "heartbeat_ms": 40}
    assert option(d, "heartbeat_ms") == 40
    assert option(d, "election_timeout_ms") == PROTOCOL.default_options["election_timeout_ms"]


def test_a_bound_follows_a_protocol_default_the_checker_does_not_know() -> None:
    """A record with node_options: the liveness bound uses what the nodes got; an older record
    (options only) falls back to the checker's own default."""
    new = {"options": {}, "node_options": {"election_timeout_ms": [1000, 2000],
                                           "heartbeat_ms": 100}}
    assert liveness.bound_of(new, "garlicfarm") == pytest.approx(3 * 2.0 + 4 * 0.1)
    assert liveness.bound_of({"options": {}}, "garlicfarm") == pytest.approx(3 * 0.6 + 4 * 0.075)
    assert option({"options": {"x": 1}}, "x") == 1 and option({}, "x", 7) == 7
