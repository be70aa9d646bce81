"""The runner against in-process clients: process semantics, history, store, verdicts."""

import json

from checkers.result import Anomaly, Artifact, Result
from harness import generators as g
from harness.runner import run
from harness.spec import DefiniteFailure, TestSpec, Workload
from vocabulary.history import read_history


class FlakyRegister:
    """An in-process register whose every 5th op times out (info) and every 7th fails."""

    node = None
    value = 0
    calls = 0

    def __init__(self, addr, process):
        self.process = process

    async def invoke(self, op):
        FlakyRegister.calls += 1
        n = FlakyRegister.calls
        if n % 7 == 0:
            raise DefiniteFailure("refused")
        if n % 5 == 0:
            raise ConnectionError("lost")
        if op["f"] == "write":
            FlakyRegister.value = op["value"]
            return {"type": "ok"}
        return {"type": "ok", "value": FlakyRegister.value}

    async def close(self):
        pass


def count_checker(test, history, obs):
    oks = [o for o in history if o["type"] == "ok"]
    return Result("count", valid=bool(oks), stats={"ok": len(oks)})


def failing_checker(test, history, obs):
    return Result("bad", valid=False, anomalies=[Anomaly("made-up", "always fails")])


def crashing_checker(test, history, obs):
    raise RuntimeError("boom")


def spec(tmp_path, **kw):
    gen = lambda s: g.limit(100, g.mix(g.repeat({"f": "read"}), lambda c: {"f": "write", "value": c.rng.randrange(9)}))  # noqa: E731
    wl = Workload(client=FlakyRegister, generator=gen, checkers={"count": count_checker, **kw.pop("checkers", {})})
    return TestSpec(name="inproc", workload=wl, concurrency=3, seed=11, time_limit=10,
                    store=str(tmp_path / "store"), **kw)


def test_history_store_and_process_semantics(tmp_path):
    r = run(spec(tmp_path))
    assert r.valid is True
    h = read_history(r.run_dir.history)
    assert h.complete
    ops = h.ops
    assert len([o for o in ops if o["type"] == "invoke"]) == 100
    # every invoke is completed by the same process, and info retires the process
    by_proc = {}
    for o in ops:
        by_proc.setdefault(o["process"], []).append(o["type"])
    for proc, types in by_proc.items():
        assert types[::2] == ["invoke"] * (len(types) // 2)
        if "info" in types:
            assert types[-1] == "info", f"process {proc} was used after an info"
    assert any("info" in t for t in by_proc.values())
    assert any("fail" in t for t in by_proc.values())
    assert max(p for p in by_proc) >= 3  # fresh process ids were issued
    test = json.loads(r.run_dir.test_json.read_text())
    assert test["status"] == "complete" and test["seed"] == 11
    results = json.loads(r.run_dir.results_json.read_text())
    assert results["valid"] is True
    latest = (tmp_path / "store" / "latest")
    assert latest.resolve() == r.run_dir.path


def test_worst_wins_and_crash_is_unknown(tmp_path):
    r = run(spec(tmp_path, checkers={"crash": crashing_checker}))
    assert r.valid == "unknown"
    r = run(spec(tmp_path, checkers={"crash": crashing_checker, "bad": failing_checker}))
    assert r.valid is False
    assert "always fails" in r.result.explain()


def test_same_seed_same_schedule(tmp_path):
    a = [(o["f"], o.get("value")) for o in read_history(run(spec(tmp_path)).run_dir.history).ops
         if o["type"] == "invoke"]
    b = [(o["f"], o.get("value")) for o in read_history(run(spec(tmp_path)).run_dir.history).ops
         if o["type"] == "invoke"]
    assert a == b


def explaining_checker(test, history, obs):
    return Result("explained", valid=False, anomalies=[Anomaly("made-up", "see the page")],
                  artifacts=[Artifact("explained/why.html", lambda: "<p>because</p>")])


def test_the_runner_writes_what_a_pure_checker_asks_for(tmp_path):
    r = run(spec(tmp_path, checkers={"explained": explaining_checker}))
    page = r.run_dir.path / "explained" / "why.html"
    assert page.read_text() == "<p>because</p>"
    stored = json.loads(r.run_dir.results_json.read_text())
    leaf = Result.from_json(stored["result"]).find("explained")
    assert leaf.anomalies[0].witness["html"] == str(page)


def test_a_backend_that_cannot_be_set_up_ends_the_run_as_failed(tmp_path, monkeypatch):
    """Not ``running`` for ever: the backend is made inside the run's bookkeeping."""
    import pytest

    from harness import runner
    from harness.backends import BackendError
    from harness.protocols import get_protocol

    def no_engine(*a, **kw):
        raise BackendError("no Docker engine: run scripts/setup-docker")

    monkeypatch.setattr(runner, "make_cluster", no_engine)
    spec = TestSpec(name="nobackend", protocol=get_protocol("garlicfarm"), nodes=3, seed=1,
                    store=str(tmp_path), backend="docker", time_limit=1)
    with pytest.raises(BackendError, match="no Docker engine"):
        run(spec)
    rd = next((tmp_path / "nobackend").iterdir())
    assert json.loads((rd / "test.json").read_text())["status"] == "failed"
