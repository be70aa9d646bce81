"""Key material for a DRiP mesh: a run CA, per-node TLS certificates, JWT keys; SSL contexts.

Every node certificate names the node twice in its subjectAltName: ``DNS:<node id>`` and
``IP:127.0.0.1`` (CN is the node id too). Peers connect through a TCP proxy on 127.0.0.1, so
the client verifies the server's certificate against the *peer's node id* (passed as the TLS
server name), never against the proxy's address: a proxy wired to the wrong node fails the
handshake. Certificates carry both serverAuth and clientAuth: the server asks for the client's
certificate and takes the connecting peer's identity from its CN (mutual TLS).
"""

from __future__ import annotations

import secrets
import ssl
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from nodes.common.pki import NodeFiles, new_key, pem_key, write_file
from nodes.common.pki import ensure_ca as _ensure_ca
from nodes.common.pki import issue_node_cert as _issue_node_cert

__all__ = ["NodeFiles", "ensure_ca", "issue_node_cert", "ensure_shared_secret", "ensure_jwt_keypair",
           "server_context", "client_context", "peer_identity"]


def ensure_ca(tls_dir: Path) -> tuple[Path, Path]:
    """The run's CA (nodes.common.pki), named for DRiP."""
    return _ensure_ca(tls_dir, "drip-test-ca")


def issue_node_cert(tls_dir: Path, node_id: str, ca: tuple[Path, Path] | None = None) -> NodeFiles:
    return _issue_node_cert(tls_dir, node_id, ca or ensure_ca(tls_dir))


def ensure_shared_secret(tls_dir: Path) -> Path:
    tls_dir.mkdir(parents=True, exist_ok=True)
    p = tls_dir / "jwt-shared.key"
    if not p.exists():
        write_file(p, secrets.token_hex(32).encode(), private=True)
    return p


def ensure_jwt_keypair(tls_dir: Path, node_id: str) -> tuple[Path, Path]:
    """(private PEM, public PEM) for ES256 tokens signed by ``node_id``."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    priv_p, pub_p = tls_dir / f"jwt-{node_id}.key", tls_dir / f"jwt-{node_id}.pub"
    if not priv_p.exists():
        key = new_key()
        write_file(priv_p, pem_key(key), private=True)
        write_file(pub_p, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv_p, pub_p


def server_context(files: NodeFiles) -> ssl.SSLContext:
    """TLS server side: our certificate; requires (and verifies) the peer's certificate.

    CERT_REQUIRED: a connection without a client certificate fails its handshake and costs
    nothing more (with CERT_OPTIONAL each got a readable 403 but stayed open, issue 26 item 9).
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files.ca))
    ctx.load_cert_chain(str(files.cert), str(files.key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    # no TLS 1.3 session tickets: peers keep their connections alive and never resume a
    # session, so the two tickets OpenSSL makes and sends after each handshake are pure cost,
    # paid on every hostile connection too (about a third of a handshake's server CPU, issue 26)
    ctx.num_tickets = 0
    return ctx


def client_context(files: NodeFiles) -> ssl.SSLContext:
    """TLS client side: verifies the server against the CA and the peer's node id."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca))
    ctx.load_cert_chain(str(files.cert), str(files.key))
    ctx.check_hostname = True
    return ctx


def peer_identity(peercert: dict | None) -> str | None:
    """The node id in a verified peer certificate (its CN), or None without one."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for k, v in rdn:
            if k == "commonName":
                return str(v)
    return None
