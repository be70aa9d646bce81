"""Durable Raft state: current term, vote, log and snapshot, under ``data_dir``.

Files (all built on ``nodes.common.records``: length + CRC32 + payload, torn tails cut):
- ``raft-meta.rec``: JSON ``{"term", "voted_for"}`` records; the last one wins.
- ``raft-log.rec``: ``E`` records (index u64, term u64, value type u8, value) and ``T``
  records (truncate from index u64); replayed in order on start.
- ``membership.rec``: JSON ``{"removed": bool}`` records; the last one wins (a server told
  to leave stays out of elections across restarts).
- ``snapshot.rec``: one record (last index u64, last term u64, config len u32, Configuration,
  application state); replaced atomically, then the log is rewritten to what follows it.

The runtime calls ``persist(record)`` for each ``Persist("raft", record)`` of a batch and then ``sync()``
once, before sending anything of that batch: nothing is acknowledged before it is on disk.

Bug modes: ``ack-before-fsync`` keeps log records in a user-space buffer that ``sync`` does
not write (the runtime calls ``flush_deferred`` every ``options.deferred_flush_ms``; SIGKILL loses it);
``forget-vote`` never stores ``voted_for`` (a restart forgets whom it voted for this term).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from nodes.common.records import RecordFile, RecoveryReport, rewrite_records
from nodes.garlicfarm.codec import (
    CodecError,
    LogEntry,
    ValueType,
    decode_config,
    encode_config,
)
from nodes.garlicfarm.raft import (
    PersistAppend,
    PersistRemoved,
    PersistSnapshot,
    PersistState,
    PersistTruncate,
    Snapshot,
    StoredState,
)

_E = struct.Struct(">QQB")
_T = struct.Struct(">Q")
_S = struct.Struct(">QQI")


class StorageError(RuntimeError):
    """The durable state is unreadable beyond tail repair (e.g. a corrupt snapshot)."""


@dataclass
class LoadReport:
    meta: RecoveryReport
    log: RecoveryReport
    entries: int
    snapshot_index: int


def _entry_rec(index: int, e: LogEntry) -> bytes:
    return b"E" + _E.pack(index, e.term, int(e.vtype)) + e.value


class RaftStorage:
    def __init__(self, data_dir: Path | str, bugs: frozenset[str] = frozenset()) -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bugs = bugs
        self.deferred = "ack-before-fsync" in bugs
        self.meta_path = self.dir / "raft-meta.rec"
        self.log_path = self.dir / "raft-log.rec"
        self.snap_path = self.dir / "snapshot.rec"
        self.member_path = self.dir / "membership.rec"
        self._meta: RecordFile | None = None
        self._log: RecordFile | None = None
        self._meta_pending: bytes | None = None
        self._member_pending: bytes | None = None
        self._log_pending: list[bytes] = []
        self._meta_count = 0
        self.report: LoadReport | None = None

    # ------------------------------------------------------------ load

    def load(self) -> StoredState:
        self._meta = RecordFile.open(self.meta_path)
        term, vote = 0, None
        for rec in self._meta.records_at_open:
            try:
                d = json.loads(rec)
                term, vote = int(d["term"]), d.get("voted_for")
            except (ValueError, KeyError, TypeError) as e:
                raise StorageError(f"{self.meta_path}: bad meta record {rec[:60]!r}: {e}") from e
        self._meta_count = len(self._meta.records_at_open)
        snap = Snapshot()
        if self.snap_path.exists():
            rf = RecordFile.open(self.snap_path)
            recs = rf.records_at_open
            rf.close()
            if recs:
                snap = self._decode_snapshot(recs[-1])
        self._log = RecordFile.open(self.log_path)
        entries: dict[int, LogEntry] = {}
        for rec in self._log.records_at_open:
            kind, body = rec[:1], rec[1:]
            if kind == b"E":
                idx, t, vt = _E.unpack_from(body)
                entries[idx] = LogEntry(t, ValueType(vt), body[_E.size :])
            elif kind == b"T":
                (frm,) = _T.unpack(body)
                for k in [k for k in entries if k >= frm]:
                    del entries[k]
            else:
                raise StorageError(f"{self.log_path}: unknown record kind {kind!r}")
        out: list[LogEntry] = []
        i = snap.last_index + 1
        while i in entries:
            out.append(entries[i])
            i += 1
        self.report = LoadReport(self._meta.report, self._log.report, len(out), snap.last_index)
        return StoredState(term, vote, snap, out, self._load_removed())

    def _load_removed(self) -> bool:
        if not self.member_path.exists():
            return False
        rf = RecordFile.open(self.member_path)
        recs = rf.records_at_open
        rf.close()
        if not recs:
            return False
        try:
            return bool(json.loads(recs[-1])["removed"])
        except (ValueError, KeyError, TypeError) as e:
            raise StorageError(f"{self.member_path}: bad membership record {recs[-1][:60]!r}: {e}; "
                               "delete the file to rejoin as a member") from e

    def _decode_snapshot(self, rec: bytes) -> Snapshot:
        try:
            li, lt, clen = _S.unpack_from(rec)
            cfg = decode_config(rec[_S.size : _S.size + clen])
        except (struct.error, CodecError) as e:
            raise StorageError(f"{self.snap_path}: unreadable snapshot: {e}") from e
        return Snapshot(li, lt, cfg, rec[_S.size + clen :])

    # ------------------------------------------------------------ persist

    def persist(self, eff: PersistState | PersistAppend | PersistTruncate | PersistSnapshot
                | PersistRemoved) -> None:
        if isinstance(eff, PersistRemoved):
            self._member_pending = json.dumps({"removed": eff.removed}).encode()
        elif isinstance(eff, PersistState):
            vote = None if "forget-vote" in self.bugs else eff.voted_for
            self._meta_pending = json.dumps({"term": eff.term, "voted_for": vote}).encode()
        elif isinstance(eff, PersistAppend):
            self._log_pending.extend(_entry_rec(i, e) for i, e in eff.entries)
        elif isinstance(eff, PersistTruncate):
            self._log_pending.append(b"T" + _T.pack(eff.from_index))
        elif isinstance(eff, PersistSnapshot):
            self.sync()
            self.flush_deferred()
            cfg = encode_config(eff.config)
            rewrite_records(self.snap_path, [_S.pack(eff.last_index, eff.last_term, len(cfg)) + cfg + eff.data])
            assert self._log is not None
            self._log.close()
            rewrite_records(self.log_path, [_entry_rec(i, e) for i, e in eff.remaining])
            self._log = RecordFile.open(self.log_path)

    def sync(self) -> None:
        """Make everything persisted so far durable (one fsync per file touched)."""
        if self._member_pending is not None:  # rare (leave, rejoin): one small file, rewritten
            rewrite_records(self.member_path, [self._member_pending])
            self._member_pending = None
        if self._meta_pending is not None:
            assert self._meta is not None
            if self._meta_count > 1000:
                rewrite_records(self.meta_path, [self._meta_pending])
                self._meta.close()
                self._meta = RecordFile.open(self.meta_path)
                self._meta_count = 1
            else:
                self._meta.append(self._meta_pending)
                self._meta_count += 1
            self._meta_pending = None
        if self._log_pending:
            assert self._log is not None
            if self.deferred:
                for p in self._log_pending:
                    self._log.append_deferred(p)
            else:
                self._log.append_many(self._log_pending)
            self._log_pending.clear()

    def flush_deferred(self) -> None:
        if self._log is not None and self._log.has_pending:
            self._log.sync()

    def close(self) -> None:
        self.sync()
        for f in (self._meta, self._log):
            if f is not None:
                f.close()
