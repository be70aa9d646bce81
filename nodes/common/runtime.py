"""The common ``main()`` of a node process: ``--config``, logging to stdout, SIGTERM.

A protocol supplies ``make_node(config) -> Node`` where ``Node`` has ``async start()``,
``async stop()``. SIGTERM/SIGINT stop the node cleanly (files flushed and closed); exit
code 0. A config error exits 2 with the message on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol

from nodes.common.config import ConfigError, NodeConfig, load_config


class Node(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


#: the event loops a node can run on (DRiP's option ``event_loop``; the others run asyncio's)
EVENT_LOOPS = ("asyncio", "uvloop")


def run(main: Coroutine[Any, Any, None], event_loop: str = "asyncio") -> None:
    """Run a node's main coroutine to its end on ``event_loop``. Why uvloop: libuv's loop
    and its TLS transport spend less CPU per socket event than asyncio's own, which a
    DRiP node under load pays for every lane frame and task (docs/drip.md "uvloop, session
    47": 10-20 % less CPU per committed update)."""
    if event_loop == "uvloop":
        import uvloop  # imported only when chosen: the other nodes never load it

        uvloop.run(main)
    elif event_loop == "asyncio":
        asyncio.run(main)
    else:
        main.close()
        raise ValueError(f"event loop {event_loop!r}: one of {', '.join(EVENT_LOOPS)}")


def setup_logging(node_id: str, level: str = "INFO") -> None:
    logging.basicConfig(
        stream=sys.stdout,
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s {node_id} %(levelname)s %(name)s: %(message)s",
        force=True,
    )


async def serve(node: Node) -> None:
    """Start ``node`` and run until SIGTERM/SIGINT, then stop it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    try:
        await stop.wait()
    finally:
        await node.stop()


def main(
    argv: list[str] | None,
    prog: str,
    known_bugs: Iterable[str],
    make_node: Callable[[NodeConfig], Node],
) -> int:
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--config", required=True, help="node config JSON (docs/contracts.md section 2)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, known_bugs)
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    setup_logging(cfg.id, str(cfg.options.get("log_level", "INFO")))
    logging.getLogger(prog).info("starting with bugs=%s", sorted(cfg.bugs))
    try:
        run(serve(make_node(cfg)))
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    return 0
