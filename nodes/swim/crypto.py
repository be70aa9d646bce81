"""Optional authenticated encryption of SWIM datagrams: a keyring and AES-GCM, as memberlist.

Sans-IO and pure: the runtime (``nodes.swim.server``) seals every datagram it sends and opens
every one it receives; nothing else in SWIM knows encryption exists. Like memberlist's
``Keyring`` the ring holds one primary key, which seals, and any number of secondary keys;
opening tries every key, so a rotation works while peers migrate: install the new key on
every node, make it primary on every node, then remove the old one.

Wire format (docs/swim.md, "Encryption")::

    version (1 byte, = 1) | nonce (12 random bytes) | AES-GCM ciphertext + 16-byte tag

The version byte and the caller's ``aad`` are authenticated, not encrypted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = 1
NONCE_LEN = 12
TAG_LEN = 16
OVERHEAD = 1 + NONCE_LEN + TAG_LEN
KEY_LENS = (16, 24, 32)  # AES-128, -192, -256


class KeyringError(ValueError):
    """A key operation the ring refuses (bad length, unknown key, removing the primary)."""


class DecryptError(ValueError):
    """A datagram that no key of the ring opens: truncated, another version, forged,
    tampered, or sealed with a key this node does not hold."""


def fingerprint(key: bytes) -> str:
    """A name for a key that does not reveal it (what the admin API shows)."""
    return hashlib.sha256(key).hexdigest()[:12]


def parse_key(key: str | bytes) -> bytes:
    """A key from hex (config, admin API) or raw bytes, checked for an AES length."""
    if isinstance(key, str):
        try:
            raw = bytes.fromhex(key)
        except ValueError as e:
            raise KeyringError(f"key is not hex: {e}; give 32, 48 or 64 hex digits") from e
    else:
        raw = bytes(key)
    if len(raw) not in KEY_LENS:
        raise KeyringError(f"key is {len(raw)} bytes; AES-GCM needs 16, 24 or 32 "
                           "(32, 48 or 64 hex digits)")
    return raw


class Keyring:
    """The primary key (first) and the secondary keys, each once, in install order."""

    def __init__(self, keys: Iterable[str | bytes]) -> None:
        self._keys: list[bytes] = []
        for k in keys:
            raw = parse_key(k)
            if raw not in self._keys:
                self._keys.append(raw)
        if not self._keys:
            raise KeyringError("a keyring needs at least one key (the primary)")
        self._aead = {k: AESGCM(k) for k in self._keys}

    @property
    def primary(self) -> bytes:
        return self._keys[0]

    @property
    def keys(self) -> list[bytes]:
        return list(self._keys)

    def fingerprints(self) -> list[str]:
        """Primary first, then the secondaries."""
        return [fingerprint(k) for k in self._keys]

    def install(self, key: str | bytes) -> None:
        """Add a secondary key (idempotent): it opens datagrams but seals none yet."""
        raw = parse_key(key)
        if raw not in self._keys:
            self._keys.append(raw)
            self._aead[raw] = AESGCM(raw)

    def use(self, key: str | bytes) -> None:
        """Make an installed key the primary, which seals from now on."""
        raw = parse_key(key)
        if raw not in self._keys:
            raise KeyringError(f"key {fingerprint(raw)} is not installed; install it first")
        self._keys.remove(raw)
        self._keys.insert(0, raw)

    def remove(self, key: str | bytes) -> None:
        """Drop a secondary key. The primary cannot be removed: ``use`` another first."""
        raw = parse_key(key)
        if raw not in self._keys:
            raise KeyringError(f"key {fingerprint(raw)} is not installed")
        if raw == self._keys[0]:
            raise KeyringError(f"key {fingerprint(raw)} is the primary; make another key "
                               "primary (use) before removing it")
        self._keys.remove(raw)
        del self._aead[raw]

    def aead(self, key: bytes) -> AESGCM:
        return self._aead[key]


def seal(keyring: Keyring, plaintext: bytes, aad: bytes = b"") -> bytes:
    """Encrypt and authenticate with the primary key under a fresh random nonce."""
    header = bytes([VERSION])
    nonce = os.urandom(NONCE_LEN)
    return header + nonce + keyring.aead(keyring.primary).encrypt(nonce, plaintext,
                                                                   header + aad)


def open_(keyring: Keyring, datagram: bytes, aad: bytes = b"") -> bytes:
    """The plaintext of a sealed datagram, trying every key of the ring (primary first);
    DecryptError if none opens it."""
    if len(datagram) < OVERHEAD:
        raise DecryptError(f"datagram of {len(datagram)} bytes is shorter than the "
                           f"{OVERHEAD}-byte encryption overhead")
    if datagram[0] != VERSION:
        raise DecryptError(f"encryption version {datagram[0]}, expected {VERSION}")
    header, nonce, body = datagram[:1], datagram[1:1 + NONCE_LEN], datagram[1 + NONCE_LEN:]
    for key in keyring.keys:
        try:
            return keyring.aead(key).decrypt(nonce, body, header + aad)
        except InvalidTag:
            continue
    raise DecryptError(f"no key of the ring ({len(keyring.keys)} keys) opens the datagram: "
                       "a wrong key, a forgery or a damaged datagram")


__all__ = ["OVERHEAD", "VERSION", "DecryptError", "Keyring", "KeyringError", "fingerprint",
           "open_", "parse_key", "seal"]
