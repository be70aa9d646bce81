"""Mixed clusters: a bug mode on some servers only (``--bug NAME@1,3``), so the search runs a
core and its bug-mode variant side by side (Garlic Farm)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.sim.gf_search import run
from harness.sim.search import bugs_by_node

pytestmark = pytest.mark.sim
#: the membership flaw's shrunk schedule (tests/unit/sim/test_search.py, seed 3): server 5
#: becomes the leader that takes the removal before an entry of its term commits
FOUND = [["partition", 172, 0, 3], ["restart", 89, 0, 1], ["crash", 0, 0, 0],
         ["loss", 353, 1, 0], ["remove", 3, 0, 0], ["partition", 1, 0, 0]]


def test_per_server_specs_parse_and_a_missing_server_is_named() -> None:
    got = bugs_by_node(("forget-vote@1,3", "sync-loop"), (1, 2, 3))
    assert got == {1: {"forget-vote", "sync-loop"}, 2: {"sync-loop"},
                   3: {"forget-vote", "sync-loop"}}
    with pytest.raises(ValueError, match="servers are numbered 1..3"):
        bugs_by_node(("forget-vote@9",), (1, 2, 3))


def test_the_flaw_fails_only_where_the_leader_runs_the_variant() -> None:
    uniform = run(FOUND, 3, ("unsafe-config-change",))
    assert run(FOUND, 3, ("unsafe-config-change@1,2,3,4,5",)).trace == uniform.trace
    verdicts = {i: run(FOUND, 3, (f"unsafe-config-change@{i}",)).ok for i in range(1, 6)}
    assert verdicts == {1: True, 2: True, 3: True, 4: True, 5: False}


def test_a_mixed_search_through_the_cli_finds_and_replays(tmp_path, capsys) -> None:
    f = tmp_path / "m.json"
    assert main(["sim", "run", "garlicfarm", "--bug", "forget-vote@1,2", "--seed", "2",
                 "--runs", "300", "--shrink-runs", "20", "--out", str(f)]) == 1
    rec = json.loads(f.read_text())
    assert rec["bug"] == ["forget-vote@1,2"]
    # the double vote is cast by a server running the variant
    assert any(w["kind"] == "double-vote" and w["witness"]["node"] in ("n1", "n2")
               for w in rec["witness"]), rec["witness"]
    assert main(["sim", "replay", str(f)]) == 1
    assert "reproduced byte for byte" in capsys.readouterr().out
    assert main(["sim", "run", "garlicfarm", "--bug", "forget-vote@7", "--runs", "1"]) == 254
    assert main(["sim", "run", "swim", "--bug", "no-refutation@1", "--runs", "1"]) == 254
    # a real run puts the mode on those servers only (harness/sim/realrun.py)
    from harness.protocols import get_protocol
    from harness.sim.realrun import spec_for

    spec, _ = spec_for(rec, get_protocol("garlicfarm"))
    assert [spec.bugs_of(n) for n in spec.node_ids] == [["forget-vote"]] * 2 + [[]] * 3
