"""``harness serve`` as a real server on a free loopback port: the report, every file a run
page links to, directory listings, and no way out of the store."""

from __future__ import annotations

import http.client
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from report_builders import real_run

from reports.report import ReportOptions, build_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    s = tmp_path_factory.mktemp("served")
    run = real_run(s, "kv", 1)
    build_report(ReportOptions(store=s, engine="local", recovery_window_s=0.1))
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("not for the browser\n")
    (s / "escape").symlink_to(outside, target_is_directory=True)
    (s / "kv" / "leak.txt").symlink_to(outside / "secret.txt")
    return {"store": s, "run": run}


@pytest.fixture(scope="module")
def server(store) -> Iterator[tuple[str, int]]:
    """``harness serve --port 0`` in a process of its own; the port from the line it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--store",
                             str(store["store"]), "--port", "0"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")  # type: ignore[union-attr]
        yield "127.0.0.1", int(m.group(1))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        assert code == 130, code


def get(server: tuple[str, int], path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET with the path sent exactly as given (no client-side normalisation)."""
    c = http.client.HTTPConnection(*server, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def test_home_redirects_to_the_report_and_every_run_page_link_is_served(server, store):
    status, headers, _ = get(server, "/")
    assert status == 302 and headers["location"] == "/_report/index.html"
    run = store["run"]
    page_url = f"/kv/{run.name}/report/index.html"
    status, _, body = get(server, page_url)
    assert status == 200
    links = [h for h in re.findall(r'(?:href|src)="([^"#]+)"', body.decode())
             if not h.startswith("data:")]
    assert "../history.jsonl" in links and "../harness.log" in links
    for h in links:
        url = urljoin(page_url, h)
        status, headers, content = get(server, url)
        assert status == 200, (h, url, status)
        assert content, url


def test_run_files_are_served_as_they_are(server, store):
    run = store["run"]
    status, headers, body = get(server, f"/kv/{run.name}/history.jsonl")
    assert status == 200 and body == (run / "history.jsonl").read_bytes()
    assert headers["content-type"].startswith("text/plain")
    status, headers, body = get(server, "/latest/harness.log")  # the store's own link
    assert status == 200 and b"phase: checking" in body


def test_a_run_dir_is_listed(server, store):
    run = store["run"]
    status, headers, _ = get(server, f"/kv/{run.name}")
    assert status == 302 and headers["location"] == f"/kv/{run.name}/"
    status, _, body = get(server, f"/kv/{run.name}/")
    text = body.decode()
    assert status == 200
    for name in ("history.jsonl", "results.json", "test.json", "harness.log", "nodes/",
                 "report/"):
        assert f'href="{name}"' in text, name
    status, headers, _ = get(server, f"/kv/{run.name}/report/")
    assert status == 302 and headers["location"].endswith("/report/index.html")


@pytest.mark.parametrize("path", [
    "/../../../../etc/passwd",
    "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/kv/..%2f..%2f..%2f..%2fetc/passwd",
    "/escape/secret.txt",  # a link in the store to a directory outside it
    "/kv/leak.txt",  # a link to a file outside
    "//etc/passwd",
    "/kv/%00",
])
def test_nothing_outside_the_store_is_served(server, path):
    status, _, body = get(server, path)
    assert status in (400, 403, 404), (path, status)
    assert b"root:" not in body and b"not for the browser" not in body


def test_serve_without_a_store_is_a_usage_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "serve", "--store",
                        str(tmp_path / "none"), "--port", "0"], cwd=ROOT, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 254 and "no store at" in r.stderr
