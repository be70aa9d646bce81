"""Figures for the report (matplotlib, offline, PNG): the Jepsen plots and the index trends.

Every function takes plain data (pandas frames, fault windows) and a path, writes one PNG and
returns its file name; nothing here reads the store. Fault windows are shaded on every time
axis so that a latency spike or a throughput dip lines up with its cause by eye.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from reports.faults import FaultWindow  # noqa: E402

TYPE_COLORS = {"ok": "#2a9d3f", "fail": "#d62728", "info": "#ff9f1c"}
FAULT_COLORS = {"partition": "#9ecae1", "kill": "#fcae91", "pause": "#c7b9e8",
                "latency": "#fde38b", "clock": "#b8e0b0", "loss": "#f4c2e0",
                "duplicate": "#f7b6a8", "bandwidth": "#d9d9d9", "slicer": "#c6dbef",
                "reset-peer": "#fdd0a2", "hostile": "#e7969c"}
DPI = 90
#: ops drawn in the per-worker timeline (the first ones); a plot of 1M bars helps nobody
TIMELINE_MAX_OPS = 3000
TIMELINE_MAX_ROWS = 40


def _shade(ax: Any, windows: list[FaultWindow], t_end_s: float, label: bool = True) -> None:
    seen: set[str] = set()
    for w in windows:
        end = (w.end if w.end is not None else t_end_s * 1e9) / 1e9
        ax.axvspan(w.start / 1e9, end, color=FAULT_COLORS.get(w.kind, "#dddddd"), alpha=0.45,
                   lw=0, label=(w.kind if label and w.kind not in seen else None), zorder=0)
        seen.add(w.kind)


def _save(fig: Any, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.subplots_adjust(left=0.08, right=0.92, bottom=0.2 if fig.get_figheight() < 3.5 else 0.12,
                        top=0.88)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path.name


def latency_plot(comp: pd.DataFrame, windows: list[FaultWindow], t_end_s: float,
                 path: Path) -> str:
    """Latency of every completed op against its invocation time, by outcome (log scale)."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    _shade(ax, windows, t_end_s)
    for typ, color in TYPE_COLORS.items():
        d = comp[comp["type"] == typ]
        if len(d):
            ax.scatter(d["invoke_time"] / 1e9, d["latency_ns"] / 1e6, s=4, c=color,
                       label=f"{typ} ({len(d)})", linewidths=0)
    if (comp["latency_ns"] > 0).any():  # a log axis needs a positive value to show
        ax.set_yscale("log")
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_xlim(0, max(t_end_s, 1e-3))
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    ax.set_title("Latency (fault windows shaded)")
    return _save(fig, path)


def throughput_plot(comp: pd.DataFrame, windows: list[FaultWindow], t_end_s: float,
                    path: Path) -> str:
    """Completions per second, by outcome, in buckets sized to the run's length."""
    fig, ax = plt.subplots(figsize=(10, 3))
    _shade(ax, windows, t_end_s)
    width = max(t_end_s / 60, 0.05)
    for typ, color in TYPE_COLORS.items():
        d = comp[comp["type"] == typ]
        if len(d):
            b = (d["time"] / 1e9 // width).value_counts().sort_index()
            ax.plot(b.index * width, b.values / width, color=color, label=typ, lw=1.2,
                    drawstyle="steps-post")
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("ops / s")
    ax.set_xlim(0, max(t_end_s, 1e-3))
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    ax.set_title(f"Throughput ({width:.2g} s buckets)")
    return _save(fig, path)


def timeline_rows(comp: pd.DataFrame, concurrency: int | None) -> pd.Series:
    """The row label of each op in the timeline: its worker ``w<process mod concurrency>``.

    The runner (like Jepsen) retires a client process whose op ended ``info`` and gives its
    worker thread a fresh process id, ``process + concurrency``: so worker t plays processes
    t, t + c, t + 2c, ... one after another, and one row per worker holds them all without
    overlap. Without a known concurrency (a hand-made history) each process is its own row,
    ``p<process>``."""
    procs = comp["process"].astype(str)
    if not concurrency or concurrency < 1 or not procs.str.fullmatch(r"\d+").all():
        return "p" + procs
    return "w" + (procs.astype("int64") % concurrency).astype(str)


def timeline_plot(comp: pd.DataFrame, windows: list[FaultWindow], t_end_s: float,
                  path: Path, concurrency: int | None = None) -> str:
    """Each op as a bar from invocation to completion, one row per worker (see
    ``timeline_rows``); the bar's colour is its outcome."""
    d = comp.sort_values("invoke_time").head(TIMELINE_MAX_OPS)
    d = d.assign(_row=timeline_rows(d, concurrency))
    rows = sorted(d["_row"].unique(), key=lambda p: (len(p), p))[:TIMELINE_MAX_ROWS]
    d = d[d["_row"].isin(rows)]
    fig, ax = plt.subplots(figsize=(10, max(2.0, 0.28 * len(rows) + 1)))
    _shade(ax, windows, t_end_s, label=False)
    for y, p in enumerate(rows):
        dp = d[d["_row"] == p]
        for typ, color in TYPE_COLORS.items():
            q = dp[dp["type"] == typ]
            if len(q):
                spans = list(zip(q["invoke_time"] / 1e9,
                                 (q["latency_ns"] / 1e9).clip(lower=t_end_s / 2000), strict=True))
                ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=color)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel("time since run start (s)")
    ax.set_xlim(0, max(t_end_s, 1e-3))
    shown = "" if len(comp) <= TIMELINE_MAX_OPS else f" (first {TIMELINE_MAX_OPS} of {len(comp)})"
    per = "worker (process mod concurrency)" if rows and rows[0].startswith("w") else "process"
    ax.set_title(f"Operations per {per}" + shown)
    return _save(fig, path)


def fault_plot(windows: list[FaultWindow], t_end_s: float, path: Path) -> str:
    """The fault schedule: one row per fault kind, a bar per window."""
    kinds = sorted({w.kind for w in windows}) or ["(no faults)"]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(kinds) + 1.2))
    for w in windows:
        end = (w.end if w.end is not None else t_end_s * 1e9) / 1e9
        ax.broken_barh([(w.start / 1e9, max(end - w.start / 1e9, t_end_s / 500))],
                       (kinds.index(w.kind) - 0.35, 0.7),
                       facecolors=FAULT_COLORS.get(w.kind, "#999999"), edgecolor="#555555")
    ax.set_yticks(range(len(kinds)), kinds, fontsize=8)
    ax.set_xlim(0, max(t_end_s, 1e-3))
    ax.set_xlabel("time since run start (s)")
    ax.set_title("Fault schedule")
    return _save(fig, path)


def node_events_plot(events: dict[str, pd.DataFrame], path: Path) -> str:
    """Node journal events (node clocks, relative to the earliest event), by event type."""
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(events), 1) + 1.4))
    nodes = sorted(events)
    t0 = min((float(e["t"].min()) for e in events.values() if len(e)), default=0.0)
    types = sorted({t for e in events.values() for t in e["type"].unique()})
    cmap = plt.get_cmap("tab10")
    for i, typ in enumerate(types):
        xs, ys = [], []
        for y, n in enumerate(nodes):
            e = events[n]
            sel = e[e["type"] == typ]
            xs += list(sel["t"] - t0)
            ys += [y] * len(sel)
        ax.scatter(xs, ys, s=10, color=cmap(i % 10), label=typ, marker="|" if i % 2 else "o")
    ax.set_yticks(range(len(nodes)), nodes, fontsize=8)
    ax.set_xlabel("node clock, s since the first event (clocks may be skewed)")
    if types:
        ax.legend(fontsize=7, ncol=min(len(types), 6), loc="upper right")
    ax.set_title("Node events")
    return _save(fig, path)


def trends_plot(trends: pd.DataFrame, path: Path) -> str:
    """Nightly trend: runs per night (else per date) by verdict, and the median run p99
    latency."""
    fig, ax = plt.subplots(figsize=(10, 3.2))
    x = list(range(len(trends)))
    bottom = [0] * len(trends)
    for col, color in (("valid", "#2a9d3f"), ("invalid", "#d62728"), ("unknown", "#ff9f1c")):
        ax.bar(x, trends[col], bottom=bottom, color=color, label=col)
        bottom = [b + v for b, v in zip(bottom, trends[col], strict=True)]
    ax.set_xticks(x, list(trends["period"]), rotation=30, fontsize=7)
    ax.set_ylabel("runs")
    ax2 = ax.twinx()
    ax2.plot(x, trends["p99_ms"], color="#333333", marker="o", lw=1, label="p99 latency (ms)")
    ax2.set_ylabel("median run p99 (ms)")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    ax.set_title("Runs by date")
    return _save(fig, path)
