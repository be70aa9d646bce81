"""Mixed clusters: a bug mode on some servers only (``--bug NAME@1,3``), so the search runs a
core and its bug-mode variant side by side (Garlic Farm, DRiP)."""

from __future__ import annotations

import itertools
import json

import pytest

from harness.cli import main
from harness.sim import drip_search
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
    # --runs decides, not the wall: 60 s under load 30 ran only 145 of the 300 (CI-safe)
    assert main(["sim", "run", "garlicfarm", "--bug", "forget-vote@1,2", "--seed", "2",
                 "--runs", "300", "--shrink-runs", "20", "--budget", "60m", "--shrink", "60m",
                 "--out", str(f)]) == 1
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


@pytest.mark.parametrize(("schedule", "bug", "kind", "fails_on"), [
    # n2 restarted and, the same millisecond, an update at n3: n2 votes while syncing
    ([["rejoin", 0, 0, 1]], "syncing-votes-no", "syncing-voted-no", 2),
    # n1 crashed and restarted by the last heal: n1 skips its sync
    ([["crash", 0, 0, 0]], "skip-sync", "sync-skipped", 1),
])
def test_a_drip_mode_fails_only_where_the_node_that_meets_it_runs_the_variant(
        schedule: list[list[object]], bug: str, kind: str, fails_on: int) -> None:
    uniform = drip_search.run(schedule, 1, (bug,))
    assert kind in {w["kind"] for w in uniform.witness}
    assert drip_search.run(schedule, 1, (f"{bug}@1,2,3,4",)).trace == uniform.trace
    verdicts = {i: drip_search.run(schedule, 1, (f"{bug}@{i}",)) for i in range(1, 5)}
    assert {i: o.ok for i, o in verdicts.items()} == {i: i != fails_on for i in range(1, 5)}
    assert kind in {w["kind"] for w in verdicts[fails_on].witness}


def test_a_drip_node_an_add_brings_in_runs_only_the_modes_named_for_every_node() -> None:
    got = drip_search.mixed(("skip-sync@1,3", "syncing-votes-no"))
    assert sorted(got["bugs"]) == ["syncing-votes-no"]
    assert got["bugs_of"] == {"n1": {"skip-sync", "syncing-votes-no"}, "n2": {"syncing-votes-no"},
                              "n3": {"skip-sync", "syncing-votes-no"}, "n4": {"syncing-votes-no"}}
    assert drip_search.mixed(("skip-sync",)) == {"bugs": {"skip-sync"}}


def test_drip_conflicting_commits_need_every_voter_to_forget_the_other_lock() -> None:
    # two updates of k0 at n1 and n3 in one millisecond: both commit only if no node keeps
    # the lock it holds, so one correct node of the four is enough to refuse the conflict
    race = [["race", 0, 0, 0]]
    assert not drip_search.run(race, 1, ("forget-in-progress",)).ok
    for k in (1, 2, 3):
        for on in itertools.combinations("1234", k):
            out = drip_search.run(race, 1, (f"forget-in-progress@{','.join(on)}",))
            assert out.ok, (on, out.witness)
