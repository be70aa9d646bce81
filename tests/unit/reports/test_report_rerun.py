"""The protocols' own checkers re-run by the report (reports.rerun) from node evidence.

Hand-made runs break one property each while results.json claims they passed: the re-run
must fail them with the right anomaly, and the report must flag every disagreement (an
``unknown`` re-run included) in the run table, the index, the run page, JUnit and the CLI.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pytest
from node_builders import protocol_store, write_run

from checkers.result import Result
from harness.protocols import get_protocol, names
from reports import rerun
from reports.checks import covered
from reports.cli import add_subcommands
from reports.discover import find_runs
from reports.report import ReportOptions, build_report
from reports.schema import RESULTS


@pytest.fixture(scope="module")
def pstore(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    s = tmp_path_factory.mktemp("pstore")
    runs = protocol_store(s)
    runs["store"] = s
    return runs


@pytest.fixture(scope="module")
def report(pstore):
    return build_report(ReportOptions(store=pstore["store"], engine="local", pages="all"))


@pytest.mark.parametrize(("case", "checker", "kind"), [
    ("raft", "raft", "two-leaders"),
    ("append", "append", "lost-append"),
    ("2pc", "2pc", "failed-update-visible"),
    ("ordering", "ordering", "causal-violation"),
    ("membership", "membership", "view-mismatch"),
])
def test_rerun_fails_each_bad_run_with_its_anomaly(pstore, case, checker, kind):
    res = {r.checker: r for r, _ in rerun.rerun_run(case, str(pstore[case]))}
    r = res[checker]
    assert r.valid is False, r.note
    assert kind in {a.kind for a in r.anomalies}
    assert r.stats["rerun"] is True and r.note  # the note names the failing part


def test_rerun_passes_a_good_run(pstore):
    res = {r.checker: (r, n) for r, n in rerun.rerun_run("good", str(pstore["sds-good"]))}
    r, n = res["ordering"]
    assert (r.valid, n) == (True, 2) and set(res) == {"ordering", "liveness", "stats"}


def test_no_node_evidence_is_unknown_not_a_pass(pstore):
    r = {r.checker: r for r, _ in rerun.rerun_run("x", str(pstore["no-evidence"]))}["2pc"]
    assert r.valid == "unknown" and "no node observations" in r.note


def test_unknown_protocol_and_crashing_checker_are_labelled_unknown(pstore, monkeypatch):
    [(r, _)] = rerun.rerun_run("x", str(pstore["unknown-protocol"]))
    assert r.checker == rerun.REGISTRY_ROW and r.valid == "unknown" and "mystery" in r.note

    def boom(test, history, obs):
        raise RuntimeError("kaput")

    monkeypatch.setattr(rerun, "registry_checkers", lambda test: ({"boom": boom}, ""))
    [(r, _)] = rerun.rerun_run("x", str(pstore["raft"]))
    assert r.valid == "unknown" and "kaput" in r.note


def test_unreadable_history_is_unknown(tmp_path):
    d = write_run(tmp_path, "drip", "20261121T000000-00000a", {"protocol": "drip"}, [], {}, None)
    (d / "history.jsonl").write_text('{"process": 0, "type": "invoke"}\n#garbage#\n{"a": 1}\n')
    res = rerun.rerun_run("x", str(d))
    assert {r.checker for r, _ in res} == {"2pc", "liveness", "stats"}
    assert all(r.valid == "unknown" and "history unreadable" in r.note for r, _ in res)


def test_one_registry_serves_runner_and_report():
    """The re-run takes the very dict the runner takes (Workload.checkers), minus what a
    pipeline checker re-checks per key: no second list of checkers."""
    assert covered() == {"linearizable": "kv-linearizable"}
    for proto in names():
        p = get_protocol(proto)
        for wl, factory in p.workloads.items():
            got, why = rerun.registry_checkers({"protocol": proto, "workload": wl})
            assert set(got) == set(factory().checkers) - set(covered()) | {"stats"} and not why
    got, _ = rerun.registry_checkers({"protocol": "garlicfarm"})  # default workload: kv
    assert set(got) == {"raft", "liveness", "stats"}
    got, _ = rerun.registry_checkers({"protocol": "garlicfarm", "nemesis": "kill"})
    assert set(got) == {"raft", "liveness", "stats", "faults"}
    assert rerun.registry_checkers({"protocol": None})[0] == {}
    with pytest.raises(ValueError, match="no workload"):
        rerun.registry_checkers({"protocol": "sds", "workload": "nope"})


def test_driver_over_arrow_and_balanced_slices(pstore):
    runs = find_runs(pstore["store"])
    slices = rerun.rerun_slices(runs, 3)
    assert len(slices) == 3
    dealt = [json.loads(s) for s in slices]
    assert sorted(r["run_id"] for s in dealt for r in s) == sorted(r.run_id for r in runs)
    assert max(map(len, dealt)) - min(map(len, dealt)) <= 1
    b = pa.RecordBatch.from_pydict({rerun.RUN_COLUMN: slices})
    out = pa.Table.from_batches(list(rerun.rerun_batches([b])), schema=RESULTS).to_pylist()
    assert {(r["checker"], r["source"]) for r in out} >= {("raft", "pipeline"),
                                                         ("ordering", "pipeline")}


def test_flatten_keeps_the_failing_parts_witnesses():
    from checkers.result import Anomaly, compose

    top = compose("raft", [Result("a", True), Result("b", False, [Anomaly("k", "m", {"x": 1})],
                                                      note="bad b"),
                           Result("c", "unknown", note="no state")])
    f = rerun.flatten(top)
    assert f.valid is False and not f.children
    assert f.anomalies[0].witness == {"check": "b", "x": 1}
    assert "b: false (bad b)" in f.note and "c: unknown (no state)" in f.note
    assert f.stats["parts_valid"] == {"a": "true", "b": "false", "c": "unknown"}


def _agreement(report, pstore):
    """(case name, checker) -> (stored, re-run, status)."""
    case = {f"{p.parent.name}/{p.name}": k for k, p in pstore.items() if k != "store"}
    a = report.output.tables["agreement"]
    return {(case[r.run_id], r.checker): (r.stored, r.rerun, r.status) for r in a.itertuples()}


def test_report_flags_every_disagreement(report, pstore):
    a = _agreement(report, pstore)
    for case in ("raft", "append", "2pc", "ordering", "membership"):  # case = checker name
        assert a[(case, case)] == ("true", "false", "MISMATCH"), case
    assert a[("sds-good", "ordering")] == ("true", "true", "agree")
    # the stored linearizable verdict is compared with the pipeline's per-key re-check
    assert a[("raft", "linearizable")] == ("true", "true", "agree")
    # an unknown re-run against a stored pass is a mismatch too, never silent
    assert a[("no-evidence", "2pc")] == ("true", "unknown", "MISMATCH")
    assert a[("unknown-protocol", "whatever")][2] == "not re-run"
    assert a[("unknown-protocol", "protocol-checkers")] == ("", "unknown", "no stored verdict")
    runs = {Path(r.path).name: r for r in report.output.runs.itertuples()}
    raft_run = runs[pstore["raft"].name]
    assert raft_run.verdict == "false" and "raft (stored true, re-run false)" in raft_run.mismatch
    good = runs[pstore["sds-good"].name]
    assert good.verdict == "true" and good.mismatch == ""
    assert runs[pstore["no-evidence"].name].verdict == "unknown"
    assert runs[pstore["unknown-protocol"].name].verdict == "unknown"


def test_index_run_page_and_junit_show_the_mismatch(report, pstore):
    index = report.index.read_text()
    assert "Stored verdicts vs the report&#39;s re-run" in index or \
        "Stored verdicts vs the report's re-run" in index
    assert "MISMATCH: 6" in index and "MISMATCH: raft (stored true, re-run false)" in index
    page = (pstore["raft"] / "report" / "index.html").read_text()
    assert "Stored verdict vs re-run" in page and "two-leaders" in page
    assert "term 1 had 2 leaders" in page
    root = ET.parse(report.index.parent / "junit.xml").getroot()
    mism = [c for c in root.iter("testcase") if c.get("name", "").startswith("stored-vs-rerun")]
    assert len(mism) == 6 and all(c.find("error").get("type") == "mismatch" for c in mism)
    names = {c.get("name") for c in root.iter("testcase")}
    assert {"raft", "raft (stored)"} <= names


def test_cli_prints_mismatches_and_fails(pstore, capsys):
    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["report", "--store", str(pstore["store"]), "--engine", "local",
                       "--pages", "none"])
    assert a.fn(a) == 1
    err = capsys.readouterr().err
    assert "6 run(s) where a stored verdict" in err and "membership (stored true" in err
