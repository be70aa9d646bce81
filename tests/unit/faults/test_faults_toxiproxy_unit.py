"""The Toxiproxy manager without a server: binary lookup, start failures, error mapping."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import toxiproxy.exceptions as legacy

from faults.toxiproxy import (
    InvalidToxicError,
    NotFoundError,
    ProxyExistsError,
    ToxicExistsError,
    ToxiproxyClient,
    ToxiproxyError,
    ToxiproxyNotInstalled,
    ToxiproxyServer,
    ToxiproxyStartError,
    _error_for,
    find_binary,
    normalize_url,
)


def test_missing_binary_says_to_run_bootstrap(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToxiproxyNotInstalled, match=r"\./scripts/bootstrap"):
        find_binary(tmp_path)


def test_binary_found_in_project_tools_then_path(tmp_path: Path, monkeypatch) -> None:
    exe = tmp_path / ".tools" / "bin" / "toxiproxy-server"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    assert find_binary(tmp_path) == exe
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.setenv("PATH", str(exe.parent))
    assert find_binary(other) == exe


def test_a_server_that_dies_at_startup_is_reported_with_its_output(tmp_path: Path) -> None:
    fake = tmp_path / "toxiproxy-server"
    fake.write_text("#!/bin/sh\necho 'listen tcp: address already in use' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ToxiproxyStartError, match="already in use"):
        ToxiproxyServer.start(binary=fake, attempts=2)


def test_attach_to_nothing_fails_clearly() -> None:
    with pytest.raises(ToxiproxyStartError, match="TOXIPROXY_URL"):
        ToxiproxyServer.attach("127.0.0.1:1", timeout_s=0.2)


def test_error_mapping_keeps_legacy_exception_classes() -> None:
    assert isinstance(_error_for(409, "proxy already exists", "POST", "/p"), ProxyExistsError)
    e = _error_for(409, "toxic already exists", "POST", "/p")
    assert isinstance(e, ToxicExistsError) and isinstance(e, legacy.ProxyExists)
    assert isinstance(_error_for(404, "x", "GET", "/p"), NotFoundError)
    assert isinstance(_error_for(400, "x", "GET", "/p"), InvalidToxicError)
    e500 = _error_for(500, "boom", "GET", "/p")
    assert type(e500) is ToxiproxyError and e500.status == 500 and "boom" in str(e500)


def test_client_needs_a_prefix_and_urls_normalise() -> None:
    with pytest.raises(ValueError):
        ToxiproxyClient("127.0.0.1:8474", "")
    assert normalize_url("127.0.0.1:8474/") == "http://127.0.0.1:8474"
    assert normalize_url("http://h:1") == "http://h:1"
