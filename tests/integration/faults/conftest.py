"""Fixtures for fault tests against the real toxiproxy-server (started by our manager)."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.toxiproxy import ToxiproxyServer

# The tests import their helpers as `faults_helpers`; make that work under any --import-mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def toxiproxy() -> Iterator[ToxiproxyServer]:
    """One server for the session (or ``TOXIPROXY_URL``'s). A missing binary fails loudly
    with the bootstrap hint: these tests are the proof, so they must not silently skip."""
    with ToxiproxyServer.from_env() as server:
        yield server


@pytest.fixture
def prefix() -> str:
    """A run-specific proxy-name prefix, so tests never see each other's proxies."""
    return f"t{os.getpid()}-{next(_prefixes)}-"
