"""The cluster's ``remove-server`` op for Garlic Farm ``{node, next_leader, wait_s}``: an
administrator's RemoveServerRequest for ``node``, sent over the wire straight to the leader
(each node's own peer port, with the run's TLS and Digest credentials, as JRaft's admin tool).

Why: the sim's ``remove`` of server ``a`` is such a request to the leader, and with no leader
it waits for the next one and is sent the moment one is elected (harness/sim/gf_search.py,
`_Run._request`): the one moment a leader may not start a change yet, having committed no
entry of its term. The node's own ``leave`` (``POST /admin/leave``) is another thing: its
RemoveServer goes out over its own links, which an isolated node does not have.

With ``next_leader`` (the sim's request met a leader with nothing of its term committed, or
none): the op asks every node who leads (an empty ClientRequest each `POLL_S`: a leader says
yes, with its term); a leader of the highest term that is fresh (`fresh_leader`: its commit
holds no entry of its term) is asked at once, else the op waits for the first leader of a
higher term and asks it the moment it is seen. With ``hold`` that first request is made with
the leader's links to every member but the removed one cut (`Hold`), until its configuration
leaves the server out (or `HOLD_S`, or a refusal): a real LeaveCluster goes to the removed
member behind the leader's first AppendEntries on that link, so without the hold the first
entry commits before the change is appended (measured: leave-start 10.6 ms after the
election, the term's entry committed 112 ms later, the LeaveCluster answered 2 ms after
that), where the sim's datagrams may overtake. A refusal (a correct leader whose term has no
committed entry yet, a stale leader asked to remove itself) is asked again `RETRY_S` later,
as the operator's tool retries; past ``wait_s`` with no new leader, the leader of the moment
is asked (``late``); the completion lists each attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodes.garlicfarm.client import WireConnection
from nodes.garlicfarm.codec import (
    ClusterServer,
    LogEntry,
    MsgType,
    Request,
    ValueType,
    encode_cluster_server,
)

#: how often every node is asked who leads (within one network delay of an election: the
#: new leader's first entry needs a round trip to a majority before it commits)
POLL_S = 0.003
#: a refused request is asked again this much later
RETRY_S = 0.05
#: one probe or request's answer is waited for this long
CALL_S = 1.0

#: a held leader's change is waited for this long (its LeaveCluster's round trip to the
#: member it removes, which a busy machine may stretch), then its links are given back
HOLD_S = 1.0
#: how often a held leader's state is read meanwhile
HOLD_POLL_S = 0.02

Fresh = Callable[[str], Awaitable[bool]]


@dataclass
class Hold:
    """How the op keeps a fresh leader's first entry from a majority while it asks: ``cut``
    its links to the members but the removed one (returns the flows cut), ``removed``
    (whether its configuration leaves the server out, read from its state), ``release``."""

    cut: Callable[[str, str], Awaitable[list[Any]]]  # (leader, the node it removes)
    removed: Callable[[str, int], Awaitable[bool]]  # (leader, the server id it removes)
    release: Callable[[list[Any]], Awaitable[Any]]


def _probe() -> Request:
    return Request(MsgType.CLIENT_REQUEST, 0, 0, 0)


def _remove(sid: int) -> Request:
    ent = LogEntry(0, ValueType.CLUSTER_SERVER, encode_cluster_server(ClusterServer(sid)))
    return Request(MsgType.REMOVE_SERVER_REQUEST, 0, 0, 0, entries=(ent,))


async def _ask(conn: WireConnection, msg: Request) -> Any:
    try:
        return await conn.request(msg, CALL_S)
    except Exception:  # down, cut off its admin path, or busy: no answer this round
        return None


async def leaders(conns: Mapping[str, WireConnection]) -> dict[str, int]:
    """The nodes that answer as leader now, with their terms."""
    names = list(conns)
    got = await asyncio.gather(*(_ask(conns[n], _probe()) for n in names))
    return {n: r.term for n, r in zip(names, got, strict=True)
            if r is not None and r.accepted}


async def remove_server(conns: Mapping[str, WireConnection], ids: Mapping[str, int],
                        pick: Callable[[str], str], *, next_leader: bool, wait_s: float,
                        fresh: Fresh | None = None, hold: Hold | None = None
                        ) -> dict[str, Any]:
    """Ask the leader (the next one, with ``next_leader``) to remove the node ``pick(leader)``
    names (server ``ids[node]``: the op's node, or one as the sim's was); the op's
    completion value: ``attempts`` ([node, term, accepted, seconds from the op's start]),
    ``accepted``, ``late`` (no new leader came in ``wait_s``: then the leader of the moment
    is asked, as the sim asks one it finds) and ``error`` when none took it at all.
    ``fresh(node)``: whether a leader has committed no entry of its term yet (one just
    elected, in the moment the sim's request meets): it is asked at once. ``hold``: the first
    request to each new leader is made under it (`Hold`), and its links are given back once
    its configuration leaves the server out, or `HOLD_S` later, or at once on a refusal."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    seen = await leaders(conns)
    above = 0
    if next_leader and seen:
        top = max(seen, key=lambda m: (seen[m], m))
        above = seen[top] - 1 if fresh is not None and await fresh(top) else seen[top]
    out: dict[str, Any] = {"next_leader": next_leader, "terms_leading_at_start":
                           sorted(set(seen.values())), "attempts": [], "late": False}
    asked: dict[tuple[str, int], float] = {}  # (leader, term) -> when last asked
    while True:
        now = loop.time()
        lead = {n: t for n, t in seen.items() if t > above}
        if lead:
            n = max(lead, key=lambda m: (lead[m], m))
            if now - asked.get((n, lead[n]), -RETRY_S) >= RETRY_S:
                first = (n, lead[n]) not in asked
                asked[(n, lead[n])] = now
                held: list[Any] = []
                gone = pick(n)
                sid = out["server"] = ids[gone]
                out["removed"] = gone
                if first and hold is not None and next_leader and not out["late"]:
                    held = await hold.cut(n, gone)
                    out["held"] = {"leader": n, "cut": [list(f) for f in held]}
                r = await _ask(conns[n], _remove(sid))
                ok = bool(r is not None and r.accepted)
                out["attempts"].append([n, lead[n], ok, round(now - start, 4)])
                if held:
                    end = loop.time() + HOLD_S
                    while ok and loop.time() < end and not await hold.removed(n, sid):
                        await asyncio.sleep(HOLD_POLL_S)
                    await hold.release(held)
                    out["held"]["for_s"] = round(loop.time() - now, 4)
                if ok:
                    out["accepted"] = True
                    return out
        if loop.time() - start >= wait_s:
            if above and not out["late"]:  # no new leader: the one of the moment, once more
                out["late"], above = True, 0
                asked.clear()
                continue
            out["accepted"] = False
            out["error"] = f"no leader took the removal within {wait_s:g} s"
            return out
        await asyncio.sleep(POLL_S)
        seen = await leaders(conns)


def removal_target(node: str, lead: str, up: list[str], cut: Any, next_leader: bool) -> str:
    """The node a removal asked of leader ``lead`` names: the op's ``node``; instead the
    first running member that is neither the leader nor cut off from it when the real run
    made ``node`` that leader (a leader refuses its own removal, every time: asked again
    for the whole ``wait_s``, the steps after it came seconds late; the sim removed a member
    it reached) or, with ``next_leader``, cut it off from it."""
    ok = [m for m in up if m != lead and (lead, m) not in cut]
    if not ok or node in ok or (not next_leader and node != lead):
        return node
    return ok[0]


def fresh_leader(state: dict[str, Any] | None) -> bool:
    """A node's ``/admin/state`` says it leads a term with no committed entry yet (its commit
    index holds an entry of an older term, or none)."""
    if not state or state.get("role") != "leader":
        return False
    commit = int(state.get("commit_index") or 0)
    at = {int(e["index"]): int(e["term"]) for e in state.get("log") or [] if "index" in e}
    snap = state.get("snapshot") or {}
    term = at.get(commit, int(snap.get("last_term") or 0) if commit else 0)
    return term != int(state.get("term") or 0)


async def connections(addrs: Mapping[str, tuple[str, int]],
                      creds: Mapping[str, Any]) -> dict[str, WireConnection]:
    """One handshaken connection to each node (``creds``: its `hostile_driver.Member`), made
    before the watch so a request goes out at once; a node that cannot be reached is left
    out (it is down: it leads nothing)."""
    async def one(n: str, host: str, port: int) -> tuple[str, WireConnection | None]:
        m = creds[n]
        c = WireConnection(host, port, cluster=m.cluster, username=m.username,
                           password=m.password, tls=m.ctx, server_name=n)
        try:
            await c.open()
        except Exception:
            c.close()
            return n, None
        return n, c

    # all at once: one after the other, five TLS and Digest handshakes on a loaded machine
    # took long enough for the election the op waits for to be over before it watched
    got = await asyncio.gather(*(one(n, h, p) for n, (h, p) in addrs.items()))
    return {n: c for n, c in got if c is not None}
