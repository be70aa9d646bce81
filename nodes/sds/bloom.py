"""The acknowledgement bloom filter, bit-compatible with the most used SDS implementation.

Layout (what nim-sds / js-waku's SDS do, so filters from either side can be read by ours):

* hash: MurmurHash3 x86_32, seed 0, **signed** 32-bit result (``mmh3.hash(s, 0, signed=True)``)
  over the UTF-8 message id;
* double hashing: ``hA = |h(id)| mod m``, ``hB = |h(id + " b")| mod m``,
  bit ``i`` (``0 <= i < k``) is ``|hA + i*hB| mod m``;
* size: capacity 10,000 ids at error rate 0.001 gives ``m = 150,000`` bits, ``k = 10``;
* bits live in 64-bit words (bit ``b`` is ``word[b // 64] & (1 << (b % 64))``), serialized as
  the words in order, each **big-endian**: ``ceil(m / 64) * 8 = 18,752`` bytes.

We keep the bytes in that serialized layout, so ``to_bytes`` is a copy and checking a peer's
filter needs no parsing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import mmh3

CAPACITY = 10_000
ERROR_RATE = 0.001
BITS = 150_000
HASHES = 10


def _nbytes(bits: int) -> int:
    return (bits + 63) // 64 * 8


@lru_cache(maxsize=4096)
def positions(message_id: str, bits: int = BITS, hashes: int = HASHES) -> tuple[int, ...]:
    """The ``k`` bit indexes of ``message_id`` (see the module docstring). Cached: a node
    needs them for its own filter and again for the entry that watches peers' filters, and
    a simulated channel's nodes (one process) all hash the same ids."""
    ha = abs(mmh3.hash(message_id, 0, signed=True)) % bits
    hb = abs(mmh3.hash(message_id + " b", 0, signed=True)) % bits
    return tuple(abs(ha + i * hb) % bits for i in range(hashes))


def _locate(bit: int) -> tuple[int, int]:
    """Byte offset and mask of ``bit`` in the big-endian 64-bit word layout."""
    word, b = divmod(bit, 64)
    return word * 8 + 7 - b // 8, 1 << (b % 8)


class BloomFormatError(ValueError):
    """A received filter of the wrong size: it cannot be one of ours."""


@dataclass
class BloomFilter:
    """Set of message ids with false positives (rate ~``ERROR_RATE`` at ``CAPACITY``)."""

    bits: int = BITS
    hashes: int = HASHES
    capacity: int = CAPACITY
    count: int = 0

    def __post_init__(self) -> None:
        self._data = bytearray(_nbytes(self.bits))

    @classmethod
    def from_bytes(cls, data: bytes, bits: int = BITS, hashes: int = HASHES) -> BloomFilter:
        if len(data) != _nbytes(bits):
            raise BloomFormatError(f"bloom filter of {len(data)} bytes; expected "
                                   f"{_nbytes(bits)} for {bits} bits")
        f = cls(bits, hashes)
        f._data[:] = data
        return f

    def add(self, message_id: str) -> None:
        for p in positions(message_id, self.bits, self.hashes):
            off, mask = _locate(p)
            self._data[off] |= mask
        self.count += 1

    def __contains__(self, message_id: str) -> bool:
        return contains(self._data, message_id, self.bits, self.hashes)

    def to_bytes(self) -> bytes:
        return bytes(self._data)

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    def fill_ratio(self) -> float:
        # one popcount over the filter as a big int: the per-byte count cost ~12 ms a state
        # snapshot (a fifth of an SDS sim search's CPU)
        return int.from_bytes(self._data, "big").bit_count() / self.bits

    def rebuilt(self, ids: Iterable[str]) -> BloomFilter:
        """A fresh filter of the same shape holding ``ids`` (the spec's roll-over)."""
        f = BloomFilter(self.bits, self.hashes, self.capacity)
        for i in ids:
            f.add(i)
        return f


def contains(data: bytes | bytearray, message_id: str, bits: int = BITS,
             hashes: int = HASHES) -> bool:
    """Membership test directly on a serialized filter (a peer's, from the wire)."""
    for p in positions(message_id, bits, hashes):
        off, mask = _locate(p)
        if not data[off] & mask:
            return False
    return True


def contains_at(data: bytes | bytearray, bits: tuple[int, ...]) -> bool:
    """Membership by precomputed `positions` (probing one id in many filters)."""
    for p in bits:
        word, b = divmod(p, 64)
        if not data[word * 8 + 7 - b // 8] & (1 << (b % 8)):
            return False
    return True
