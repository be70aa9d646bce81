"""The ``sim`` marker: searches on the simulator, fast enough for every commit."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sim: a fault-schedule search on the simulator "
                                       "(harness sim); runs in the default test command")
