"""The harness wrapper, the HTML explanation and the command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from checkers.linearizable import check, checker, from_ops, render_html
from checkers.linearizable.__main__ import main
from checkers.result import Result, compose, write_artifacts
from tests.unit.golden import Golden
from tests.unit.linearizable.helpers import hist

ROOT = Path(__file__).resolve().parents[3]

BAD = hist((0, "invoke", "write", ["x", 1]), (0, "ok", "write", ["x", 1]),
           (1, "invoke", "write", ["x", 2]), (2, "invoke", "read", ["x", None]),
           (2, "ok", "read", ["x", 2]), (1, "info", "write", ["x", 2]),
           ("nemesis", "invoke", "kill", None), ("nemesis", "info", "kill", None),
           (2, "invoke", "read", ["x", None]), (2, "ok", "read", ["x", 1]))


def test_wrapper_returns_a_result_with_witness_and_the_html_to_write(tmp_path, golden: Golden):
    r = golden(checker("kv", time_s=10)({}, BAD, {"run_dir": str(tmp_path)}))
    assert isinstance(r, Result) and r.valid is False
    w = r.anomalies[0].witness
    assert r.anomalies[0].kind == "nonlinearizable"
    assert w["failed_op"]["output"] == ["x", 1] and "Cannot linearize" in w["text"]
    assert "html" not in w and not list(tmp_path.iterdir())  # the check wrote nothing
    assert [a.path for a in r.artifacts] == ["linearizable/x.html"]
    top = compose("all", [Result("stats", True), r])
    assert write_artifacts(top, tmp_path) == [tmp_path / "linearizable" / "x.html"]
    assert Path(w["html"]) == tmp_path / "linearizable" / "x.html"
    assert "<svg" in Path(r.anomalies[0].witness["html"]).read_text()
    assert r.stats["ops"] == 4 and r.stats["explored"] > 0
    json.dumps(r.to_json())  # the store can save it
    assert Result.from_json(r.to_json()).valid is False


def test_wrapper_valid_and_unreadable_histories(golden: Golden):
    good = BAD[:-1] + [{**BAD[-1], "value": ["x", 2]}]
    assert golden(checker("kv")({}, good, {})).valid is True
    r = golden(checker("register")({}, hist((0, "invoke", "cas", [1, 2]), (0, "ok", "cas", [1, 2])), {}))
    assert r.valid == "unknown" and "cas-register" in r.note


def test_html_is_self_contained_svg_with_the_failure_highlighted(tmp_path, golden: Golden):
    r = golden(check(from_ops(BAD), "kv"))
    p = render_html(r, tmp_path / "out.html")
    doc = p.read_text()
    assert "http://" not in doc.replace("http://www.w3.org/2000/svg", "")
    svg = re.search(r"<svg.*</svg>", doc, re.S)[0]
    root = ET.fromstring(svg)  # well-formed
    assert root.tag.endswith("svg")
    assert "CANNOT BE LINEARIZED" in doc and "#c00" in doc
    assert "url(#hatch)" in doc  # the open-ended write


def test_cli_prints_one_json_line_and_exit_codes(tmp_path, capsys):
    f = tmp_path / "history.jsonl"
    f.write_text("".join(json.dumps(o) + "\n" for o in BAD))
    assert main(["--model", "kv", str(f)]) == 1
    out = json.loads(capsys.readouterr().out.strip())
    assert out["valid"] is False and out["ops"] == 4 and "text" in out["witness"]
    good = BAD[:-1] + [{**BAD[-1], "value": ["x", 2]}]
    f.write_text("".join(json.dumps(o) + "\n" for o in good))
    assert main(["--model", "kv", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    assert main(["--model", "kv", "--time-s", "0", "--memory-mb", "0", str(f)]) in (0, 2)
    capsys.readouterr()
    assert main(["--model", "kv", "--format", "porcupine-etcd", str(f)]) == 3


def test_cli_runs_as_a_module(tmp_path):
    f = tmp_path / "etcd.log"
    f.write_text("INFO  jepsen.util - 0\t:invoke\t:write\t1\n"
                 "INFO  jepsen.util - 0\t:ok\t:write\t1\n"
                 "INFO  jepsen.util - 1\t:invoke\t:read\tnil\n"
                 "INFO  jepsen.util - 1\t:ok\t:read\tnil\n")
    p = subprocess.run([sys.executable, "-m", "checkers.linearizable", "--model", "cas-register",
                        "--format", "porcupine-etcd", str(f)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    line = json.loads(p.stdout)
    assert set(line) >= {"valid", "ops", "elapsed_s", "witness"} and line["valid"] is False


def test_cli_options_their_defaults_and_help(monkeypatch, golden):
    from checkers.linearizable.__main__ import parser

    monkeypatch.setenv("COLUMNS", "100")
    assert vars(parser().parse_args(["h.jsonl"])) == {
        "file": "h.jsonl", "model": "cas-register", "format": "jsonl", "time_s": 60.0,
        "memory_mb": 1024.0, "html": None, "explain": False}
    golden({"help": parser().format_help()})


def test_cli_explains_on_stderr_and_writes_the_html(tmp_path, capsys, golden):
    f = tmp_path / "history.jsonl"
    f.write_text("".join(json.dumps(o) + "\n" for o in BAD))
    html = tmp_path / "why.html"
    assert main(["--model", "kv", "--explain", "--html", str(html), str(f)]) == 1
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["html"] == str(html) and html.exists() and "<svg" in html.read_text()
    assert cap.err.strip() == out["witness"]["text"].strip()
    out.pop("html")
    golden(out)
    assert main(["--model", "kv", str(f)]) == 1 and capsys.readouterr().err == ""


def test_cli_an_unreadable_input_says_why_on_both_streams(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert main([str(missing)]) == 3
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert list(out) == ["valid", "error"] and out["valid"] == "unknown"
    assert "nope.jsonl" in out["error"] and cap.err == f"error: {out['error']}\n"


def test_cli_porcupine_kv_reads_a_missing_key_as_empty(tmp_path, capsys):
    f = tmp_path / "kv.txt"
    f.write_text('{:process 0, :type :invoke, :f :get, :key "1", :value nil}\n'
                 '{:process 0, :type :ok, :f :get, :key "1", :value ""}\n')
    assert main(["--model", "kv", "--format", "porcupine-kv", str(f)]) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_explanation_pages_are_named_after_their_part():
    from checkers.linearizable.wrapper import _slug

    assert [_slug(k) for k in (None, "x", "k/1 ü", "", "a" * 100)] == [
        "all", "x", "k_1_", "part", "a" * 80]


def test_the_checker_reports_under_the_name_it_was_given():
    # the same engine runs as several named checks (e.g. per workload); a verdict filed
    # under the default name would be attributed to the wrong check
    r = checker("kv", name="kv-linearizable")({}, BAD, {})
    assert r.valid is False and r.checker == "kv-linearizable"
