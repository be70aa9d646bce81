"""Durable append-only record files: the one storage primitive nodes build on.

Each record is ``length (u32 BE) | crc32(payload) (u32 BE) | payload``. ``append`` writes
and fsyncs before returning (so a caller may acknowledge afterwards); ``append_many`` puts
many records under one fsync. A crash can leave a torn or corrupt tail: ``RecordFile.open``
scans from the start, keeps every whole record with a good CRC, truncates the rest and says
how many bytes it dropped (``RecoveryReport``). Records after the first bad one are dropped
too: an append-only file has no valid data after a torn write.

``append_deferred`` keeps records in a user-space buffer until ``sync``: a SIGKILL loses them.
That is only for the ``ack-before-fsync`` bug mode; correct code never acknowledges before
``sync`` returns.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct(">II")
MAX_RECORD = 256 * 1024 * 1024


class RecordError(Exception):
    """A record file could not be used as asked (closed, too large, unreadable)."""


class RecordTooLarge(RecordError):
    """A payload larger than MAX_RECORD was appended; split it."""


@dataclass(frozen=True)
class RecoveryReport:
    """What ``open`` found: whole records kept, bytes kept, bytes dropped and why."""

    records: int
    valid_bytes: int
    dropped_bytes: int
    reason: str | None  # None when the file was clean

    @property
    def clean(self) -> bool:
        return self.dropped_bytes == 0


def encode_record(payload: bytes) -> bytes:
    if len(payload) > MAX_RECORD:
        raise RecordTooLarge(f"record of {len(payload)} bytes exceeds {MAX_RECORD}")
    return HEADER.pack(len(payload), zlib.crc32(payload) & 0xFFFFFFFF) + payload


def scan_records(data: bytes) -> tuple[list[bytes], int, str | None]:
    """Whole, CRC-valid records from the start of ``data``; (records, valid length, reason)."""
    out: list[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        if n - pos < HEADER.size:
            return out, pos, f"torn header at byte {pos}"
        length, crc = HEADER.unpack_from(data, pos)
        if length > MAX_RECORD:
            return out, pos, f"implausible length {length} at byte {pos}"
        end = pos + HEADER.size + length
        if end > n:
            return out, pos, f"torn payload at byte {pos} (need {length}, have {n - pos - HEADER.size})"
        payload = data[pos + HEADER.size : end]
        if zlib.crc32(payload) & 0xFFFFFFFF != crc:
            return out, pos, f"CRC mismatch at byte {pos}"
        out.append(payload)
        pos = end
    return out, pos, None


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RecordFile:
    """An open append-only record file. Use ``RecordFile.open(path)``."""

    def __init__(self, path: Path, fd: int, records: list[bytes], report: RecoveryReport) -> None:
        self.path = path
        self._fd = fd
        self.records_at_open = records
        self.report = report
        self._pending: list[bytes] = []
        self.size = report.valid_bytes

    @classmethod
    def open(cls, path: Path | str) -> RecordFile:
        """Open (creating) ``path``, repair a torn tail, and load the surviving records."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = b""
            chunks = []
            while True:
                c = os.read(fd, 1 << 20)
                if not c:
                    break
                chunks.append(c)
            data = b"".join(chunks)
            records, valid, reason = scan_records(data)
            dropped = len(data) - valid
            if dropped:
                os.ftruncate(fd, valid)
                os.fsync(fd)
            os.lseek(fd, valid, os.SEEK_SET)
            if created:
                fsync_dir(path.parent)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, records, RecoveryReport(len(records), valid, dropped, reason))

    def _check(self) -> None:
        if self._fd < 0:
            raise RecordError(f"{self.path} is closed")

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.size += len(data)

    def append(self, payload: bytes, sync: bool = True) -> None:
        """Append one record; with ``sync`` it is on disk when this returns."""
        self.append_many([payload], sync=sync)

    def append_many(self, payloads: Iterable[bytes], sync: bool = True) -> None:
        """Append records with one write and (by default) one fsync."""
        self._check()
        blob = self._flush_pending_bytes() + b"".join(encode_record(p) for p in payloads)
        if blob:
            self._write_all(blob)
        if sync:
            os.fsync(self._fd)

    def append_deferred(self, payload: bytes) -> None:
        """Buffer a record in process memory only (lost on SIGKILL) until ``sync``."""
        self._check()
        self._pending.append(encode_record(payload))

    def _flush_pending_bytes(self) -> bytes:
        blob = b"".join(self._pending)
        self._pending.clear()
        return blob

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def sync(self) -> None:
        """Write any deferred records and fsync."""
        self._check()
        blob = self._flush_pending_bytes()
        if blob:
            self._write_all(blob)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                if self._pending:
                    self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1


def rewrite_records(path: Path | str, payloads: Iterable[bytes]) -> None:
    """Atomically replace ``path`` with exactly ``payloads`` (tmp file, fsync, rename, dir fsync)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"".join(encode_record(p) for p in payloads))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
