"""Fixtures every unit test may use."""

from __future__ import annotations

import pytest

from tests.unit.golden import Golden


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """``golden(result)``: assert a checker's whole output equals its stored copy."""
    return Golden(request.node.path.stem, request.node.name, request.node.nodeid)
