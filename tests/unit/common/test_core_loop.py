"""The one runtime loop: effect order, fsync before anything leaves, timers, a core that fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer
from nodes.common.loop import CoreLoop


class Recorder:
    """A Host that writes down every call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def send(self, to: Any, msg: Any) -> None:
        self.calls.append(("send", to, msg))

    def persist(self, what: str, record: Any) -> None:
        self.calls.append(("persist", what, record))

    def sync(self) -> None:
        self.calls.append(("sync",))

    def reply(self, token: Any, value: Any) -> None:
        self.calls.append(("reply", token, value))

    def emit(self, type_: str, fields: dict[str, Any]) -> None:
        self.calls.append(("emit", type_))

    def failed(self, where: str, error: BaseException) -> None:
        self.calls.append(("failed", where, str(error)))


class Scripted:
    """A core that answers each input with the effects the test gave it."""

    def __init__(self, **script: list[Effect]) -> None:
        self.script = script
        self.fired: list[tuple[Any, float]] = []

    def start(self, now: float) -> list[Effect]:
        return self.script.get("start", [])

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        if msg == "boom":
            raise KeyError("a core bug")
        return self.script.get("message", [])

    def on_timer(self, name: Any, now: float) -> list[Effect]:
        self.fired.append((name, now))
        return self.script.get("timer", [])

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        return [Persist("log", cmd), Reply(token, "done")]


def test_a_persist_is_synced_before_the_next_send_or_reply_and_batches_share_one_sync() -> None:
    host = Recorder()
    core = Scripted(message=[Persist("log", 1), Emit("deliver", {}), Send("b", "m1"),
                             Persist("log", 2), Persist("log", 3)])
    loop = CoreLoop(core, host, lambda: 0.0)
    loop.message("a", "x")
    assert host.calls == [("persist", "log", 1), ("emit", "deliver"), ("sync",),
                          ("send", "b", "m1"), ("persist", "log", 2), ("persist", "log", 3),
                          ("sync",)]
    host.calls.clear()
    loop.messages([("a", "x"), ("a", "y")])  # read together: the persists between the two
    assert host.calls.count(("sync",)) == 3  # sends share a sync (4 when performed apart)
    host.calls.clear()
    loop.command("put", token=7)
    assert host.calls == [("persist", "log", "put"), ("sync",), ("reply", 7, "done")]


def test_a_core_that_raises_is_reported_and_the_loop_goes_on() -> None:
    host = Recorder()
    loop = CoreLoop(Scripted(message=[Send("b", "ok")]), host, lambda: 0.0)
    loop.message("a", "boom")
    loop.message("a", "fine")
    assert host.calls[0][0] == "failed" and "a core bug" in host.calls[0][2]
    assert host.calls[1:] == [("send", "b", "ok")]


class Faulty(Recorder):
    """A Host whose sends of "bad" and persists of "full" raise, as an encoder given an
    out-of-range field or a full disk would."""

    def send(self, to: Any, msg: Any) -> None:
        if msg == "bad":
            raise OverflowError("int too big to convert")
        super().send(to, msg)

    def persist(self, what: str, record: Any) -> None:
        if record == "full":
            raise OSError(28, "No space left on device")
        super().persist(what, record)


def test_an_effect_that_raises_is_reported_and_the_rest_still_run() -> None:
    host = Faulty()
    loop = CoreLoop(Scripted(), host, lambda: 0.0)
    loop.perform([Send("b", "bad"), Send("c", "fine"), Emit("e", {})])
    assert host.calls[0][:2] == ("failed", "performing Send")
    assert host.calls[1:] == [("send", "c", "fine"), ("emit", "e")]


def test_a_timer_armed_after_a_failed_send_still_fires() -> None:
    """The SWIM node's period timer died when one refutation could not be encoded."""
    async def run() -> Scripted:
        now = asyncio.get_running_loop().time
        core = Scripted(start=[Send("b", "bad"), SetTimer("tick", now() + 0.02)])
        CoreLoop(core, Faulty(), now).start()
        await asyncio.sleep(0.1)
        return core

    assert [name for name, _ in asyncio.run(run()).fired] == ["tick"]


def test_after_a_failed_persist_nothing_leaves_that_could_promise_it() -> None:
    host = Faulty()
    loop = CoreLoop(Scripted(), host, lambda: 0.0)
    loop.perform([Persist("log", "full"), Send("b", "ack"), Reply(1, "ok"), Emit("e", {})])
    assert [c[0] for c in host.calls] == ["failed", "emit"]
    host.calls.clear()
    loop.perform([Persist("log", 1), Send("b", "ack")])  # the next batch is judged afresh
    assert host.calls == [("persist", "log", 1), ("sync",), ("send", "b", "ack")]


class BadEmit(Recorder):
    def emit(self, type_: str, fields: dict[str, Any]) -> None:
        raise ValueError("journal line too long")


def test_a_failed_emit_between_a_persist_and_its_send_does_not_hold_the_send() -> None:
    """Only a failure to make something durable stops the rest of a batch's sends."""
    host = BadEmit()
    loop = CoreLoop(Scripted(), host, lambda: 0.0)
    loop.perform([Persist("log", 1), Emit("e", {}), Send("b", "ack"), Persist("log", 2)])
    assert host.calls == [("persist", "log", 1), ("failed", "performing Emit",
                                                  "journal line too long"),
                          ("sync",), ("send", "b", "ack"), ("persist", "log", 2), ("sync",)]


def test_not_an_effect_is_a_type_error() -> None:
    loop = CoreLoop(Scripted(), Recorder(), lambda: 0.0)
    with pytest.raises(TypeError, match="not an effect"):
        loop.perform([("send", "b")])  # type: ignore[list-item]


def test_a_timer_fires_once_replaced_timers_do_not_and_close_cancels() -> None:
    async def run() -> Scripted:
        loop_ = asyncio.get_running_loop()
        now = loop_.time
        core = Scripted(start=[SetTimer("t", now() + 0.05), SetTimer("t", now() + 0.02),
                               SetTimer("u", now() + 0.2)])
        loop = CoreLoop(core, Recorder(), now)
        loop.start()
        await asyncio.sleep(0.1)
        loop.close()
        await asyncio.sleep(0.15)
        return core

    core = asyncio.run(run())
    assert [name for name, _ in core.fired] == ["t"]  # once (replaced, not doubled); u cancelled


def test_a_timer_pushed_back_fires_once_at_its_new_time_not_before() -> None:
    async def run() -> tuple[Scripted, float]:
        loop_ = asyncio.get_running_loop()
        now = loop_.time
        t0 = now()
        # due 200 ms out, pushed back every 20 ms as heartbeats push an election timer (the
        # margin keeps a loaded machine's late wake-ups from letting it fire early)
        core = Scripted(start=[SetTimer("e", t0 + 0.2)])
        loop = CoreLoop(core, Recorder(), now)
        loop.start()
        for k in range(1, 6):
            await asyncio.sleep(0.02)
            loop.perform([SetTimer("e", t0 + 0.2 + 0.02 * k)])
        await asyncio.sleep(0.3)
        loop.close()
        return core, t0

    core, t0 = asyncio.run(run())
    assert len(core.fired) == 1
    assert core.fired[0][1] >= t0 + 0.3 - 0.0005
