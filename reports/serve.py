"""``harness serve``: browse the store over HTTP on loopback (aiohttp).

Everything under the store is served as it is on disk: the report pages (which link to each
other and to a run's files with relative paths, so what is served is exactly what was
written), and every run's files: history.jsonl, results.json, harness.log, node logs and
journals, the linearizability explanations. A directory with an index.html redirects to it;
one without is listed. Every path is resolved (symlinks included) and must stay inside the
store, else 404: the store's ``latest`` link works, a link or a ``..`` that leads out does
not. Loopback by default: a store holds whatever the system under test logged.
"""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from reports.discover import REPORT_DIR

#: served as text in the browser rather than downloaded
TEXT_TYPES = {".jsonl": "text/plain", ".log": "text/plain", ".json": "application/json",
              ".xml": "application/xml", ".txt": "text/plain", ".out": "text/plain",
              ".err": "text/plain"}


def inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` resolved, or None if it leads outside ``root`` (``..``, an absolute part,
    a symlink out) or does not exist."""
    if "\x00" in rel:
        return None
    p = (root / rel.lstrip("/")).resolve()
    if not p.is_relative_to(root) or not p.exists():
        return None
    return p


def listing(root: Path, d: Path, url_path: str) -> str:
    """A plain page listing a directory's entries (escaped, links relative to the page)."""
    rows = []
    if d != root:
        rows.append('<li><a href="../">../</a></li>')
    for e in sorted(d.iterdir(), key=lambda e: (not e.is_dir(), e.name)):
        name = e.name + ("/" if e.is_dir() else "")
        size = f" <span>({e.stat().st_size} bytes)</span>" if e.is_file() else ""
        rows.append(f'<li><a href="{quote(name)}">{html.escape(name)}</a>{size}</li>')
    title = html.escape(url_path)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family: system-ui, sans-serif'><h1>{title}</h1>"
            f"<ul>{''.join(rows)}</ul></body></html>")


def make_app(store: Path) -> web.Application:
    root = store.resolve()

    async def home(request: web.Request) -> web.StreamResponse:
        if not (root / REPORT_DIR / "index.html").exists():
            return web.Response(status=404, text=f"no report in {root}; run `harness report` "
                                                 "first (or browse the runs at /_runs/)")
        raise web.HTTPFound(f"/{REPORT_DIR}/index.html")

    async def get(request: web.Request) -> web.StreamResponse:
        rel = request.match_info["path"]
        if rel == "_runs/":  # the store's own listing, when there is no report yet
            return web.Response(text=listing(root, root, "/"), content_type="text/html")
        p = inside(root, rel)
        if p is None:
            raise web.HTTPNotFound(text="not in the store")
        if p.is_dir():
            if not request.path.endswith("/"):
                raise web.HTTPFound(request.path + "/")
            if (p / "index.html").is_file():
                raise web.HTTPFound(request.path + "index.html")
            return web.Response(text=listing(root, p, request.path), content_type="text/html")
        headers = {}
        ctype = TEXT_TYPES.get(p.suffix)
        if ctype:
            headers["Content-Type"] = f"{ctype}; charset=utf-8"
        return web.FileResponse(p, headers=headers)

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/{path:.+}", get)
    return app


async def _serve(store: Path, host: str, port: int) -> None:
    runner = web.AppRunner(make_app(store))
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1] if runner.addresses else port
        print(f"serving {store.resolve()} on http://{host}:{bound}/  (Ctrl-C to stop)",
              flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def serve(store: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until Ctrl-C; ``port`` 0 takes a free port (the line printed says which)."""
    asyncio.run(_serve(store, host, port))
