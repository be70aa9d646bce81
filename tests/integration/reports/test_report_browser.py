"""Headless Chromium opens the served index and a run page: every image loads, no console
errors, and a screenshot of each is saved (under the store's ``_report/screenshots``)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from aiohttp import web
from report_builders import bad_store, real_run
from report_cdp import Browser, chromium_binary

from reports.report import ReportOptions, build_report
from reports.serve import make_app

BINARY = chromium_binary()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason="no chromium binary; install Debian's `chromium` package "
                           "(apt-get install -y chromium) to run the browser test")


def test_index_and_run_page_load_cleanly(tmp_path: Path):
    store = tmp_path / "store"
    stale = real_run(store, "kv-stale", 2, stale=True)
    bad_store(store)
    build_report(ReportOptions(store=store, engine="local", recovery_window_s=0.1))
    shots = Path(os.environ.get("HARNESS_SCREENSHOTS", store / "_report" / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)

    async def go() -> dict[str, dict]:
        runner = web.AppRunner(make_app(store))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        try:
            async with Browser(BINARY, tmp_path / "profile") as b:  # type: ignore[arg-type]
                return {
                    "index": await b.open(f"{base}/", shots / "index.png"),
                    "run": await b.open(f"{base}/kv-stale/{stale.name}/report/index.html",
                                        shots / "run.png"),
                }
        finally:
            await runner.cleanup()

    pages = asyncio.run(go())
    assert len(pages["index"]["images"]) == 1  # the trends plot (two dates in the store)
    assert len(pages["run"]["images"]) == 5  # latency, throughput, timeline, faults, nodes
    for name, p in pages.items():
        assert p["errors"] == [], f"{name}: {p['errors']}"
        for img in p["images"]:
            assert img["complete"] and img["w"] > 0, f"{name}: image did not load: {img}"
    for f in ("index.png", "run.png"):
        assert (shots / f).stat().st_size > 10_000
    print(f"screenshots: {shots}")
