"""DRiP bench: update throughput and commit latency on 5 nodes; sync time for 10,000 keys.

Real node processes over TLS on loopback, peers wired directly (no proxy), figure-1 mesh.
Run: ``.venv/bin/python bench/bench_drip.py [--seconds 10] [--clients 8] [--keys 10000]
[--jwt-mode public|shared] [--profile DIR]``.

Besides updates/s and latency it prints the CPU seconds the node processes spent per committed
update (each node's and their sum): on a machine shared with other work the rate varies with
the load, the CPU per update much less, so it is the figure to compare between changes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from nodes.common.runtime import run  # noqa: E402
from nodes.drip.codec import Item  # noqa: E402
from nodes.drip.topology import figure1  # noqa: E402


class ProfiledMesh(Mesh):
    """A mesh whose node processes run under cProfile, each writing ``DIR/<id>.prof`` on a clean
    stop (SIGTERM): read with ``python -m pstats DIR/n1.prof``."""

    def __init__(self, *args: Any, profile_dir: Path, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.profile_dir = profile_dir

    def start_node(self, nid: str) -> None:
        log = open(self.root / nid / "log.txt", "ab")  # noqa: SIM115 - owned by the process
        self.procs[nid] = subprocess.Popen(
            [sys.executable, "-m", "cProfile", "-o", str(self.profile_dir / f"{nid}.prof"),
             "-m", "nodes.drip", "--config", str(self.configs[nid])],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def throughput(m: Mesh, seconds: float, clients: int) -> dict[str, Any]:
    lat: list[float] = []
    #: non-200 answers by status: 409 aborted, 503 not initiated (node inactive or syncing),
    #: 504 no outcome in time; a run where 503s dominate has had nodes drop out under load
    refused: dict[int, int] = {}
    #: committed update id -> (wall time sent, wall time answered), for `where_time_goes`
    sent: dict[str, tuple[float, float]] = {}
    stop = time.monotonic() + seconds

    async def worker(c: int, s: aiohttp.ClientSession) -> None:
        i = 0
        while time.monotonic() < stop:
            t0, w0 = time.perf_counter(), time.time()
            st, _ = await m.update(s, m.ids[c % len(m.ids)], f"c{c}-k{i % 50}", i, f"b{c}-{i}")
            if st == 200:
                lat.append(time.perf_counter() - t0)
                sent[f"b{c}-{i}"] = (w0, time.time())
            else:
                refused[st] = refused.get(st, 0) + 1
            i += 1

    async with aiohttp.ClientSession() as s:
        await m.wait_all_active(s)
        cpu0 = {n: cpu_s(m.procs[n].pid) for n in m.ids}
        t0, own0 = time.monotonic(), time.process_time()
        await asyncio.gather(*(worker(c, s) for c in range(clients)))
        dt, own = time.monotonic() - t0, time.process_time() - own0
        cpu = {n: cpu_s(m.procs[n].pid) - cpu0[n] for n in m.ids}
        states = [await m.state(s, n) for n in m.ids]
        phases = await where_time_goes(m, s, sent)
        sent_b = [st.get("batches", {}) for st in states]
        conns = [st.get("peer_connections", {}) for st in states]
    posts = sum(b.get("sent", 0) for b in sent_b)
    lanes = sum(b.get("lane_exchanges", 0) for b in sent_b)
    reqs = posts + lanes  # a batch is a POST /batch or an exchange on a lane
    items = sum(b.get("sent_items", 0) + b.get("lane_items", 0) for b in sent_b)
    lat.sort()
    per = max(len(lat), 1)
    return {"commits": len(lat), "aborted": refused.get(409, 0),
            "not_initiated": refused.get(503, 0), "no_outcome": refused.get(504, 0),
            "other": sum(n for st, n in refused.items() if st not in (409, 503, 504)),
            "seconds": round(dt, 2),
            "batches": reqs, "items_per_batch": round(items / reqs, 1) if reqs else 0,
            #: flooded messages not sent back to a peer that had sent them to us meanwhile
            "spared_per_update": round(sum(b.get("spared", 0) for b in sent_b) / per, 2),
            #: TLS connections the nodes opened to each other (whole run) and peer requests
            #: they sent: reuse keeps the first near the number of links
            "peer_connections_opened": sum(c.get("opened", 0) for c in conns),
            "peer_requests": sum(c.get("requests", 0) for c in conns),
            #: per committed update: HTTPS requests between the nodes, POST /batch among
            #: them, and batch exchanges on WebSocket lanes (docs/drip.md "WebSocket lanes")
            "peer_requests_per_update": round(sum(c.get("requests", 0) for c in conns) / per,
                                              2),
            "batch_posts_per_update": round(posts / per, 2),
            "lane_exchanges_per_update": round(lanes / per, 2),
            "lanes": {k: sum(b.get(k, 0) for b in sent_b)
                      for k in ("lane_opened", "lane_failed", "lane_accepted")},
            #: answers to lane exchanges that rode on an exchange the other way instead of
            #: a frame of their own (docs/drip.md "Riders, session 49")
            "answers_riding_per_update": round(
                sum(b.get("lane_answers", 0) - b.get("lane_answer_frames", 0)
                    for b in sent_b) / per, 2),
            #: SQLite group commits of all nodes per committed update (whole run)
            "group_commits_per_update": {
                k: round(sum(st.get("group_commits", {}).get(k, 0) for st in states) / per, 2)
                for k in ("fsynced", "unsynced", "records")},
            #: JWTs all nodes signed and signatures they checked, per committed update
            "jwt_per_update": {
                k: round(sum(st.get("jwt", {}).get(k, 0) for st in states) / per, 2)
                for k in ("signed", "checked")},
            "updates_per_s": round(len(lat) / dt, 1),
            "latency_ms_p50": round(1000 * statistics.median(lat), 1) if lat else -1,
            "latency_ms_p95": round(1000 * lat[int(0.95 * len(lat))], 1) if lat else -1,
            "latency_ms_p99": round(1000 * lat[int(0.99 * len(lat))], 1) if lat else -1,
            "cpu_ms_per_update": round(1000 * sum(cpu.values()) / per, 1),
            "cpu_ms_per_update_by_node": {n: round(1000 * c / per, 1) for n, c in cpu.items()},
            "node_cpu_utilisation": round(sum(cpu.values()) / dt, 2),
            #: this process's own CPU (the clients' requests) per committed update: it shares
            #: the machine's cores with the nodes, so it is part of what the latency measures
            "bench_cpu_ms_per_update": round(1000 * own / per, 2),
            #: each node's adaptive admission cap at the end (nodes/drip/admission.py)
            "admission_cap": {n: st.get("admission", {}).get("cap")
                              for n, st in zip(m.ids, states, strict=True)},
            #: requests the nodes refused, by reason (whole run): a correct mesh refuses none,
            #: so anything here is a bug the rates would hide
            "refused": _sum_counts(st.get("refused", {}) for st in states),
            "where_time_goes_ms_p50": phases}


async def where_time_goes(m: Mesh, s: aiohttp.ClientSession,
                          sent: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Medians over committed updates of the phases of one update, from the five nodes'
    journals (one machine, one clock): ``admit`` client sent -> initiator's vote-start
    (admission slot, parsing); ``votes`` -> the last node's vote (the /voting flood);
    ``answers`` -> the initiator's decide (vote responses climbing the relays);
    ``reply`` -> the client's answer (the decision's fsync, HTTP); ``applied`` decide -> the
    last node's apply (the /commit flood, off the client's path)."""
    at: dict[str, dict[str, float]] = {u: {} for u in sent}
    for n in m.ids:
        async with s.get(m.admin(n) + "/admin/events?since=0") as r:
            evs = (await r.json())["events"]
        for e in evs:
            uid = e.get("uid")
            got = at.get(uid) if isinstance(uid, str) else None
            if got is None:
                continue
            kind = e["type"]
            if kind in ("vote", "apply"):
                got[kind] = max(got.get(kind, 0.0), e["t"])
            elif kind in ("vote-start", "decide"):
                got[kind] = e["t"]
    spans: dict[str, list[float]] = {k: [] for k in ("admit", "votes", "answers", "reply",
                                                      "applied")}
    for u, (w0, w1) in sent.items():
        t = at[u]
        if not {"vote-start", "vote", "decide"} <= t.keys():
            continue  # journal trimmed, or events of an earlier run
        spans["admit"].append(t["vote-start"] - w0)
        spans["votes"].append(t["vote"] - t["vote-start"])
        spans["answers"].append(t["decide"] - t["vote"])
        spans["reply"].append(w1 - t["decide"])
        if "apply" in t:
            spans["applied"].append(t["apply"] - t["decide"])
    return {k: round(1000 * statistics.median(v), 1) for k, v in spans.items() if v}


def _sum_counts(counts: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    return total


async def sync_time(m: Mesh, keys: int) -> dict[str, float]:
    """Fill n1..n4 with ``keys`` keys, then restart an empty (non-fresh) n5 and time its sync."""
    m.close()
    items = [Item(f"key{i:06d}", {"route": i}, 1, f"seed-{i}", None) for i in range(keys)]
    m.preload(m.ids[:-1], lambda: items, chunk=keys)
    for n in m.ids[:-1]:
        m.start_node(n)
    await asyncio.gather(*(m.wait_healthy(n) for n in m.ids[:-1]))
    async with aiohttp.ClientSession() as s:
        await m.wait_all_active(s, timeout=120, nodes=m.ids[:-1])
        last = m.ids[-1]
        t0 = time.monotonic()
        m.start_node(last)
        await m.wait_healthy(last)
        while True:
            st = await m.state(s, last)
            if st["state"] == "active" and len(st["kv"]) >= keys:
                break
            await asyncio.sleep(0.02)
        wall = time.monotonic() - t0
        async with s.get(m.admin(last) + "/admin/events?since=0") as r:
            evs = (await r.json())["events"]
    done = [e for e in evs if e["type"] == "sync-done"][-1]
    return {"keys": keys, "restart_to_active_s": round(wall, 2),
            "sync_elapsed_s": done.get("elapsed_s"), "batches": done.get("batches")}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--keys", type=int, default=10_000,
                    help="keys for the sync bench; 0 skips it")
    ap.add_argument("--jwt-mode", choices=("public", "shared"), default="public",
                    help="public: ES256 per-node keys (the default); shared: HS256")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=JSON",
                    help="a node option (docs/drip.md), e.g. batch=false or "
                         "event_loop=asyncio (a value that is not JSON is a string); repeatable")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="run the nodes under cProfile, one DIR/<id>.prof each")
    a = ap.parse_args()
    opts: dict[str, object] = {"jwt_mode": a.jwt_mode}
    for o in a.option:
        name, sep, val = o.partition("=")
        if not sep:
            ap.error(f"--option {o!r}: expected NAME=JSON, e.g. batch=false")
        try:
            opts[name] = json.loads(val)
        except ValueError:
            opts[name] = val  # event_loop=asyncio: a bare word is the string it spells
    ids = [f"n{i}" for i in range(1, 6)]
    with tempfile.TemporaryDirectory() as d:
        if a.profile:
            a.profile.mkdir(parents=True, exist_ok=True)
            m: Mesh = ProfiledMesh(Path(d), 5, figure1(ids), options=opts,
                                   profile_dir=a.profile.resolve())
        else:
            m = Mesh(Path(d), 5, figure1(ids), options=opts)
        try:
            await m.start()
            out: dict[str, object] = {"options": opts, "clients": a.clients,
                                      "load_avg_1m_before": round(os.getloadavg()[0], 2),
                                      "throughput": await throughput(m, a.seconds, a.clients),
                                      "load_avg_1m_after": round(os.getloadavg()[0], 2)}
            if a.keys > 0:
                out["sync"] = await sync_time(m, a.keys)
        finally:
            m.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    # the clients share the machine's cores with the nodes: on uvloop they take ~20 % less
    # CPU per update (0.26 -> 0.21 ms, docs/drip.md session 51)
    run(main(), "uvloop")
