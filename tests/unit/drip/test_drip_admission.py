"""The adaptive admission cap (nodes/drip/admission.py): grows while decisions are fast, halves
once per slow burst, stays within its bounds, and a waiter that gives up takes no slot."""

from __future__ import annotations

import asyncio

import pytest

from nodes.drip.admission import Admission


def test_fast_decisions_grow_the_cap_up_to_the_ceiling() -> None:
    a = Admission(floor=4, ceiling=8, slow_s=0.5)
    for i in range(200):
        a.active += 1
        a.release(0.01, now=float(i))
    assert a.cap == 8.0


def test_a_slow_burst_halves_once_and_never_below_the_floor() -> None:
    a = Admission(floor=4, ceiling=64, slow_s=0.5, cap=32.0)
    for _ in range(5):  # five slow decisions at the same moment: one signal
        a.active += 1
        a.release(2.0, now=10.0)
    assert a.cap == 16.0
    for t in range(5):  # one per interval: halves each time, down to the floor
        a.active += 1
        a.release(2.0, now=11.0 + t)
    assert a.cap == 4.0


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="floor"):
        Admission(floor=0, ceiling=4, slow_s=1.0)
    with pytest.raises(ValueError, match="ceiling"):
        Admission(floor=8, ceiling=4, slow_s=1.0)


def test_waiters_get_slots_as_they_free_and_a_timed_out_one_takes_none() -> None:
    async def go() -> None:
        a = Admission(floor=2, ceiling=2, slow_s=0.5)
        await a.acquire()
        await a.acquire()
        gave_up = asyncio.create_task(asyncio.wait_for(a.acquire(), 0.01))
        with pytest.raises(TimeoutError):
            await gave_up
        waiter = asyncio.create_task(a.acquire())
        await asyncio.sleep(0)
        assert not waiter.done()
        a.release(0.01, now=0.0)
        await asyncio.wait_for(waiter, 1)
        assert a.active == 2  # the one that gave up holds nothing
    asyncio.run(go())


def test_a_woken_waiter_cancelled_before_it_runs_passes_its_slot_on() -> None:
    async def go() -> None:
        a = Admission(floor=1, ceiling=1, slow_s=0.5)
        await a.acquire()
        first = asyncio.create_task(a.acquire())
        second = asyncio.create_task(a.acquire())
        await asyncio.sleep(0)
        a.release(0.01, now=0.0)  # wakes first ...
        first.cancel()  # ... which is cancelled before it takes the slot
        await asyncio.wait_for(second, 1)
        assert a.active == 1
    asyncio.run(go())
