"""Where nodes run. ``get_backend(name)`` is the one way to make one."""

from __future__ import annotations

from harness.backends.base import Backend, BackendError, NodeSpec

BACKENDS = ("local", "docker", "docker-bridge", "ssh")


def get_backend(name: str) -> Backend:
    if name == "local":
        from harness.backends.local import LocalBackend

        return LocalBackend()
    if name in ("docker", "docker-bridge"):
        return __import__("harness.backends.docker", fromlist=["from_name"]).from_name(name)
    if name == "ssh":
        return __import__("harness.backends.ssh", fromlist=["from_env"]).from_env()
    raise BackendError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")


__all__ = ["Backend", "BackendError", "NodeSpec", "get_backend", "BACKENDS"]
