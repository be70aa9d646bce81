"""The ANTACID ordering checker on hand-made histories: one passing run, and for every leaf
a history that breaks exactly that property."""

from __future__ import annotations

import copy
from typing import Any

from checkers import csn_order

A, B = "10.0.0.1:700", "10.0.0.2:700"


def grp(etype: str, csn: int, server: str | None, ssn: int | None, docs: list[str],
        deleted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": etype, "csn": csn, "server": server, "incarn": 1 if server else None,
            "ssn": ssn, "docs": docs, "deleted": list(deleted)}


def state(last: int, docs: dict[str, int]) -> dict[str, Any]:
    return {"last_csn": last, "docs": {n: {"content": f"v{c}", "csn": c}
                                       for n, c in docs.items()}}


def good() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """p primary; r1 applies all; r2 gets CSN 3 collapsed away (z.b rewritten at 4)."""
    commits = [grp("commit", 2, A, 1, ["z.a", "z.b"]), grp("commit", 3, B, 1, ["z.b"]),
               grp("commit", 4, A, 2, ["z.b", "z.c"])]
    final = state(4, {"z.a": 2, "z.b": 4, "z.c": 4})
    nodes = {
        "p": {"events": [{"type": "start", "primary": True, "last_csn": 0}, *commits],
              "state": final},
        "r1": {"events": [{"type": "start", "primary": False, "last_csn": 0},
                          *[{**e, "type": "apply"} for e in commits]], "state": final},
        "r2": {"events": [{"type": "start", "primary": False, "last_csn": 0},
                          grp("apply", 2, A, 1, ["z.a", "z.b"]), grp("apply", 3, B, 1, []),
                          grp("apply", 4, A, 2, ["z.b", "z.c"])], "state": final},
    }
    history = [
        {"index": 0, "process": 0, "f": "submit", "type": "ok",
         "value": {"server": A, "incarn": 1, "ssn": 1, "csn": 2}},
        {"index": 1, "process": 1, "f": "submit", "type": "ok",
         "value": {"server": B, "incarn": 1, "ssn": 1, "csn": 3}},
        {"index": 2, "process": 0, "f": "read", "type": "ok", "node": "r1",
         "value": state(3, {"z.a": 2, "z.b": 3})},
    ]
    return {"primary": "p"}, history, {"nodes": nodes}


def run(test: dict[str, Any], history: list[dict[str, Any]], obs: dict[str, Any]):
    return csn_order.check(test, history, obs)


def test_a_correct_run_is_valid() -> None:
    r = run(*good())
    assert r.valid is True, r.explain()
    assert {c.checker for c in r.children} == {
        "csn-order", "ssn-order", "group-atomic", "acked-present", "no-double-commit",
        "convergence", "availability"}


def test_primary_assigning_a_csn_twice_fails_csn_order() -> None:
    test, history, obs = good()
    obs["nodes"]["r1"]["events"][3] = grp("apply", 3, A, 2, ["z.b"])
    r = run(test, history, obs)
    assert r.find("csn-order").valid is False
    assert "csn-conflict" in r.find("csn-order").stats["anomalies"]


def test_downstream_skipping_a_csn_fails_csn_order() -> None:
    test, history, obs = good()
    del obs["nodes"]["r2"]["events"][2]
    r = run(test, history, obs)
    assert r.find("csn-order").valid is False
    assert r.find("csn-order").anomalies[0].kind == "csn-gap"


def test_ssns_applied_out_of_order_fail_ssn_order() -> None:
    test, history, obs = good()
    ev = obs["nodes"]["r1"]["events"]
    ev[1], ev[3] = {**ev[1], "ssn": 2}, {**ev[3], "ssn": 1}
    r = run(test, history, obs)
    assert r.find("ssn-order").valid is False


def test_partial_group_apply_fails_group_atomic() -> None:
    test, history, obs = good()
    obs["nodes"]["r1"]["events"][1] = grp("apply", 2, A, 1, ["z.b"])
    r = run(test, history, obs)
    assert r.find("group-atomic").valid is False
    assert r.find("group-atomic").anomalies[0].kind == "partial-group"


def test_a_read_seeing_half_a_group_fails_group_atomic() -> None:
    test, history, obs = good()
    history[2]["value"] = state(2, {"z.a": 2})
    r = run(test, history, obs)
    assert r.find("group-atomic").valid is False
    assert r.find("group-atomic").anomalies[0].kind == "half-applied"


def test_a_later_delete_explains_a_missing_document() -> None:
    test, history, obs = good()
    for o in obs["nodes"].values():
        o["events"].append(grp("apply" if o is not obs["nodes"]["p"] else "commit",
                               5, B, 2, [], ("z.a",)))
        o["state"] = state(5, {"z.b": 4, "z.c": 4})
    assert run(test, history, obs).valid is True


def test_an_acked_update_missing_after_heal_fails_acked_present() -> None:
    test, history, obs = good()
    history.append({"index": 3, "process": 2, "f": "submit", "type": "ok",
                    "value": {"server": A, "incarn": 1, "ssn": 3, "csn": 5}})
    r = run(test, history, obs)
    assert r.find("acked-present").valid is False
    assert r.find("acked-present").anomalies[0].kind == "acked-lost"


def test_a_gsid_committed_twice_fails_no_double_commit() -> None:
    test, history, obs = good()
    for name in obs["nodes"]:
        obs["nodes"][name]["events"].append(
            grp("commit" if name == "p" else "apply", 5, A, 1, ["z.c"]))
        obs["nodes"][name]["state"] = state(5, {"z.a": 2, "z.b": 4, "z.c": 5})
    r = run(test, history, obs)
    assert r.find("no-double-commit").valid is False
    assert r.find("no-double-commit").anomalies[0].kind == "committed-twice"


def test_different_final_contents_fail_convergence() -> None:
    test, history, obs = good()
    obs["nodes"]["r2"]["state"] = copy.deepcopy(obs["nodes"]["r2"]["state"])
    obs["nodes"]["r2"]["state"]["docs"]["z.c"]["content"] = "other"
    r = run(test, history, obs)
    assert r.find("convergence").valid is False
    assert r.valid is False


def test_primary_down_is_unavailability_not_inconsistency() -> None:
    test, history, obs = good()
    obs["nodes"]["p"]["state"] = None
    history.append({"index": 3, "process": 2, "f": "submit", "type": "info",
                    "value": {"server": A, "incarn": 1, "ssn": 3}})
    history.append({"index": 4, "process": 2, "f": "submit", "type": "fail",
                    "value": {"server": B, "incarn": 1, "ssn": 2, "error": 210001}})
    r = run(test, history, obs)
    assert r.valid == "unknown", r.explain()
    av = r.find("availability")
    assert av.valid == "unknown" and "primary p was down" in av.note
    assert "2 of 4 submissions" in av.note
    assert not [c for c in r.children if c.valid is False]


def test_primary_killed_for_good_leaves_every_safety_leaf_judged_on_the_survivors() -> None:
    """A gone primary has no final state by design: no gap, so the safety leaves stay valid
    on the replicas; only availability is unknown, saying why."""
    test, history, obs = good()
    obs["nodes"]["p"].update(state=None, gone=True)
    history.append({"index": 3, "process": 2, "f": "submit", "type": "info",
                    "value": {"server": A, "incarn": 1, "ssn": 3}})
    r = run(test, history, obs)
    assert [c.checker for c in r.children if c.valid is not True] == ["availability"]
    assert "killed for good" in r.find("availability").note
    assert r.find("convergence").examined["nodes_with_state"] == 2
    obs["nodes"]["p"]["gone"] = False  # merely unreachable: the state leaves cannot judge
    r = run(test, history, obs)
    assert r.find("convergence").valid == "unknown"


def test_a_replica_cut_off_by_the_gone_primary_keeps_what_it_had() -> None:
    """r2 pulls only from the primary, killed for good before r2 got CSN 4: acked-present and
    convergence do not require CSN 4 there; with r1 as its upstream they do."""
    test, history, obs = good()
    history.append({"index": 3, "process": 0, "f": "submit", "type": "ok",
                    "value": {"server": A, "incarn": 1, "ssn": 2, "csn": 4}})
    nodes = obs["nodes"]
    nodes["p"].update(state=None, gone=True)
    nodes["r1"]["state"] = {**nodes["r1"]["state"], "upstreams": ["p"]}
    nodes["r2"]["events"] = nodes["r2"]["events"][:-1]
    nodes["r2"]["state"] = {**state(3, {"z.a": 2, "z.b": 3}), "upstreams": ["p"]}
    r = run(test, history, obs)
    assert r.find("acked-present").valid is True and r.find("convergence").valid is True
    nodes["r2"]["state"]["upstreams"] = ["r1"]  # it could have pulled CSN 4 from r1
    r = run(test, history, obs)
    assert r.find("acked-present").valid is False and r.find("convergence").valid is False


def test_a_submission_the_client_gave_up_on_but_committed_later_has_its_outcome() -> None:
    test, history, obs = good()
    history[1] = {**history[1], "type": "info", "value": {"server": B, "incarn": 1, "ssn": 1}}
    av = run(test, history, obs).find("availability")
    assert av.valid is True and (av.stats["unresolved"], av.stats["committed_late"]) == (0, 1)
    history[1]["value"]["ssn"] = 9  # never committed: no outcome, not judged
    av = run(test, history, obs).find("availability")
    assert av.valid == "unknown" and "1 of 2 submissions got no commit outcome" in av.note


def test_a_submission_whose_server_was_killed_before_it_answered_is_the_kills() -> None:
    test, history, obs = good()
    history += [
        {"index": 3, "process": 2, "f": "submit", "type": "invoke", "time": 10, "node": "r1",
         "value": {"z.a": "c2:9"}},
        {"index": 4, "process": "nemesis", "f": "kill", "type": "invoke", "time": 11,
         "value": {"node": "random"}},
        {"index": 5, "process": 2, "f": "submit", "type": "info", "time": 12, "node": "r1",
         "value": {"z.a": "c2:9"}, "error": "AntacidUnavailable: the BEEP session was lost"},
        {"index": 6, "process": "nemesis", "f": "kill", "type": "info", "time": 13,
         "value": {"node": "random", "nodes": ["r1"]}}]
    av = run(test, history, obs).find("availability")
    assert av.valid is True and av.stats["lost_with_server"] == 1, av
    history[-1]["value"]["nodes"] = ["r2"]  # another node killed: r1 just never answered
    av = run(test, history, obs).find("availability")
    assert av.valid == "unknown" and av.stats["unresolved"] == 1


def test_nothing_to_examine_is_unknown_with_reasons() -> None:
    r = run({}, [], {"nodes": {"p": {"events": [], "state": None}}})
    assert r.valid == "unknown"
    for c in r.children:
        assert c.valid == "unknown", c.checker
        assert c.note, c.checker
    r = run({}, [], {})
    assert r.valid == "unknown"
    assert "no node observations" in r.find("csn-order").note


def test_a_submission_never_given_an_id_that_did_not_commit_was_never_taken() -> None:
    """No answer to SubmitUpdate, r1 not killed: no promise was made (the GlobalSubmitID is the
    promise), and every committed GlobalSubmitID is one a client was given, so it did not
    commit: a definite outcome. A commit no submit names could be it: then unjudged."""
    test, history, obs = good()
    history[1] = {**history[1], "type": "info",
                  "value": {"server": B, "incarn": 1, "ssn": 1}}  # committed late: known
    history += [
        {"index": 3, "process": 0, "f": "submit", "type": "ok",
         "value": {"server": A, "incarn": 1, "ssn": 2, "csn": 4}},
        {"index": 4, "process": 2, "f": "submit", "type": "invoke", "time": 10, "node": "r1",
         "value": {"z.a": "c2:9"}},
        {"index": 5, "process": 2, "f": "submit", "type": "info", "time": 15, "node": "r1",
         "value": {"z.a": "c2:9"}, "error": "timeout"}]
    av = run(test, history, obs).find("availability")
    assert av.valid is True, av.explain()
    assert (av.stats["never_taken"], av.stats["unresolved"], av.stats["committed_late"]) == (
        1, 0, 1)
    # CSN 4 (A SSN 2) committed but no submit was told that ID: it could be the unanswered
    # one, so the run cannot say that one did not commit
    unnamed = [op for op in history if op["index"] != 3]
    av = run(test, unnamed, obs).find("availability")
    assert av.valid == "unknown" and (av.stats["never_taken"], av.stats["unresolved"]) == (0, 1)
    # without the primary's journal, commits may be missing: not judged either way
    obs["nodes"]["p"]["events"] = []
    av = run(test, history, obs).find("availability")
    assert av.valid == "unknown" and av.stats["never_taken"] == 0
