"""How many ops/s the runner records against a trivial in-process client.

Target (issue 3): at least 20,000 ops/s on the 2-core machine. Prints the figure; the run's
history is really written and flushed per op, as in a chaos run.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from checkers.result import Result
from harness import generators as g
from harness.runner import run
from harness.spec import TestSpec, Workload


class Noop:
    node = None

    def __init__(self, addr, process):
        pass

    async def invoke(self, op):
        return {"type": "ok", "value": op.get("value")}

    async def close(self):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--concurrency", type=int, default=10)
    a = ap.parse_args()
    wl = Workload(client=Noop,
                  generator=lambda s: g.limit(a.ops, g.mix(g.repeat({"f": "read", "value": None}),
                                                          g.repeat({"f": "write", "value": 1}))),
                  checkers={"none": lambda t, h, o: Result("none", True)})
    with tempfile.TemporaryDirectory() as d:
        spec = TestSpec(name="bench-runner", workload=wl, concurrency=a.concurrency, seed=1,
                        time_limit=600, store=d)
        t0 = time.perf_counter()
        r = run(spec)
        dt = time.perf_counter() - t0
    print(f"runner: {a.ops} ops ({r.ops} history records, {a.concurrency} processes) "
          f"in {dt:.2f} s = {a.ops / dt:,.0f} ops/s (target >= 20,000)")


if __name__ == "__main__":
    main()
