"""DRiP lane micro-bench: the CPU of one batch exchange on a WebSocket lane against one
POST /batch of the same batch, between this script (as node n1, with its certificate and
signer) and a real node process n2 (TLS, its gate, its core).

Run: ``.venv/bin/python bench/bench_drip_lane.py [--n 2000] [--items 3] [--jwt-mode shared]``.

Each exchange is sequential (one in flight, as ``peer_pipeline`` 1) and carries ``--items``
bodiless vote responses (the spec's example form: the receiver's gate checks and decodes them
and its core answers each, with nothing to persist). A POST /batch is signed with a fresh
batch token each time (as a node sends it); a lane exchange, since session 47, carries no
token: its frame is MAC'd under the lane's key, which the one signed upgrade carried
(docs/drip.md "Lane frames under a per-lane key"). Printed per exchange: the sender's CPU
(this process, ``time.process_time``), the receiver's (its /proc CPU, less what it spends
idle over the same time: heartbeats to n1, whose own process is stopped for the run), their
sum, and the JWTs signed by the sender and checked by the receiver (its /admin/state
``jwt``; idle heartbeats included). CPU, not time: the figures do not depend on the
machine's load (the elapsed times do, and are printed only for reference).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration" / "drip")]

from drip_mesh import Mesh  # noqa: E402

from nodes.drip import codec, lane  # noqa: E402
from nodes.drip.hostile import Creds  # noqa: E402


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


async def run(n: int, items: int, jwt_mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        m = Mesh(Path(tmp), 2, options={"jwt_mode": jwt_mode})
        try:
            await m.start()
            async with aiohttp.ClientSession() as s:
                await m.wait_all_active(s)
            m.pause("n1")  # we are n1 now: its own process sends nothing meanwhile
            creds = Creds.load("n1", m.extra["n1"]["tls"], m.extra["n1"]["jwt"])
            pid = m.procs["n2"].pid
            body = codec.encode(codec.Batch("n1", tuple(
                codec.VoteResponse("n1", True, None, None, None) for _ in range(items)))
            ).body_bytes()
            base = f"https://127.0.0.1:{m.ports['n2']['peer']}"

            def token() -> str:
                return creds.signer.header(time.time(), codec.batch_digest("n1", body),
                                           once=True)

            out: dict[str, Any] = {"exchanges": n, "items": items, "jwt_mode": jwt_mode}
            conn = aiohttp.TCPConnector(ssl=creds.with_cert)
            async with aiohttp.ClientSession(connector=conn) as s:
                # the receiver's idle CPU (heartbeats to the stopped n1 and timers)
                c0, t0 = cpu_s(pid), time.monotonic()
                await asyncio.sleep(3.0)
                idle_per_s = (cpu_s(pid) - c0) / (time.monotonic() - t0)

                async def post() -> None:
                    async with s.post(base + "/batch", data=body, headers={
                            codec.H_NODE: "n1", codec.H_AUTH: token(),
                            "Content-Type": "application/json"}) as r:
                        raw = await r.read()
                        assert r.status == 200, (r.status, raw)
                        json.loads(raw)

                key = lane.new_key()
                opening = codec.LaneOpen("n1", key.hex())
                ws = await s.ws_connect(base + lane.PATH, headers={
                    **codec.encode(opening).headers, codec.H_AUTH: creds.signer.header(
                        time.time(), codec.signed_digest(opening), once=True)})
                seal = lane.Seal(key)

                async def exchange() -> None:
                    await ws.send_bytes(seal.exchange(body))
                    msg = await ws.receive()
                    _, status, raw = seal.open_answer(msg.data)
                    assert status == 200, (status, raw)
                    json.loads(raw)

                async def checked() -> int:
                    async with s.get(m.admin("n2") + "/admin/state") as r:
                        return int((await r.json())["jwt"]["checked"])

                for name, one in (("post_batch", post), ("lane", exchange),
                                  ("post_batch_2", post), ("lane_2", exchange)):
                    for _ in range(50):  # warm: connections, caches
                        await one()
                    j0, s0 = await checked(), creds.signer.signed
                    p0, c0, t0 = time.process_time(), cpu_s(pid), time.monotonic()
                    for _ in range(n):
                        await one()
                    dt = time.monotonic() - t0
                    snd = (time.process_time() - p0) / n
                    rcv = (cpu_s(pid) - c0 - idle_per_s * dt) / n
                    out[name] = {"sender_us": round(1e6 * snd), "receiver_us": round(1e6 * rcv),
                                 "total_us": round(1e6 * (snd + rcv)),
                                 "elapsed_us": round(1e6 * dt / n),
                                 "jwt_signed": round((creds.signer.signed - s0) / n, 2),
                                 "jwt_checked": round((await checked() - j0) / n, 2)}
                await ws.close()
            out["receiver_idle_cpu_ms_per_s"] = round(1e3 * idle_per_s, 2)
            out["load_average"] = os.getloadavg()
            m.resume("n1")
            return out
        finally:
            m.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--items", type=int, default=3)
    ap.add_argument("--jwt-mode", choices=["shared", "public"], default="shared")
    a = ap.parse_args()
    print(json.dumps(asyncio.run(run(a.n, a.items, a.jwt_mode)), indent=1))


if __name__ == "__main__":
    main()
