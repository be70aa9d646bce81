"""The node image: built once per machine, named by a hash of what goes into it.

Two ways to the same image (Python 3.11 as ``python3``, the node's pinned dependencies in
``/opt/node-site``, no project code: that is mounted read-only when a node starts):

- ``debootstrap`` (the default for root on Debian/Ubuntu): a minimal Debian bookworm root
  with python3 from Debian's packages, the wheels pip-installed into it from PyPI, then
  ``docker import``. Needs no container registry, only Debian's mirror and PyPI.
- ``dockerfile``: ``Dockerfile`` beside this module, from ``python:3.11-slim-bookworm``,
  for machines that can pull.

The tag is ``chaos-harness-node:<hash>`` where the hash covers the recipe (this file's
RECIPE, the Dockerfile, requirements-node.txt) and the CPU architecture, so a changed pin
rebuilds and an unchanged one never does. ``python -m harness.backends.images.build``
builds it ahead of time (CI does this once, outside any test's time limit).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.optional import require

HERE = Path(__file__).resolve().parent
REPO = "chaos-harness-node"
# Bumped by hand when the debootstrap steps below change in a way the files do not show.
RECIPE = {"suite": "bookworm", "variant": "minbase", "include": "python3,ca-certificates",
          "site": "/opt/node-site", "version": "2"}
ENV = {"PYTHONPATH": RECIPE["site"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
       "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
HASH_LABEL = "chaos-harness.image-hash"
LOCK = Path(tempfile.gettempdir()) / "chaos-harness-node-image.lock"
# Wheels for bookworm's glibc 2.36; listing older manylinux tags lets pip pick any of them.
PLATFORMS = ("manylinux_2_36", "manylinux_2_34", "manylinux_2_28", "manylinux_2_17", "manylinux2014")


class ImageBuildError(RuntimeError):
    pass


def content_hash() -> str:
    h = hashlib.sha256()
    h.update((HERE / "Dockerfile").read_bytes() + b"\0")
    h.update("\n".join(requirements()).encode() + b"\0")  # the pins, not their comments
    h.update(repr(sorted(RECIPE.items())).encode())
    h.update(platform.machine().encode())
    return h.hexdigest()[:16]


def image_tag() -> str:
    return f"{REPO}:{content_hash()}"


def requirements() -> list[str]:
    lines = (HERE / "requirements-node.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """Parallel test processes wait for one build instead of each starting their own."""
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def choose_method() -> str:
    """``HARNESS_IMAGE_BUILD`` decides; otherwise debootstrap where it can run (root + the tool)."""
    want = os.environ.get("HARNESS_IMAGE_BUILD", "auto")
    if want in ("debootstrap", "dockerfile"):
        return want
    if os.geteuid() == 0 and shutil.which("debootstrap"):
        return "debootstrap"
    return "dockerfile"


def ensure_image(client: Any, say: Callable[[str], None] | None = None) -> str:
    """The tag of the node image, building it first when this machine does not have it."""
    say = say or (lambda m: print(f"[node-image] {m}", file=sys.stderr, flush=True))
    tag = image_tag()
    if _has_image(client, tag):
        return tag
    with _build_lock():
        if _has_image(client, tag):
            return tag
        method = choose_method()
        say(f"building {tag} with {method} (once per machine; a few minutes)")
        t0 = time.monotonic()
        if method == "debootstrap":
            _build_debootstrap(client, tag, say)
        else:
            _build_dockerfile(client, tag)
        say(f"built {tag} in {time.monotonic() - t0:.0f}s")
    return tag


def _build_dockerfile(client: Any, tag: str) -> None:
    import docker.errors

    try:
        client.images.build(path=str(HERE), tag=tag, labels={HASH_LABEL: content_hash()}, rm=True,
                            pull=True)
    except (docker.errors.BuildError, docker.errors.APIError) as e:
        raise ImageBuildError(
            f"building the node image from {HERE / 'Dockerfile'} failed: {e}. Without a container "
            "registry, build it from Debian packages: as root, apt-get install debootstrap and set "
            "HARNESS_IMAGE_BUILD=debootstrap") from e


def _mirror() -> str:
    return os.environ.get("HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def _run(argv: list[str], what: str) -> None:
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-25:])
        raise ImageBuildError(f"{what} failed (exit {p.returncode}): {' '.join(argv[:4])} ...\n{tail}")


def _build_debootstrap(client: Any, tag: str, say: Callable[[str], None]) -> None:
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        raise ImageBuildError("the offline node image is built with debootstrap as root: "
                              "run scripts/setup-docker as root (it installs debootstrap)")
    work = Path(tempfile.mkdtemp(prefix="chaos-harness-rootfs-", dir="/var/tmp"))
    root = work / "root"
    try:
        say(f"debootstrap {RECIPE['suite']} from {_mirror()}")
        _run(["debootstrap", f"--variant={RECIPE['variant']}", f"--include={RECIPE['include']}",
              RECIPE["suite"], str(root), _mirror()], "debootstrap")
        say("pip-installing the node's pinned wheels into the root")
        plat = [a for p in PLATFORMS for a in ("--platform", f"{p}_{platform.machine()}")]
        _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
              "--no-compile", "--target", str(root) + RECIPE["site"], "--only-binary=:all:",
              "--implementation", "cp", "--python-version", "3.11", *plat,
              "-r", str(HERE / "requirements-node.txt")], "pip install into the image root")
        # byte-compile with the image's own python: the site dir is read-only to nodes in
        # effect (no pyc written back into a container we throw away), and compiling aiohttp
        # and friends at every node start cost ~1 s of CPU per node
        _run(["chroot", str(root), "python3", "-m", "compileall", "-q", "-j", "0",
              RECIPE["site"]], "byte-compiling the node's dependencies")
        for junk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info",
                     "var/cache/apt/archives", "var/lib/apt/lists", "var/log"):
            shutil.rmtree(root / junk, ignore_errors=True)
        tar = work / "root.tar"
        say("importing the root into Docker")
        _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tar), "."], "tar of the image root")
        changes = [f"ENV {k}={v}" for k, v in ENV.items()]
        changes += [f"LABEL {HASH_LABEL}={content_hash()}", 'CMD ["python3"]']
        repo, _, version = tag.partition(":")
        client.api.import_image(src=str(tar), repository=repo, tag=version, changes=changes)
        if not _has_image(client, tag):
            raise ImageBuildError(f"docker import did not produce {tag}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.backends.images.build",
                                 description="build (or find) the node image for the docker backend")
    ap.add_argument("--print-tag", action="store_true", help="only print the tag this tree wants")
    a = ap.parse_args(argv)
    if a.print_tag:
        print(image_tag())
        return 0
    require("docker", "building the node image")
    import docker

    t0 = time.monotonic()
    tag = ensure_image(docker.from_env())
    print(f"{tag} ready ({time.monotonic() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
