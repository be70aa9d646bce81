"""``harness ls`` (whole run ids, ``--json``) and ``harness check`` (says what it rewrites,
keeps results.prev.json, ``--out``) on a store of hand-made run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli

MS = 1_000_000
#: longer than any terminal column rich would give the id: truncation would show
LONG_TEST = "garlicfarm-kv-" + "-".join(["a-rather-long-test-name"] * 4)


def kv_history() -> list[dict]:
    """A linearizable register history on one key (the garlicfarm kv workload's shape)."""
    return [
        {"process": 0, "type": "invoke", "f": "write", "value": ["k0", 1], "node": "n1"},
        {"process": 0, "type": "ok", "f": "write", "value": ["k0", 1], "node": "n1"},
        {"process": 1, "type": "invoke", "f": "read", "value": ["k0", None], "node": "n2"},
        {"process": 1, "type": "ok", "f": "read", "value": ["k0", 1], "node": "n2"},
    ]


def write_run(store: Path, test: str, run_id: str, *, stored: object = True,
              started: str | None = "2026-11-21T01:00:00+0000", seed: int = 5) -> Path:
    """A complete garlicfarm kv run with no node evidence: re-checked, its raft checkers have
    nothing to judge, so the fresh verdict is unknown whatever ``stored`` claims."""
    d = store / test / run_id
    d.mkdir(parents=True)
    desc = {"name": test, "protocol": "garlicfarm", "workload": "kv", "status": "complete",
            "nodes": ["n1", "n2", "n3"], "nemesis": "none", "seed": seed, "ops": 4}
    if started:
        desc["started"] = started
    (d / "test.json").write_text(json.dumps(desc))
    (d / "history.jsonl").write_text("".join(
        json.dumps({"time": (i + 1) * MS, **op, "index": i}) + "\n"
        for i, op in enumerate(kv_history())))
    if stored is not None:
        (d / "results.json").write_text(json.dumps(
            {"valid": stored, "seed": seed, "result": {"name": "all", "valid": stored}}))
    return d


@pytest.fixture
def store(tmp_path) -> Path:
    s = tmp_path / "store"
    write_run(s, "gf-kv", "20261121T010000-000001", stored=True)
    write_run(s, LONG_TEST, "20261121T020000-00abcd", stored=None, started=None, seed=9)
    write_run(s, "gf-kv", "20261121T030000-000003", stored=False)
    (s / "junk" / "20261121T040000-000004").mkdir(parents=True)  # torn: unreadable test.json
    (s / "junk" / "20261121T040000-000004" / "test.json").write_text("{not json")
    return s


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- ls


@pytest.mark.parametrize("columns", ["40", "80", "200"])
def test_ls_never_truncates_the_run_id(store, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run_cli(capsys, "ls", "--store", str(store))
    assert code == 0
    long_id = f"{LONG_TEST}/20261121T020000-00abcd"
    assert len(long_id) > 100
    lines = [ln for ln in out.splitlines() if LONG_TEST[:20] in ln]
    assert len(lines) == 1 and long_id in lines[0], out  # whole, on one line
    assert "gf-kv/20261121T010000-000001" in out and "gf-kv/20261121T030000-000003" in out
    assert "junk" not in out


def test_ls_json_lists_every_readable_run(store, capsys):
    code, out, _ = run_cli(capsys, "ls", "--store", str(store), "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == ["gf-kv/20261121T010000-000001",
                                       f"{LONG_TEST}/20261121T020000-00abcd",
                                       "gf-kv/20261121T030000-000003"]  # oldest first
    first, long_run, last = rows
    assert first["path"] == str((store / "gf-kv" / "20261121T010000-000001").resolve())
    assert Path(long_run["path"]).name == "20261121T020000-00abcd"
    assert (first["protocol"], first["workload"], first["nemesis"], first["status"]) == \
        ("garlicfarm", "kv", "none", "complete")
    assert (first["seed"], long_run["seed"], first["ops"]) == (5, 9, 4)
    assert first["started"] == "2026-11-21T01:00:00+0000"
    assert long_run["started"] == "2026-11-21T02:00:00"  # no "started": the id's timestamp
    assert (first["verdict"], long_run["verdict"], last["verdict"]) == (True, None, False)
    assert (first["run_id"], first["test"]) == ("20261121T010000-000001", "gf-kv")


def test_ls_json_of_an_empty_store_is_an_empty_list(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "ls", "--store", str(tmp_path / "nothing"), "--json")
    assert (code, json.loads(out)) == (0, [])


# --------------------------------------------------------------------------- check


def results_of(path: Path) -> dict:
    return json.loads(path.read_text())


def test_check_announces_the_rewrite_and_keeps_the_previous_results(store, capsys):
    run = store / "gf-kv" / "20261121T010000-000001"
    before = (run / "results.json").read_bytes()
    code, _, err = run_cli(capsys, "check", str(run))
    assert code == 2  # no node evidence: unknown
    results = (run / "results.json").resolve()
    said = f"rewriting {results}; the previous verdict was True"
    assert said in err
    assert err.index(said) < err.index("verdict")  # said before the checkers' table
    assert (run / "results.prev.json").read_bytes() == before
    assert results_of(run / "results.json")["valid"] == "unknown"
    assert "the verdict changed: True before, unknown now" in err


def test_check_by_the_id_ls_prints(store, capsys):
    _, out, _ = run_cli(capsys, "ls", "--store", str(store), "--json")
    rows = {r["verdict"]: r for r in json.loads(out)}
    code, _, err = run_cli(capsys, "check", rows[False]["id"], "--store", str(store))
    assert code == 2
    run = Path(rows[False]["path"])
    assert f"rewriting {run / 'results.json'}; the previous verdict was False" in err
    assert results_of(run / "results.prev.json")["valid"] is False
    # the bare run id, when it names one run, is enough
    code, _, err = run_cli(capsys, "check", "20261121T010000-000001", "--store", str(store))
    assert code == 2 and "the previous verdict was True" in err


def test_check_out_leaves_results_json_untouched(store, tmp_path, capsys):
    run = store / "gf-kv" / "20261121T030000-000003"
    before = (run / "results.json").read_bytes()
    out = tmp_path / "recheck.json"
    code, _, err = run_cli(capsys, "check", str(run), "--out", str(out))
    assert code == 2
    assert (run / "results.json").read_bytes() == before
    assert not (run / "results.prev.json").exists()
    assert results_of(out)["valid"] == "unknown" and results_of(out)["seed"] == 5
    assert f"writing {out}; {(run / 'results.json').resolve()} is left as it is" in err
    assert "rewriting" not in err


def test_check_of_a_run_without_results_says_there_was_none(store, capsys):
    run = store / LONG_TEST / "20261121T020000-00abcd"
    code, _, err = run_cli(capsys, "check", str(run))
    assert code == 2
    assert f"writing {(run / 'results.json').resolve()}; there was no previous verdict" in err
    assert results_of(run / "results.json")["valid"] == "unknown"
    assert not (run / "results.prev.json").exists()


def test_check_of_no_run_is_a_usage_error_that_writes_nothing(store, tmp_path, capsys):
    snapshot = sorted(p for p in store.rglob("*"))
    code, _, err = run_cli(capsys, "check", "gf-kv/nosuch", "--store", str(store))
    assert code == cli.USAGE and "harness ls" in err
    code, _, err = run_cli(capsys, "check", str(store / "gf-kv" / "20261121T010000-000001"),
                           "--out", str(tmp_path / "no" / "such" / "dir.json"))
    assert code == cli.USAGE and "--out" in err
    assert sorted(p for p in store.rglob("*")) == snapshot


def test_a_usage_error_keeps_a_long_path_on_one_line(store, capsys):
    # CI's checkout path is longer than ours: rich had broken "see 'harness ls'" across lines
    far = "gf-kv/" + "x" * 120
    code, _, err = run_cli(capsys, "check", far, "--store", str(store))
    assert code == cli.USAGE
    assert len(err.strip().splitlines()) == 1 and far in err and "see 'harness ls'" in err, err


def test_a_torn_results_json_is_listed_and_replaced_as_unreadable(tmp_path, capsys):
    s = tmp_path / "store"
    run = write_run(s, "gf-kv", "20261121T010000-000001")
    (run / "results.json").write_text('{"valid": tr')
    _, out, _ = run_cli(capsys, "ls", "--store", str(s), "--json")
    assert [r["verdict"] for r in json.loads(out)] == ["unreadable"]
    code, _, err = run_cli(capsys, "check", str(run))
    assert code == 2 and "the previous verdict was unreadable" in err
    assert (run / "results.prev.json").read_text() == '{"valid": tr'
