"""TLS on the peer port, on by default: the spec's "SSL sockets" ("no support for clearnet
non-SSL sockets").

``options.tls`` is either ``{"ca": PATH, "cert": PATH, "key": PATH}``, the run's material
(``node_tls_material`` writes it: one CA per run, each node's certificate signed by it with
``DNS:<node id>`` and ``IP:127.0.0.1`` SANs, nodes.common.pki), or ``false``, plain TCP,
which a run must ask for. There is no third way: no self-signed certificates, no unverified
connections. Clients verify the server's certificate against the CA with hostname checking
on, naming the peer by its node id (its address when the id is unknown, checked against the
IP SAN). Servers do not ask for client certificates: peers and clients authenticate with the
Digest handshake that follows, inside the TLS channel.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from nodes.common.config import ConfigError
from nodes.common.pki import NodeFiles, ensure_ca, issue_node_cert

CA_NAME = "garlicfarm-run-ca"


def node_tls_material(tls_dir: Path, node_id: str) -> dict[str, str]:
    """The run CA (made once per ``tls_dir``) and ``node_id``'s certificate: the value of
    that node's ``options.tls``."""
    files = issue_node_cert(tls_dir, node_id, ensure_ca(tls_dir, CA_NAME))
    return {"ca": str(files.ca), "cert": str(files.cert), "key": str(files.key)}


def parse_option(value: Any) -> NodeFiles | None:
    """``options.tls`` -> the node's files, or None for plain TCP (``false``)."""
    if value is False:
        return None
    if isinstance(value, dict) and all(isinstance(value.get(k), str) for k in ("ca", "cert", "key")):
        files = NodeFiles(Path(value["ca"]), Path(value["cert"]), Path(value["key"]))
        for p in (files.ca, files.cert, files.key):
            if not p.is_file():
                raise ConfigError(f"options.tls: {p} does not exist (the harness writes it under "
                                  f"<run dir>/tls; see nodes/garlicfarm/tls.py)")
        return files
    raise ConfigError("options.tls: expected {\"ca\", \"cert\", \"key\"} file paths (TLS, the "
                      f"default; harness.suites.garlicfarm writes them) or false (plain TCP), got {value!r}")


def server_context(files: NodeFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(files.cert), str(files.key))
    ctx.verify_mode = ssl.CERT_NONE  # peers authenticate with Digest, not certificates
    return ctx


def client_context(ca: Path | str) -> ssl.SSLContext:
    """Verifies the server against the run CA, hostname checking on."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    ctx.check_hostname = True
    return ctx
