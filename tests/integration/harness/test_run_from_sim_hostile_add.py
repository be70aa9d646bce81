"""``harness run --from FILE``: a sim ``hostile`` step as one real burst at its node (the
sim's choice of kinds kept), and a Garlic Farm ``add`` as a fresh server that joins through
the leader (harness/sim/realrun.py). Each plays a replay file written here, as
``harness sim run --hostile`` / ``--members`` would draw the step, on real processes and reads
what the real run did: the burst's sends and the node's own refusal counters, the join's
process start and the configuration change the leader committed. Each is a whole real run
(12-25 s here): nightly."""

from __future__ import annotations

import json

import pytest

from tests.integration.harness.test_run_from_sim import real
from tests.integration.harness.test_run_from_sim_steps import nemesis, replay

pytestmark = pytest.mark.chaos


def test_an_sds_hostile_step_is_one_burst_at_its_node_without_the_kinds_it_skipped(tmp_path):
    # a=1: only the datagrams that decode (no truncated or garbage), at participant b=2 (n3)
    said, run, test = real(replay(tmp_path, "sds", [["hostile", 500, 1, 2],
                                                    ["write", 1000, 0, 0]], []), tmp_path / "s")
    done = [(o["f"], o["value"], o.get("error")) for o in nemesis(run)]
    assert [(f, e) for f, _, e in done] == [("start-hostile", None), ("stop-hostile", None)], done
    assert done[0][1]["nodes"] == ["n3"] and done[0][1]["skip"] == ["garbage", "truncated"]
    sent = done[1][1]["sent"]
    assert list(sent) == ["n3"] and sent["n3"]["sent"] > 0, sent
    assert not {"garbage", "truncated"} & set(sent["n3"]["by_kind"]), sent
    # the node itself refused what was sent (its own counters, read at the end)
    report = test["hostile"]["n3"]
    assert report["sent"] == sent["n3"]["sent"] and report["refused_total"] > 0, report
    assert "sim replay: step 0 hostile: one burst of the real generator's messages at n3" in said


def test_a_garlicfarm_add_starts_a_fresh_server_that_the_leader_adds(tmp_path):
    said, run, test = real(replay(tmp_path, "garlicfarm", [["add", 1000, 0, 0],
                                                           ["write", 4000, 0, 0]], []),
                           tmp_path / "s")
    done = [(o["f"], o["value"].get("node"), o.get("error")) for o in nemesis(run)]
    assert done == [("join", "n6", None)], done
    assert len(test["nodes"]) == 6 and test["options"]["late_nodes"] == ["n6"]
    cfg = json.loads((run / "nodes" / "n6" / "config.json").read_text())
    assert cfg["options"]["join"] is True

    def events(n: str) -> list[dict]:
        path = run / "nodes" / n / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    asked = [e for e in events("n6") if e["type"] == "join-request"]
    assert asked and asked[-1]["accepted"], asked  # its AddServerRequest, to the leader
    led = [e for n in ("n1", "n2", "n3", "n4", "n5") for e in events(n)
           if e.get("server") == 6 and e["type"] == "join-complete"]
    assert led, "no leader completed n6's join"
    assert "not matched: the sim's step asks to add server 1, a member (refused)" in said


def test_a_drip_hostile_step_sends_the_sims_flood_through_the_real_driver(tmp_path):
    said, run, test = real(replay(tmp_path, "drip", [["hostile", 500, 1, 1],
                                                     ["update", 2500, 0, 0]], []),
                           tmp_path / "s")
    done = [(o["f"], o["value"], o.get("error")) for o in nemesis(run)]
    assert [(f, e) for f, _, e in done] == [("start-hostile", None), ("stop-hostile", None)], done
    assert done[0][1]["nodes"] == ["n2"]
    by_kind = done[1][1]["sent"]["n2"]["by_kind"]
    assert by_kind.get("sync-request-flood") == 3, by_kind  # the sim's 1 + 2a
    assert test["options"]["hostile_flood"] == 3
    assert test["options"]["hostile_key_holder_lies"] is False
    assert test["hostile"]["n2"]["refused_total"] > 0, test["hostile"]


def test_a_swim_hostile_step_of_forged_kinds_goes_through_the_members_relay_links(tmp_path):
    # a=2: only the datagrams forged from a member's address (the member-* kinds), at n2
    said, run, test = real(replay(tmp_path, "swim", [["hostile", 500, 2, 1],
                                                     ["write", 1000, 0, 0]], []), tmp_path / "s")
    done = [(o["f"], o["value"], o.get("error")) for o in nemesis(run)]
    assert [(f, e) for f, _, e in done] == [("start-hostile", None), ("stop-hostile", None)], done
    kinds = done[1][1]["sent"]["n2"]["by_kind"]
    assert kinds and all(k.startswith("member-") for k in kinds), kinds
    assert test["hostile"]["n2"]["sent"] == sum(kinds.values())
    assert test["hostile"]["n2"]["refused"] is not None, test["hostile"]


def test_an_antacid_hostile_step_is_one_beep_burst_and_says_what_it_could_not_match(tmp_path):
    said, run, test = real(replay(tmp_path, "antacid", [["hostile", 500, 1, 2],
                                                        ["write", 1500, 0, 0]], []),
                           tmp_path / "s")
    done = [(o["f"], o["value"], o.get("error")) for o in nemesis(run)]
    assert [(f, e) for f, _, e in done] == [("start-hostile", None), ("stop-hostile", None)], done
    assert done[0][1]["nodes"] == ["n3"] and "skip" not in done[0][1]
    assert done[1][1]["sent"]["n3"]["sent"] > 0
    assert test["hostile"]["n3"]["refused_total"] > 0, test["hostile"]
    assert "not matched: the sim sent only the exchanges that reach the core" in said


def test_a_garlicfarm_hostile_step_is_a_member_burst_at_the_leader_refused_by_its_core(tmp_path):
    # a=2: only the extreme values on a member's link (no outsider kinds), at b=0: the leader
    from nodes.garlicfarm.hostile import OUTSIDER

    said, run, test = real(replay(tmp_path, "garlicfarm", [["hostile", 500, 2, 0],
                                                           ["write", 3000, 0, 0]], []),
                           tmp_path / "s")
    done = [(o["f"], o["value"], o.get("error")) for o in nemesis(run)]
    assert [(f, e) for f, _, e in done] == [("start-hostile", None), ("stop-hostile", None)], done
    (target,) = done[0][1]["nodes"]  # "leader", resolved when the op ran
    assert set(done[0][1]["skip"]) == OUTSIDER
    sent = done[1][1]["sent"][target]
    assert sent["sent"] == 6 and not OUTSIDER & set(sent["by_kind"]), sent
    # the core refused the counters past its bound, each by closing the connection
    for kind in ("vote-max-term", "append-max-term", "append-stale-huge-commit"):
        assert sent["outcome"][kind] == {"closed": 1}, sent
    report = test["hostile"][target]
    assert report["refused"]["core:counter-out-of-range"] >= 3, report
    assert "sim replay: step 0 hostile: one burst of the real generator's messages at leader" \
        in said
