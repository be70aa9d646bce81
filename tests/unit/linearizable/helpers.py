"""Small builders for hand-made histories in the harness op shape."""

from __future__ import annotations

from typing import Any


def hist(*events: tuple[Any, ...], timed: bool = False) -> list[dict[str, Any]]:
    """Events ``(process, type, f, value)`` or ``(time, process, type, f, value)`` in order."""
    out = []
    for i, ev in enumerate(events):
        if timed:
            t, p, typ, f, v = ev
        else:
            p, typ, f, v = ev
            t = None
        op = {"index": i, "process": p, "type": typ, "f": f, "value": v}
        if t is not None:
            op["time"] = t
        out.append(op)
    return out
