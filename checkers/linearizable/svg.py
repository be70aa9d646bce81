"""A self-contained HTML page with an inline SVG that explains a linearizability verdict.

In the spirit of Porcupine's visualisation and Knossos' ``linear.svg``: one lane per
process, each operation a bar from its call to its return on an event-ordered axis (ranks,
not raw times, so short and long gaps read alike; real positions are in the tooltips), the
deepest partial linearization drawn as numbered points joined by a line, the operation
that could not be linearized in red and the ops concurrent with it in orange. Open-ended
(``info``) ops run to the right edge, hatched. No scripts, no network.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from checkers.linearizable.engine import LinResult, PartResult

LANE_H = 34
BAR_H = 18
LEFT = 110
X_STEP = 22
TOP = 40


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _strip(v: Any, key: Any) -> Any:
    """In a per-key part the ``[key, v]`` key is in the title: show ``v`` alone."""
    if key is not None and isinstance(v, list | tuple) and len(v) == 2 and v[0] == key:
        return v[1]
    return v


def _label(op: Any, key: Any) -> str:
    val, out = _strip(op.value, key), _strip(op.output, key)
    label = op.f if val is None else f"{op.f} {val!r}"
    if op.ret is not None and out is not None and out != val and not isinstance(out, bool | dict):
        label += f" -> {out!r}"
    elif out is False:
        label += " -> false"
    return label


def part_svg(part: PartResult) -> str:
    """The SVG for one part."""
    ops = part.part_ops
    w = part.witness or {}
    fail_id = (w.get("failed_op") or {}).get("id")
    order = {op.id: k for k, (op, _) in enumerate(part.best)}
    fail_ret = (w.get("failed_op") or {}).get("ret")
    conc_ids = set() if fail_ret is None else {
        op.id for op in ops if op.id not in order and op.id != fail_id and op.call <= fail_ret}
    state_after = {op.id: st for op, st in part.best}
    # event ranks: calls and returns on one axis, calls first on ties
    points = sorted({(op.call, 0) for op in ops} | {(op.ret, 1) for op in ops if op.ret is not None})
    rank = {p: k for k, p in enumerate(points)}
    end_rank = len(points)
    procs: list[Any] = []
    for op in ops:
        if op.process not in procs:
            procs.append(op.process)
    lane = {p: k for k, p in enumerate(procs)}
    title = "whole history" if part.key is None else f"part {part.key!r}"
    width = LEFT + X_STEP * (end_rank + 2) + 20
    height = TOP + LANE_H * len(procs) + 30

    def x(r: float) -> float:
        return LEFT + X_STEP * (r + 0.5)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)">'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#777" stroke-width="1.5"/></pattern></defs>',
           f'<text x="4" y="16" font-size="13">{_esc(title)}: valid={_esc(part.valid)}, '
           f'{len(ops)} ops, linearized prefix {len(part.best)}</text>']
    for p, k in lane.items():
        y = TOP + k * LANE_H
        out.append(f'<line x1="{LEFT - 4}" y1="{y + BAR_H / 2}" x2="{width - 10}" '
                   f'y2="{y + BAR_H / 2}" stroke="#ddd"/>')
        out.append(f'<text x="4" y="{y + BAR_H - 4}">process {_esc(p)}</text>')
    lin_pts: list[tuple[float, float, int]] = []
    for op in ops:
        y = TOP + lane[op.process] * LANE_H
        x0 = x(rank[(op.call, 0)]) - X_STEP * 0.4
        x1 = x(rank[(op.ret, 1)] if op.ret is not None else end_rank) + X_STEP * 0.4
        if op.id == fail_id:
            fill, stroke = "#f4a6a6", "#c00"
        elif op.id in order:
            fill, stroke = "#b9e4b9", "#2a2"
        elif op.id in conc_ids:
            fill, stroke = "#fbd38d", "#c60"
        else:
            fill, stroke = "#e6e6e6", "#888"
        label = _label(op, part.key)
        tip = (f"op {op.id} process {op.process}: {label}\ncall {op.call}, return "
               f"{'never (info)' if op.ret is None else op.ret}")
        if op.id in order:
            tip += f"\nlinearized #{order[op.id] + 1}, state after: {state_after[op.id]!r}"
        if op.id == fail_id:
            tip += "\nCANNOT BE LINEARIZED after the prefix"
        out.append(f'<g><title>{_esc(tip)}</title>'
                   f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 4):.1f}" height="{BAR_H}" '
                   f'rx="3" fill="{fill}" stroke="{stroke}" '
                   f'stroke-width="{2 if op.id == fail_id else 1}"/>'
                   + (f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 4):.1f}" '
                      f'height="{BAR_H}" rx="3" fill="url(#hatch)" fill-opacity="0.6"/>'
                      if op.ret is None else "") +
                   f'<text x="{x0 + 3:.1f}" y="{y + BAR_H - 5}" font-size="9">'
                   f'{_esc(label[:max(int((x1 - x0) / 5.5), 0)])}</text></g>')
    # linearization points: each after its predecessor's, within its own call..return
    last = -1.0
    for k, (op, _) in enumerate(part.best):
        lo = rank[(op.call, 0)]
        hi = rank[(op.ret, 1)] if op.ret is not None else end_rank
        r = min(max(lo + 0.0, last + 0.25), hi)
        last = r
        lin_pts.append((x(r), TOP + lane[op.process] * LANE_H - 1, k + 1))
    if lin_pts:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in lin_pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="#2a2" stroke-width="1.5" '
                   f'stroke-opacity="0.7"/>')
        for px, py, k in lin_pts:
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="#060"/>'
                       f'<text x="{px + 3:.1f}" y="{py - 3:.1f}" font-size="8" fill="#060">{k}</text>')
    if fail_id is not None:
        fop = next(op for op in ops if op.id == fail_id)
        fx = x(rank[(fop.call, 0)]) - X_STEP * 0.4
        fy = TOP + lane[fop.process] * LANE_H + BAR_H + 10
        msg = f"cannot linearize: {w['failed_op'].get('describe', '')} (state was {w.get('state')})"
        out.append(f'<text x="{fx:.1f}" y="{fy}" fill="#c00" font-weight="bold">{_esc(msg)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_html(result: LinResult, path: str | Path, part: PartResult | None = None) -> Path:
    """Write the page for ``part`` (default: the first failing part, else the first part)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(html_page(result, part))
    return p


def html_page(result: LinResult, part: PartResult | None = None) -> str:
    """The self-contained page (SVG inline) for ``part``, as text."""
    part = part or result.failed or (result.parts[0] if result.parts else None)
    text = (part.witness or {}).get("text", "") if part else ""
    body = part_svg(part) if part else "<p>(empty history)</p>"
    legend = ("green: linearized prefix (numbers give the order); red: could not be "
              "linearized; orange: concurrent with it; hatched: open-ended (info); "
              "hover a bar for details.")
    doc = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>linearizability: {_esc(result.model)} valid={_esc(result.valid)}</title>
<style>body{{font-family:sans-serif;margin:1em}} pre{{background:#f6f6f6;padding:.6em;overflow:auto}}
.svg{{overflow:auto;border:1px solid #ccc}}</style></head>
<body><h2>Linearizability ({_esc(result.model)}): valid = {_esc(result.valid)}</h2>
<p>{result.ops} ops in {len(result.parts)} part(s), {result.elapsed_s:.3f} s, {result.explored} steps. {_esc(result.note)}</p>
<p>{_esc(legend)}</p>
<div class="svg">{body}</div>
<pre>{_esc(text)}</pre>
</body></html>
"""
    return doc
