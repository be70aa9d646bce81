"""The ANTACID node's zone configuration: ``options.zones`` beside the unchanged default
zone, bad zone configs refused, and a data dir holding a zone the options dropped refused at
start (its data would otherwise be silently ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodes.antacid.core import BUGS
from nodes.antacid.server import AntacidNode, topologies_of
from nodes.common.config import ConfigError, NodeConfig, parse_config
from osutil.ports import free_port


def cfg(tmp_path: Path, **options: Any) -> NodeConfig:
    return parse_config({"id": "n1", "num_id": 1, "host": "127.0.0.1",
                         "data_dir": str(tmp_path / "n1"),
                         "ports": {"peer": free_port(), "client": free_port(),
                                   "admin": free_port()},
                         "peers": {"n2": {"num_id": 2, "peer": f"127.0.0.1:{free_port()}"}},
                         "options": {"primary": "n1", "upstream": {"n2": ["n1"]},
                                     **options}}, BUGS)


def test_zones_option_adds_zones_with_their_own_primary(tmp_path: Path) -> None:
    topos = topologies_of(cfg(tmp_path, zones={"z2.test": {"primary": "n2",
                                                           "upstream": {"n1": ["n2"]}}}))
    assert list(topos) == ["zone.test", "z2.test"]
    assert (topos["zone.test"].primary, topos["z2.test"].primary) == ("n1", "n2")
    assert topos["z2.test"].upstream == {"n1": ("n2",)}
    one = topologies_of(cfg(tmp_path))  # an unchanged config: the one default zone
    assert list(one) == ["zone.test"] and one["zone.test"].primary == "n1"


@pytest.mark.parametrize("zones, match", [
    ([1, 2], "options.zones: expected"),
    ({"zone.test": {}}, "is the default zone"),
    ({"z2.test": {"primary": "n1", "upstream": {"n1": ["n2"]}}},
     r"options.zones.z2.test \(zone topology\): the zone primary has no upstream"),
])
def test_bad_zone_configs_are_refused(tmp_path: Path, zones: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        topologies_of(cfg(tmp_path, zones=zones))


def test_a_data_dir_with_a_dropped_zone_is_refused(tmp_path: Path) -> None:
    two = cfg(tmp_path, zones={"z2.test": {"primary": "n1"}})
    node = AntacidNode(two)
    node.store.write(("at", "z2.test", ("ssn", 3)))
    node.store.commit()
    node.store.close()
    again = AntacidNode(two)  # same options: both zones back
    assert again.core.zones["z2.test"].durable.last_ssn == 3
    again.store.close()
    with pytest.raises(ConfigError, match=r"holds zone\(s\) \['z2.test'\]"):
        AntacidNode(cfg(tmp_path))
