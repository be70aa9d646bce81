"""``late_unknown`` (harness/suites/drip.py): a late node is known to none of the others'
configs (no member id, no JWT key) and starts with ``join``; ``member_entry`` is what the
cluster's "add-member" op gives ``POST /admin/members`` for it."""

from __future__ import annotations

from pathlib import Path

from harness.spec import TestSpec
from harness.suites.drip import PROTOCOL, member_entry, node_extra
from nodes.drip.membership import operator_entry


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
