"""A node's clock rate as a real fault: the node process runs under libfaketime.

Why libfaketime (Jepsen's choice too) and not a node-side option: every clock the process
reads (``time.monotonic``, ``time.time``, asyncio's timers and sleeps, any C library) runs at
the faked rate, as on a machine whose oscillator is off; a node-side rate would reach only the
clocks the node's code asks through `nodes.common.clock.Clock`, and no ``--node-command``
implementation.

How: the node starts with ``LD_PRELOAD`` = libfaketime and ``FAKETIME_TIMESTAMP_FILE`` = its
own rate file (``+0 x1``); the ``clock-rate`` nemesis op rewrites that file (``+0 x2``).
``FAKETIME_NO_CACHE`` makes the process read it on every clock read (about 14 µs each, so
only a run that plans a rate fault pays it) and ``FAKETIME_XRESET`` makes a rate change go on
from the time read then: measured on libfaketime 0.9.10, without it a change from x2 to x0.5
moves ``time.monotonic()`` back by a second. The file outlives the process, so a restarted
node comes back at the same rate (the clock is the machine's). A calendar step is the
separate ``clock-skew`` op (the node's own offset): libfaketime's offset moves its monotonic
clock too, and ``FAKETIME_XRESET`` ignores a changed offset.
"""

from __future__ import annotations

import os
from pathlib import Path

#: where Debian/Ubuntu's ``libfaketime`` package puts the library (the first that exists wins;
#: ``HARNESS_LIBFAKETIME`` names another)
LIBRARY_PATHS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
#: the rate file, in the node's run directory
RATE_FILE = "faketime.rc"


class ClockRateError(Exception):
    """libfaketime is missing, or the backend cannot preload it."""


def library() -> str:
    """The libfaketime shared object to preload, or a ClockRateError saying how to get it."""
    given = os.environ.get("HARNESS_LIBFAKETIME")
    for path in ((given,) if given else LIBRARY_PATHS):
        if Path(path).is_file():
            return path
    where = f"HARNESS_LIBFAKETIME={given} is no file" if given else \
        f"none of {', '.join(LIBRARY_PATHS)} exists"
    raise ClockRateError(f"a clock-rate fault needs libfaketime ({where}): run "
                         "scripts/setup-faketime (Debian: apt-get install libfaketime), or set "
                         "HARNESS_LIBFAKETIME to its libfaketime.so.1")


def spec_line(rate: float) -> str:
    if not rate > 0:
        raise ValueError(f"a clock rate must be positive, got {rate}")
    return f"+0 x{rate:g}\n"


def set_rate(rate_file: Path, rate: float) -> None:
    """From now on the node reading ``rate_file`` runs its clocks at ``rate`` (atomically: the
    process never reads half a line)."""
    tmp = rate_file.with_name(rate_file.name + ".tmp")
    tmp.write_text(spec_line(rate))
    os.replace(tmp, rate_file)


def node_env(rate_file: Path) -> dict[str, str]:
    """The environment that starts a node under libfaketime reading ``rate_file`` (written at
    rate 1 when absent, so a restart keeps the rate it had)."""
    lib = library()
    if not rate_file.exists():
        rate_file.parent.mkdir(parents=True, exist_ok=True)
        set_rate(rate_file, 1.0)
    preload = os.environ.get("LD_PRELOAD")
    return {"LD_PRELOAD": f"{lib}:{preload}" if preload else lib,
            "FAKETIME_TIMESTAMP_FILE": str(rate_file), "FAKETIME_NO_CACHE": "1",
            "FAKETIME_XRESET": "1"}


def forget(pid: int) -> None:
    """Remove what libfaketime left in /dev/shm for process ``pid`` (its shared-memory
    segment and semaphore): a killed node never unlinks them itself."""
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        Path("/dev/shm", name).unlink(missing_ok=True)
