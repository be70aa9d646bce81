"""How much a DRiP node remembers, structure by structure: ``sizes`` in ``GET /admin/state``.

Why: issue 26 asks a node's memory to stay flat over a long attack, and an operator (or the
hostile bench, which prints these before and after the attack) needs to see which of the
node's bounded memories a flood fills. Cheap ``len()`` figures only (each a dict or set held
anyway), so the endpoint costs no more under load; the bounds themselves are listed in
docs/drip.md "Limits and refusals".
"""

from __future__ import annotations

from typing import Any

from nodes.drip import auth


def core_sizes(core: Any) -> dict[str, int]:
    """The core's remembered state: vote rounds, ended updates, counter windows."""
    d = core.d
    return {
        "tallies": len(core.tallies), "answered": len(core.answered), "voted": len(core.voted),
        "aborted": len(core.aborted), "abort_rounds": len(core.abort_rounds),
        "abort_proofs": len(core.abort_proofs), "forged_rounds": len(core.forged_rounds),
        "lock_rounds": len(core.lock_rounds),
        "expired": len(core.expired), "locks": len(d.locks), "kv": len(d.kv),
        "applied": len(d.applied), "applied_lookups": d.applied.lookups,
        "outbox_rows": sum(len(r) for r in d.outbox.values()),
        "inflight": sum(len(r) for r in core.inflight.values()),
        "seen_initiators": len(core.seen.windows),
        "seen_listed": sum(len(w.recent) for w in core.seen.windows.values()),
        "seen_listed_max": max((len(w.recent) for w in core.seen.windows.values()), default=0),
        "saved_windows_chars": sum(len(x or "") for _, _, x in d.counters.values()),
    }


def node_sizes(node: Any) -> dict[str, int]:
    """The core's figures and the server's: token memories, waiters, queues, the journal's
    in-memory tail, connection buckets."""
    out = core_sizes(node.core)
    v = node.verifier
    out.update({
        "jti_remembered": len(v.seen), "tokens_verified": len(v.verified),
        "groups_hashed": auth.groups_hashed(),
        "peer_has": sum(len(x) for x in node._peer_has.values()),
        "waiters": len(node.answers),
        "outq": sum(len(q) for q in node._outq.values()),
        "journal_tail": node.journal.tail_events,
        "refusal_reasons": len(node.refusals.counts),
    })
    conn = getattr(node.session, "connector", None)
    if conn is not None:  # aiohttp's own pool: each TLS connection holds ~128 KiB of buffers.
        # aiohttp has no public count of pooled connections; read through getattr, so a
        # change in aiohttp drops these two figures instead of failing /admin/state
        out["peer_conns_idle"] = sum(len(x) for x in getattr(conn, "_conns", {}).values())
        out["peer_conns_busy"] = len(getattr(conn, "_acquired", ()))
    listener = node._peer_listener
    if listener is not None and listener.buckets is not None:
        out["conn_sources"] = len(listener.buckets)
    return out
