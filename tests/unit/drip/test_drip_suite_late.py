"""``late_unknown`` (harness/suites/drip.py): a late node is known to none of the others'
configs (no member id, no JWT key) and starts with ``join``; ``member_entry`` is what the
cluster's "add-member" op gives ``POST /admin/members`` for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec import TestSpec
from harness.suites.drip import PROTOCOL, member_entry, node_extra
from nodes.drip.membership import check_membership, dial_address, operator_entry


def test_a_late_unknown_node_is_named_by_nobody_and_joins(tmp_path: Path) -> None:
    spec = TestSpec("t", protocol=PROTOCOL, nodes=3,
                    options={"late_nodes": ["n3"], "late_unknown": True})
    old, late = node_extra(spec, 0, tmp_path), node_extra(spec, 2, tmp_path)
    assert old["mesh_members"] == ["n1", "n2"] and "n3" not in old["jwt"]["public_keys"]
    assert "options" not in old
    assert late["mesh_members"] == ["n1", "n2", "n3"] and late["options"] == {"join": True}
    entry = member_entry({"id": "n3", **late}, "127.0.0.1:7003")
    assert entry["peer"] == "127.0.0.1:7003" and "BEGIN CERTIFICATE" in entry["cert"]
    assert entry["jwt_key"] == Path(late["jwt"]["public_keys"]["n3"]).read_text()
    assert set(operator_entry("n3", entry)) == {"peer", "cert_sha256", "jwt_key"}
    plain = TestSpec("t", protocol=PROTOCOL, nodes=3, options={"late_nodes": ["n3"]})
    assert node_extra(plain, 0, tmp_path)["mesh_members"] == ["n1", "n2", "n3"]


def test_each_member_dials_an_added_node_through_its_own_link(tmp_path: Path) -> None:
    """``peer_for`` (harness: each old member's proxy into the added node) is kept in the
    agreed entry and picked per member; anyone unnamed dials ``peer``; bad ones are refused."""
    spec = TestSpec("t", protocol=PROTOCOL, nodes=3,
                    options={"late_nodes": ["n3"], "late_unknown": True})
    late = node_extra(spec, 2, tmp_path)
    via = {"n1": "127.0.0.1:9101", "n2": "127.0.0.1:9102"}
    entry = operator_entry("n3", member_entry({"id": "n3", **late}, "127.0.0.1:7003", via))
    assert entry["peer_for"] == via
    assert check_membership({"members": ["n1", "n2", "n3"], "addresses": {"n3": entry}}) is None
    assert dial_address(entry, "n1") == "127.0.0.1:9101"
    assert dial_address(entry, "n2") == "127.0.0.1:9102"
    assert dial_address(entry, "n4") == "127.0.0.1:7003"
    for bad in ({"n1": "nohost"}, {}, ["n1"], {"": "127.0.0.1:1"}, {"n1": "127.0.0.1:0"}):
        with pytest.raises(ValueError, match="peer"):
            operator_entry("n3", {"peer": "127.0.0.1:7003", "peer_for": bad})
        why = check_membership({"members": ["n1", "n3"],
                                "addresses": {"n3": {"peer": "127.0.0.1:7003",
                                                     "peer_for": bad}}})
        assert why is not None and why.startswith("address of 'n3'"), why
