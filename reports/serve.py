"""``harness serve``: browse the store's reports over HTTP on loopback (aiohttp).

Static files only, rooted at the store: run pages link to the index with relative paths, so
what is served is exactly what was written. Loopback by default: a store holds whatever the
system under test logged.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from reports.discover import REPORT_DIR


def make_app(store: Path) -> web.Application:
    root = store.resolve()

    async def home(request: web.Request) -> web.StreamResponse:
        if not (root / REPORT_DIR / "index.html").exists():
            return web.Response(status=404, text=f"no report in {root}; run `harness report` first")
        raise web.HTTPFound(f"/{REPORT_DIR}/index.html")

    async def dir_index(request: web.Request) -> web.StreamResponse:
        rel = request.match_info["path"]
        p = (root / rel).resolve()
        if not p.is_relative_to(root) or not p.is_dir() or not (p / "index.html").is_file():
            raise web.HTTPNotFound()
        raise web.HTTPFound(f"/{rel.rstrip('/')}/index.html")

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/{path:.*/}", dir_index)
    app.router.add_static("/", root, follow_symlinks=False, show_index=False)
    return app


def serve(store: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    print(f"serving {store.resolve()} on http://{host}:{port}/  (Ctrl-C to stop)")
    web.run_app(make_app(store), host=host, port=port, print=None)
