"""DRiP under hostile traffic: 10,000 hostile requests (nodes/drip/hostile.py: every attack
kind, from compromised members and unauthenticated clients) against a 5-node figure-1 mesh
while closed-loop clients update, beside a quiet phase of the same clients.

Figures: each node's RSS before and after the hostile phase (issue 26 asks for flat), the
commits per second during it vs the quiet phase (issue 26: within 20%), what the attacker saw
answered for the vote-round kinds, and what each node refused.

Real node processes over TLS on loopback, peers wired directly (no proxy; `drip_mesh.Mesh`),
the hostile sender built as the harness builds it (`nodes.drip.hostile.driver` on the nodes'
own configs). The attacker, the clients and the five nodes share this machine; a real
attacker runs elsewhere. ``--attacker-nice 19`` runs the attacker's process at the lowest CPU
priority (``os.nice(19)``), so it takes the cores only when the nodes and clients leave them
idle; the default (0) keeps the old mode, the attacker competing at the same priority, because
on a busy machine a niced attacker sends at about half the rate (docs/drip.md, session 41b):
its better ratio is a slower attack, not cheaper nodes. The figures that do not depend on
either: the attacker's CPU seconds per phase, the nodes' CPU per committed update in both
phases, and the node CPU the attack added per hostile request.

Run: ``.venv/bin/python bench/bench_drip_hostile.py [--requests 10000] [--rate 100]
[--clients 8] [--quiet-s 20] [--attacker-nice 0]`` (Linux: RSS is read from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from faults.hostile import Target  # noqa: E402
from nodes.common import heapdiag  # noqa: E402
from nodes.drip.hostile import Burst, HostileDrip, driver  # noqa: E402
from nodes.drip.topology import figure1  # noqa: E402

#: per phase tag: seconds the bench's own event loop stalled (`loop_lag`)
LAG: dict[str, float] = {}
#: ``only``: attack kinds to keep (comma-separated); ``drop``: keep all others instead
KINDS: dict[str, Any] = {}
#: CPU seconds of the attacker's own process (``s``), when it ran in one
ATTACKER_CPU: dict[str, float] = {}
#: per phase tag: each client update's seconds
LATENCY: dict[str, list[float]] = {}
#: per phase tag: client updates committed so far (read by the progress sampler)
COMMITTED: dict[str, int] = {}
#: (seconds into the attack, hostile requests tried, per-node (RSS MiB, CPU s), commits)
PROGRESS: list[tuple[float, int, dict[str, tuple[float, float]], int]] = []
#: the kinds that meet the core's vote-round checks (their answers are printed)
CORE_KINDS = ("commit-without-vote", "commit-other-initiator", "revote-applied",
              "sync-unsolicited", "vote-response-relayed-voters")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sample(m: Mesh, snap: bool = True) -> dict[str, tuple[float, float]]:
    """Per node: (RSS MiB, CPU seconds); ``bench``: this process's CPU (attacker, clients).
    With ``--heapdiag`` each node also writes a tracemalloc snapshot (nodes/common/heapdiag)."""
    if snap and os.environ.get(heapdiag.ENV):
        for n in m.ids:
            m.procs[n].send_signal(signal.SIGUSR2)
        time.sleep(3.0)  # the snapshots are written before the RSS below is read
    out = {n: (rss_mib(m.procs[n].pid), cpu_s(m.procs[n].pid)) for n in m.ids}
    return {**out, "bench": (0.0, time.process_time())}


async def updates(m: Mesh, s: aiohttp.ClientSession, clients: int, tag: str,
                  done: asyncio.Event) -> tuple[int, int, float]:
    """Closed-loop clients on every node until ``done``: (commits, other answers, seconds)."""
    counts = [0, 0]

    async def worker(c: int) -> None:
        i = 0
        while not done.is_set():
            t0 = time.monotonic()
            try:  # no answer in time (a very loaded machine) is "not committed", not a crash
                st, _ = await m.update(s, m.ids[c % len(m.ids)], f"c{c}-k{i % 50}", i,
                                       f"{tag}{c}-{i}")
            except (aiohttp.ClientError, TimeoutError):
                st = 0
            LATENCY.setdefault(tag, []).append(time.monotonic() - t0)
            counts[0 if st == 200 else 1] += 1
            COMMITTED[tag] = counts[0]
            i += 1

    t0 = time.monotonic()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    return counts[0], counts[1], time.monotonic() - t0


async def loop_lag(done: asyncio.Event, step: float = 0.01) -> float:
    """Seconds this process's event loop was late (beyond 5 ms per tick) until ``done``: the
    clients share it with the attacker, so a stall here is client latency no node caused."""
    late = 0.0
    while not done.is_set():
        t0 = time.monotonic()
        await asyncio.sleep(step)
        late += max(0.0, time.monotonic() - t0 - step - 0.005)
    return late


async def phase(m: Mesh, s: aiohttp.ClientSession, clients: int, tag: str, seconds: float
                ) -> tuple[int, int, float]:
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, done.set)
    lag = asyncio.create_task(loop_lag(done))
    out = await updates(m, s, clients, tag, done)
    LAG[tag] = await lag
    return out


async def attack(h: HostileDrip, requests: int, progress: Any = None
                 ) -> dict[str, dict[str, Any]]:
    """Send with ``h`` until ``requests`` were tried (written, or refused a connection:
    ``failed``, e.g. reset by a node's per-source connection bucket); its counts. The number
    tried so far goes to ``progress`` (a shared ``multiprocessing.Value``), if given."""
    h.start()
    try:
        while (tried := sum(v["sent"] + v.get("failed", 0) for v in h.counts().values())
               ) < requests:
            if progress is not None:
                progress.value = tried
            await asyncio.sleep(0.2)
    finally:
        await h.stop()
        h.close()
    return h.counts()


def only(kinds: str, drop: bool = False) -> None:
    """Limit every burst to the attack kinds named (comma-separated), or (``drop``) to all
    others: which kinds cost the mesh its commit rate."""
    names = set(kinds.split(","))
    build = Burst.build

    def limited(self: Burst, t: Any, known: Any = None) -> list[Any]:
        return [a for a in build(self, t, known) if (a.kind.split(":")[0] in names) != drop]

    Burst.build = limited  # type: ignore[method-assign]


def attacker_main(targets: list[Target], configs: dict[str, Any], requests: int,
                  out: Any, kinds: str | None = None, drop: bool = False, nice: int = 0,
                  progress: Any = None) -> None:
    """The attacker in a process of its own: the clients' event loop is then not the
    attacker's (in one loop the attack stalled the clients, which measured the bench);
    ``nice`` lowers its CPU priority so the nodes, not the attacker, are measured."""
    if nice:
        os.nice(nice)
    if kinds:
        only(kinds, drop)
    h = driver(targets, random.Random(26), configs)
    counts = asyncio.run(attack(h, requests, progress))
    out.send((counts, time.process_time()))
    out.close()


async def hostile_phase(m: Mesh, s: aiohttp.ClientSession, targets: list[Target],
                        configs: dict[str, Any], requests: int, clients: int, same_loop: bool,
                        nice: int = 0) -> tuple[tuple[int, int, float], dict[str, dict[str, Any]]]:
    """The clients while the attacker sends until ``requests`` were written: in a child
    process, or (``same_loop``) in this process's event loop beside the clients."""
    done = asyncio.Event()
    load = asyncio.create_task(updates(m, s, clients, "h", done))
    lag = asyncio.create_task(loop_lag(done))
    ctx = multiprocessing.get_context("spawn")
    tried = ctx.Value("q", 0)
    watch = asyncio.create_task(sampler(m, tried, done))
    try:
        if same_loop:
            counts = await attack(driver(targets, random.Random(26), configs), requests, tried)
        else:
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=attacker_main, args=(targets, configs, requests, send,
                                                        KINDS.get("only"), KINDS.get("drop"),
                                                        nice, tried),
                            name="drip-hostile-attacker")
            p.start()
            send.close()
            try:
                while not recv.poll():
                    if p.exitcode is not None:
                        raise RuntimeError(f"the attacker process exited {p.exitcode}; "
                                           "its traceback is above")
                    await asyncio.sleep(0.2)
                counts, ATTACKER_CPU["s"] = recv.recv()
            finally:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join()
    finally:
        done.set()
    LAG["h"] = await lag
    await watch
    return await load, counts


async def sampler(m: Mesh, tried: Any, done: asyncio.Event, step: float = 1.0) -> None:
    """Every ``step`` s of the attack: hostile requests tried, each node's RSS and CPU, and
    commits so far (`PROGRESS`), so the cost per hostile request can be told per third of
    the attack: a cost that grows as the attack goes on is state the attack leaves behind."""
    t0 = time.monotonic()
    while not done.is_set():
        PROGRESS.append((time.monotonic() - t0, tried.value, sample(m, False),
                         COMMITTED.get("h", 0)))
        await asyncio.sleep(step)
    PROGRESS.append((time.monotonic() - t0, tried.value, sample(m, False),
                         COMMITTED.get("h", 0)))


def thirds(ids: list[str], quiet_ms_per_commit: float) -> list[str]:
    """Per third of the hostile requests: node CPU (all nodes) per hostile request beyond the
    commits' own quiet cost, commits, and the RSS of each node at its end."""
    if len(PROGRESS) < 4:
        return []
    total = PROGRESS[-1][1]
    marks = [PROGRESS[0]]
    for k in (1, 2):
        marks.append(next(p for p in PROGRESS if p[1] >= total * k / 3))
    marks.append(PROGRESS[-1])
    out = []
    for k, (a, b) in enumerate(zip(marks, marks[1:], strict=False), 1):
        cpu = sum(b[2][n][1] - a[2][n][1] for n in ids)
        req, commits = b[1] - a[1], b[3] - a[3]
        added = cpu - commits * quiet_ms_per_commit / 1000
        rss = ", ".join(f"{b[2][n][0]:.0f}" for n in ids)
        out.append(f"third {k}: {req} requests in {b[0] - a[0]:.0f} s, {commits} commits, "
                   f"node CPU {cpu:.1f} s = {_ms(cpu, req)} per request, "
                   f"{_ms(added, req)} beyond the commits' quiet cost; RSS MiB at its end: {rss}")
    return out


async def run(root: Path, requests: int, rate: float, clients: int, quiet_s: float,
              same_loop: bool, lies: bool = True, nice: int = 0,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    m = Mesh(root, 5, figure1([f"n{i}" for i in range(1, 6)]),
             options={"hostile_rate": rate, "hostile_key_holder_lies": lies, **(extra or {})})
    try:
        await m.start()
        configs = {n: json.loads(m.configs[n].read_text()) for n in m.ids}
        targets = [Target(n, i + 1, "127.0.0.1", m.ports[n]["peer"])
                   for i, n in enumerate(m.ids)]
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            await phase(m, s, clients, "w", 5.0)  # warm up: imports, buffers, first keys
            q0, load = sample(m), [os.getloadavg()[0]]
            quiet = await phase(m, s, clients, "q", quiet_s)
            before = sample(m)
            # a correct mesh is refused nothing: start, warm-up and quiet phase together
            pre = {n: await m.state(s, n) for n in m.ids}
            calm = {n: st.get("refused", {}) for n, st in pre.items()}
            load.append(os.getloadavg()[0])
            t_hostile = time.time()
            during, counts = await hostile_phase(m, s, targets, configs, requests, clients,
                                                 same_loop, nice)
            after = sample(m)
            load.append(os.getloadavg()[0])
            try:  # a loaded machine may need longer: the figures are kept either way
                await m.wait_all_active(s)
            except TimeoutError as e:
                print(f"after the attack: {e}", file=sys.stderr)
            states = {n: await m.state(s, n) for n in m.ids}
        alive = {n: m.procs[n].poll() is None for n in m.ids}
        aborts = abort_reasons(root, m.ids, t_hostile)
        answers = later_answers(root, m.ids, t_hostile)
        asks = lock_asks(root, m.ids, t_hostile)
    finally:
        m.close()
    return {"quiet": quiet, "during": during, "q0": q0, "before": before, "after": after,
            "load": load,
            "alive": alive, "aborts": aborts, "answers": answers, "asks": asks,
            "sent": sum(v["sent"] + v.get("failed", 0) for v in counts.values()),
            "failed": sum(v.get("failed", 0) for v in counts.values()),
            "status": {k: _sum(counts, k) for k in CORE_KINDS},
            "refused": {n: st.get("refused", {}) for n, st in states.items()},
            "refused_quiet": calm,
            "sizes": {n: (pre[n].get("sizes", {}), states[n].get("sizes", {})) for n in m.ids}}


def abort_reasons(root: Path, ids: list[str], since: float) -> dict[str, int]:
    """How the initiators' aborts after wall time ``since`` were explained (their journals'
    ``decide`` events): which member voted no or was missing is what tells a slow mesh from
    one that drops a peer's messages."""
    out: dict[str, int] = {}
    for n in ids:
        with open(root / n / "data" / "events.jsonl", "rb") as f:
            for line in f:
                ev = json.loads(line)
                if (ev.get("type") == "decide" and ev.get("outcome") == "abort"
                        and ev["t"] >= since):
                    why = f"{n}: {ev.get('reason')}"
                    out[why] = out.get(why, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def lock_asks(root: Path, ids: list[str], since: float) -> dict[str, int]:
    """Outcome questions asked after wall time ``since`` (``lock-expired`` events: each sent
    to every active peer) and by how many distinct locks: locks a flood left that no one could
    end were asked about again and again (issue 26, session 44); since session 45 a lock of a
    round forged in a member's name ends once that member is asked (it answers "aborted")."""
    asks, locks = 0, set()
    for n in ids:
        with open(root / n / "data" / "events.jsonl", "rb") as f:
            for line in f:
                if b'"lock-expired"' not in line:
                    continue
                ev = json.loads(line)
                if ev.get("type") == "lock-expired" and ev["t"] >= since:
                    asks += len(ev.get("asked", ()))
                    locks.add((n, ev.get("uid")))
    return {"questions sent": asks, "locks": len(locks)}


def later_answers(root: Path, ids: list[str], since: float) -> dict[str, int]:
    """Vote answers after wall time ``since`` that came from a hop that had answered already:
    ``re-answer`` (a relay passed the voters they proved up again) and ``late-vote`` (after the
    vote was decided or from a hop never asked), so a run shows whether answers are lost."""
    out = {"re-answer": 0, "late-vote": 0, "re-answer-after-decide": 0}
    decided: dict[str, float] = {}
    reanswers: list[tuple[str, float]] = []
    for n in ids:
        with open(root / n / "data" / "events.jsonl", "rb") as f:
            for line in f:
                ev = json.loads(line)
                if ev.get("type") == "decide":
                    decided[ev["uid"]] = ev["t"]
                elif ev.get("type") in out and ev["t"] >= since:
                    out[ev["type"]] += 1
                    if ev["type"] == "re-answer":
                        reanswers.append((ev["uid"], ev["t"]))
    # a re-answer after its update was decided at the initiator helps nobody
    out["re-answer-after-decide"] = sum(1 for u, t in reanswers if decided.get(u, t + 1) <= t)
    return out


def _per(mib: float, commits: int) -> str:
    return f"{mib * 1024 / commits:.2f} KiB" if commits else "n/a"


def _ms(cpu_s: float, commits: int) -> str:
    return f"{cpu_s * 1000 / commits:.1f} ms" if commits else "n/a"


def _total(refused: dict[str, dict[str, int]]) -> dict[str, int]:
    """Refusal counts of every node added up, by reason."""
    total: dict[str, int] = {}
    for ref in refused.values():
        for k, v in ref.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def _sum(counts: dict[str, dict[str, Any]], kind: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts.values():
        for code, k in c["status"].get(kind, {}).items():
            out[code] = out.get(code, 0) + k
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=100.0, help="hostile requests a second")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--quiet-s", type=float, default=20.0)
    ap.add_argument("--same-loop", action="store_true",
                    help="run the attacker in the clients' event loop (the old way: its "
                         "stalls then slow the clients, not the nodes)")
    ap.add_argument("--attacker-nice", type=int, default=0, choices=range(20),
                    metavar="0-19", help="CPU niceness of the attacker's process; 19: the "
                    "lowest priority, so the nodes do not pay for the attacker's CPU (a real "
                    "attacker runs elsewhere), but on a busy machine it then sends slower; "
                    "0 (default): the attacker competes with the nodes, as before")
    ap.add_argument("--kinds", help="only these attack kinds (comma-separated; the attacker "
                    "then runs in its own process)")
    ap.add_argument("--drop-kinds", action="store_true", help="every kind but --kinds")
    ap.add_argument("--no-key-holder-lies", action="store_true",
                    help="leave out the compromised member's own forged yes on a vote the "
                         "target waits on (hostile_key_holder_lies false, as the correct-node "
                         "chaos test): a member's own word no node can refuse")
    ap.add_argument("--node-option", action="append", default=[], metavar="KEY=JSON",
                    help="a node option for every node (repeatable), e.g. "
                         "charge_core_refusals=false: a lever off, to compare back to back")
    ap.add_argument("--heapdiag", metavar="DIR", help="run the nodes under tracemalloc and "
                    "write a snapshot of each before the quiet phase, before and after the "
                    "attack to DIR (nodes/common/heapdiag.py; CPU figures are then void)")
    a = ap.parse_args()
    if a.heapdiag:
        os.environ[heapdiag.ENV] = str(Path(a.heapdiag).resolve())
    extra: dict[str, Any] = {}
    for kv in a.node_option:
        k, sep, v = kv.partition("=")
        try:
            extra[k] = json.loads(v)
        except ValueError:
            sep = ""
        if not sep or not k:
            ap.error(f"--node-option {kv!r}: expected KEY=JSON, e.g. initiator_rounds=1000000")
    KINDS.update(only=a.kinds, drop=a.drop_kinds)
    with tempfile.TemporaryDirectory() as d:
        r = asyncio.run(run(Path(d), a.requests, a.rate, a.clients, a.quiet_s, a.same_loop,
                            not a.no_key_holder_lies, a.attacker_nice, extra))
    (qc, qo, qs), (hc, ho, hs) = r["quiet"], r["during"]
    if extra:
        print("node options:", json.dumps(extra))
    print(f"drip 5 nodes (figure 1): {r['sent']} hostile requests in {hs:.1f} s "
          f"({r['sent'] / hs:.0f}/s; {r['failed']} of them refused a connection)")
    print(f"commits: quiet {qc / qs:.1f}/s ({qo} not committed), during hostile "
          f"{hc / hs:.1f}/s ({ho} not committed): {hc / hs / (qc / qs):.0%} of quiet")
    q0, b, af = r["q0"], r["before"], r["after"]
    for n in sorted(r["alive"]):
        print(f"{n}: RSS {b[n][0]:.1f} MiB before, {af[n][0]:.1f} MiB after "
              f"({af[n][0] - b[n][0]:+.1f}; quiet phase {b[n][0] - q0[n][0]:+.1f}); RSS grown "
              f"per commit: quiet {_per(b[n][0] - q0[n][0], qc)}, hostile "
              f"{_per(af[n][0] - b[n][0], hc)}; CPU s/s: quiet {(b[n][1] - q0[n][1]) / qs:.2f}, "
              f"hostile {(af[n][1] - b[n][1]) / hs:.2f}; alive {r['alive'][n]}")
    node_cpu = [sum(x[n][1] - y[n][1] for n in r["alive"]) for x, y in ((b, q0), (af, b))]
    print(f"node CPU per committed update (all five nodes; load-independent-ish): quiet "
          f"{_ms(node_cpu[0], qc)}, hostile {_ms(node_cpu[1], hc)}")
    # what the attack added beyond the commits' own quiet cost: comparable across attack
    # rates (a niced attacker sends slower on a busy machine) and attacker placements
    added = node_cpu[1] - hc * node_cpu[0] / max(1, qc)
    print(f"node CPU the attack added: {added:.1f} s, {_ms(added, r['sent'])} per hostile "
          "request")
    for line in thirds(sorted(r["alive"]), node_cpu[0] * 1000 / max(1, qc)):
        print(line)
    print(f"load average (1 min) at start {r['load'][0]:.1f}, before the attack "
          f"{r['load'][1]:.1f}, at the end {r['load'][2]:.1f}")
    print(f"bench process (clients and attacker) CPU s/s: quiet "
          f"{(b['bench'][1] - q0['bench'][1]) / qs:.2f}, hostile "
          f"{(af['bench'][1] - b['bench'][1]) / hs:.2f}")
    if "s" in ATTACKER_CPU:
        print(f"attacker process (nice {a.attacker_nice}) CPU s: quiet 0.0 (not running), "
              f"hostile {ATTACKER_CPU['s']:.1f} ({ATTACKER_CPU['s'] / hs:.2f} s/s, "
              f"{ATTACKER_CPU['s'] * 1000 / max(1, r['sent']):.1f} ms per request)")
    print(f"bench event loop late: quiet {LAG.get('q', 0.0):.1f} s of {qs:.0f}, hostile "
          f"{LAG.get('h', 0.0):.1f} s of {hs:.0f}")
    for tag, name in (("q", "quiet"), ("h", "hostile")):
        ms = sorted(x * 1000 for x in LATENCY.get(tag, [0.0]))
        print(f"update latency {name}: p50 {ms[len(ms) // 2]:.0f} ms, p99 "
              f"{ms[int(len(ms) * 0.99)]:.0f} ms")
    print("answers to the vote-round attacks:", json.dumps(r["status"]))
    print("refused before the attack (a correct mesh: must be empty):",
          json.dumps(_total(r["refused_quiet"])))
    print("refused (all nodes):", json.dumps(_total(r["refused"])))
    print("aborts during hostile, by initiator and reason:", json.dumps(r["aborts"]))
    print("vote answers during hostile from a hop that had answered:", json.dumps(r["answers"]))
    print("lock outcome questions during hostile (all nodes):", json.dumps(r["asks"]))
    for n, (pre, post) in sorted(r["sizes"].items()):  # GET /admin/state sizes, issue 26
        grown = {k: f"{pre.get(k, 0)}->{v}" for k, v in post.items() if v != pre.get(k, 0)}
        print(f"{n} remembered (before->after the attack):", json.dumps(grown))


if __name__ == "__main__":
    main()
