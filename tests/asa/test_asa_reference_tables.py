"""A Stream Analytics query joining two reference inputs becomes the list form of ``reference``,
in the query's order, the second table keyed by the first one's column; what cannot be a list
of tables is refused as before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidegate.asa import spec_text
from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec

SIDE = {"inputs": {
    "input": {"payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"}},
    "devices": {"type": "Reference", "path": "jobs/samples/site_devices",
                "columns": {"deviceId": "string", "siteId": "string"}},
    "sites": {"type": "Reference", "path": "jobs/samples/sites",
              "columns": {"siteId": "string", "site": "string", "max_temperature": "double"}},
    "other": {"payload": {"deviceId": "string"}},
}}  # fmt: skip


def imported(tmp_path: Path, query: str) -> dict:
    (tmp_path / "q.asaql").write_text(query)
    (tmp_path / "side.yaml").write_text(yaml.safe_dump(SIDE))
    return yaml.safe_load(spec_text(tmp_path / "q.asaql", tmp_path / "side.yaml", "over-site-limit"))


def test_two_reference_joins_are_two_tables_in_the_querys_order(tmp_path):
    spec = imported(
        tmp_path,
        "SELECT i.deviceId, s.site INTO output FROM input i TIMESTAMP BY eventTime\n"
        "JOIN devices d ON i.deviceId = d.deviceId\n"
        "LEFT OUTER JOIN sites s ON d.siteId = s.siteId\n"
        "WHERE i.temperature > s.max_temperature",
    )
    assert [(t["name"], t["keys"], t["type"]) for t in spec["reference"]] == [
        ("devices", ["deviceId = devices.deviceId"], "inner"),
        ("sites", ["devices.siteId = sites.siteId"], "left"),
    ]
    assert spec["reference"][1]["path"] == "jobs/samples/sites"
    assert spec["select"] == {"deviceId": "deviceId", "site": "sites.site"}
    assert spec["filter"] == "temperature > sites.max_temperature"
    job = parse_spec(spec)
    assert [r.name for r in job.references] == ["devices", "sites"]


def test_one_reference_join_stays_the_single_mapping(tmp_path):
    spec = imported(
        tmp_path, "SELECT i.deviceId, d.siteId INTO output FROM input i JOIN devices d ON i.deviceId = d.deviceId"
    )
    assert spec["reference"]["name"] == "devices" and spec["reference"]["keys"] == ["deviceId = devices.deviceId"]


def test_a_key_reading_a_reference_joined_later_is_refused_by_the_spec_loader_naming_both(tmp_path):
    spec = imported(tmp_path, "SELECT i.deviceId INTO output FROM input i\n"
                    "JOIN sites s ON d.siteId = s.siteId JOIN devices d ON i.deviceId = d.deviceId")  # fmt: skip
    assert [t["name"] for t in spec["reference"]] == ["sites", "devices"]  # the query's order, kept
    with pytest.raises(ConfigError, match="reference sites is keyed by devices.siteId, a column of devices"):
        parse_spec(spec)


def test_a_third_input_that_is_a_stream_is_still_refused(tmp_path):
    with pytest.raises(ConfigError, match="a join of more than two inputs"):
        imported(tmp_path, "SELECT i.deviceId INTO output FROM input i JOIN devices d ON i.deviceId = d.deviceId\n"
                 "JOIN other o ON i.deviceId = o.deviceId AND DATEDIFF(minute, i, o) BETWEEN 0 AND 5")  # fmt: skip
