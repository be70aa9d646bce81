"""A third party registers a protocol suite through the entry point group, without editing us."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import protocols
from harness.suites.sds import PROTOCOL as SDS


def install(site: Path, dist: str, entries: dict[str, str], module: str = "") -> None:
    """A real installed distribution as pip leaves it: a dist-info with entry_points.txt."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{protocols.GROUP}]\n{lines}\n")
    if module:
        (site / f"{dist}_suite.py").write_text(module)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    protocols.registry.cache_clear()
    yield tmp_path
    protocols.registry.cache_clear()


def test_an_installed_suite_is_found_by_name(site: Path) -> None:
    install(site, "gossipy", {"gossipy": "gossipy_suite:PROTOCOL"},
            "from dataclasses import replace\nfrom harness.suites.sds import PROTOCOL as P\n"
            "PROTOCOL = replace(P, name='gossipy')\n")
    assert "gossipy" in protocols.names() and "garlicfarm" in protocols.names()
    p = protocols.get_protocol("gossipy")
    assert p.name == "gossipy" and p.workloads.keys() == SDS.workloads.keys()


def test_two_suites_for_one_name_is_an_error_naming_both(site: Path) -> None:
    install(site, "rogue", {"sds": "rogue_suite:PROTOCOL"})
    with pytest.raises(protocols.SuiteConflict, match="harness.suites.sds:PROTOCOL and rogue_suite"):
        protocols.names()


def test_an_entry_point_that_is_not_a_suite_is_refused(site: Path) -> None:
    install(site, "wrong", {"wrong": "wrong_suite:PROTOCOL"}, "PROTOCOL = 'not a suite'\n")
    with pytest.raises(TypeError, match="not a harness.spec.ProtocolDef"):
        protocols.get_protocol("wrong")


def test_an_unknown_name_lists_what_exists() -> None:
    with pytest.raises(ValueError, match="available: antacid, drip, garlicfarm, sds, swim"):
        protocols.get_protocol("nope")
