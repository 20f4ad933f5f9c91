"""Job specs: examples load, every mistake is named with its fix, fingerprints change only
with results, and the look-back follows semantics §6."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tidegate.errors import ConfigError
from tidegate.eventtime.windows import HoppingWindow, SessionWindow, TumblingWindow
from tidegate.jobspec import (
    JobSpec,
    PayloadLimits,
    canonical_expression,
    load_spec,
    normalise_expression,
    parse_spec,
)

JOBS = Path(__file__).resolve().parents[2] / "jobs"
EXAMPLES = sorted(JOBS.glob("*.yaml"))
S = 1_000_000
M = 60 * S

BASE_YAML = """
name: device-fleet-counts
version: 3
description: Per-device counts and mean temperature per minute.
source:
  event_log: var/event-log
  max_events_per_batch: 100000
  max_arrival_span_per_batch: 10m
payload:
  deviceId: string
  eventTime: string
  temperature: double
  humidity: double
timestamp_by: eventTime
over: deviceId
policy:
  out_of_order_tolerance: 30s
  late_arrival_tolerance: 2m
filter: "temperature > -50"
window:
  kind: tumbling
  size: 1m
group_by: [deviceId]
aggregates:
  events: count(*)
  avg_temperature: avg(temperature)
sinks:
  output: {format: parquet}
  audit: true
"""


class _Delete:
    """A field the case removes from the base spec (its repr names it, so test ids are stable)."""

    def __repr__(self) -> str:
        return "DELETE"


DELETE = _Delete()


def base() -> dict:
    return yaml.safe_load(BASE_YAML)


def spec_with(**changes) -> dict:
    """The base spec with dotted-path changes: ``spec_with(**{"window.size": "2m"})``;
    ``DELETE`` removes a field."""
    data = copy.deepcopy(base())
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(data, origin="test.yaml")
    return str(info.value)


# -- examples --------------------------------------------------------------------------


def test_there_are_example_specs():
    assert {p.name for p in EXAMPLES} >= {
        "device_fleet.yaml",
        "fleet_hopping.yaml",
        "device_sessions.yaml",
        "hot_readings.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads_describes_itself_and_round_trips(path):
    spec = load_spec(path)
    assert spec.description and spec.describe()
    assert parse_spec(spec.to_dict()) == spec
    assert parse_spec(spec.to_dict()).fingerprint == spec.fingerprint
    # the demo's generator payload; a join example reads a log of its own kinds of event, or
    # two logs, each with its own fields; the epoch example its time as epoch milliseconds; the
    # cross_apply example a batch of readings per event
    expected = (["orderId", "amount", "orderedAt", "paid", "paidAt"] if spec.own_logs
                else ["kind", "orderId", "amount", "eventTime"] if spec.join
                else ["deviceId", "eventTime", "readings"] if spec.cross_apply
                else ["deviceId", "epochMs", "temperature", "humidity"] if spec.timestamp_by != "eventTime"
                else ["deviceId", "eventTime", "temperature", "humidity"])  # fmt: skip
    assert list(spec.payload) == expected


def test_the_device_fleet_example_is_the_job_the_brief_describes():
    spec = load_spec(JOBS / "device_fleet.yaml")
    assert spec.window == TumblingWindow(1 * M)
    assert (spec.timestamp_by, spec.over) == ("eventTime", "deviceId")
    assert spec.policy.late_arrival_tolerance_us == 2 * M
    assert spec.policy.out_of_order_tolerance_us == 30 * S
    assert spec.group_by == (("deviceId", "deviceId"),)
    assert [e for _, e in spec.aggregates] == ["count(*)", "avg(temperature)", "max(temperature)"]
    assert spec.source.event_log == "var/event-log"
    assert spec.lookback_us == 8 * M


def test_the_demos_job_is_named_as_its_spec_says():
    from tidegate.examples import DEMO_JOB, DEMO_SPEC
    from tidegate.jobspec import default_spec

    assert default_spec().name == DEMO_SPEC  # what `tidegate demo run` runs
    assert load_spec(JOBS / DEMO_SPEC).name == DEMO_JOB


def test_the_other_examples_have_their_shapes():
    hopping = load_spec(JOBS / "fleet_hopping.yaml")
    assert hopping.window == HoppingWindow(5 * M, 1 * M) and hopping.group_by == () and hopping.over is None
    sessions = load_spec(JOBS / "device_sessions.yaml")
    assert sessions.window == SessionWindow(2 * M, 30 * M) and sessions.over == "deviceId"
    hot = load_spec(JOBS / "hot_readings.yaml")
    assert hot.window is None and hot.filter == "temperature > 30" and not hot.needs_lookback
    assert ("temp_f", "temperature * 9 / 5 + 32") in hot.select


# -- parsing ---------------------------------------------------------------------------


def test_the_base_spec_parses_into_typed_parts():
    spec = parse_spec(base())
    assert isinstance(spec, JobSpec)
    assert (spec.name, spec.version) == ("device-fleet-counts", 3)
    assert spec.source.max_events_per_batch == 100_000
    assert spec.source.max_arrival_span_per_batch_us == 10 * M
    assert spec.policy.out_of_order_action == "adjust" and spec.policy.late_arrival_action == "adjust"
    assert spec.sinks.audit is True and spec.sinks.output_format == "parquet"


def test_a_minimal_spec_takes_every_default():
    spec = parse_spec({"name": "raw", "version": 1, "payload": {"deviceId": "string"}})
    assert spec.window is None and spec.timestamp_by is None and spec.select == ()
    assert spec.policy.late_arrival_tolerance_us == 5 * S
    assert spec.source.kind == "event_log" and spec.source.event_log is None
    assert spec.sinks.audit is True


def test_the_default_event_log_lives_under_tidegate_home_and_relative_paths_under_the_cwd(tmp_path):
    default = parse_spec({"name": "raw", "version": 1, "payload": {"a": "int"}}).source
    assert default.event_log_path(env={}, cwd=tmp_path) == tmp_path / "var" / "event-log"
    assert default.event_log_path(env={"TIDEGATE_HOME": "/srv/tg"}, cwd=tmp_path) == Path("/srv/tg/event-log")
    assert parse_spec(base()).source.event_log_path(env={}, cwd=tmp_path) == tmp_path / "var" / "event-log"


def test_payload_limits_default_to_1_mib_and_64_levels_and_can_be_set():
    assert parse_spec(base()).source.payload_limits == PayloadLimits(1_048_576, 64)
    spec = parse_spec(spec_with(**{"source.max_payload_bytes": 4096, "source.max_payload_depth": 8}))
    assert spec.source.payload_limits == PayloadLimits(max_payload_bytes=4096, max_payload_depth=8)
    assert parse_spec(spec.to_dict()) == spec
    # they decide which events are quarantined, so they are part of the logic: set, they change
    # the fingerprint; written out at their defaults, they do not
    assert spec.fingerprint != parse_spec(base()).fingerprint
    defaults = spec_with(**{"source.max_payload_bytes": 1_048_576, "source.max_payload_depth": 64})
    assert parse_spec(defaults).fingerprint == parse_spec(base()).fingerprint
    assert "max_payload_bytes" not in parse_spec(base()).to_dict()["source"]


def test_kafka_is_a_source_too():
    spec = parse_spec(
        spec_with(
            **{
                "source.event_log": DELETE,
                "source.kafka": {
                    "bootstrap_servers": "b1:9092",
                    "topic": "devices",
                    "options": {"check.crcs": True, "fetch.min.bytes": 1},
                },
            }
        )  # fmt: skip
    )
    assert spec.source.kind == "kafka"
    assert spec.source.kafka.options == {"check.crcs": "true", "fetch.min.bytes": "1"}
    assert parse_spec(spec.to_dict()) == spec


def test_group_by_takes_named_expressions_and_decimal_types():
    spec = parse_spec(
        spec_with(
            **{
                "payload.price": "DECIMAL(10, 2)",
                "group_by": ["deviceId", {"hot": "temperature > 30"}],
                "aggregates": {"revenue": "sum(price)", "hot_share": "avg(cast(hot AS int))"},
            }
        )  # fmt: skip
    )
    assert spec.payload["price"] == "decimal(10,2)"
    assert spec.group_by == (("deviceId", "deviceId"), ("hot", "temperature > 30"))
    assert parse_spec(spec.to_dict()) == spec


def test_a_spark_datetime_pattern_with_quoted_literals_is_accepted():
    spec = parse_spec(spec_with(time_format="yyyy-MM-dd'T'HH:mm:ss.SSSX"))
    assert spec.time_format == "yyyy-MM-dd'T'HH:mm:ss.SSSX"


def test_select_may_be_a_plain_list_of_columns():
    data = spec_with(window=DELETE, group_by=DELETE, aggregates=DELETE, select=["deviceId", "arrival_time"])
    assert parse_spec(data).select == (("deviceId", "deviceId"), ("arrival_time", "arrival_time"))


@pytest.mark.parametrize(
    "expr",
    [
        "transform(tags, t -> upper(t))",  # lambda parameter
        "size(transform(xs, (x, i) -> x + i)) > 0",  # two lambda parameters
        "location.lat > 0",  # struct field after a dot
        "`deviceId` LIKE 'dev-00%'",  # backticks, keyword, words inside a string
        "arrival_time > TIMESTAMP '2026-01-01 00:00:00' AND partition IN (0, 1)",  # typed literal, builtins
        "CASE WHEN temperature IS NULL THEN false ELSE temperature BETWEEN -50 AND 80 END",
        "date_trunc('MINUTE', current_timestamp) <= arrival_time + INTERVAL 5 MINUTES",
        "key IS NOT NULL and offset % 2 = 0 and 1.5e3 > 10L",
    ],
)
def test_the_expression_check_accepts_real_spark_sql(expr):
    data = spec_with(filter=expr, **{"payload.tags": "string", "payload.xs": "string", "payload.location": "string"})
    assert parse_spec(data).filter == normalise_expression(expr)


# -- every mistake names its field and the fix -----------------------------------------


@pytest.mark.parametrize(
    "changes, expected",
    [
        # unknown fields, with the closest known name
        ({"windw": {"kind": "tumbling"}}, ["unknown field windw", "did you mean window?"]),
        ({"policy.late_arival_tolerance": "5s"}, ["policy.late_arival_tolerance", "policy.late_arrival_tolerance"]),
        ({"window.sise": "1m"}, ["window.sise", "did you mean window.size?"]),
        ({"late_arrival_tolerance": "2m"}, ["unknown field late_arrival_tolerance", "policy.late_arrival_tolerance"]),
        ({"sinks.outptu": {}}, ["sinks.outptu", "sinks.output"]),
        # missing required fields
        ({"name": DELETE}, ["name is missing", "name: device-fleet-counts"]),
        ({"version": DELETE}, ["version is missing"]),
        ({"payload": DELETE}, ["payload is missing"]),
        # name and version
        ({"name": "Device Fleet"}, ["name 'Device Fleet'", "lower-case"]),
        ({"name": "a" * 64}, ["not a valid job name", "1–63"]),
        ({"version": 0}, ["version 0", "positive whole number"]),
        ({"version": "3"}, ["version '3'", "no quotes"]),
        ({"version": True}, ["version True"]),
        # durations and windows
        ({"window.size": "1 minute"}, ["window.size", "cannot read", "5m"]),
        ({"window.size": "8d"}, ["window.size is 8d", "7-day maximum"]),
        ({"window.kind": "tumbled"}, ["window.kind 'tumbled'", "did you mean tumbling?"]),
        ({"window.kind": DELETE}, ["window.kind is missing", "tumbling, hopping, sliding, session"]),
        ({"window.hop": "30s"}, ["window.hop does not apply to a tumbling window", "kind: hopping"]),
        ({"window": {"kind": "session", "gap": "5m"}}, ["window.max_duration is missing", "gap and max_duration"]),
        ({"window": {"kind": "hopping", "size": "5m"}}, ["window.hop is missing"]),
        ({"window.size": "0s"}, ["window.size must be positive"]),
        ({"window.edges": "closed"}, ["window.edges is 'closed'", "end_inclusive", "start_inclusive"]),
        ({"window.edges": True}, ["window.edges is True", "start_inclusive"]),
        (
            {"window": {"kind": "sliding", "size": "5m", "edges": "start_inclusive"}},
            ["window.edges does not apply to a sliding window", "tumbling"],
        ),
        ({"window.offset": "1m"}, ["window.offset is 1m, not strictly between -window.size and window.size"]),
        ({"window.offset": "-1m"}, ["window.offset is -1m", "Offset(millisecond, -1)"]),
        # policy
        ({"policy.late_arrival_tolerance": "21d"}, ["policy.late_arrival_tolerance is 21d", "20d"]),
        ({"policy.late_arrival_tolerance": True}, ["policy.late_arrival_tolerance", "duration"]),
        ({"policy.out_of_order_tolerance": ["30s"]}, ["policy.out_of_order_tolerance", "expected a duration"]),
        ({"policy.out_of_order_tolerance": "-5s"}, ["policy.out_of_order_tolerance", "cannot read"]),
        ({"policy.late_arrival_action": "discard"}, ["policy.late_arrival_action is 'discard'", "'drop'"]),
        ({"policy.late_arrival_action": False}, ["policy.late_arrival_action is False", "drop"]),
        ({"policy.early_arrival_window": "10m"}, ["policy.early_arrival_window cannot be set", "fixed at 5 minutes"]),
        (
            {"timestamp_by": DELETE},
            ["policy.out_of_order_tolerance has no effect without timestamp_by", "set timestamp_by"],
        ),
        # query shape
        ({"select": {"t": "temperature"}}, ["select cannot be used with a window", "aggregates", "window_start"]),
        ({"window": DELETE, "group_by": DELETE}, ["aggregates are set but there is no window", "select"]),
        ({"window": DELETE, "aggregates": DELETE}, ["group_by is set but there is no window"]),
        ({"aggregates": DELETE}, ["window is set but aggregates are missing", "count(*)"]),
        ({"aggregates": {}}, ["aggregates are missing"]),
        ({"aggregates.t": "temperature"}, ["aggregates.t", "not an aggregate", "avg(temperature)"]),
        ({"aggregates.deviceId": "count(*)"}, ["output column deviceId appears twice"]),
        ({"aggregates.window_end": "count(*)"}, ["aggregates.window_end: 'window_end' is a name the engine uses"]),
        # references to fields that are not in the payload
        ({"timestamp_by": "event_ts"}, ["timestamp_by: 'event_ts' is not a payload field", "deviceId, eventTime"]),
        ({"timestamp_by": "temperature"}, ["timestamp_by: payload field temperature is double", "string"]),
        ({"over": "device_id"}, ["over: 'device_id'", "did you mean deviceId?"]),
        ({"group_by": ["site"]}, ["group_by[0]: 'site' is not a payload field"]),
        (
            {"group_by": [{"deviceId": "upper(deviceId)"}]},
            ["group_by: deviceId names a payload field", "deviceId_group"],
        ),
        ({"filter": "temprature > 30"}, ["filter: unknown column temprature", "did you mean temperature?", "humidity"]),
        ({"filter": "temperature > 30 AND site = 'x'"}, ["filter: unknown column site", "add it to payload"]),
        ({"filter": "temperature > 'unclosed"}, ["filter: cannot read", "quotes"]),
        ({"aggregates.a": "avg(temp)"}, ["aggregates.a: unknown column temp", "temperature"]),
        ({"aggregates.a": "max(arrival_time)"}, ["aggregates.a: unknown column arrival_time", "partition, offset"]),
        ({"group_by": [{"hot": "tmp > 30"}]}, ["group_by[0].hot: unknown column tmp"]),
        # payload
        ({"payload.humidity": "float64"}, ["payload.humidity: unknown type 'float64'", "did you mean double?"]),
        ({"payload.humidity": "long"}, ["payload.humidity: unknown type 'long'", "did you mean bigint?"]),
        ({"payload.humidity": "decimal(40,2)"}, ["payload.humidity", "1 <= p <= 38"]),
        ({"payload.offset": "bigint"}, ["payload.offset: 'offset' is a name the engine uses", "choose another name"]),
        (
            {"payload.temp-c": "double"},
            ["payload.temp-c: 'temp-c' is not a plain column name", "letters, digits and '_'"],
        ),
        ({"payload": {}}, ["payload is empty"]),
        (
            {"time_format": "yyyy-MM-dd", "timestamp_by": DELETE, "policy": DELETE},
            ["time_format is set but timestamp_by"],
        ),
        ({"time_format": "yyyy-MM-ddTHH:mm:ss"}, ["time_format", "T is not a Spark datetime pattern letter", "'T'"]),
        ({"time_format": "YYYY-MM-dd HH:mm"}, ["time_format", "Y is not", "use y for the year"]),
        # source and sinks
        ({"source.kafka": {"bootstrap_servers": "b:9092", "topic": "t"}}, ["source has both event_log and kafka"]),
        (
            {"source.event_log": DELETE, "source.kafka": {"bootstrap_servers": "b:9092"}},
            ["source.kafka.topic is missing"],
        ),
        (
            {"source.event_log": DELETE, "source.kafka": {"topic": "t", "options": {"sasl.jaas.config": "x"}}},
            ["source.kafka.options.sasl.jaas.config", "not set in a job spec", "source.kafka.connection"],
        ),
        ({"source.max_events_per_batch": 0}, ["source.max_events_per_batch is 0", "positive"]),
        ({"source.max_arrival_span_per_batch": "10 mins"}, ["source.max_arrival_span_per_batch", "cannot read"]),
        ({"source.max_payload_bytes": 0}, ["source.max_payload_bytes is 0", "whole number of bytes", "1048576"]),
        ({"source.max_payload_bytes": "1MB"}, ["source.max_payload_bytes is '1MB'", "whole number of bytes"]),
        ({"source.max_payload_bytes": 2**31}, ["source.max_payload_bytes is 2147483648", "2147483647"]),
        ({"source.max_payload_depth": True}, ["source.max_payload_depth is True", "levels", "64"]),
        ({"source.max_payload_depth": float("nan")}, ["source.max_payload_depth is nan", "levels"]),
        ({"sinks.quarantine": False}, ["sinks.quarantine cannot be turned off", "semantics §9"]),
        ({"sinks.output": {"format": "csv"}}, ["sinks.output.format 'csv'", "parquet"]),
        ({"sinks.audit": "yes please"}, ["sinks.audit", "true"]),
    ],
)
def test_a_mistake_raises_a_config_error_naming_the_field_and_the_fix(changes, expected):
    message = error_of(spec_with(**changes))
    assert message.startswith("test.yaml: ")
    assert " — " in message  # problem — fix
    for part in expected:
        assert part in message


@pytest.mark.parametrize(
    "field, text",
    [
        ("window.size", ".nan"),
        ("window.size", ".inf"),
        ("policy.out_of_order_tolerance", ".NaN"),
        ("policy.late_arrival_tolerance", ".Inf"),
        ("policy.late_arrival_tolerance", "-.inf"),
        ("source.max_arrival_span_per_batch", ".nan"),
        ("source.max_arrival_span_per_batch", "1.0e+400"),  # YAML reads it as infinity
        ("window.size", "nan"),  # plain text: not a YAML float
        ("window.size", "inf"),
    ],
)
def test_a_non_finite_duration_in_yaml_is_a_config_error_naming_the_field(tmp_path, field, text):
    section, name = field.split(".")
    data = base()
    data[section][name] = "PLACEHOLDER"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data).replace("PLACEHOLDER", text))
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: {field}: ")
    assert " — " in str(info.value)  # problem — fix


def test_yaml_syntax_errors_name_the_file_and_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nversion: 1\npayload:\n  a: int\n  b: [int\nwindow: {}\n")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert f"{path}:6:" in str(info.value) and "YAML" in str(info.value)


def test_a_key_written_twice_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: x\nversion: 1\npayload: {a: int}\nversion: 2\n")
    with pytest.raises(ConfigError, match=r"twice\.yaml:4:1: a key written first at line 2 appears again"):
        load_spec(path)


# each file holds the word "hunter2" where PyYAML's message would quote it: a tag, an alias, an
# escape, a key, a stray line, the line printed under its mark, or the whole file (not a mapping)
_SECRET_FILES = {
    "tag": "name: x\nversion: !hunter2 1\n",
    "alias": "name: *hunter2\n",
    "escape": 'name: "hunter2\\q"\n',
    "twice": "hunter2: 1\nhunter2: 2\n",
    "stray line": "name: x\nhunter2\nversion: 1\n",
    "bracket": "name: [hunter2, x\n",
    "block": "name: x\n- hunter2\n",
    "text": "root:x:0:0:hunter2:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
    "list": "- hunter2\n- 2\n",
    "number": "12345\n",
    "control": "name: hunter2\x01\n",
    "tab": "name: x\n\thunter2: 2\n",
}


@pytest.mark.parametrize("kind", sorted(_SECRET_FILES))
def test_errors_of_a_file_that_is_not_a_spec_never_quote_its_text(tmp_path, kind):
    path = tmp_path / "secret.yaml"
    path.write_text(_SECRET_FILES[kind])
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    message = str(info.value)
    assert "hunter2" not in message and "root:" not in message and "12345" not in message, message
    assert message.startswith(f"{path}"), message


def test_yaml_errors_say_line_column_and_the_kind_of_problem(tmp_path):
    path = tmp_path / "odd.yaml"
    cases = {
        "name: x\nversion: !secret 1\n": ":2:10: YAML syntax error: could not determine a constructor for the tag",
        "name: [a, b\n": ":2:1: YAML syntax error: expected ',' or ']', but got '<stream end>'",
        "name: x\n\tversion: 1\n": ":2:1: YAML syntax error: a tab character (YAML indents with spaces",
        "- a\n": ": the job spec is a list, not a mapping of name: value",
    }
    for text, expected in cases.items():
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_spec(path)
        assert f"{path}{expected}" in str(info.value), str(info.value)


def test_a_spec_file_that_is_not_utf8_text_is_a_config_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\nversion: 1\npayload: {temp\u00e9rature: double}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml: not UTF-8 text .*byte 0xe9 at position 33.* — save"):
        load_spec(path)


def test_a_spec_nested_too_deeply_is_a_config_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: x\nversion: 1\npayload: {a: int}\nfilter: " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(ConfigError, match=r"deep\.yaml: the job spec is nested too deeply"):
        load_spec(path)
    deep: dict = {}
    node = deep
    for _ in range(5000):  # what json.loads can hand parse_spec from a control database row
        node["a"] = node = {}
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_spec({"name": "x", "version": 1, "payload": {"a": "int"}, "filter": deep})


def test_a_mapping_used_as_a_key_is_a_config_error_with_its_line(tmp_path):
    path = tmp_path / "key.yaml"
    path.write_text("name: x\nversion: 1\npayload: {a: int}\n{a: 1}: 2\n")
    with pytest.raises(ConfigError, match=r"key\.yaml:4:.*unhashable key"):
        load_spec(path)


def test_a_missing_or_empty_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="no such job spec file"):
        load_spec(tmp_path / "nope.yaml")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="empty"):
        load_spec(tmp_path / "empty.yaml")


# -- fingerprint -----------------------------------------------------------------------

REFORMATTED_YAML = """
# same job, written differently
name: renamed-job
version: 4
description: something else entirely
source: {event_log: /elsewhere/event-log, max_events_per_batch: 5}
payload: {deviceId: string, eventTime: string, temperature: DOUBLE, humidity: double}
timestamp_by: eventTime
over: deviceId
policy: {late_arrival_tolerance: 120s, out_of_order_tolerance: 0.5m, late_arrival_action: adjust}
filter: "temperature   >   -50"
window: {kind: TUMBLING, size: 60s, offset: 0s}
group_by: deviceId
aggregates:
  events: COUNT( * )
  avg_temperature: "AVG(`temperature`)"
sinks: {output: {format: parquet}, audit: false, quarantine: true}
"""


def test_the_fingerprint_ignores_names_versions_sinks_sources_and_formatting():
    assert parse_spec(yaml.safe_load(REFORMATTED_YAML)).fingerprint == parse_spec(base()).fingerprint


@pytest.mark.parametrize(
    "sinks, problem",
    [
        (
            {"output": {"path": "/data/out"}},
            "sinks.output.path cannot be set: a job does not choose where it writes — "
            "the platform writes its results to output/ of the lineage's folder under the "
            "region's storage root",
        ),
        (
            {"quarantine": {"path": "/data/q"}},
            "sinks.quarantine.path cannot be set: a job does not choose where it "
            "writes — the platform writes its bad input to quarantine/",
        ),
    ],
    ids=["output", "quarantine"],
)
def test_a_spec_file_naming_where_its_sinks_go_is_refused_at_load(tmp_path, sinks, problem):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec_with(sinks=sinks)))
    with pytest.raises(ConfigError) as refused:
        load_spec(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: {problem}") and "docs/concepts/output-layout.md" in message
    assert message.endswith(f"— remove sinks.{next(iter(sinks))}.path") and len(message.encode()) < 2048


def test_a_version_registered_when_sinks_paths_were_accepted_reads_back_with_its_fingerprint():
    """Stored versions hold ``path: null`` (what JobSpec.to_dict wrote), or a path their author
    gave, which nothing ever read: both read back as they were, with the fingerprint they were
    registered with; only a spec file is refused for naming one."""
    for path, quarantine in ((None, None), ("/data/out", "/data/q")):
        stored = spec_with(
            **{"sinks.output": {"path": path, "format": "parquet"}, "sinks.quarantine": {"path": quarantine}}
        )
        assert parse_spec(stored) == parse_spec(base())
        assert parse_spec(stored).fingerprint == parse_spec(base()).fingerprint
    assert parse_spec(base()).to_dict()["sinks"] == {"output": {"format": "parquet"}, "audit": True}


@pytest.mark.parametrize(
    "changes",
    [
        {"policy.late_arrival_tolerance": "3m"},
        {"policy.out_of_order_action": "drop"},
        {"window.size": "2m"},
        {"window": {"kind": "hopping", "size": "1m", "hop": "30s"}},
        {"window.edges": "start_inclusive"},  # a changed convention is a changed query
        {"window.offset": "10s"},
        {"window.offset": "-10s"},
        {"aggregates.events": "count(deviceId)"},
        {"aggregates": {"avg_temperature": "avg(temperature)", "events": "count(*)"}},  # column order
        {"filter": "temperature > -40"},
        {"filter": DELETE},
        {"over": DELETE},
        {"group_by": []},
        {"payload.humidity": "float"},
        {"time_format": "yyyy-MM-dd'T'HH:mm:ssX"},
    ],
    ids=repr,
)
def test_the_fingerprint_changes_with_anything_that_changes_results(changes):
    assert parse_spec(spec_with(**changes)).fingerprint != parse_spec(base()).fingerprint


def test_offsets_one_window_apart_are_the_same_windows_and_the_same_fingerprint():
    minus = parse_spec(spec_with(**{"window.offset": "-1ms"}))  # Stream Analytics' Offset(millisecond, -1)
    assert minus.window.offset_us == -1_000
    assert minus.fingerprint == parse_spec(spec_with(**{"window.offset": "59.999s"})).fingerprint
    assert minus.to_dict()["window"]["offset"] == "-1ms"


def test_the_fingerprint_is_a_sha256_hex_digest():
    fp = parse_spec(base()).fingerprint
    assert len(fp) == 64 and int(fp, 16) >= 0


def test_expressions_normalise_whitespace_but_not_inside_strings():
    assert normalise_expression("  a  >\n 1 AND b = 'x   y' ") == "a > 1 AND b = 'x   y'"
    assert canonical_expression("AVG( temperature )") == canonical_expression("avg(temperature)")
    assert canonical_expression("b = 'x   y'") != canonical_expression("b = 'x y'")


# -- look-back (semantics §6) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "window, late, expected_us",
    [
        # tumbling 1m + late 2m + early 5m
        ({"kind": "tumbling", "size": "1m"}, "2m", 8 * M),
        # hopping: the span is the size, not the hop
        ({"kind": "hopping", "size": "5m", "hop": "1m"}, "2m", 12 * M),
        ({"kind": "sliding", "size": "10m"}, "5s", 15 * M + 5 * S),
        # session cut at every check point: the maximum duration, not the gap
        ({"kind": "session", "gap": "2m", "max_duration": "30m", "cut": "every_check_point"}, "5s", 35 * M + 5 * S),
        # cut as Stream Analytics cuts (the default): a session lasts up to 2 × max, and where
        # the first one ending after T is cut depends on its burst's start, read from gap before
        ({"kind": "session", "gap": "2m", "max_duration": "30m"}, "5s", 67 * M + 5 * S),
    ],
)
def test_lookback_is_the_window_span_plus_late_tolerance_plus_the_early_window(window, late, expected_us):
    spec = parse_spec(spec_with(window=window, **{"policy.late_arrival_tolerance": late}))
    assert spec.needs_lookback and spec.lookback_us == expected_us


def test_a_per_event_query_reads_back_only_the_policys_stretch_and_nothing_with_arrival_as_event_time():
    spec = parse_spec(spec_with(window=DELETE, group_by=DELETE, aggregates=DELETE))
    assert not spec.needs_lookback  # nothing to rebuild: each event is emitted once judged
    assert spec.lookback_us == spec.replay_lookback_us == 2 * M + 5 * M  # late + early decide the first outcomes
    assert "look-back 7m" in spec.describe()
    by_arrival = parse_spec(spec_with(window=DELETE, group_by=DELETE, aggregates=DELETE, timestamp_by=DELETE,
                                      policy=DELETE, over=DELETE))  # fmt: skip
    assert by_arrival.replay_lookback_us == 0 and "look-back none" in by_arrival.describe()
    windowed = parse_spec(spec_with())
    assert windowed.replay_lookback_us == windowed.lookback_us


# -- round trip ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"window": {"kind": "hopping", "size": "90s", "hop": "30s", "offset": "10s"}},
        {"window": {"kind": "hopping", "size": "90s", "hop": "30s", "offset": "-1ms", "edges": "start_inclusive"}},
        {"window": {"kind": "session", "gap": "5m", "max_duration": "1h", "edges": "start_inclusive"}},
        {"window": {"kind": "sliding", "size": "1h30m"}},
        {"timestamp_by": DELETE, "policy": DELETE, "over": DELETE},
        {"window": DELETE, "group_by": DELETE, "aggregates": DELETE, "select": {"f": "temperature * 9 / 5 + 32"}},
        {"policy.late_arrival_action": "drop", "policy.out_of_order_action": "drop", "sinks.audit": False},
    ],
    ids=repr,
)
def test_to_dict_round_trips_through_parse_spec(changes):
    spec = parse_spec(spec_with(**changes))
    again = parse_spec(yaml.safe_load(yaml.safe_dump(spec.to_dict(), sort_keys=False)))
    assert again == spec and again.to_dict() == spec.to_dict()


def test_a_group_by_expression_named_as_itself_round_trips_when_it_is_not_a_payload_field():
    spec = parse_spec(spec_with(group_by=["deviceId", {"day": "day"}]))  # a bare word, not a payload field
    assert parse_spec(spec.to_dict()) == spec


def test_to_dict_writes_durations_in_their_shortest_form():
    spec = parse_spec(spec_with(**{"window.size": "60s", "policy.late_arrival_tolerance": 120}))
    d = spec.to_dict()
    assert d["window"] == {"kind": "tumbling", "size": "1m", "offset": "0s", "edges": "end_inclusive"}
    assert d["policy"]["late_arrival_tolerance"] == "2m"
    assert d["source"]["max_arrival_span_per_batch"] == "10m"
