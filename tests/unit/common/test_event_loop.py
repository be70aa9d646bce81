"""`nodes.common.runtime.run`: a node's main coroutine on the event loop its option names."""

from __future__ import annotations

import asyncio

import pytest

from nodes.common.config import ConfigError
from nodes.common.runtime import EVENT_LOOPS, run
from nodes.drip.server import Options


@pytest.mark.parametrize("name", EVENT_LOOPS)
def test_run_uses_the_named_loop(name: str) -> None:
    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    run(main(), name)
    assert seen == [name]


def test_an_unknown_loop_is_refused_and_its_coroutine_closed() -> None:
    async def main() -> None:
        raise AssertionError("must not run")

    coro = main()
    with pytest.raises(ValueError, match="one of asyncio, uvloop"):
        run(coro, "trio")
    assert coro.cr_frame is None  # closed: no "never awaited" warning


def test_drip_runs_uvloop_unless_told_and_refuses_other_names() -> None:
    assert Options().event_loop == "uvloop"
    assert Options.from_options({"event_loop": "asyncio"}).event_loop == "asyncio"
    with pytest.raises(ConfigError, match="options.event_loop 'trio'"):
        Options.from_options({"event_loop": "trio"})
