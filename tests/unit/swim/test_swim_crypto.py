"""The SWIM keyring and datagram sealing (nodes.swim.crypto): round trips, refusals, rotation."""

from __future__ import annotations

import pytest

from nodes.swim.crypto import (
    OVERHEAD,
    VERSION,
    DecryptError,
    Keyring,
    KeyringError,
    fingerprint,
    open_,
    seal,
)

OLD = bytes(range(32))
NEW = bytes(range(100, 116))  # AES-128
OTHER = bytes(range(50, 74))  # AES-192


def test_round_trip_and_wire_format() -> None:
    ring = Keyring([OLD])
    sealed = seal(ring, b"ping", b"swim")
    assert sealed[0] == VERSION and len(sealed) == OVERHEAD + len(b"ping")
    assert b"ping" not in sealed
    assert open_(ring, sealed, b"swim") == b"ping"
    assert seal(ring, b"ping") != seal(ring, b"ping")  # a fresh nonce each time


def test_hex_keys_and_bad_keys() -> None:
    assert Keyring([OLD.hex()]).primary == OLD
    with pytest.raises(KeyringError, match="16, 24 or 32"):
        Keyring(["abcd"])
    with pytest.raises(KeyringError, match="not hex"):
        Keyring(["zz" * 16])
    with pytest.raises(KeyringError, match="at least one key"):
        Keyring([])


def test_wrong_key_refused() -> None:
    with pytest.raises(DecryptError, match="no key"):
        open_(Keyring([NEW]), seal(Keyring([OLD]), b"ping"))


def test_wrong_aad_refused() -> None:
    ring = Keyring([OLD])
    with pytest.raises(DecryptError):
        open_(ring, seal(ring, b"ping", b"swim"), b"other")


@pytest.mark.parametrize("pos", [0, 1, 12, 13, -1])
def test_tampered_byte_refused(pos: int) -> None:
    ring = Keyring([OLD])
    sealed = bytearray(seal(ring, b"membership"))
    sealed[pos] ^= 0x01
    with pytest.raises(DecryptError):
        open_(ring, bytes(sealed))


def test_truncated_refused() -> None:
    ring = Keyring([OLD])
    sealed = seal(ring, b"membership")
    for n in (0, 1, OVERHEAD - 1, len(sealed) - 1):
        with pytest.raises(DecryptError):
            open_(ring, sealed[:n])


def test_rotation_while_peers_migrate() -> None:
    a, b = Keyring([OLD]), Keyring([OLD])
    a.install(NEW)  # a: [old, new] -- still seals with old, opens both
    assert a.fingerprints() == [fingerprint(OLD), fingerprint(NEW)]
    assert open_(b, seal(a, b"x")) == b"x"
    a.use(NEW)  # a: [new, old] -- seals with new; b (old only) cannot open it yet
    with pytest.raises(DecryptError):
        open_(b, seal(a, b"x"))
    assert open_(a, seal(b, b"y")) == b"y"  # a still opens b's old-key datagrams
    b.install(NEW)
    b.use(NEW)
    assert open_(b, seal(a, b"x")) == b"x" and open_(a, seal(b, b"y")) == b"y"
    a.remove(OLD)
    with pytest.raises(DecryptError):
        open_(a, seal(Keyring([OLD]), b"z"))  # a straggler on the old key only


def test_primary_cannot_be_removed_and_use_needs_install() -> None:
    ring = Keyring([OLD, NEW])
    with pytest.raises(KeyringError, match="primary"):
        ring.remove(OLD)
    with pytest.raises(KeyringError, match="install it first"):
        ring.use(OTHER)
    with pytest.raises(KeyringError, match="not installed"):
        ring.remove(OTHER)
    ring.install(NEW)  # idempotent
    assert ring.keys == [OLD, NEW]
    ring.remove(NEW)
    assert ring.keys == [OLD]
