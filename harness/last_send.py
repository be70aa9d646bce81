"""The cluster's ``last-send`` nemesis op ``{node, reach}``: node ``node`` sends one message
through the workload's own client (a ``send`` op), and the op waits until every node in
``reach`` holds it in its log (``/admin/state``'s ``log`` entries, by the id the send's ok
answer gave).

Why: a sim replay's SDS ``gone`` step with last words (harness/sim/realrun.py) is a node that
dies in the middle of broadcasting a send that reached only some peers. The real run plays it
as: its links to the others cut (``start-partition``), this op, then ``kill`` for good; the
wait makes sure the message really is held by the peers the sim says got it before the kill,
so the real run leaves the same state the sim did, not one a real ``kill -9`` hits by chance.

The completion's value names the send as the history's ok sends do (``sent``: ``{"v", "id",
...}``, and ``node``), so `checkers.ordering` counts it as an acknowledged send; a send the
node refused or that no ``reach`` peer held in time completes with an ``error`` (the faults
checker then says the fault was not applied).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: the client process id of the op's send (the workload's own processes count from 0)
LAST_SEND_PROCESS = 999
#: how long the peers are given to hold the message (its datagrams, one resend at most)
HOLD_TIMEOUT_S = 5.0
#: how often their states are read meanwhile
POLL_S = 0.05

States = Callable[[list[str]], Awaitable[dict[str, dict[str, Any] | None]]]


def holds(state: dict[str, Any] | None, mid: str) -> bool:
    """Whether a node's ``/admin/state`` has message ``mid`` in its log."""
    log = state.get("log") if isinstance(state, dict) else None
    return any(isinstance(e, dict) and e.get("id") == mid for e in log or [])


async def last_send(client: Any, node: str, reach: list[str], payload: str, states: States,
                    timeout_s: float = HOLD_TIMEOUT_S) -> dict[str, Any]:
    """Send ``payload`` at ``node`` through ``client`` (a workload client of it), then wait
    until every ``reach`` node's state holds it. Returns the op's completion value, with
    ``error`` set when the send failed or a peer did not hold it in ``timeout_s``."""
    out: dict[str, Any] = {"node": node, "reach": list(reach)}
    try:
        res = await asyncio.wait_for(client.invoke({"f": "send", "value": payload}), timeout_s)
    except Exception as e:  # refused or silent: nothing was acknowledged
        return {**out, "error": f"the send at {node} failed: {type(e).__name__}: {e}"}
    value = res.get("value") if isinstance(res, dict) else None
    if not isinstance(value, dict) or res.get("type") != "ok" or not value.get("id"):
        return {**out, "error": f"the send at {node} was not acknowledged with an id: {res!r}"}
    out["sent"] = value
    loop = asyncio.get_running_loop()
    start = loop.time()
    held: list[str] = []
    while True:
        got = await states(list(reach))
        held = sorted(n for n in reach if holds(got.get(n), str(value["id"])))
        if len(held) == len(reach) or loop.time() - start >= timeout_s:
            break
        await asyncio.sleep(POLL_S)
    out.update(held_by=held, waited_s=round(loop.time() - start, 3))
    if len(held) < len(reach):
        out["error"] = (f"{sorted(set(reach) - set(held))} did not hold {node}'s last send "
                        f"within {timeout_s:g} s")
    return out
