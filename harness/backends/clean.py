"""``harness clean``: remove what a crashed harness left behind (a harness killed with -9
runs no ``finally`` and no atexit hook).

What is ours is found by label or by path, never by a broad name:

- Docker: containers, volumes and networks labelled ``chaos-harness.run``. Each carries its
  owner ``<hostname>:<pid>``; it is an orphan when that process is gone on this host (or
  always, with ``all_runs``). Old node images (a tag other than the current content hash)
  go too with ``images``.
- SSH hosts (``HARNESS_SSH_HOSTS``): run dirs under each host's ``workdir/runs`` whose
  ``owner`` file names a dead harness: their node groups are killed and the dir removed.
- The ssh backend's own loopback sshd: its temp dirs whose sshd is gone, and any node still
  running from such a dir.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import BackendError
from harness.optional import MissingExtra
from osutil.procs import pid_alive


@dataclass
class CleanReport:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # a live harness still owns these
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        lines = [f"{verb} {len(self.removed)}, kept {len(self.kept)} (owner still running)"]
        lines += [f"  - {r}" for r in self.removed]
        lines += [f"  kept {k}" for k in self.kept]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def owner_alive(owner: str) -> bool:
    """``host:pid`` names a live process here; another host's owner counts as alive."""
    host, _, pid = owner.strip().rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        return pid_alive(int(pid))
    except ValueError:
        return False


def clean(all_runs: bool = False, images: bool = False, dry_run: bool = False,
          ssh_hosts: str | None = None) -> CleanReport:
    """Remove orphaned docker resources, remote runs and loopback sshd leftovers.

    ``all_runs`` removes live runs' resources too; ``dry_run`` only reports.
    ``ssh_hosts`` defaults to ``HARNESS_SSH_HOSTS``.
    """
    rep = CleanReport(dry_run=dry_run)
    orphan: Callable[[str], bool] = (lambda _o: True) if all_runs else (lambda o: not owner_alive(o))
    _clean_docker(rep, orphan, images, dry_run)
    hosts = ssh_hosts if ssh_hosts is not None else os.environ.get("HARNESS_SSH_HOSTS")
    if hosts:
        _clean_ssh_hosts(rep, hosts, orphan, dry_run)
    _clean_loopback(rep, orphan, dry_run)
    return rep


def _clean_docker(rep: CleanReport, orphan: Callable[[str], bool], images: bool,
                  dry_run: bool) -> None:
    from harness.backends.docker import LABEL_OWNER, LABEL_RUN, connect

    try:
        client = connect(timeout_s=5)
    except BackendError:
        rep.notes.append("no Docker engine answers: no containers to clean")
        return
    except MissingExtra:  # no Docker SDK here: nothing of ours ran in containers from here
        rep.notes.append("no Docker SDK installed: no containers to clean")
        return
    filt = {"label": LABEL_RUN}
    groups: list[tuple[str, list[Any], Callable[[Any], None]]] = [
        ("container", client.containers.list(all=True, filters=filt),
         lambda c: c.remove(force=True, v=True)),
        ("volume", client.volumes.list(filters=filt), lambda v: v.remove(force=True)),
        ("network", client.networks.list(filters=filt), lambda n: n.remove()),
    ]
    for kind, objs, remove in groups:  # containers first: they hold the volumes and networks
        for o in objs:
            labels = o.attrs.get("Labels") or o.attrs.get("Config", {}).get("Labels") or {}
            what = f"{kind} {o.name} (run {labels.get(LABEL_RUN)}, owner {labels.get(LABEL_OWNER)})"
            if not orphan(labels.get(LABEL_OWNER, "")):
                rep.kept.append(what)
                continue
            if not dry_run:
                with contextlib.suppress(Exception):
                    remove(o)
            rep.removed.append(what)
    if images:
        from harness.backends.images.build import REPO, image_tag

        current = image_tag()
        for img in client.images.list(name=REPO):
            old = [t for t in img.tags if t != current]
            if old and current not in img.tags:
                if not dry_run:
                    with contextlib.suppress(Exception):
                        client.images.remove(img.id, force=True)
                rep.removed.append(f"image {', '.join(old)}")


def _clean_ssh_hosts(rep: CleanReport, hosts_file: str, orphan: Callable[[str], bool],
                     dry_run: bool) -> None:
    from harness.backends.ssh import HostConn, load_hosts

    for host in load_hosts(hosts_file):
        try:
            conn = HostConn(host)
        except BackendError as e:
            rep.notes.append(f"{host.label}: {e}")
            continue
        try:
            runs = shlex.quote(f"{host.workdir}/runs")
            _, out = conn.run(f"for d in {runs}/*/; do [ -d \"$d\" ] && echo \"$d $(cat \"$d/owner\" "
                              "2>/dev/null || echo ?:0)\"; done; true")
            for line in out.splitlines():
                d, _, owner = line.partition(" ")
                if not d:
                    continue
                if not orphan(owner):
                    rep.kept.append(f"remote run {host.label}:{d} (owner {owner})")
                    continue
                if not dry_run:
                    q = shlex.quote(d)
                    conn.run(f"for p in {q}*/pid; do [ -f \"$p\" ] && kill -s KILL -- -$(cat \"$p\") "
                             f"2>/dev/null; done; rm -rf {q}", check=False)
                rep.removed.append(f"remote run {host.label}:{d} (owner {owner})")
        finally:
            conn.close()


def _clean_loopback(rep: CleanReport, orphan: Callable[[str], bool], dry_run: bool) -> None:
    """Temp dirs of the ssh backend's own sshd, and nodes still running out of them."""
    tmp = Path(tempfile.gettempdir())
    dirs = {d for d in tmp.glob("chaos-harness-sshd-*") if d.is_dir()}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        cfg = next((a.decode() for a in argv if b"/chaos-harness-sshd-" in a and a.endswith(b"config.json")), None)
        if cfg is None:
            continue
        owner_file = Path(cfg).parent.parent / "owner"
        owner = owner_file.read_text() if owner_file.exists() else "?:0"
        if orphan(owner):
            if not dry_run:
                with contextlib.suppress(OSError):
                    os.killpg(int(proc.name), signal.SIGKILL)
            rep.removed.append(f"loopback ssh node pid {proc.name} ({cfg})")
    for d in dirs:
        alive = False
        with contextlib.suppress(OSError, ValueError):
            alive = pid_alive(int((d / "sshd.pid").read_text()))
        with contextlib.suppress(OSError):
            alive = alive or not orphan((d / "owner").read_text())
        if not alive:
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
            rep.removed.append(f"loopback sshd dir {d}")


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.backends.clean``: the same as ``harness clean``."""
    import argparse

    ap = argparse.ArgumentParser(prog="harness clean", description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="also what live harnesses own")
    ap.add_argument("--images", action="store_true", help="also node images of other hashes")
    ap.add_argument("--dry-run", action="store_true", help="only say what would go")
    a = ap.parse_args(argv)
    print(clean(all_runs=a.all, images=a.images, dry_run=a.dry_run).summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
