"""constraints.txt pins every requirement of pyproject.toml (core and every extra) at a
version inside its range, so `pip install -c constraints.txt '.[...]'` installs exactly what
we test with, and a dependency added to pyproject.toml without a pin fails here."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    out = {}
    for ln in (ROOT / "constraints.txt").read_text().splitlines():
        ln = ln.split("#", 1)[0].strip()
        if ln:
            name, sep, ver = ln.partition("==")
            assert sep and ver, f"constraints.txt: {ln!r} is not NAME==VERSION"
            out[canonicalize_name(name)] = ver
    return out


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"], *(r for rs in project["optional-dependencies"].values()
                                        for r in rs)]
    return [Requirement(r) for r in reqs if canonicalize_name(Requirement(r).name) !=
            canonicalize_name(project["name"])]


def test_every_requirement_is_pinned_inside_its_range() -> None:
    have = pins()
    bad = [f"{r}: constraints.txt has {have.get(canonicalize_name(r.name))}" for r in requirements()
           if have.get(canonicalize_name(r.name)) is None
           or not r.specifier.contains(have[canonicalize_name(r.name)], prereleases=True)]
    assert not bad, "pin these in constraints.txt (inside pyproject's range):\n" + "\n".join(bad)


def test_the_core_and_extras_state_ranges_not_pins() -> None:
    """A library pins nothing exactly: that is constraints.txt's job."""
    exact = [str(r) for r in requirements() if any(s.operator == "==" for s in r.specifier)]
    assert not exact, exact
