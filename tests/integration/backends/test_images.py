"""The node image: its pins agree with constraints.txt, its tag is a content hash, and the
image really runs the node's imports on Python 3.11."""

from __future__ import annotations

import re
from pathlib import Path

from harness.backends.images import build

ROOT = Path(__file__).resolve().parents[3]


def _pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for ln in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+).*", ln)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_pins_match_constraints():
    project = _pins((ROOT / "constraints.txt").read_text().splitlines())
    image = _pins(build.requirements())
    assert image, "requirements-node.txt pins nothing"
    clash = {k: (v, project.get(k)) for k, v in image.items() if project.get(k) != v}
    assert clash == {}, f"node image pins differ from (or are missing in) constraints.txt: {clash}"
    assert all("==" in r for r in build.requirements()), "every node dependency is pinned"


def test_tag_is_a_content_hash(monkeypatch, tmp_path):
    tag = build.image_tag()
    assert re.fullmatch(r"chaos-harness-node:[0-9a-f]{16}", tag)
    assert build.image_tag() == tag  # stable
    monkeypatch.setattr(build, "RECIPE", {**build.RECIPE, "version": "changed"})
    assert build.image_tag() != tag  # a changed recipe is a new image


def test_image_runs_the_node_imports(docker_client):
    out = docker_client.containers.run(
        build.image_tag(), ["python3", "-c", "import sys, aiohttp, cryptography, jwt, mmh3, "
                            "defusedxml, google.protobuf; print(sys.version_info[:2])"], remove=True)
    assert out.decode().strip() == "(3, 11)"
