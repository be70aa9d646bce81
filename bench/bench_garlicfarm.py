"""Garlic Farm bench: commit throughput / latency, and leader failover time.

Real node processes on loopback, two ways of wiring them:

* ``direct``: tests/integration/garlicfarm/cluster.py's ``LocalCluster`` (peers and clients
  talk to each other's real ports);
* ``toxiproxy``: harness.cluster.Cluster, every node->node and client->node link through its
  own Toxiproxy proxy, exactly as in a chaos run (no toxics).

1. Throughput: ``--clients`` closed-loop clients for ``--seconds`` (after a warm-up) on 3 and
   5 nodes, (a) raw-wire appends (``WireClient.append``: the leader answers after commit),
   (b) KV writes over HTTP spread over all nodes like the harness's clients (followers forward
   to the leader and answer once they have applied). ops/s, p50, p99 of the ops completed
   in the window.
2. Failover (direct loopback; ``--failover-proxied`` adds Toxiproxy): per trial, settle (one
   leader, every node in its term and caught up), pre-open one raw-wire connection and one
   KV session to each survivor, SIGKILL the leader, then every survivor is polled
   (``--poll-ms``) with a raw-wire append and, concurrently, a KV write until one succeeds.
   A raw-wire append is answered by the new leader only after commit, and the leader applies
   before it replies (core._set_commit emits Apply before Reply); the bench then checks the
   node's /admin/state (leader, last_applied >= index). Reported: kill -> wire ack (headline)
   and kill -> KV ack, in s and as a multiple of the minimum election timeout, with a
   breakdown from the survivors' journals: kill -> first candidate (detection), -> leader
   (election), -> commit of our entry, -> ack; plus election rounds (terms) per failover.
   The killed node is restarted and the cluster settles before the next trial.

Peer ports speak TLS (the node's default; the run CA, verified certificates) unless
``--tls off``; ``--tls both`` runs every measurement with TLS on and again with it off.

Run: ``.venv/bin/python bench/bench_garlicfarm.py [--quick] [--trials N] [--skip-throughput]
[--skip-failover] [--failover-proxied] [--config 3:1000-2000:100 ...] [--explore]
[--tls on|off|both]``. Config strings are ``nodes:min-max:heartbeat_ms`` (all ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp

from harness.cluster import Cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.garlicfarm import PROTOCOL, leader_of, num_id
from nodes.garlicfarm.client import (
    KVClient,
    KVFail,
    KVIndeterminate,
    WireClient,
    WireConnection,
    WireFail,
    WireIndeterminate,
    parse_endpoint,
)
from nodes.garlicfarm.codec import LogEntry, MsgType, Request, ValueType
from nodes.garlicfarm.tls import client_context
from osutil.procs import die_with_parent

ROOT = Path(__file__).resolve().parents[1]
# The Go library's figures quoted in the issue (same machine, loopback TCP).
GO_REF = {(3, 1000): 1.9, (5, 300): 2.2}
TARGET = 1.5


def _load_local_cluster() -> type:
    """tests/ is not a package on sys.path: load the integration helper from its file."""
    path = ROOT / "tests" / "integration" / "garlicfarm" / "cluster.py"
    spec = importlib.util.spec_from_file_location("_gf_local_cluster", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.LocalCluster


LocalCluster = _load_local_cluster()


class _LocalCluster(LocalCluster):  # type: ignore[misc, valid-type]
    """LocalCluster whose nodes die with the bench (PR_SET_PDEATHSIG) even on SIGKILL."""

    def start(self, nid: str, join: bool = False) -> None:
        cfg = self.config_path(nid, join)
        with open(self.base / nid / "log.txt", "ab") as log:
            self.procs[nid] = subprocess.Popen(
                [sys.executable, "-m", "nodes.garlicfarm", "--config", str(cfg)], cwd=ROOT,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ}, start_new_session=True, preexec_fn=die_with_parent)


# ------------------------------------------------------------------ stats helpers


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None or x != x else f"{x:.{nd}f}"


# ------------------------------------------------------------------ clusters


@dataclass
class Timing:
    nodes: int
    el_min: int
    el_max: int
    hb: int
    tls: bool = True

    @property
    def label(self) -> str:
        return f"{self.nodes}n [{self.el_min},{self.el_max}] hb{self.hb}" + ("" if self.tls else " plain")

    def options(self) -> dict[str, Any]:
        return {**PROTOCOL.default_options, "election_timeout_ms": [self.el_min, self.el_max],
                "heartbeat_ms": self.hb, "tls": self.tls}

    @staticmethod
    def parse(s: str) -> Timing:
        n, rng, hb = s.split(":")
        lo, hi = rng.split("-")
        return Timing(int(n), int(lo), int(hi), int(hb))


DEFAULT_TIMING = Timing(3, *PROTOCOL.default_options["election_timeout_ms"],
                        PROTOCOL.default_options["heartbeat_ms"])


class BenchCluster:
    """What the bench needs: addresses, admin, kill/restart, journals."""

    wiring = ""
    nodes: list[str]
    has_wire = has_kv = True  # which client ports the bench can reach

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))

    def peer_addr(self, n: str) -> str:
        raise NotImplementedError

    def wire_tls(self) -> ssl.SSLContext | None:
        """The client context for the peer ports (None when the nodes run ``tls: false``)."""
        raise NotImplementedError

    def wire(self, n: str) -> WireConnection:
        """A raw-wire connection to ``n`` (its certificate checked against its node id)."""
        return WireConnection(*parse_endpoint(self.peer_addr(n)), tls=self.wire_tls(), server_name=n)

    def kv_url(self, n: str) -> str:
        raise NotImplementedError

    def admin_url(self, n: str) -> str:
        raise NotImplementedError

    def journal(self, n: str) -> Path:
        raise NotImplementedError

    async def kill(self, n: str) -> None:
        raise NotImplementedError

    async def restart(self, n: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    def pids(self) -> list[int]:
        raise NotImplementedError

    async def state(self, n: str) -> dict[str, Any] | None:
        assert self.session is not None
        try:
            async with self.session.get(self.admin_url(n) + "/admin/state") as r:
                return await r.json()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def states(self) -> dict[str, dict[str, Any] | None]:
        got = await asyncio.gather(*(self.state(n) for n in self.nodes))
        return dict(zip(self.nodes, got, strict=True))

    async def wait_healthy(self, n: str, limit: float = 30.0) -> None:
        assert self.session is not None
        end = time.monotonic() + limit
        while time.monotonic() < end:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                async with self.session.get(self.admin_url(n) + "/admin/health") as r:
                    if (await r.json()).get("ok"):
                        return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"{n} not healthy after {limit}s")

    async def settle(self, limit: float = 60.0, stable_s: float = 0.2) -> str:
        """Every node up, in one term, following one leader, commit indexes within 3 of the
        leader's; checked twice ``stable_s`` apart. Returns the leader."""
        end = time.monotonic() + limit
        prev: tuple[str, int] | None = None
        while time.monotonic() < end:
            sts = await self.states()
            ld = leader_of(sts)
            ok = ld is not None and all(s is not None for s in sts.values())
            if ok:
                lst = sts[ld]
                assert lst is not None
                ok = all(s["term"] == lst["term"] and s["leader"] == num_id(ld)
                         and s["commit_index"] >= lst["commit_index"] - 3
                         for s in sts.values() if s is not None)
            if ok:
                assert ld is not None and sts[ld] is not None
                cur = (ld, sts[ld]["term"])
                if prev == cur:
                    return ld
                prev = cur
                await asyncio.sleep(stable_s)
                continue
            prev = None
            await asyncio.sleep(0.05)
        raise TimeoutError("cluster did not settle")


class DirectCluster(BenchCluster):
    wiring = "direct"

    def __init__(self, t: Timing, base: Path) -> None:
        super().__init__()
        self.lc = _LocalCluster(base, n=t.nodes, options=t.options())
        self.nodes = list(self.lc.ids)
        self.base = base

    async def start(self) -> None:
        await super().start()
        for n in self.nodes:
            self.lc.start(n)
        await asyncio.gather(*(self.wait_healthy(n) for n in self.nodes))

    def peer_addr(self, n: str) -> str:
        return f"127.0.0.1:{self.lc.ports[n]['peer']}"

    def wire_tls(self) -> ssl.SSLContext | None:
        return self.lc.client_tls()

    def kv_url(self, n: str) -> str:
        return f"http://127.0.0.1:{self.lc.ports[n]['client']}"

    def admin_url(self, n: str) -> str:
        return f"http://127.0.0.1:{self.lc.ports[n]['admin']}"

    def journal(self, n: str) -> Path:
        return self.base / n / "data" / "events.jsonl"

    async def kill(self, n: str) -> None:
        p = self.lc.procs[n]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            await asyncio.to_thread(p.wait)

    async def restart(self, n: str) -> None:
        self.lc.start(n)
        await self.wait_healthy(n)

    async def close(self) -> None:
        try:
            for p in self.lc.procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in self.lc.procs.values():
                try:
                    await asyncio.to_thread(p.wait, 5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                    await asyncio.to_thread(p.wait)
        finally:
            await super().close()

    def pids(self) -> list[int]:
        return [p.pid for p in self.lc.procs.values()]

    def kill_now(self) -> None:
        for p in self.lc.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)


class ProxiedCluster(BenchCluster):
    """harness.cluster.Cluster: all links through Toxiproxy. ``workload`` decides which node
    port the client proxies lead to: "append" -> peer port (raw wire), "kv" -> KV port."""

    wiring = "toxiproxy"

    def __init__(self, t: Timing, base: Path, workload: str) -> None:
        super().__init__()
        self.workload = workload
        self.has_wire, self.has_kv = workload == "append", workload == "kv"
        spec = TestSpec(name=f"bench-gf-{t.nodes}-{workload}", protocol=PROTOCOL, nodes=t.nodes,
                        workload=workload, store=str(base), options=t.options(), seed=7)
        self.run_dir = new_run(spec.name, base)
        self.c = Cluster(spec, self.run_dir)
        self.nodes = list(self.c.nodes)
        self.tls = t.tls

    def wire_tls(self) -> ssl.SSLContext | None:
        return client_context(self.run_dir.path / "tls" / "ca.pem") if self.tls else None

    async def start(self) -> None:
        await super().start()
        await self.c.start()

    def _link(self, n: str) -> str:
        return self.c.links[f"client->{n}"]

    def peer_addr(self, n: str) -> str:
        assert self.workload == "append"
        return self._link(n)

    def kv_url(self, n: str) -> str:
        assert self.workload == "kv"
        return f"http://{self._link(n)}"

    def admin_url(self, n: str) -> str:
        return self.c.admin_url(n)

    def journal(self, n: str) -> Path:
        return self.run_dir.node_dir(n) / "data" / "events.jsonl"

    async def kill(self, n: str) -> None:
        await self.c.kill(n)

    async def restart(self, n: str) -> None:
        await self.c.restart(n)

    def pids(self) -> list[int]:
        return [self.c.backend.pid(n) for n in self.nodes]

    async def close(self) -> None:
        try:
            await self.c.close()
        finally:
            await super().close()


# ------------------------------------------------------------------ throughput


async def load(c: BenchCluster, mode: str, clients: int, seconds: float,
               warmup: float) -> dict[str, Any]:
    leader = await c.settle()
    t0 = time.monotonic()
    w0, w1 = t0 + warmup, t0 + warmup + seconds
    lat: list[float] = []
    errors = 0

    async def wire(i: int) -> None:
        nonlocal errors
        wc = WireClient({num_id(n): c.peer_addr(n) for n in c.nodes}, timeout=5.0,
                        tls=c.wire_tls(), names={num_id(n): n for n in c.nodes})
        wc.leader_hint = num_id(leader)
        k = 0
        try:
            while time.monotonic() < w1:
                k += 1
                s = time.monotonic()
                try:
                    await wc.append({"op": "append", "v": f"b{i}:{k}"})
                except (WireFail, WireIndeterminate):
                    errors += 1
                    await asyncio.sleep(0.01)
                    continue
                e = time.monotonic()
                if w0 <= e <= w1:
                    lat.append(e - s)
        finally:
            await wc.close()

    async def kv(i: int) -> None:
        nonlocal errors
        kc = KVClient(c.kv_url(c.nodes[i % len(c.nodes)]), timeout=5.0)
        k = 0
        try:
            while time.monotonic() < w1:
                k += 1
                s = time.monotonic()
                try:
                    await kc.write(f"b{i}", k)
                except (KVFail, KVIndeterminate):
                    errors += 1
                    await asyncio.sleep(0.01)
                    continue
                e = time.monotonic()
                if w0 <= e <= w1:
                    lat.append(e - s)
        finally:
            await kc.close()

    async def node_cpu() -> float:
        """The nodes' CPU seconds over the measuring window: unlike latency, hardly moved by
        other work on a shared machine, so it is the figure to compare two commits by."""
        await asyncio.sleep(max(0.0, w0 - time.monotonic()))
        start = sum(cpu_seconds(p) for p in c.pids())
        await asyncio.sleep(max(0.0, w1 - time.monotonic()))
        return sum(cpu_seconds(p) for p in c.pids()) - start

    *_, cpu = await asyncio.gather(*((wire if mode == "wire" else kv)(i) for i in range(clients)),
                                   node_cpu())
    return {"ops_s": len(lat) / seconds, "p50_ms": pct(lat, 0.5) * 1e3,
            "p99_ms": pct(lat, 0.99) * 1e3, "n": len(lat), "errors": errors,
            "node_cpu_ms_per_op": cpu * 1e3 / max(1, len(lat))}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0  # gone: its share is lost, the figure errs low
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_throughput(args: argparse.Namespace, base: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    t = DEFAULT_TIMING
    for n, tls in ((n, tls) for n in (3, 5) for tls in tls_modes(args)):
        tn = Timing(n, t.el_min, t.el_max, t.hb, tls)
        for wiring in ("direct",) if args.no_proxied else ("direct", "toxiproxy"):
            for mode in ("wire", "kv"):
                d = Path(tempfile.mkdtemp(prefix=f"gf-tp-{n}-", dir=base))
                c: BenchCluster = (DirectCluster(tn, d) if wiring == "direct" else
                                   ProxiedCluster(tn, d, "append" if mode == "wire" else "kv"))
                try:
                    await c.start()
                    r = await load(c, mode, args.clients, args.seconds, args.warmup)
                finally:
                    await c.close()
                row = {"nodes": n, "tls": tls, "wiring": wiring, "mode": mode, **r}
                rows.append(row)
                print(f"  {n}n {'tls' if tls else 'plain':5} {wiring:9} {mode:4}: {r['ops_s']:7.1f} ops/s  p50 "
                      f"{r['p50_ms']:6.1f} ms  p99 {r['p99_ms']:6.1f} ms  node cpu "
                      f"{r['node_cpu_ms_per_op']:.2f} ms/op  (n={r['n']}, "
                      f"errors={r['errors']})", flush=True)
    return rows


# ------------------------------------------------------------------ failover


def read_journal(p: Path, since_wall: float) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        for line in p.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("t", 0) >= since_wall:
                out.append(e)
    return out


def append_request(value: Any) -> Request:
    data = json.dumps(value).encode()
    return Request(MsgType.CLIENT_REQUEST, 0, 0, 0, entries=(LogEntry(0, ValueType.APPLICATION, data),))


async def failover_trial(c: BenchCluster, t: Timing, trial: int, poll: float,
                         limit: float, restart: bool = True) -> dict[str, Any]:
    leader = await c.settle()
    survivors = [n for n in c.nodes if n != leader]
    conns = ({n: c.wire(n) for n in survivors}
             if c.has_wire else {})
    kvs = {n: KVClient(c.kv_url(n), timeout=limit) for n in survivors} if c.has_kv else {}
    # pre-open: connections and handshakes are not part of the failover time
    for conn in conns.values():
        await conn.request(Request(MsgType.CLIENT_REQUEST, 0, 0, 0), 3.0)
    for n, kc in kvs.items():
        await kc.read(f"fo-warm-{n}")
    await asyncio.sleep(t.hb / 1000 * (trial % 4) / 4)  # vary the kill's heartbeat phase a bit
    got: dict[str, Any] = {}
    done = {"wire": asyncio.Event(), "kv": asyncio.Event()}
    if not conns:
        done["wire"].set()
    if not kvs:
        done["kv"].set()

    async def wire_probe(n: str, conn: WireConnection) -> None:
        k = 0
        while not done["wire"].is_set():
            k += 1
            try:
                resp = await conn.request(append_request({"op": "append", "v": f"fo{trial}:{n}:{k}"}), limit)
            except (WireFail, WireIndeterminate):
                await asyncio.sleep(poll)
                continue
            if resp.accepted and not done["wire"].is_set():
                got["wire"] = (time.monotonic(), n, resp.next_index - 1)
                done["wire"].set()
                return
            await asyncio.sleep(poll)

    async def kv_probe(n: str, kc: KVClient) -> None:
        k = 0
        while not done["kv"].is_set():
            k += 1
            try:
                await kc.write(f"fo{trial}", f"{n}:{k}")
            except (KVFail, KVIndeterminate):
                await asyncio.sleep(poll)
                continue
            if not done["kv"].is_set():
                got["kv"] = (time.monotonic(), n)
                done["kv"].set()
            return

    kill_wall = time.time()
    kill_mono = time.monotonic()
    await c.kill(leader)
    tasks = [asyncio.create_task(wire_probe(n, cn)) for n, cn in conns.items()]
    tasks += [asyncio.create_task(kv_probe(n, kc)) for n, kc in kvs.items()]
    try:
        async with asyncio.timeout(limit):
            await asyncio.gather(done["wire"].wait(), done["kv"].wait())
    except TimeoutError:
        pass
    finally:
        for tk in tasks:
            tk.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cn in conns.values():
            cn.close()
        for kc in kvs.values():
            await kc.close()
    res: dict[str, Any] = {"killed": leader}
    if "wire" in got:
        at, n, idx = got["wire"]
        res["wire_s"] = at - kill_mono
        st = await c.state(n)
        res["new_leader"] = n
        res["verified"] = bool(st and st["role"] == "leader" and st["last_applied"] >= idx)
        evs = {s: read_journal(c.journal(s), kill_wall - 0.002) for s in survivors}
        cands = [e for s in survivors for e in evs[s] if e["type"] == "role" and e["role"] == "candidate"]
        lead = [e for e in evs[n] if e["type"] == "role" and e["role"] == "leader"]
        com = [e for e in evs[n] if e["type"] == "commit" and e["index"] == idx]
        if cands:
            first = min(cands, key=lambda e: e["t"])
            fnode = next(s for s in survivors if first in evs[s])
            res["detect_s"] = first["t"] - kill_wall
            res["rounds"] = len({e["term"] for e in cands})
            # how long the first candidate's RequestVote took to reach the other survivors
            # (journal "vote" at the voter), and whether another survivor also stood in that term
            seen = [min((e["t"] for e in evs[s] if e["type"] == "vote" and e["term"] == first["term"]
                         and e["candidate"] == num_id(fnode)), default=None)
                    for s in survivors if s != fnode]
            delays = [x - first["t"] for x in seen if x is not None]
            res["vote_delay_s"] = min(delays) if delays else None
            res["split"] = any(e["term"] == first["term"] for e in cands if e is not first)
            # a voter that answered "no" while not itself a candidate in that term: the
            # leader-stickiness check (core._on_vote heard_leader) refused it
            res["lease_refused"] = False
            for s in survivors:
                if s == fnode:
                    continue
                v = [e for e in evs[s] if e["type"] == "vote" and e["term"] == first["term"]
                     and e["candidate"] == num_id(fnode)]
                own = [e["t"] for e in evs[s] if e["type"] == "role" and e["role"] == "candidate"
                       and e["term"] >= first["term"]]
                if v and not v[0]["granted"] and not (own and min(own) <= v[0]["t"]):
                    res["lease_refused"] = True
        if lead:
            res["leader_s"] = lead[0]["t"] - kill_wall
        if com:
            res["commit_s"] = com[0]["t"] - kill_wall
    if "kv" in got:
        res["kv_s"] = got["kv"][0] - kill_mono
    if restart:
        await c.restart(leader)
    return res


def summarize(t: Timing, wiring: str, trials: list[dict[str, Any]]) -> dict[str, Any]:
    mn = t.el_min / 1000

    def col(k: str) -> list[float]:
        return [r[k] for r in trials if r.get(k) is not None]

    w, kv = col("wire_s"), col("kv_s")
    out: dict[str, Any] = {"config": t.label, "wiring": wiring, "trials": len(trials),
                           "ok": len(w), "verified": sum(1 for r in trials if r.get("verified"))}
    if w:
        out.update(mean_s=statistics.fmean(w), median_s=statistics.median(w), max_s=max(w))
        out.update(mean_x=out["mean_s"] / mn, median_x=out["median_s"] / mn, max_x=out["max_s"] / mn)
    if kv:
        out.update(kv_mean_s=statistics.fmean(kv), kv_mean_x=statistics.fmean(kv) / mn)
    for k in ("detect_s", "leader_s", "commit_s", "rounds"):
        xs = col(k)
        out[k] = statistics.fmean(xs) if xs else None
    vd = col("vote_delay_s")
    out["vote_delay_med_s"] = statistics.median(vd) if vd else None
    out["slow_votes"] = sum(1 for x in vd if x > t.hb / 1000)  # RequestVote lost, resent by timer
    out["splits"] = sum(1 for r in trials if r.get("split"))
    out["multi_round"] = sum(1 for r in trials if (r.get("rounds") or 0) > 1)
    out["lease_refused"] = sum(1 for r in trials if r.get("lease_refused"))
    # prediction if every election were one round with no lost RequestVote: detection is
    # unaffected by either problem, so mean detection + the median detection->ack time of the
    # clean trials
    clean = [r["wire_s"] - r["detect_s"] for r in trials
             if r.get("wire_s") is not None and r.get("detect_s") is not None
             and r.get("rounds") == 1 and not r.get("lease_refused")
             and (r.get("vote_delay_s") or 0) <= t.hb / 1000]
    det = col("detect_s")
    out["pred_x"] = (statistics.fmean(det) + statistics.median(clean)) / mn if det and clean else None
    # model: the first survivor's timer fires after min over (N-1) U(min, max) from its last
    # heartbeat, which arrived on average hb/2 before the kill
    out["model_detect_s"] = mn + (t.el_max - t.el_min) / 1000 / t.nodes - t.hb / 2000
    go = GO_REF.get((t.nodes, t.el_min))
    out["go_x"] = go
    return out


async def bench_failover(args: argparse.Namespace, base: Path, timings: list[Timing],
                         proxied: bool) -> list[dict[str, Any]]:
    rows = []
    for t in timings:
        if args.fresh:
            rows.append(await failover_fresh(args, base, t))
            continue
        for wiring in ("direct", "toxiproxy") if proxied else ("direct",):
            d = Path(tempfile.mkdtemp(prefix=f"gf-fo-{t.nodes}-", dir=base))
            c: BenchCluster = DirectCluster(t, d) if wiring == "direct" else ProxiedCluster(t, d, "append")
            trials = []
            limit = max(10.0, 10 * t.el_max / 1000)
            try:
                await c.start()
                for i in range(args.trials):
                    r = await failover_trial(c, t, i, args.poll_ms / 1000, limit)
                    trials.append(r)
                    if args.verbose:
                        print(f"    {t.label} {wiring} #{i}: " + ", ".join(
                            f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in r.items()), flush=True)
            finally:
                await c.close()
            s = summarize(t, wiring, trials)
            rows.append(s)
            print(f"  {t.label:22} {wiring:9}: mean {fmt(s.get('mean_s'))} s = "
                  f"{fmt(s.get('mean_x'), 2)}x min  (ok {s['ok']}/{s['trials']})", flush=True)
    return rows


async def failover_fresh(args: argparse.Namespace, base: Path, t: Timing) -> dict[str, Any]:
    """One new cluster per trial: no node was ever restarted, so no survivor holds a stale
    outbound connection to another (what the node would do if it healed those itself)."""
    trials = []
    for i in range(args.trials):
        d = Path(tempfile.mkdtemp(prefix=f"gf-fr-{t.nodes}-", dir=base))
        c = DirectCluster(t, d)
        try:
            await c.start()
            await asyncio.sleep(0.5)
            trials.append(await failover_trial(c, t, i, args.poll_ms / 1000,
                                               max(10.0, 10 * t.el_max / 1000), restart=False))
        finally:
            await c.close()
        if args.verbose:
            print(f"    {t.label} fresh #{i}: " + ", ".join(
                f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in trials[-1].items()), flush=True)
    s = summarize(t, "fresh", trials)
    print(f"  {t.label:22} fresh    : mean {fmt(s.get('mean_s'))} s = "
          f"{fmt(s.get('mean_x'), 2)}x min  (ok {s['ok']}/{s['trials']})", flush=True)
    return s


# ------------------------------------------------------------------ output


def print_tables(tp: list[dict[str, Any]], fo: list[dict[str, Any]]) -> None:
    if tp:
        print("\nCommit throughput (closed loop; default timing [300,600] hb75)")
        print(f"{'nodes':>5} {'tls':5} {'wiring':9} {'op':5} {'ops/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
        for r in tp:
            print(f"{r['nodes']:>5} {('tls' if r['tls'] else 'plain'):5} {r['wiring']:9} {r['mode']:5} {r['ops_s']:8.1f} "
                  f"{r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['errors']:>6}")
    if fo:
        print("\nFailover: SIGKILL leader -> new leader acked (= applied) a raw-wire append"
              f" (x = multiple of min election timeout; target mean < {TARGET}x)")
        print(f"{'config':22} {'wiring':9} {'ok':>5} {'mean s':>7} {'med s':>7} {'max s':>7} "
              f"{'mean x':>7} {'med x':>6} {'max x':>6} {'KV x':>6} {'Go x':>5}")
        for r in fo:
            print(f"{r['config']:22} {r['wiring']:9} {r['ok']:>2}/{r['trials']:<2} "
                  f"{fmt(r.get('mean_s')):>7} {fmt(r.get('median_s')):>7} {fmt(r.get('max_s')):>7} "
                  f"{fmt(r.get('mean_x'), 2):>7} {fmt(r.get('median_x'), 2):>6} "
                  f"{fmt(r.get('max_x'), 2):>6} {fmt(r.get('kv_mean_x'), 2):>6} "
                  f"{fmt(r.get('go_x'), 1):>5}")
        print("\nFailover breakdown (means, s after the kill, from the survivors' journals)")
        print(f"{'config':22} {'wiring':9} {'model det':>9} {'1st cand':>8} {'leader':>7} "
              f"{'commit':>7} {'ack':>7} {'rounds':>6} {'>1 round':>8} {'split':>5} "
              f"{'vote dly':>8} {'slow vote':>9} {'lease no':>8} {'pred x':>6} {'verified':>8}")
        for r in fo:
            print(f"{r['config']:22} {r['wiring']:9} {fmt(r['model_detect_s']):>9} "
                  f"{fmt(r['detect_s']):>8} {fmt(r['leader_s']):>7} {fmt(r['commit_s']):>7} "
                  f"{fmt(r.get('mean_s')):>7} {fmt(r['rounds'], 2):>6} {r['multi_round']:>8} "
                  f"{r['splits']:>5} {fmt(r['vote_delay_med_s']):>8} {r['slow_votes']:>9} "
                  f"{r['lease_refused']:>8} {fmt(r['pred_x'], 2):>6} "
                  f"{r['verified']:>4}/{r['trials']:<3}")
        print("model det = E[min over N-1 survivors of U(min,max)] - hb/2; vote dly = median time"
              " for the first candidate's RequestVote to reach a survivor; slow vote = trials"
              " where that took > 1 heartbeat (the vote went down a stale peer connection and"
              " was resent by the candidate's timer); split = two survivors stood in one term;"
              " lease no = a survivor refused the first candidate because it had heard from the"
              " dead leader < min timeout before (core._on_vote heard_leader); pred x = mean"
              " detection + median detection->ack of one-round trials with neither problem.")


async def main_async(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"loadavg_start": os.getloadavg()}
    tp: list[dict[str, Any]] = []
    fo: list[dict[str, Any]] = []
    if not args.skip_throughput:
        print(f"throughput: {args.clients} clients, {args.seconds:g}s window", flush=True)
        tp = await bench_throughput(args, base)
    if not args.skip_failover:
        timings = [Timing.parse(s) for s in args.config] if args.config else [
            Timing(3, 1000, 2000, 100), Timing(5, 300, 600, 30), DEFAULT_TIMING]
        if args.explore:
            timings += [Timing.parse(s) for s in EXPLORE]
        timings = [replace(t, tls=tls) for t in timings for tls in tls_modes(args)]
        print(f"failover: {args.trials} trials per configuration", flush=True)
        fo = await bench_failover(args, base, timings, args.failover_proxied)
    out["loadavg_end"] = os.getloadavg()
    print_tables(tp, fo)
    print(f"\nload average (1/5/15 min) at start {out['loadavg_start']}, at end {out['loadavg_end']}")
    out.update(throughput=tp, failover=fo)
    return out


# narrower ranges / other heartbeats (config only), to see what the node could reach
EXPLORE = ["3:1000-1200:100", "3:1000-2000:50", "5:300-360:30", "3:300-360:30"]


def tls_modes(args: argparse.Namespace) -> tuple[bool, ...]:
    return {"on": (True,), "off": (False,), "both": (True, False)}[args.tls]


def _on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 failover trials, 2 s windows, direct only")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0, help="throughput measuring window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=10, help="failover trials per configuration")
    ap.add_argument("--poll-ms", type=float, default=5.0, help="failover write retry interval")
    ap.add_argument("--config", action="append", help="failover timing nodes:min-max:hb (ms); repeatable")
    ap.add_argument("--explore", action="store_true", help=f"also failover configs {EXPLORE}")
    ap.add_argument("--fresh", action="store_true",
                    help="failover on a new cluster per trial (no restarts, no stale peer links)")
    ap.add_argument("--failover-proxied", action="store_true", help="failover through Toxiproxy too")
    ap.add_argument("--no-proxied", action="store_true", help="throughput on direct loopback only")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--json", help="write all figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the node directories")
    ap.add_argument("--tls", choices=("on", "off", "both"), default="on",
                    help="peer ports over TLS (the node default), plain TCP, or each in turn")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failover trial")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.seconds, args.warmup, args.no_proxied = 3, 2.0, 0.5, True
    base = Path(tempfile.mkdtemp(prefix="bench-gf-"))
    # SIGTERM -> the same clean-up path as Ctrl-C (finally blocks close every cluster)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    try:
        out = asyncio.run(main_async(args, base))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
    except KeyboardInterrupt:
        print("interrupted; nodes stopped", file=sys.stderr)
        sys.exit(130)
    finally:
        if args.keep:
            print(f"node directories kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
