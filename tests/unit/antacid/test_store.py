"""The ANTACID SQLite store: loading what was written equals folding the records (for every
record a simulated run with submissions, pulls and a restart produced), and a writer killed
with SIGKILL mid-stream leaves whole transactions only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.sim.antacid import AntacidSim
from nodes.antacid.state import Durable
from nodes.antacid.store import Store


def _run() -> AntacidSim:
    sim = AntacidSim(seed=4, loss=0.05)
    for i in range(6):
        sim.submit(["p", "r1", "r2"][i % 3], (f"blocks:z.k{i % 2}", f"v{i}", "write"),
                   (f"blocks:z.g{i}", "x\ny", "create"))
        if i == 2:
            sim.crash("r1")
        if i == 3:
            sim.boot("r1")
        sim.run_for(0.2)
    sim.submit("p", ("blocks:z.g0", "", "delete"))
    sim.command("p", __import__("nodes.antacid.core", fromlist=["TruncateLog"]).TruncateLog(4))
    sim.run_for(10)
    return sim


def test_load_equals_the_fold_of_the_records(tmp_path: Path) -> None:
    sim = _run()
    kinds = set()
    for name, node in sim.nodes.items():
        records = [p.record for p in node.durable]
        kinds |= {r[0] for r in records}
        store = Store(tmp_path / f"{name}.sqlite3")
        for k, r in enumerate(records):
            store.write(r)
            if k % 3 == 2 or k == len(records) - 1:
                store.commit()
                assert store.load(999) == Durable.restore(records[:k + 1], 999), (name, k)
        store.close()
        again = Store(tmp_path / f"{name}.sqlite3")
        assert again.load(999) == Durable.restore(records, 999)
        again.close()
    assert kinds >= {"incarn", "ssn", "pending", "done", "commit", "zone", "truncate", "owed",
                     "paid"}, kinds


def test_an_empty_store_takes_the_new_incarnation(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.sqlite3")
    d = s.load(1234)
    assert (d.incarn, d.fresh_incarn, d.last_csn, d.docs) == (1234, True, 0, {})
    s.close()


def test_an_unknown_record_is_refused_and_rolled_back(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.sqlite3")
    s.write(("ssn", 3))
    try:
        s.write(("bogus", 1))
    except ValueError as e:
        assert "unknown ANTACID record" in str(e)
    else:
        raise AssertionError("accepted a bogus record")
    s.commit()
    assert s.load(1).last_ssn == 0
    s.close()


WRITER = textwrap.dedent("""
    import sys
    from nodes.antacid import messages as m
    from nodes.antacid.state import Committed, Pending
    from nodes.antacid.store import Store
    s = Store(sys.argv[1])
    me = m.ServerId("p.test", 5000, 7)
    s.write(("incarn", 7)); s.commit()
    for n in range(1, 100000):
        g = m.GlobalSubmitID(me, n)
        docs = tuple(m.DatumAndOp(f"blocks:z.d{n % 50}.{j}", "c" * 200 + str(n), "write")
                     for j in range(5))
        s.write(("ssn", n))
        s.write(("pending", g, Pending(m.UpdateGroup(docs), None, None, "propagating")))
        s.write(("commit", Committed(n + 1, g, docs)))
        s.write(("done", g))
        s.commit()
        print(n, flush=True)
""")


def test_a_writer_killed_mid_stream_leaves_whole_transactions(tmp_path: Path) -> None:
    db = tmp_path / "ars.sqlite3"
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE,
                            text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        last = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            last = int(line)
            if last >= 300:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert last >= 300, "the writer did not get going"
    s = Store(db)
    d = s.load(1)
    s.close()
    assert d.incarn == 7 and not d.fresh_incarn
    assert d.last_ssn >= last, "a committed transaction was lost"
    # every transaction whole: the SSN, its commit and its done record together
    assert d.last_csn == d.last_ssn + 1
    assert [e.csn for e in d.log] == list(range(2, d.last_csn + 1))
    assert d.pending == {}
    assert all(len(e.data) == 5 for e in d.log)
    n = d.last_ssn
    assert d.docs[f"blocks:z.d{n % 50}.0"] == ("c" * 200 + str(n), n + 1)
    assert d.committed_ssn == {next(iter(d.committed_ssn)): n}


def test_a_notify_channel_is_not_durable(tmp_path: Path) -> None:
    from nodes.antacid import messages as m
    from nodes.antacid.core import NotifyDest
    from nodes.antacid.state import Pending
    s = Store(tmp_path / "n.sqlite3")
    gsid = m.GlobalSubmitID(m.ServerId("h", 1, 2), 1)
    s.write(("pending", gsid, Pending(None, NotifyDest("c", 7, via=object()), None, "notifying")))
    s.commit()
    got = s.load(1).pending[gsid].notify
    assert (got.host, got.port, got.via) == ("c", 7, None)
    s.close()
