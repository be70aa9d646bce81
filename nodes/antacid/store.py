"""An ARS server's SQLite store: where the runtime writes the core's ``Persist("ars", record)``
records (`nodes.antacid.state`) and reads back the `Durable` it rebuilds the core from.

The tables hold the folded state, not the record stream, every row keyed by its zone (a
server may hold several, `nodes.antacid.zones`; a store from before is migrated at open): documents, the committed update log,
the counters (incarnation, last SSN, last CSN, truncation point), each submission server's
last serialized SSN, the pending submissions, the primary's reorder queue (``held``) and the
result notifications it owes downstream servers (``owed``); ``write`` applies one record the way
`Durable.apply` does, so ``load`` after any prefix of writes equals folding that prefix.
WAL journal, ``synchronous=FULL``; records written between two ``commit`` calls are one
transaction (the runtime commits before the next send or reply leaves, as DRiP's does), so a
kill -9 leaves either all of them or none.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nodes.antacid import messages as m
from nodes.antacid.core import NotifyDest
from nodes.antacid.state import Committed, Durable, Pending

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (zone TEXT NOT NULL, k TEXT NOT NULL, v INTEGER NOT NULL,
                                 PRIMARY KEY (zone, k));
CREATE TABLE IF NOT EXISTS docs (zone TEXT NOT NULL, name TEXT NOT NULL, content TEXT NOT NULL,
                                 csn INTEGER NOT NULL, PRIMARY KEY (zone, name));
CREATE TABLE IF NOT EXISTS log (zone TEXT NOT NULL, csn INTEGER NOT NULL, gsid TEXT,
                                data TEXT NOT NULL, PRIMARY KEY (zone, csn));
CREATE TABLE IF NOT EXISTS pending (zone TEXT NOT NULL, gsid TEXT NOT NULL, value TEXT NOT NULL,
                                    PRIMARY KEY (zone, gsid));
CREATE TABLE IF NOT EXISTS ssn_seen (zone TEXT NOT NULL, server TEXT NOT NULL,
                                     ssn INTEGER NOT NULL, PRIMARY KEY (zone, server));
CREATE TABLE IF NOT EXISTS held (zone TEXT NOT NULL, gsid TEXT NOT NULL, peer TEXT, grp TEXT,
                                 PRIMARY KEY (zone, gsid));
CREATE TABLE IF NOT EXISTS owed (zone TEXT NOT NULL, peer TEXT NOT NULL, gsid TEXT NOT NULL,
                                 value TEXT NOT NULL, PRIMARY KEY (zone, peer, gsid));
"""

#: the tables of a store written before servers held several zones (no ``zone`` column)
TABLES = ("meta", "docs", "log", "pending", "ssn_seen", "held", "owed")


class Store:
    """One SQLite database file (``":memory:"`` for tests). Every row is keyed by its zone;
    ``default_zone`` is the zone of records that name none (a one-zone server's) and the zone
    a store written before zones were keyed is migrated into, once, at open."""

    def __init__(self, path: Path | str, default_zone: str = "") -> None:
        self.path = str(path)
        self.default_zone = default_zone
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self._migrate()
        self.db.executescript(SCHEMA)
        self._open = False
        self._zone = default_zone

    def _migrate(self) -> None:
        """A store from before zones were keyed: every row becomes the default zone's, in
        one transaction (a kill -9 midway leaves the old store, migrated again next time)."""
        cols = [r[1] for r in self.db.execute("PRAGMA table_info(meta)")]
        if not cols or "zone" in cols:
            return
        db = self.db
        old = [t for t in TABLES if db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (t,)).fetchone()]
        db.execute("BEGIN IMMEDIATE")
        try:
            for t in old:
                db.execute(f"ALTER TABLE {t} RENAME TO {t}_unzoned")
            # executescript would COMMIT: one statement at a time inside the transaction
            for stmt in SCHEMA.strip().split(";"):
                if stmt.strip():
                    db.execute(stmt)
            for t in old:
                db.execute(f"INSERT INTO {t} SELECT ?, * FROM {t}_unzoned", (self.default_zone,))
                db.execute(f"DROP TABLE {t}_unzoned")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def zones(self) -> list[str]:
        """The zones this store holds anything of."""
        return sorted({z for t in TABLES for (z,) in self.db.execute(
            f"SELECT DISTINCT zone FROM {t}")})

    def close(self) -> None:
        if self._open:
            self.db.execute("ROLLBACK")
            self._open = False
        self.db.close()

    # ---- reading (at start)
    def load(self, new_incarn: int, zone: str | None = None) -> Durable:
        """The durable state of ``zone`` (None: the default zone); a zone that never took an
        ``incarn`` record gives the server ``new_incarn`` (time-of-day, 3.1.1), as
        `Durable.restore` does."""
        db = self.db
        z = self.default_zone if zone is None else zone
        meta = dict(db.execute("SELECT k, v FROM meta WHERE zone = ?", (z,)))
        d = Durable(incarn=new_incarn)
        if "incarn" in meta:
            d.incarn, d.fresh_incarn = meta["incarn"], False
        d.last_ssn = meta.get("last_ssn", 0)
        d.last_csn = meta.get("last_csn", 0)
        d.truncated_through = meta.get("truncated_through", 0)
        d.docs = {n: (c, csn) for n, c, csn in db.execute("SELECT name, content, csn FROM docs WHERE zone = ?", (z,))}
        d.log = [Committed(csn, _gsid(json.loads(g)) if g else None,
                           tuple(_datum(x) for x in json.loads(data)))
                 for csn, g, data in db.execute("SELECT csn, gsid, data FROM log WHERE zone = ? ORDER BY csn", (z,))]
        d.pending = {_gsid(json.loads(g)): _pending(json.loads(v))
                     for g, v in db.execute("SELECT gsid, value FROM pending WHERE zone = ?", (z,))}
        d.committed_ssn = {_server(json.loads(s)): n
                           for s, n in db.execute("SELECT server, ssn FROM ssn_seen WHERE zone = ?", (z,))}
        d.held = {_gsid(json.loads(g)): (peer, _group(json.loads(grp)))
                  for g, peer, grp in db.execute("SELECT gsid, peer, grp FROM held WHERE zone = ?", (z,))}
        d.owed = {(peer, _gsid(json.loads(g))): _note(json.loads(v))
                  for peer, g, v in db.execute("SELECT peer, gsid, value FROM owed WHERE zone = ?", (z,))}
        return d

    # ---- writing
    def write(self, record: tuple[Any, ...]) -> None:
        """Apply one record in the open transaction (opened if none is); ``("at", zone,
        record)`` is ``record`` of that zone (`nodes.antacid.zones`), any other the default
        zone's."""
        if not self._open:
            self.db.execute("BEGIN IMMEDIATE")
            self._open = True
        try:
            if record and record[0] == "at":
                self._zone = record[1]
                record = record[2]
            else:
                self._zone = self.default_zone
            self._write(record)
        except BaseException:
            self.db.execute("ROLLBACK")
            self._open = False
            raise

    def commit(self) -> None:
        """Commit (fsync) what was written since the last commit."""
        if self._open:
            self._open = False
            self.db.execute("COMMIT")

    def _meta(self, k: str, v: int, *, keep_max: bool = False) -> None:
        sql = ("INSERT INTO meta VALUES (?, ?, ?) ON CONFLICT(zone, k) DO UPDATE SET v = "
               + ("max(v, excluded.v)" if keep_max else "excluded.v"))
        self.db.execute(sql, (self._zone, k, v))

    def _write(self, r: tuple[Any, ...]) -> None:
        db, z = self.db, self._zone
        match r:
            case ("incarn", n):
                self._meta("incarn", n)
            case ("ssn", n):
                self._meta("last_ssn", n, keep_max=True)
            case ("pending", gsid, Pending() as p):
                db.execute("INSERT OR REPLACE INTO pending VALUES (?, ?, ?)",
                           (z, _key(gsid), json.dumps(_plain(p))))
            case ("done", gsid):
                db.execute("DELETE FROM pending WHERE zone = ? AND gsid = ?", (z, _key(gsid)))
            case ("ssn-seen", server, ssn):
                self._ssn_seen(server, ssn)
            case ("held", gsid, peer, group):
                db.execute("INSERT OR REPLACE INTO held VALUES (?, ?, ?, ?)",
                           (z, _key(gsid), peer, json.dumps(_plain_group(group))))
            case ("unheld", gsid):
                db.execute("DELETE FROM held WHERE zone = ? AND gsid = ?", (z, _key(gsid)))
            case ("owed", peer, m.SubmittedUpdateResultNotification() as n):
                db.execute("INSERT OR REPLACE INTO owed VALUES (?, ?, ?, ?)",
                           (z, peer, _key(n.gsid), json.dumps(
                               {"gsid": asdict(n.gsid), "csn": n.csn, "zone": n.zone,
                                "error": None if n.error is None else asdict(n.error)})))
            case ("paid", peer, gsid):
                db.execute("DELETE FROM owed WHERE zone = ? AND peer = ? AND gsid = ?",
                           (z, peer, _key(gsid)))
            case ("commit", Committed() as e):
                for d in e.data:
                    if d.action == "delete":
                        db.execute("DELETE FROM docs WHERE zone = ? AND name = ?", (z, d.name))
                    else:
                        db.execute("INSERT OR REPLACE INTO docs VALUES (?, ?, ?, ?)",
                                   (z, d.name, d.content, e.csn))
                db.execute("INSERT OR REPLACE INTO log VALUES (?, ?, ?, ?)",
                           (z, e.csn, _key(e.gsid) if e.gsid else None,
                            json.dumps([asdict(d) for d in e.data])))
                self._meta("last_csn", e.csn)
                if e.gsid is not None:
                    self._ssn_seen(e.gsid.server, e.gsid.ssn)
            case ("zone", csn, data):
                db.execute("DELETE FROM docs WHERE zone = ?", (z,))
                db.executemany("INSERT OR REPLACE INTO docs VALUES (?, ?, ?, ?)",
                               [(z, d.name, d.content, d.csn or 1) for d in data])
                db.execute("DELETE FROM log WHERE zone = ?", (z,))
                self._meta("last_csn", csn)
                self._meta("truncated_through", csn)
            case ("truncate", through):
                db.execute("DELETE FROM log WHERE zone = ? AND csn <= ?", (z, through))
                self._meta("truncated_through", through, keep_max=True)
            case _:
                raise ValueError(f"unknown ANTACID record {r!r}")

    def _ssn_seen(self, server: m.ServerId, ssn: int) -> None:
        self.db.execute("INSERT INTO ssn_seen VALUES (?, ?, ?) ON CONFLICT(zone, server) DO "
                        "UPDATE SET ssn = max(ssn, excluded.ssn)",
                        (self._zone, json.dumps(asdict(server)), ssn))


# ---- JSON forms of the record parts (dataclasses of nodes.antacid.messages)

def _key(g: m.GlobalSubmitID) -> str:
    return json.dumps(asdict(g), sort_keys=True)


def _server(d: dict[str, Any]) -> m.ServerId:
    return m.ServerId(d["host"], d["port"], d["incarn"])


def _gsid(d: dict[str, Any]) -> m.GlobalSubmitID:
    return m.GlobalSubmitID(_server(d["server"]), d["ssn"])


def _datum(d: dict[str, Any]) -> m.DatumAndOp:
    return m.DatumAndOp(d["name"], d["content"], d["action"], d["csn"])


def _plain_group(g: m.UpdateGroup | None) -> dict[str, Any] | None:
    return None if g is None else {"data": [asdict(d) for d in g.data]}


def _group(d: dict[str, Any] | None) -> m.UpdateGroup | None:
    return None if d is None else m.UpdateGroup(tuple(_datum(x) for x in d["data"]))


def _error(e: dict[str, Any] | None) -> m.ArsError | None:
    return None if e is None else m.ArsError(e["code"], _server(e["at"]), e["text"],
                                             e["specifics"])


def _note(d: dict[str, Any]) -> m.SubmittedUpdateResultNotification:
    return m.SubmittedUpdateResultNotification(_gsid(d["gsid"]), d["csn"], d["zone"],
                                               _error(d["error"]))


def _plain(p: Pending) -> dict[str, Any]:
    notify = ({"host": p.notify.host, "port": p.notify.port}  # never ``via`` (a channel)
              if isinstance(p.notify, NotifyDest) else None)
    return {"group": _plain_group(p.group),
            "notify": notify, "from_peer": p.from_peer, "state": p.state, "csn": p.csn,
            "error": None if p.error is None else asdict(p.error), "rounds": p.rounds,
            "tries": p.tries}


def _pending(d: dict[str, Any]) -> Pending:
    return Pending(_group(d["group"]),
                   None if d["notify"] is None else NotifyDest(**d["notify"]), d["from_peer"],
                   d["state"], d["csn"], _error(d["error"]), d["rounds"], d["tries"])
