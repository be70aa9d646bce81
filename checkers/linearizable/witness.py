"""Minimal witnesses: why a part is not linearizable, in words a person can act on.

The witness is the deepest partial linearization the search reached (the longest prefix
that is linearizable), the first completed operation that no extension of it could place
(the earliest-returning op left over), the operations concurrent with it (called before it
returned, not yet linearized) with what the model says about each from the state reached,
and the model states along the way. Only the last few prefix ops go into the text; the dict
keeps the last :data:`DICT_PREFIX` of them and the first :data:`DICT_CONCURRENT` concurrent
ops (the HTML draws everything).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.linearizable.models import Model

if TYPE_CHECKING:
    from checkers.linearizable.engine import Search

#: prefix ops shown in the text
TEXT_PREFIX = 8
#: prefix ops kept in the dict (the last ones; the HTML draws them all)
DICT_PREFIX = 200
#: concurrent ops kept in the dict
DICT_CONCURRENT = 100


def _desc(model: Model, s: Search, o: int) -> str:
    return model.describe_op(s.inp[o], s.out[o])


def build_witness(s: Search, model: Model) -> dict[str, Any]:
    """The witness dict for a failed search (``s.verdict is False``), with a ``text`` field."""
    index_of = {id(op): i for i, op in enumerate(s.ops)}
    prefix = s.best_linearization()
    done = {index_of[id(op)] for op, _ in prefix}
    state = s.best_state
    left = [i for i, op in enumerate(s.ops) if i not in done and op.ret is not None]
    fail_i = min(left, key=lambda i: s.ops[i].ret)  # type: ignore[arg-type,return-value]
    fail_op = s.ops[fail_i]
    ok_here, after = model.step(state, s.inp[fail_i], s.out[fail_i])
    concurrent = []
    for i, op in enumerate(s.ops):
        if i in done or i == fail_i or op.call > fail_op.ret:  # type: ignore[operator]
            continue
        could, ns = model.step(state, s.inp[i], s.out[i])
        concurrent.append({
            **op.brief(), "describe": _desc(model, s, i),
            "from_state": {"ok": could, "state_after": model.describe_state(ns) if could else None},
        })
    w: dict[str, Any] = {
        "part": None if s.key is None else repr(s.key),
        "prefix_len": len(prefix),
        "prefix_omitted": max(len(prefix) - DICT_PREFIX, 0),
        "prefix": [{**op.brief(), "describe": model.describe_op(s.inp[index_of[id(op)]],
                                                                s.out[index_of[id(op)]]),
                    "state_after": model.describe_state(st)}
                   for op, st in prefix[-DICT_PREFIX:]],
        "state": model.describe_state(state),
        "failed_op": {**fail_op.brief(), "describe": _desc(model, s, fail_i),
                      "from_state": {"ok": ok_here,
                                     "state_after": model.describe_state(after) if ok_here else None}},
        "concurrent": concurrent[:DICT_CONCURRENT],
        "concurrent_total": len(concurrent),
        "explored": s.steps,
        "timed": s.timed,
    }
    w["text"] = witness_text(w, model.describe_state(model.init()))
    return w


def witness_text(w: dict[str, Any], initial: str) -> str:
    """The terminal rendering of a witness dict."""
    part = f" (part {w['part']})" if w["part"] is not None else ""
    f = w["failed_op"]
    lines = [f"Not linearizable{part}: no order of the operations agrees with the model."]
    lines.append("(positions are " + ("times" if w.get("timed") else "event numbers")
                 + "; [call .. return])")
    n = w["prefix_len"]
    lines.append(f"Longest linearizable prefix: {n} op(s), from initial state {initial}:")
    shown = w["prefix"][-TEXT_PREFIX:]
    if n > len(shown):
        lines.append(f"  ... {n - len(shown)} earlier op(s)")
    for k, p in enumerate(shown, start=n - len(shown) + 1):
        lines.append(f"  {k:3d}. process {p['process']}: {p['describe']}  {_where_d(p)}"
                     f"  => {p['state_after']}")
    lines.append(f"State reached: {w['state']}")
    lines.append(f"Cannot linearize: process {f['process']}: {f['describe']}  {_where_d(f)}")
    lines.append("  from the state reached it " + ("would be fine, but" if f["from_state"]["ok"]
                                                   else "is impossible, and")
                 + " no concurrent op can be placed before it to make it fit.")
    if w["concurrent"]:
        lines.append("Concurrent ops not linearized (what each would do from the state reached):")
        for c in w["concurrent"][:12]:
            fs = c["from_state"]
            res = f"=> {fs['state_after']}" if fs["ok"] else "=> impossible here"
            lines.append(f"  process {c['process']}: {c['describe']}  {_where_d(c)}  {res}")
        total = w.get("concurrent_total", len(w["concurrent"]))
        if total > 12:
            lines.append(f"  ... {total - 12} more")
    return "\n".join(lines)


def _where_d(d: dict[str, Any]) -> str:
    ret = "open (info)" if d["ret"] is None else d["ret"]
    return f"[{d['call']} .. {ret}]"
