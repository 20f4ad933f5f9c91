"""The ``reference`` section: what it reads, what it refuses when the spec is loaded (with the
field and the fix), and what follows from it — no look-back, the fingerprint, the normalised form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec, parse_spec

JOBS = Path(__file__).resolve().parents[2] / "jobs"
REFERENCE = {"name": "devices", "path": "jobs/samples/device_sites", "format": "csv",
             "columns": {"deviceId": "string", "site": "string", "max_temperature": "double"},
             "keys": ["deviceId = devices.deviceId"]}  # fmt: skip
BASE = {
    "name": "over-limit",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
    "filter": "temperature > devices.max_temperature",
    "select": {"deviceId": "deviceId", "site": "devices.site"},
}


def spec(reference=None, **more):
    return parse_spec(BASE | {"reference": REFERENCE | (reference or {})} | more)


def test_the_example_enriches_each_reading_from_its_device_table_and_needs_no_look_back():
    job = load_spec(JOBS / "device_over_limit.yaml")
    ref = job.references[0]
    assert (ref.name, ref.path, ref.format, ref.kind) == ("devices", "jobs/samples/device_sites", "csv", "left")
    assert ref.keys == (("deviceId", "deviceId"),)
    assert not job.needs_lookback  # a reference join holds no events between batches
    assert "left outer join reference devices" in job.describe()


def test_the_normalised_form_reads_back_and_the_fingerprint_follows_what_decides_the_rows():
    job = spec({"keys": ["devices.deviceId = deviceId"], "type": "LEFT OUTER"})
    assert job.references[0].keys == (("deviceId", "deviceId"),) and job.references[0].kind == "left"
    assert parse_spec(job.to_dict()) == job and job.name == "over-limit"
    assert spec().fingerprint != job.fingerprint  # inner → left
    assert spec({"path": "var/reference/devices"}).fingerprint != spec().fingerprint
    assert spec().fingerprint == spec(version=2).fingerprint
    assert (
        parse_spec(BASE | {"filter": "temperature > 30", "select": None}).fingerprint
        != parse_spec(BASE | {"filter": "temperature > 30", "select": None, "reference": REFERENCE}).fingerprint
    )


@pytest.mark.parametrize("change, message", [
    ({"keys": []}, "reference.keys is .*at least one equality key"),
    ({"keys": ["deviceId = devices.nope"]}, r"reference.keys\[0\]: devices.nope is not one of reference.columns"),
    ({"keys": ["deviceId = site"]}, r"reference.keys\[0\].*must compare an event expression with a column of devices"),
    ({"keys": ["nope = devices.deviceId"]}, r"reference.keys\[0\].*nope"),
    ({"keys": ["deviceId < devices.deviceId"]}, "is not one equality"),
    ({"path": "../secrets"}, "reference.path '../secrets' contains '..'"),
    ({"path": "abfss://c@acct/devices"}, "is a URI: reference snapshots are read from local folders and S3"),
    ({"path": "s3a://bucket/ref//devices"}, "is not a plain S3 prefix.*'' is not a plain name"),  # empty segment
    ({"path": "s3a://Bucket/devices"}, "is not a plain S3 prefix.*not a valid bucket name"),
    ({"path": "s3://bucket/devices"}, r"is a URI: .* S3 prefixes \(s3a://\) only"),
    ({"format": "json"}, "reference.format is 'json'.*csv.*parquet"),
    ({"type": "right"}, "reference.type is 'right'"),
    ({"name": "deviceId"}, "reference.name: deviceId is a payload field"),
    ({"name": "reference_snapshot"}, "reference.name: 'reference_snapshot' is a name the engine uses"),
    ({"columns": {"site": "text"}}, "reference.columns.site"),
    ({"url": "x"}, "reference.*url"),
])  # fmt: skip
def test_a_reference_that_cannot_work_is_refused_naming_the_field(change, message):
    with pytest.raises(ConfigError, match=message):
        spec(change)


def test_missing_fields_and_columns_the_table_does_not_have_are_refused():
    with pytest.raises(ConfigError, match="reference.path is missing"):
        parse_spec(BASE | {"reference": {k: v for k, v in REFERENCE.items() if k != "path"}})
    with pytest.raises(ConfigError, match="filter: devices.limit is not one of reference.columns"):
        spec(filter="temperature > devices.limit")
    with pytest.raises(ConfigError, match="select.site: devices.name is not one of reference.columns"):
        spec(select={"site": "devices.name"})
    with pytest.raises(ConfigError, match="select.reference_snapshot: every row carries it already"):
        spec(select={"reference_snapshot": "deviceId"})


@pytest.mark.parametrize("more, field", [
    ({"window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}, "select": None}, "window"),
    ({"analytics": {"prev": "LAG(temperature) OVER (LIMIT DURATION(minute, 1))"}}, "analytics"),
])  # fmt: skip
def test_a_reference_enriches_a_per_event_step_only(more, field):
    with pytest.raises(ConfigError, match=f"{field} cannot be used with reference in one step"):
        spec(**more)


def test_a_reference_enriches_the_first_step_and_later_steps_read_its_columns():
    base = {k: v for k, v in BASE.items() if k not in ("filter", "select")} | {"reference": REFERENCE}
    steps = [{"name": "hot", "from": "input", "filter": "temperature > devices.max_temperature",
              "select": {"deviceId": "deviceId", "site": "devices.site", "temperature": "temperature"}},
             {"name": "per_hour", "from": "hot", "window": {"kind": "tumbling", "size": "1h"},
              "group_by": {"site": "site"}, "aggregates": {"n": "count(*)"}}]  # fmt: skip
    parsed = parse_spec(base | {"steps": steps})
    assert parsed.references[0].name == "devices" and parsed.first_step == "hot" and parsed.window is None
    windowed_first = [
        steps[0] | {"window": {"kind": "tumbling", "size": "1h"}, "aggregates": {"n": "count(*)"}, "select": None},
        steps[1],
    ]
    with pytest.raises(ConfigError, match="window cannot be used with reference in one step") as raised:
        parse_spec(base | {"steps": windowed_first})
    assert "later step" in raised.value.fix or "steps" in raised.value.fix


def test_the_event_side_of_each_key_is_among_the_expressions_sparks_parser_reads_again():
    from tidegate.jobspec.spec_expressions import spec_expressions

    job = spec({"keys": ["lower(deviceId) = devices.deviceId"]})
    assert ("reference.keys[0]", "lower(deviceId)") in [(e.where, e.text) for e in spec_expressions(job)]
