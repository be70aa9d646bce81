"""A run page says how to reproduce its run and links, relatively, to every file of it: the
history, results, the harness's log, node journals and logs, the linearizability explainer."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from report_builders import hand_run, nonlinearizable_ops, real_run

from checkers.linearizable import checker as linearizable
from harness import cli
from reports.report import ReportOptions, build_report
from reports.runfiles import explainer, run_files


def cli_record(*argv: str) -> dict:
    spec = cli.run_spec(cli.parser().parse_args(["run", *argv]))
    return {**spec.describe(), "status": "complete"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    s = tmp_path_factory.mktemp("store")
    stale = real_run(s, "kv-stale", 2, stale=True, checkers={"linearizable": linearizable("kv")})
    (stale / "nodes" / "n1" / "node.log").write_text("a node's own log\n")
    gf = hand_run(s, "gf", "20261120T050000-eeeeee", nonlinearizable_ops())
    (gf / "test.json").write_text(json.dumps(cli_record(
        "garlicfarm", "--nodes", "3", "--seed", "9", "--nemesis", "kill", "--bug", "forget-vote",
        "--time-limit", "2")))
    build_report(ReportOptions(store=s, engine="local", recovery_window_s=0.1))
    return {"store": s, "stale": stale, "gf": gf}


def page_of(run: Path) -> str:
    return (run / "report" / "index.html").read_text()


def hrefs(page: str) -> list[str]:
    return re.findall(r'(?:href|src)="([^"]*)"', page)


@pytest.mark.parametrize("which", ["stale", "gf"])
def test_every_link_is_relative_and_leads_to_a_file(store, which):
    run = store[which]
    page = page_of(run)
    links = hrefs(page)
    assert links
    for h in links:
        assert not h.startswith(("/", "file:", "http:", "https:")), h
        if h.startswith(("#", "data:")):
            continue
        target = (run / "report" / unquote(h)).resolve()
        assert target.is_file(), (h, target)
    # the store moved (copied, unzipped elsewhere): the links still work
    moved = store["store"].parent / f"moved-{which}"
    shutil.copytree(store["store"], moved, symlinks=True)
    new_run = moved / run.relative_to(store["store"])
    for h in links:
        if not h.startswith(("#", "data:")):
            assert (new_run / "report" / unquote(h)).resolve().is_file(), h


def test_the_run_page_links_the_runs_files(store):
    run = store["stale"]
    links = set(hrefs(page_of(run)))
    for f in ("test.json", "results.json", "history.jsonl", "harness.log",
              "nodes/n1/events.jsonl", "nodes/n1/node.log"):
        assert f"../{f}" in links, f
    lin = sorted((run / "linearizable").glob("*.html"))
    assert lin, "the runner wrote no linearizability explainer"
    assert {f"../linearizable/{p.name}" for p in lin} <= links
    assert not any(h.startswith("../report/") for h in links)  # the page is not listed


def test_the_explainer_is_linked_from_its_anomaly(store):
    run = store["stale"]
    page = page_of(run)
    block = page.split("found by linearizable", 1)[1].split('<div class="anomaly">', 1)[0]
    (link,) = re.findall(r'<a href="([^"]+)">explanation', block)
    assert link.startswith("../linearizable/") and (run / "report" / link).resolve().is_file()
    # the witness holds the absolute path it was written to; a moved store still finds it
    stored = json.loads((run / "results.json").read_text())
    lin = next(c for c in stored["result"]["children"] if c["checker"] == "linearizable")
    witness = lin["anomalies"][0]["witness"]
    assert Path(witness["html"]).is_absolute()
    moved = {"html": "/elsewhere/store/kv-stale/x/linearizable/" + Path(witness["html"]).name}
    assert explainer(moved, run, run / "report") == link
    assert explainer({"html": "/etc/passwd"}, run, run / "report") is None
    assert explainer({"html": "../../../../etc/passwd"}, run, run / "report") is None


def test_the_run_page_says_how_to_reproduce_the_run(store):
    gf = page_of(store["gf"])
    assert f"harness run --from {store['gf']}/test.json" in gf
    assert ("harness run garlicfarm --nodes 3 --concurrency 3 --time-limit 2 --nemesis kill "
            "--nemesis-interval 5 --seed 9 --backend local --bug forget-vote --name "
            "garlicfarm-kv") in gf
    # a run whose workload was built in code: why it cannot be replayed, and no command
    stale = page_of(store["stale"])
    assert "this run cannot be replayed: the run had no protocol" in stale
    assert "harness run --from" not in stale


def test_run_files_lists_well_known_files_first_and_never_follows_links(tmp_path):
    run = tmp_path / "run"
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "report").mkdir()
    for f in ("zz.txt", "history.jsonl", "test.json", "nodes/n1/a b.log", "report/index.html"):
        (run / f).write_text("x")
    (run / "escape").symlink_to("/etc")
    links, total = run_files(run, run / "report")
    assert [f.path for f in links] == ["test.json", "history.jsonl", "nodes/n1/a b.log",
                                       "zz.txt"]
    assert total == 4 and links[2].href == "../nodes/n1/a%20b.log"
