"""Bounded memory (issue 22 item 5): state that grew with load in a 15-minute soak stays
under a fixed size however many requests, events or calls a node sees."""

from __future__ import annotations

import json
import tracemalloc
import uuid

from nodes.garlicfarm.kv import KVStateMachine
from nodes.garlicfarm.server import CallPool


def test_kv_results_stay_under_one_megabyte_after_30000_requests():
    kv = KVStateMachine()
    tracemalloc.start()
    try:
        for i in range(30_000):
            op = json.loads(json.dumps({"kv": "cas", "key": f"k{i % 50}", "old": 1, "new": 2,
                                        "rid": uuid.uuid4().hex}))
            kv.apply(op)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000, f"KV holds {held / 1e6:.1f} MB after 30,000 requests"
    # the newest results (what the core reads right after applying a batch) are all kept
    last = kv.apply({"kv": "read", "key": "k1", "rid": "newest"})
    assert kv.results["newest"] == last


class _Conn:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_call_pool_keeps_at_most_cap_idle_connections_per_peer():
    pool = CallPool()
    conns = [_Conn() for _ in range(30)]  # 30 calls in flight to one peer at once
    for c in conns:
        pool.give(2, c)  # type: ignore[arg-type]
    assert len(pool.idle[2]) == 4
    assert sum(c.closed for c in conns) == 26
    taken = pool.take(2)
    assert taken is conns[3] and pool.take(7) is None
    pool.close()  # a stopping node closes what is idle; the taken one is its call's to close
    assert all(c.closed for c in conns if c is not taken) and not pool.idle


def test_memtrace_is_off_by_default_and_dumps_growth_when_asked(tmp_path, monkeypatch):
    import asyncio
    import os

    from nodes.garlicfarm import memtrace

    monkeypatch.delenv("GF_TRACEMALLOC", raising=False)
    assert not memtrace.enabled()
    monkeypatch.setenv("GF_TRACEMALLOC", str(tmp_path / "tm"))
    monkeypatch.setenv("GF_TRACEMALLOC_S", "0.05")
    assert memtrace.enabled()

    async def go() -> None:
        t = asyncio.create_task(memtrace.dump_loop())
        await asyncio.sleep(0.3)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)

    asyncio.run(go())
    text = (tmp_path / f"tm.{os.getpid()}").read_text()
    assert text.startswith("dump ") and "traced" in text
    assert not tracemalloc.is_tracing()
