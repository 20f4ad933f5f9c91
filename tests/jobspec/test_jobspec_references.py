"""``reference`` as a list of tables: joined in the order listed, each key reading the event and
the tables before it; what is refused when the spec is loaded (naming the table and the fix);
the single mapping unchanged (its fingerprint pinned as it was before lists existed); the
fingerprint, the normalised form and the folder checks covering every table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec, parse_spec
from tidegate.jobspec.folders import check_places
from tidegate.jobspec.references import MAX_REFERENCES, snapshot_columns
from tidegate.jobspec.spec_expressions import spec_expressions
from tidegate.validation.comparison import Layout

JOBS = Path(__file__).resolve().parents[2] / "jobs"
DEVICES = {"name": "devices", "path": "jobs/samples/site_devices",
           "columns": {"deviceId": "string", "siteId": "string"}, "keys": ["deviceId = devices.deviceId"]}  # fmt: skip
SITES = {"name": "sites", "path": "jobs/samples/sites", "type": "left",
         "columns": {"siteId": "string", "site": "string", "max_temperature": "double"},
         "keys": ["devices.siteId = sites.siteId"]}  # fmt: skip
BASE = {
    "name": "over-site-limit",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
    "filter": "temperature > sites.max_temperature",
    "select": {"deviceId": "deviceId", "site": "sites.site"},
}
# device_over_limit.yaml's fingerprint as Tidegate computed it when a job had one table at most
DEVICE_OVER_LIMIT = "40fa0b3dc7de72018252cda88d3d079120cbefccba868800549ff86da227f263"


def spec(tables=None, **more):
    return parse_spec(BASE | {"reference": [DEVICES, SITES] if tables is None else tables} | more)


def test_the_tables_are_joined_in_the_order_listed_each_with_its_own_type():
    job = spec()
    assert [(r.name, r.kind) for r in job.references] == [("devices", "inner"), ("sites", "left")]
    assert job.references[1].keys == (("devices.siteId", "siteId"),)
    assert "join reference devices" in job.describe() and ", then left outer join reference sites" in job.describe()
    assert not job.needs_lookback
    assert snapshot_columns(job.references) == ("reference_snapshot_devices", "reference_snapshot_sites")


def test_the_single_mapping_keeps_its_fingerprint_and_a_list_of_one_is_the_same_job():
    job = load_spec(JOBS / "device_over_limit.yaml")
    assert job.fingerprint == DEVICE_OVER_LIMIT
    listed = parse_spec(job.to_dict() | {"reference": [job.to_dict()["reference"]]})
    assert listed == job and listed.fingerprint == DEVICE_OVER_LIMIT
    assert isinstance(job.to_dict()["reference"], dict)  # written back as it was read
    assert snapshot_columns(job.references) == ("reference_snapshot",)


def test_the_fingerprint_covers_every_table_and_their_order():
    base = spec().fingerprint
    assert parse_spec(spec().to_dict()) == spec() and spec().to_dict()["reference"][1]["name"] == "sites"
    assert spec([DEVICES, SITES | {"type": "inner"}]).fingerprint != base
    assert spec([DEVICES, SITES | {"path": "jobs/samples/sites2"}]).fingerprint != base
    assert spec([DEVICES, SITES | {"columns": SITES["columns"] | {"region": "string"}}]).fingerprint != base
    assert spec(version=2).fingerprint == base
    assert spec([DEVICES, SITES]).fingerprint != spec([DEVICES], filter=None, select=None).fingerprint


@pytest.mark.parametrize("tables, problem", [
    # a key that reads a table listed after its own
    ([DEVICES | {"keys": ["sites.siteId = devices.siteId"]}, SITES],
     r"reference\[0\]\.keys\[0\]: reference devices is keyed by sites\.siteId, a column of sites, which is joined"),
    ([SITES, DEVICES], r"reference\[0\]\.keys\[0\]: reference sites is keyed by devices\.siteId"),
    # an earlier table's column that is not among its columns
    ([DEVICES, SITES | {"keys": ["devices.site = sites.siteId"]}],
     r"reference\[1\]\.keys\[0\]: devices\.site is not one of reference\[0\]\.columns"),
    ([DEVICES, SITES | {"name": "devices", "keys": ["devices.siteId = devices.siteId"]}], "names two tables"),
    ([DEVICES, SITES | {"name": "deviceId"}], r"reference\[1\]\.name: deviceId is a payload field"),
    ([DEVICES, SITES | {"name": "system_time"}], r"reference\[1\]\.name"),
    ([DEVICES, SITES | {"path": "../sites"}], r"reference\[1\]\.path '\.\./sites' contains '\.\.'"),
    ([DEVICES, None], r"reference\[1\] is empty"),
    ([], "reference is an empty list"),
    ([DEVICES | {"name": f"t{i}", "keys": [f"deviceId = t{i}.deviceId"]} for i in range(MAX_REFERENCES + 1)],
     f"reference lists {MAX_REFERENCES + 1} tables, more than {MAX_REFERENCES}"),
])  # fmt: skip
def test_a_list_that_cannot_work_is_refused_naming_the_table(tables, problem):
    with pytest.raises(ConfigError, match=problem):
        spec(tables, filter=None, select=None)


def test_the_snapshot_columns_and_the_columns_read_are_checked_per_table():
    with pytest.raises(ConfigError, match=r"select\.reference_snapshot_sites: every row carries it already"):
        spec(select={"reference_snapshot_sites": "deviceId"})
    with pytest.raises(ConfigError, match=r"filter: sites\.limit is not one of reference\[1\]\.columns"):
        spec(filter="temperature > sites.limit")
    payload = BASE["payload"] | {"reference_snapshot_sites": "string"}
    with pytest.raises(ConfigError, match=r"reference\[1\]: reference_snapshot_sites is a payload field"):
        spec(payload=payload)
    assert spec(select={"reference_snapshot": "deviceId"}).select  # not a column of a job of two tables


def test_eight_tables_load():
    chain = [DEVICES | {"name": f"t{i}", "keys": [f"deviceId = t{i}.deviceId"]} for i in range(MAX_REFERENCES)]
    assert len(spec(chain, filter=None, select=None).references) == MAX_REFERENCES


def test_each_tables_keys_are_read_again_by_sparks_parser_named_by_table():
    read = [(e.where, e.text) for e in spec_expressions(spec())]
    assert ("reference[0].keys[0]", "deviceId") in read and ("reference[1].keys[0]", "devices.siteId") in read


def test_the_completeness_check_compares_every_tables_snapshot():
    layout = Layout.of(spec())
    assert layout.aggregates[-2:] == ("reference_snapshot_devices", "reference_snapshot_sites")
    bare = Layout.of(spec(select=None, filter=None))  # no select: each table's row is compared too
    assert bare.aggregates[-4:] == ("devices", "sites", "reference_snapshot_devices", "reference_snapshot_sites")


def test_every_tables_folder_must_lie_inside_the_reference_folders(tmp_path):
    (tmp_path / "refs" / "devices").mkdir(parents=True)
    (tmp_path / "outside" / "sites").mkdir(parents=True)
    tables = [DEVICES | {"path": "refs/devices"}, SITES | {"path": "outside/sites"}]
    job = spec(tables)
    with pytest.raises(ConfigError, match="reference.path 'outside/sites' is outside the reference folders"):
        check_places(job, logs=[tmp_path], base=tmp_path, references=[tmp_path / "refs"])
    (tmp_path / "refs" / "sites").symlink_to(tmp_path / "outside" / "sites", target_is_directory=True)
    with pytest.raises(ConfigError, match="outside the reference folders"):
        check_places(spec([tables[0], SITES | {"path": "refs/sites"}]), logs=[tmp_path], base=tmp_path,
                     references=[tmp_path / "refs"])  # fmt: skip
    check_places(spec([tables[0], SITES | {"path": "refs/later"}]), logs=[tmp_path], base=tmp_path,
                 references=[tmp_path / "refs"])  # fmt: skip
