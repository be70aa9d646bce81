"""The agreed membership value (key ``drip:members``) and the addresses it carries.

Two shapes, both agreed by 2PC (docs/drip.md "Membership"):

* a sorted list of node ids: every member is a configured peer of whoever needs to reach it;
* ``{"members": [ids], "addresses": {id: {"peer": "host:port", "cert_sha256": hex,
  "jwt_key": PEM}}}`` once a member was added at run time with its address. Each node dials
  an addressed member at ``peer`` and trusts only what the entry says: the TLS client
  certificate whose DER has that SHA-256 (still issued by the mesh CA) and, with public-key
  JWTs, that ES256 public key. Nothing a peer says in a heartbeat is ever trusted this way.
  An entry may also carry ``peer_for: {id: "host:port"}``: where the named members dial it
  instead (each behind its own proxy or NAT, as a chaos run's links are); the others use
  ``peer``.

The list shape stays the one written while no member carries an address, so every mesh that
never adds a node at run time writes what it wrote before.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from typing import Any

from cryptography.hazmat.primitives.serialization import load_pem_public_key

#: a ``cert_sha256`` entry: the hex SHA-256 of the member's DER certificate
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: the longest PEM public key an address entry may carry (an ES256 key is ~180 bytes)
MAX_KEY_CHARS = 4096
#: the most per-member dial addresses (``peer_for``) one entry may carry
MAX_PEER_FOR = 256


def member_ids(value: Any) -> list[str]:
    """The member ids of an agreed value of either shape (``[]`` when malformed)."""
    if isinstance(value, dict):
        value = value.get("members")
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


def member_addresses(value: Any) -> dict[str, dict[str, Any]]:
    """The address entries of an agreed value (none for the list shape)."""
    a = value.get("addresses") if isinstance(value, dict) else None
    return {k: v for k, v in a.items() if isinstance(v, dict)} if isinstance(a, dict) else {}


def membership_value(ids: set[str], addresses: dict[str, dict[str, Any]]) -> Any:
    """The value to agree on: the list shape unless some member carries an address."""
    kept = {n: a for n, a in sorted(addresses.items()) if n in ids}
    if not kept:
        return sorted(ids)
    return {"members": sorted(ids), "addresses": kept}


def parse_peer(peer: Any) -> tuple[str, int]:
    """``"host:port"`` as (host, port); ValueError says what is wrong."""
    if not isinstance(peer, str) or ":" not in peer:
        raise ValueError(f"peer must be 'host:port', got {peer!r}")
    host, _, port = peer.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"peer must be 'host:port' with a port 1-65535, got {peer!r}")
    return host, int(port)


def dial_address(entry: dict[str, Any], me: str) -> str:
    """Where member ``me`` dials the member of this address entry: its own ``peer_for``
    address if the entry names one, else ``peer``."""
    own = entry.get("peer_for")
    return own[me] if isinstance(own, dict) and isinstance(own.get(me), str) else entry["peer"]


def _check_peer_for(nid: str, raw: Any) -> dict[str, str]:
    """A ``peer_for`` object as {member id: "host:port"}; ValueError says what is wrong."""
    if not isinstance(raw, dict) or not 0 < len(raw) <= MAX_PEER_FOR:
        raise ValueError(f"address of {nid!r}: peer_for must be an object of 1 to "
                         f"{MAX_PEER_FOR} member id -> 'host:port'")
    out: dict[str, str] = {}
    for who, peer in raw.items():
        if not isinstance(who, str) or not who:
            raise ValueError(f"address of {nid!r}: peer_for keys must be member ids")
        host, port = parse_peer(peer)
        out[who] = f"{host}:{port}"
    return out


def check_membership(value: Any) -> str | None:
    """None when ``value`` is a well-formed membership, else why not (a voter's "no")."""
    if isinstance(value, dict):
        if set(value) - {"members", "addresses"}:
            return "a membership object has only 'members' and 'addresses'"
        ids, addresses = value.get("members"), value.get("addresses")
        if not isinstance(addresses, dict):
            return "a membership object's 'addresses' must be an object of node id -> address"
    else:
        ids, addresses = value, {}
    if not isinstance(ids, list) or not ids or not all(isinstance(n, str) and n for n in ids):
        return "a membership must be a non-empty list of node ids"
    for nid, a in addresses.items():
        if nid not in ids:
            return f"address for {nid!r}, which is not a member"
        if not isinstance(a, dict) or set(a) - {"peer", "cert_sha256", "jwt_key", "peer_for"}:
            return f"address of {nid!r} must be {{peer, cert_sha256?, jwt_key?, peer_for?}}"
        try:
            parse_peer(a.get("peer"))
            if "peer_for" in a:
                _check_peer_for(nid, a["peer_for"])
        except ValueError as e:
            return str(e) if str(e).startswith("address of") else f"address of {nid!r}: {e}"
        if "cert_sha256" in a and not (isinstance(a["cert_sha256"], str)
                                       and _SHA256.match(a["cert_sha256"])):
            return f"address of {nid!r}: cert_sha256 must be 64 lowercase hex digits"
        if "jwt_key" in a and not (isinstance(a["jwt_key"], str)
                                   and 0 < len(a["jwt_key"]) <= MAX_KEY_CHARS):
            return f"address of {nid!r}: jwt_key must be a PEM public key"
    return None


def operator_entry(nid: str, raw: Any) -> dict[str, Any]:
    """An address entry from the operator's ``POST /admin/members`` ``addresses[nid]``:
    ``{"peer": "host:port", "cert": PEM certificate?, "jwt_key": PEM public key?,
    "peer_for": {member: "host:port"}?}``. The certificate is kept as its fingerprint;
    ValueError says what to fix."""
    if not isinstance(raw, dict) or set(raw) - {"peer", "cert", "jwt_key", "peer_for"}:
        raise ValueError(f"addresses[{nid!r}] must be {{peer, cert?, jwt_key?, peer_for?}}")
    host, port = parse_peer(raw.get("peer"))
    entry: dict[str, Any] = {"peer": f"{host}:{port}"}
    if raw.get("peer_for") is not None:
        entry["peer_for"] = _check_peer_for(nid, raw["peer_for"])
    if raw.get("cert") is not None:
        try:
            der = ssl.PEM_cert_to_DER_cert(str(raw["cert"]))
        except ValueError as e:
            raise ValueError(f"addresses[{nid!r}].cert is not a PEM certificate: {e}") from None
        entry["cert_sha256"] = hashlib.sha256(der).hexdigest()
    if raw.get("jwt_key") is not None:
        try:
            load_pem_public_key(str(raw["jwt_key"]).encode())
        except (ValueError, TypeError) as e:
            raise ValueError(f"addresses[{nid!r}].jwt_key is not a PEM public key: {e}") \
                from None
        entry["jwt_key"] = str(raw["jwt_key"])
    return entry
