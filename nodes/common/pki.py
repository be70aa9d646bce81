"""A run's TLS material: one CA per run, and certificates it signs for each node.

Every node certificate names the node twice in its subjectAltName: ``DNS:<node id>`` and
``IP:127.0.0.1`` (CN is the node id too), and carries serverAuth and clientAuth. Peers reach
each other through proxies, so clients verify a server against the *peer's node id* (passed
as the TLS server name), never against the proxy's address: a proxy wired to the wrong node
fails the handshake. Used by DRiP (nodes/drip/material.py) and Garlic Farm (nodes/garlicfarm/tls.py).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def pem_key(k: ec.EllipticCurvePrivateKey) -> bytes:
    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption())


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


@dataclass(frozen=True)
class NodeFiles:
    ca: Path
    cert: Path
    key: Path


def ensure_ca(tls_dir: Path, name: str = "test-run-ca") -> tuple[Path, Path]:
    """The run's CA (created once, reused by later calls): (cert path, key path)."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    cert_p, key_p = tls_dir / "ca.pem", tls_dir / "ca.key"
    if cert_p.exists() and key_p.exists():
        return cert_p, key_p
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    write_file(key_p, pem_key(key), private=True)
    write_file(cert_p, cert.public_bytes(serialization.Encoding.PEM))
    return cert_p, key_p


def issue_node_cert(tls_dir: Path, node_id: str, ca: tuple[Path, Path] | None = None) -> NodeFiles:
    """A certificate for ``node_id`` (SAN DNS:node_id, IP:127.0.0.1) signed by the run CA."""
    ca_cert_p, ca_key_p = ca or ensure_ca(tls_dir)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_p.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_p.read_bytes(), None)
    key = new_key()
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName(node_id), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    cert_p, key_p = tls_dir / f"{node_id}.pem", tls_dir / f"{node_id}.key"
    write_file(key_p, pem_key(key), private=True)
    write_file(cert_p, cert.public_bytes(serialization.Encoding.PEM))
    return NodeFiles(ca_cert_p, cert_p, key_p)
