"""Fixtures for the docker and ssh backend tests: the real engine, the real sshd.

Without a Docker engine (or sshd) these tests skip with the set-up command to run; where
the environment promises them (``CI`` or ``HARNESS_REQUIRE_BACKENDS`` set), they fail
instead, so a missing install step cannot hide behind a skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the tests import their helpers as `backend_helpers`; make that work under any --import-mode
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend_helpers import sshd_available  # noqa: E402


def _missing(what: str) -> None:
    if os.environ.get("CI") or os.environ.get("HARNESS_REQUIRE_BACKENDS"):
        pytest.fail(what, pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """An engine that answers, and the node image built (once per machine)."""
    from harness.backends.base import BackendError
    from harness.backends.docker import connect
    from harness.backends.images.build import ensure_image

    try:
        client = connect(timeout_s=10)
    except BackendError as e:
        _missing(f"{e}")
    ensure_image(client)
    return client


@pytest.fixture
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real sshd on a loopback port, with its own host key and authorized key."""
    if not sshd_available():
        _missing("no /usr/sbin/sshd: run scripts/setup-sshd (apt-get install openssh-server)")
    from harness.backends.ssh import LoopbackSshd

    with LoopbackSshd(tmp_path_factory.mktemp("sshd")) as s:
        yield s
