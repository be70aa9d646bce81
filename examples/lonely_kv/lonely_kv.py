#!/usr/bin/env python3
"""A deliberately broken key-value node that speaks Garlic Farm's client API: every node keeps
its own dictionary and never tells its peers, so a read on one node misses a write made on
another. It is the "your own implementation" example of docs/extending.md, and the harness
must find it not linearizable:

    harness run garlicfarm --node-command "python3 examples/lonely_kv/lonely_kv.py {config}"

Standard library only, on purpose: the harness needs nothing from an implementation but the
contract in docs/contracts.md (the config file, the ports, the admin API, the client API).
It writes no journal, so the checks that read one say unknown and why.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Store:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.lock = threading.Lock()

    def apply(self, f: str, body: dict[str, Any]) -> dict[str, Any]:
        key = str(body.get("key"))
        with self.lock:
            if f == "read":
                return {"type": "ok", "value": self.data.get(key)}
            if f == "write":
                self.data[key] = body.get("value")
                return {"type": "ok", "value": None}
            if f == "cas":
                cur = self.data.get(key)
                if cur != body.get("old"):
                    return {"type": "fail", "error": "cas-mismatch", "value": cur}
                self.data[key] = body.get("new")
                return {"type": "ok", "value": None}
        return {"type": "fail", "error": f"unknown op {f!r}"}


def serve(port: int, host: str, routes: dict[tuple[str, str], Any]) -> None:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                body = None
            route = routes.get((method, self.path.split("?")[0]))
            if route is None or not isinstance(body, dict):
                self.send_response(404 if route is None else 400)
                self.end_headers()
                return
            out = json.dumps(route(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._answer("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._answer("POST")

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    cfg = json.load(open(sys.argv[1]))
    host, ports, store = cfg["host"], cfg["ports"], Store()
    # the peer port is where the harness's proxies deliver peers' traffic; this node listens
    # so the link exists, and ignores it (the bug)
    peer = socket.create_server((host, ports["peer"]))
    serve(ports["client"], host, {("POST", f"/kv/{f}"): (lambda b, f=f: store.apply(f, b))
                                  for f in ("read", "write", "cas")})
    serve(ports["admin"], host, {
        ("GET", "/admin/health"): lambda _: {"ok": True, "id": cfg["id"]},
        ("GET", "/admin/state"): lambda _: {"id": cfg["id"], "kv": dict(store.data)},
        ("POST", "/admin/clock"): lambda _: {"ok": True},
    })
    print(f"lonely_kv {cfg['id']} serving on {host}:{ports['client']}", flush=True)
    try:
        while True:
            conn, _ = peer.accept()
            conn.close()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
