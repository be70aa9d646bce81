"""The ANTACID store keyed by zone: two zones' interleaved records load back as each zone's
fold, and a store written before zones were keyed is migrated into the default zone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nodes.antacid.state import Durable
from nodes.antacid.store import TABLES, Store
from nodes.antacid.zones import restore_zones
from tests.unit.antacid.test_store import _run
from tests.unit.antacid.test_zones import TOPOS, ZA, ZB, net

#: the tables as a one-zone store wrote them (before this module's change)
UNZONED = """
CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE docs (name TEXT PRIMARY KEY, content TEXT NOT NULL, csn INTEGER NOT NULL);
CREATE TABLE log (csn INTEGER PRIMARY KEY, gsid TEXT, data TEXT NOT NULL);
CREATE TABLE pending (gsid TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ssn_seen (server TEXT PRIMARY KEY, ssn INTEGER NOT NULL);
CREATE TABLE held (gsid TEXT PRIMARY KEY, peer TEXT, grp TEXT);
CREATE TABLE owed (peer TEXT NOT NULL, gsid TEXT NOT NULL, value TEXT NOT NULL,
                   PRIMARY KEY (peer, gsid));
"""


def test_two_zones_interleaved_load_as_each_zones_fold(tmp_path: Path) -> None:
    z = net()
    for i in range(4):
        z.submit("n3", (f"{ZA}.d{i % 2}", f"a{i}", "write"))
        z.submit("n3", (f"{ZB}.d{i % 2}", f"b{i}", "write"), (f"{ZB}.g{i}", "x", "create"))
        z.run()
    for node in ("n1", "n2", "n3"):
        records = z.records[node]
        assert {r[1] for r in records} == {ZA, ZB}
        store = Store(tmp_path / f"{node}.sqlite3", default_zone=ZA)
        for k, r in enumerate(records):
            store.write(r)
            if k % 4 == 3 or k == len(records) - 1:
                store.commit()
                want = restore_zones(records[:k + 1], TOPOS, 999)
                assert store.load(999, ZA) == want[ZA], (node, k)
                assert store.load(999, ZB) == want[ZB], (node, k)
        assert store.zones() == [ZA, ZB]
        store.close()
    # the two zones did not mix: same SSNs and CSNs, different documents
    s = Store(tmp_path / "n1.sqlite3", default_zone=ZA)
    a, b = s.load(1, ZA), s.load(1, ZB)
    assert a.last_csn == b.last_csn == 5 and set(a.docs).isdisjoint(b.docs)
    s.close()


def test_a_store_from_before_zones_migrates_into_the_default_zone(tmp_path: Path) -> None:
    sim = _run()
    records = [p.record for p in sim.nodes["r1"].durable]
    # the rows a one-zone store held: this store's rows less the zone column
    new = Store(tmp_path / "new.sqlite3")
    for r in records:
        new.write(r)
    new.commit()
    old = sqlite3.connect(tmp_path / "old.sqlite3", isolation_level=None)
    old.executescript(UNZONED)
    for t in TABLES:
        rows = [row[1:] for row in new.db.execute(f"SELECT * FROM {t}")]
        if rows:
            old.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    new.close()
    old.close()
    want = Durable.restore(records, 999)
    migrated = Store(tmp_path / "old.sqlite3", default_zone="blocks:z")
    assert migrated.zones() == ["blocks:z"]
    assert migrated.load(999) == want and migrated.load(999, "blocks:z") == want
    assert migrated.load(999, "blocks:other").fresh_incarn  # another zone starts empty
    migrated.write(("ssn", want.last_ssn + 1))  # and keeps working unzoned
    migrated.commit()
    migrated.close()
    again = Store(tmp_path / "old.sqlite3", default_zone="blocks:z")  # migrated once only
    assert again.load(999).last_ssn == want.last_ssn + 1
    assert [r[1] for r in again.db.execute("PRAGMA table_info(meta)")][0] == "zone"
    again.close()
