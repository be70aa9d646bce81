"""How a node gathers the answers of a batch's items (`Answers.then`, `_Gathered`) and runs its
group committer (a loop callback, not a task): the answer keeps item order, an item the core
failed on is a 500 of its own, the batch answers once, and a committer that raises is
journaled and does not stop the next turn's commit."""

from __future__ import annotations

import asyncio
import functools
from types import SimpleNamespace
from typing import Any

from nodes.common.loop import Answers
from nodes.drip.core import Answer
from nodes.drip.server import DripNode, _Gathered


def test_a_batch_answers_once_every_item_is_answered_in_item_order() -> None:
    async def run() -> Any:
        answers = Answers()
        fut = asyncio.get_running_loop().create_future()
        g = _Gathered(3, fut, "node n1 could not handle it")
        for i in range(3):
            answers.then(i, functools.partial(g.put, i))
        answers.give(2, Answer(409, {"error": "no"}))
        answers.give(0, Answer(200, {"ok": True}))
        assert not fut.done() and len(answers) == 1
        answers.give(1, None)  # the core failed on it
        answers.give(1, Answer(200, {}))  # given twice: the second finds no waiter
        return fut.result(), len(answers)

    (status, body), left = asyncio.run(run())
    assert status == 200 and left == 0
    assert body["answers"] == [{"status": 200, "body": {"ok": True}},
                               {"status": 500, "body": {"error": "node n1 could not handle it"}},
                               {"status": 409, "body": {"error": "no"}}]


def test_a_future_and_a_callback_waiter_are_both_answered() -> None:
    async def run() -> tuple[Any, list[Any]]:
        answers = Answers()
        got: list[Any] = []
        fut = answers.wait("a")
        answers.then("b", got.append)
        answers.give("a", 1)
        answers.give("b", 2)
        answers.drop("a")
        return await fut, got

    assert asyncio.run(run()) == (1, [2])


def test_a_committer_that_raises_is_journaled_and_the_next_turn_still_commits() -> None:
    errors: list[str] = []
    runs: list[int] = []

    def commit_groups() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("a bug in the committer")

    n = SimpleNamespace(_committing=True, _commit_groups=commit_groups,
                        journal=SimpleNamespace(node_error=lambda where, e, **k: errors.append(
                            f"{where}: {e}")))
    DripNode._committer(n)  # type: ignore[arg-type]
    assert errors == ["group committer: a bug in the committer"] and not n._committing
    n._committing = True
    DripNode._committer(n)  # type: ignore[arg-type]
    assert len(runs) == 2 and len(errors) == 1 and not n._committing
