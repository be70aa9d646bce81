import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from nodes.common.admin import AdminServer
from nodes.common.clock import Clock
from nodes.common.config import ConfigError, parse_config
from nodes.common.journal import Journal

BASE = {
    "id": "n1", "num_id": 1, "host": "127.0.0.1", "data_dir": "/tmp/x",
    "ports": {"peer": 1, "client": 2, "admin": 3},
    "peers": {"n2": {"num_id": 2, "peer": "127.0.0.1:21002"}},
    "bugs": [], "seed": 42, "options": {"a": 1},
}


def test_journal_seq_continues_and_torn_line(tmp_path):
    clock = Clock()
    j = Journal(tmp_path / "events.jsonl", clock)
    j.emit("start", term=0)
    j.emit("vote", term=1)
    j.close()
    with open(tmp_path / "events.jsonl", "ab") as f:
        f.write(b'{"seq": 2, "t": 1.0, "ty')
    j2 = Journal(tmp_path / "events.jsonl", clock)
    assert j2.torn_bytes > 0 and j2.next_seq == 3  # seq 2 says what the cut removed
    ev = j2.emit("role", role="leader")
    assert ev["seq"] == 3
    events, nxt = j2.since(1)
    assert [e["seq"] for e in events] == [1, 2, 3] and nxt == 4
    assert events[1]["type"] == "journal-repaired"
    assert j2.since(5) == ([], 4)
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [0, 1, 2, 3]


def test_a_held_turns_events_reach_the_file_together_at_its_end(tmp_path):
    """A runtime turn's events are written once, when the turn ends (its effects leave only
    after it); the tail serves them at once, and an event outside a turn is written at once."""
    path = tmp_path / "events.jsonl"
    j = Journal(path, Clock())
    j.emit("start")
    assert len(path.read_bytes().splitlines()) == 1
    with j.held():
        j.emit("vote", uid="u1")
        with j.held():  # nested: the outer end writes
            j.emit("apply", uid="u1")
        assert len(path.read_bytes().splitlines()) == 1
        assert [e["type"] for e in j.since(0)[0]] == ["start", "vote", "apply"]
    assert [json.loads(x)["type"] for x in path.read_bytes().splitlines()] == [
        "start", "vote", "apply"]
    try:
        with j.held():
            j.emit("release", uid="u1")
            raise RuntimeError("a core bug mid-turn")
    except RuntimeError:
        pass
    assert len(path.read_bytes().splitlines()) == 4  # written all the same
    j.close()


def test_clock_offset_only_moves_wall():
    c = Clock()
    w, m = c.wall(), c.monotonic()
    c.set_offset(100.0)
    assert c.wall() - w > 99 and c.monotonic() - m < 1


def test_config_ok_and_errors():
    cfg = parse_config(BASE, ["forget-vote"])
    assert cfg.num_id == 1 and cfg.peers["n2"].peer_addr() == ("127.0.0.1", 21002)
    with pytest.raises(ConfigError, match="unknown bug"):
        parse_config({**BASE, "bugs": ["nope"]}, ["forget-vote"])
    with pytest.raises(ConfigError, match="missing required field 'ports'"):
        parse_config({k: v for k, v in BASE.items() if k != "ports"}, [])
    with pytest.raises(ConfigError, match="host:port"):
        parse_config({**BASE, "peers": {"n2": {"peer": "nope"}}}, [])


def test_admin_api(tmp_path):
    asyncio.run(_admin_api(tmp_path))


async def _admin_api(tmp_path):
    clock = Clock()
    j = Journal(tmp_path / "e.jsonl", clock)
    j.emit("start")
    admin = AdminServer("n1", lambda: {"role": "leader"}, j, clock, "127.0.0.1", 0)
    async with TestClient(TestServer(admin.app)) as c:
        r = await c.get("/admin/health")
        assert r.status == 503
        admin.set_ready()
        assert await (await c.get("/admin/health")).json() == {"ok": True, "id": "n1"}
        assert (await (await c.get("/admin/state")).json())["role"] == "leader"
        r = await c.post("/admin/clock", json={"offset_s": 2.5})
        assert r.status == 200 and clock.offset_s == 2.5
        ev = await (await c.get("/admin/events?since=0")).json()
        assert [e["type"] for e in ev["events"]] == ["start", "clock"] and ev["next"] == 2
        assert (await c.post("/admin/clock", json={})).status == 400
