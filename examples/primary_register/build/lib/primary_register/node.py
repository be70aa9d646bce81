"""The node: ``python -m primary_register.node --config CONFIG.json``.

The primary (lowest ``num_id``) holds the register and fsyncs every write before it answers,
so a kill loses nothing. Any other node forwards each op to the primary over its peer link,
which the harness routes through a proxy it can cut. The bug mode ``stale-reads`` makes a
non-primary node answer reads from the last value it forwarded, without asking the primary.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BUGS = ("stale-reads",)


class Register:
    """The primary's register, durable in ``data_dir/value.json``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "value.json"
        self.lock = threading.Lock()
        self.value = json.loads(self.path.read_text())["value"] if self.path.exists() else None

    def apply(self, op: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if op.get("f") == "read":
                return {"type": "ok", "value": self.value}
            if op.get("f") == "write":
                tmp = self.path.with_suffix(".tmp")
                with open(tmp, "w") as f:
                    json.dump({"value": op.get("value")}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
                self.value = op.get("value")
                return {"type": "ok", "value": op.get("value")}
        return {"type": "fail", "error": f"unknown op {op.get('f')!r}"}


class Forwarder:
    """A non-primary node: every op goes to the primary; an op that may have reached it but
    got no answer is ``info`` (it may have happened), one refused before sending is ``fail``."""

    def __init__(self, primary: str, bugs: list[str]) -> None:
        self.url = f"http://{primary}/op"
        self.stale = "stale-reads" in bugs
        self.last: Any = None

    def apply(self, op: dict[str, Any]) -> dict[str, Any]:
        if self.stale and op.get("f") == "read":
            return {"type": "ok", "value": self.last}
        req = urllib.request.Request(self.url, json.dumps(op).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=1.0) as r:
                out = json.loads(r.read())
        except urllib.error.URLError as e:
            if isinstance(e.reason, ConnectionRefusedError):
                return {"type": "fail", "error": "primary unreachable"}
            return {"type": "info", "error": f"no answer from the primary: {e.reason}"}
        except (OSError, ValueError) as e:  # a reset or a torn answer: it may have happened
            return {"type": "info", "error": f"no answer from the primary: {e}"}
        if out.get("type") == "ok" and op.get("f") == "write":
            self.last = op.get("value")
        return out


def serve(host: str, port: int, routes: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                body = None
            route = routes.get(self.path)
            if route is None or not isinstance(body, dict):
                self.send_error(404 if route is None else 400)
                return
            out = json.dumps(route(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    cfg = json.loads(Path(ap.parse_args().config).read_text())
    unknown = set(cfg.get("bugs", [])) - set(BUGS)
    if unknown:
        raise SystemExit(f"unknown bug modes {sorted(unknown)}; this node has {list(BUGS)}")
    data = Path(cfg["data_dir"])
    data.mkdir(parents=True, exist_ok=True)
    ids = {p["num_id"]: p["peer"] for p in cfg["peers"].values()}
    primary = min([cfg["num_id"], *ids])
    store: Register | Forwarder = (Register(data) if primary == cfg["num_id"]
                                   else Forwarder(ids[primary], cfg.get("bugs", [])))
    host, ports = cfg["host"], cfg["ports"]
    serve(host, ports["client"], {"/op": store.apply})
    if isinstance(store, Register):
        serve(host, ports["peer"], {"/op": store.apply})
    else:  # nobody sends to a forwarder; listen so its peer link has an end
        socket.create_server((host, ports["peer"]))
    serve(host, ports["admin"], {
        "/admin/health": lambda _: {"ok": True, "id": cfg["id"]},
        "/admin/state": lambda _: {"id": cfg["id"], "primary": primary,
                                   "value": getattr(store, "value", None)},
        "/admin/clock": lambda _: {"ok": True},
    })
    print(f"{cfg['id']} serving, primary is num_id {primary}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
