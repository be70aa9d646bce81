"""A minimal Chrome DevTools Protocol client over aiohttp websockets, for the browser test.

Starts headless Chromium with every phone-home feature off and a fresh profile, opens pages,
and collects what a person would see as broken: console errors, uncaught exceptions, failed
requests, images that did not load.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio",
         "--remote-debugging-port=0", "--window-size=1200,900"]


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if p := shutil.which(name):
            return p
    return None


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        self.binary, self.profile = binary, profile
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.events: list[dict[str, Any]] = []

    async def __aenter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and len(port_file.read_text().splitlines()) >= 2:
                break
            await asyncio.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        with contextlib.suppress(Exception):
            await self.ws.close()  # type: ignore[union-attr]
        await self.session.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    async def _read(self) -> None:
        async for msg in self.ws:  # type: ignore[union-attr]
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   session: str | None = None) -> dict[str, Any]:
        i = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[i] = fut
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self.ws.send_str(json.dumps(msg))  # type: ignore[union-attr]
        res = await asyncio.wait_for(fut, 30)
        if "error" in res:
            raise RuntimeError(f"{method}: {res['error']}")
        return res.get("result", {})

    async def open(self, url: str, screenshot: Path | None = None) -> dict[str, Any]:
        """Load a page; return its problems and image states."""
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        sid = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        for dom in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{dom}.enable", session=sid)
        start = len(self.events)
        await self.send("Page.navigate", {"url": url}, session=sid)
        for _ in range(300):
            if any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == sid
                   for e in self.events[start:]):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        js = ("JSON.stringify([...document.images].map(i => ({src: i.src, complete: i.complete, "
              "w: i.naturalWidth})))")
        r = await self.send("Runtime.evaluate", {"expression": js, "returnByValue": True}, session=sid)
        images = json.loads(r["result"]["value"])
        if screenshot is not None:
            shot = await self.send("Page.captureScreenshot",
                                   {"format": "png", "captureBeyondViewport": True}, session=sid)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        evs = [e for e in self.events[start:] if e.get("sessionId") == sid]
        errors = [e for e in evs if
                  (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
                  or e["method"] == "Runtime.exceptionThrown"
                  or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
                  or e["method"] == "Network.loadingFailed"
                  or (e["method"] == "Network.responseReceived"
                      and e["params"]["response"]["status"] >= 400)]
        await self.send("Target.closeTarget", {"targetId": target})
        return {"images": images, "errors": errors}
