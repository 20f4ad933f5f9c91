"""A Stream Analytics query becomes the spec fields that compute its rows, or an error naming
its line and column, the construct and the form to write instead."""

from __future__ import annotations

import pytest
import yaml

from tidegate.asa import spec_text
from tidegate.asa.side_file import parse_side_file
from tidegate.asa.translate import translate as translate_all
from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec


def translate(query: str, origin: str, references: frozenset[str] = frozenset()):
    """The translation of a query of one SELECT … INTO."""
    (one,) = translate_all(query, origin, references)
    return one


def fields(query: str) -> list[dict]:
    return [s.fields for s in translate(query, "q.asaql").steps]


def test_a_tumbling_count_per_device_with_having_is_window_group_by_aggregates_and_having():
    (step,) = fields(
        "SELECT deviceId, AVG(temperature) AS avgT, System.Timestamp() AS t INTO o FROM input TIMESTAMP BY eventTime\n"
        "GROUP BY deviceId, TumblingWindow(minute, 1) HAVING AVG(temperature) > 25 AND System.Timestamp() > '2026'"
    )
    assert step["window"] == {"kind": "tumbling", "size": "1m"}
    assert step["group_by"] == ["deviceId"]
    assert step["aggregates"] == {"avgT": "AVG(temperature)"}
    assert step["having"] == "avgT > 25 AND window_end > '2026'"


@pytest.mark.parametrize(
    "window, spec",
    [
        ("HoppingWindow(minute, 5, 1)", {"kind": "hopping", "size": "5m", "hop": "1m"}),
        ("HoppingWindow(minute, 5, 1, 30)", {"kind": "hopping", "size": "5m", "hop": "1m", "offset": "30m"}),
        (
            "TumblingWindow(hour, 1, Offset(millisecond, -1))",
            {"kind": "tumbling", "size": "1h", "edges": "start_inclusive"},
        ),
        ("TumblingWindow(Duration(hour, 1), Offset(minute, 15))", {"kind": "tumbling", "size": "1h", "offset": "15m"}),
        ("SlidingWindow(second, 30)", {"kind": "sliding", "size": "30s"}),  # (t − 30 s, t]
        ("SessionWindow(minute, 2, 30) OVER (PARTITION BY d)", {"kind": "session", "gap": "2m", "max_duration": "30m"}),
    ],
)
def test_each_window_function_is_its_spec_window(window, spec):
    (step,) = fields(f"SELECT d, COUNT(*) AS n INTO o FROM i TIMESTAMP BY t GROUP BY d, {window}")
    assert step["window"] == spec


def test_a_with_chain_is_steps_each_reading_the_one_before():
    t = translate(
        "WITH m AS (SELECT d, COUNT(*) AS n FROM i TIMESTAMP BY t OVER d WHERE v > 0\n"
        "           GROUP BY d, TumblingWindow(minute, 1))\n"
        "SELECT MAX(n) AS top INTO alerts FROM m GROUP BY TumblingWindow(hour, 1)",
        "q",
    )
    assert [(s.name, s.reads) for s in t.steps] == [("m", "i"), ("alerts", "m")]
    assert t.steps[0].fields["filter"] == "v > 0" and t.over == "d" and t.timestamp_by == "t"


def test_a_per_event_query_is_filter_and_select():
    (step,) = fields("SELECT d, v * 2 AS twice INTO o FROM i TIMESTAMP BY t WHERE v > 30")
    assert step == {"filter": "v > 30", "select": {"d": "d", "twice": "v * 2"}}


@pytest.mark.parametrize(
    "query, where, words",
    [
        ("SELECT d\nFROM i GROUP BY d, SnapshotWindow()", "q.asaql:2:", "SnapshotWindow"),
        (
            "SELECT d, COUNT(*) AS n FROM i\nGROUP BY d, TumblingWindow(minute, 1)\nHAVING SUM(v) > 3",
            "q.asaql:3:8",
            "HAVING computes SUM(v)",
        ),
        ("SELECT a.d FROM i a\n  JOIN j b ON a.d = b.d", "q.asaql:2:8", "without DATEDIFF"),
        ("SELECT a.d FROM i a\n  RIGHT JOIN j b ON a.d = b.d", "q.asaql:2:14", "RIGHT JOIN is not supported"),
        (
            "SELECT a.d FROM i a LEFT JOIN j b\n ON a.d = b.d AND a.v > 3 AND DATEDIFF(minute, a, b) BETWEEN 0 AND 5",
            "q.asaql:2:19",
            "in a LEFT OUTER JOIN",
        ),
        (
            "SELECT a.d FROM i a JOIN j b ON a.d = b.d AND DATEDIFF(minute, a, b) BETWEEN 0 AND 5\n JOIN k c ON 1 = 1",
            "q.asaql:2:7",
            "more than two inputs",
        ),
        (
            "SELECT a.k FROM a TIMESTAMP BY t OVER k JOIN b ON a.k = b.k AND DATEDIFF(minute, a, b) BETWEEN 0 AND 1",
            "q.asaql:1:39",
            "OVER in a join",
        ),
        (
            "SELECT * FROM a JOIN b ON a.k = b.k AND DATEDIFF(minute, a, b) BETWEEN 0 AND 1",
            "q.asaql:1:8",
            "SELECT * in a join",
        ),
        ("SELECT LAG(v) OVER (PARTITION BY d) AS p FROM i", "q.asaql:1:8", "LAG without LIMIT DURATION"),
        ("SELECT LAG(*) OVER (LIMIT DURATION(minute, 1)) AS p FROM i", "q.asaql:1:8", "LAG(*) returns the whole event"),
        (
            "SELECT LAST(*) OVER (LIMIT DURATION(minute, 1)) AS p FROM i",
            "q.asaql:1:8",
            "LAST(*) returns the whole event",
        ),
        ("SELECT ISFIRST(*) OVER (LIMIT DURATION(minute, 1)) AS p FROM i", "q.asaql:1:8", "ISFIRST takes a unit"),
        (
            "SELECT d,\n SUM(*) OVER (PARTITION BY d LIMIT DURATION(minute, 1)) AS n FROM i",
            "q.asaql:2:",
            "name one value",
        ),
        ("SELECT d, SUM(v) OVER (PARTITION BY d) AS n FROM i", "q.asaql:1:", "SUM(…) OVER without LIMIT DURATION"),
        (
            "SELECT d, STDEV(v) OVER (PARTITION BY d LIMIT DURATION(minute, 1)) AS n FROM i",
            "q.asaql:1:",
            "no form over a duration",
        ),
        (
            "SELECT ISFIRST(minute, 1) OVER (PARTITION BY d LIMIT DURATION(minute, 1)) AS f FROM i",
            "q.asaql:1:",
            "ISFIRST with LIMIT DURATION",
        ),
        (
            "SELECT LAG(v) OVER (PARTITION BY d LIMIT DURATION(minute, 1)) AS p,\n"
            "  LAST(v) OVER (PARTITION BY e LIMIT DURATION(minute, 1)) AS l FROM i",
            "q.asaql:2:3",
            "share one PARTITION BY",
        ),
        (
            "SELECT d, COUNT(*) AS n FROM i\nWHERE ISFIRST(minute, 1) = 1 GROUP BY d, TumblingWindow(minute, 5)",
            "q.asaql:2:7",
            "analytic function in a windowed SELECT",
        ),
        ("SELECT GetArrayElement(a, 0) AS x FROM i", "q.asaql:1:8", "element_at"),
        ("SELECT d, v FROM i GROUP BY d, TumblingWindow(minute, 1)", "q.asaql:1:11", "neither a group key"),
        ("SELECT * INTO a FROM i\nSELECT * FROM i", "q.asaql:2:8", "SELECT without INTO in a query of several"),
        ("SELECT * INTO a FROM i\nSELECT v INTO A FROM i", "q.asaql:2:15", "a second SELECT … INTO A"),
        (
            "WITH s AS (SELECT v FROM i)\nSELECT * INTO a FROM i\nSELECT * INTO b FROM i",
            "q.asaql:1:6",
            "step s is read by no SELECT … INTO",
        ),  # fmt: skip
        ("SELECT * INTO a FROM i\nWITH s AS (SELECT v FROM i) SELECT * INTO b FROM s", "q.asaql:2:", "WITH after"),
        ("SELECT d FROM i WHERE", "q.asaql:1:", "grammar"),
    ],
)
def test_what_has_no_translation_is_refused_with_line_and_column(query, where, words):
    with pytest.raises(ConfigError) as err:
        translate(query, "q.asaql")
    assert str(err.value).startswith(where) and (words in str(err.value) or words == "grammar")
    assert "coming-from-stream-analytics" in str(err.value)


def test_lag_last_and_isfirst_are_analytics_and_a_where_reads_the_column_the_select_names():
    (step,) = fields(
        "SELECT d, LAG(v, 2, 0) OVER (PARTITION BY d LIMIT DURATION(minute, 10) WHEN v > 3) AS p,\n"
        "  ISFIRST(hour, 1) OVER (PARTITION BY d WHEN v > 3) AS f\n"
        "FROM i TIMESTAMP BY t\n"
        "WHERE v - LAG(v, 2, 0) OVER (PARTITION BY d LIMIT DURATION(minute, 10) WHEN v > 3) > 5\n"
        "  AND LAST(v) OVER (PARTITION BY d LIMIT DURATION(hour, 1)) IS NOT NULL"
    )
    assert step["analytics"] == {
        "p": "LAG(v, 2, 0) OVER (PARTITION BY d LIMIT DURATION(minute, 10) WHEN v > 3)",
        "f": "ISFIRST(hour, 1) OVER (PARTITION BY d WHEN v > 3)",
        "last_v": "LAST(v) OVER (PARTITION BY d LIMIT DURATION(hour, 1))",
    }
    assert step["filter"] == "v - p > 5 AND NOT last_v IS NULL"
    assert step["select"] == {"d": "d", "p": "p", "f": "f"}


def test_lag_of_star_is_the_lag_of_the_whole_event_the_side_file_describes():
    (t,) = translate_all(
        "SELECT d, LAG(*, 2) OVER (PARTITION BY d LIMIT DURATION(minute, 5)) AS p FROM i TIMESTAMP BY t",
        "q.asaql",
        payloads={"i": ["d", "t", "v`w"]},
    )
    assert t.steps[0].fields["analytics"] == {"p": "LAG(struct(`d`, `t`, `v``w`), 2) OVER (PARTITION BY d LIMIT "
                                              "DURATION(minute, 5))"}  # fmt: skip


def test_last_of_star_is_the_latest_matching_whole_event_the_side_file_describes():
    (t,) = translate_all(
        "SELECT d, LAST(*) OVER (PARTITION BY d LIMIT DURATION(minute, 5) WHEN v > 0) AS p FROM i TIMESTAMP BY t",
        "q.asaql",
        payloads={"i": ["d", "t", "v"]},
    )
    assert t.steps[0].fields["analytics"] == {"p": "LAST(struct(`d`, `t`, `v`)) OVER (PARTITION BY d LIMIT "
                                              "DURATION(minute, 5) WHEN v > 0)"}  # fmt: skip


def test_an_analytic_step_then_a_window_is_two_steps():
    t = translate(
        "WITH firsts AS (SELECT d FROM i TIMESTAMP BY t WHERE ISFIRST(minute, 10) OVER (PARTITION BY d) = 1)\n"
        "SELECT COUNT(*) AS n INTO o FROM firsts GROUP BY TumblingWindow(hour, 1)",
        "q",
    )
    assert t.steps[0].fields["analytics"] == {"isfirst_value": "ISFIRST(minute, 10) OVER (PARTITION BY d)"}
    assert t.steps[0].fields["filter"] == "isfirst_value = 1"


def test_a_join_of_two_streams_is_inputs_and_join_each_side_by_its_input_name():
    t = translate(
        "SELECT o.id AS id, p.paid AS paid FROM orders o TIMESTAMP BY ot\n"
        "LEFT OUTER JOIN payments p TIMESTAMP BY pt ON p.id = o.id AND DATEDIFF(second, p, o) BETWEEN -60 AND 0\n"
        "WHERE p.paid IS NULL OR p.paid < o.amount",
        "q",
    )
    assert [(s.name, s.timestamp_by) for s in t.inputs] == [("orders", "ot"), ("payments", "pt")]
    assert t.inputs[0].fields_read == ["ot", "id", "amount"] and t.inputs[1].fields_read == ["pt", "paid", "id"]
    (step,) = t.steps
    assert step.fields["join"] == {
        "type": "left", "left": "orders", "right": "payments", "keys": ["payments.id = orders.id"],
        "within": "DATEDIFF(second, payments, orders) BETWEEN -60 AND 0",
    }  # fmt: skip
    assert step.fields["select"] == {"id": "orders.id", "paid": "payments.paid"}
    assert step.fields["filter"] == "payments.paid IS NULL OR payments.paid < orders.amount"


def test_an_inner_joins_other_on_conditions_are_its_filter():
    (step,) = fields(
        "SELECT a.k AS k FROM a JOIN b ON a.k = b.k AND b.v > 2 AND DATEDIFF(minute, a, b) BETWEEN 0 AND 5\n"
        "WHERE a.v > 1"
    )
    assert step["filter"] == "(a.v > 1) AND (b.v > 2)"


def test_a_join_with_reference_data_is_the_specs_reference():
    t = translate(
        "SELECT i.d, r.site FROM input i TIMESTAMP BY t LEFT OUTER JOIN Devices r ON lower(i.d) = r.deviceId",
        "q",
        frozenset({"devices"}),
    )
    assert t.reference is not None
    assert (t.reference.name, t.reference.keys, t.reference.type) == (
        "Devices",
        ["LOWER(d) = Devices.deviceId"],
        "left",
    )
    assert t.steps[0].fields["select"] == {"d": "d", "site": "Devices.site"}
    assert t.inputs[0].fields_read == ["t", "d"]


def test_the_side_file_declares_reference_data_in_stream_analytics_names():
    side = parse_side_file(
        {"inputs": {"devices": {"type": "Reference", "serialization": "Parquet", "path": "jobs/x",
                                "columns": {"deviceId": "string"}}}}, "s.yaml",
    )  # fmt: skip
    assert side.references() == {"devices"}
    assert side.reference("Devices") == {"path": "jobs/x", "format": "parquet", "columns": {"deviceId": "string"}}


def test_the_side_file_gives_the_policy_in_stream_analytics_names():
    side = parse_side_file(
        {"eventsOutOfOrderPolicy": "Drop", "eventsOutOfOrderMaxDelayInSeconds": 30,
         "eventsLateArrivalMaxDelayInSeconds": 120}, "s.yaml",
    )  # fmt: skip
    assert side.policy() == {
        "out_of_order_tolerance": "30s",
        "out_of_order_action": "drop",
        "late_arrival_tolerance": "120s",
        "late_arrival_action": "drop",
    }


@pytest.mark.parametrize(
    "data, words",
    [
        ({"eventsOutOfOrderPolicy": "Keep"}, "eventsOutOfOrderPolicy"),
        ({"eventsLateArrivalMaxDelayInSeconds": -1}, "wait forever"),
        ({"eventsLateArivalMaxDelayInSeconds": 5}, "did you mean eventsLateArrivalMaxDelayInSeconds"),
        ({"inputs": {"i": {"schema": {}}}}, "unknown field 'inputs.i.schema'"),
        (
            {"inputs": {"r": {"type": "Reference", "path": "ref/{date}/{time}", "columns": {"a": "string"}}}},
            "pathPattern",
        ),
        ({"inputs": {"r": {"type": "Reference", "path": "ref"}}}, "inputs.r.columns is missing"),
        ({"inputs": {"r": {"path": "ref"}}}, "inputs.r.path on a stream input"),
        ({"inputs": {"r": {"type": "Table"}}}, "Stream (the default) or Reference"),
    ],
)
def test_a_bad_side_file_is_refused_with_what_to_write(data, words):
    with pytest.raises(ConfigError, match="s.yaml") as err:
        parse_side_file(data, "s.yaml")
    assert words in str(err.value)


def test_the_spec_written_is_one_the_spec_loader_accepts_with_comments_naming_query_lines(tmp_path):
    query = tmp_path / "hot.asaql"
    query.write_text(
        "SELECT deviceId, AVG(temperature) AS avgT\nINTO alerts\nFROM input TIMESTAMP BY eventTime\n"
        "GROUP BY deviceId, TumblingWindow(minute, 1)\nHAVING AVG(temperature) > 25\n"
    )
    text = spec_text(query, None)
    assert "having: avgT > 25   # line 5: HAVING AVG(temperature) > 25" in text
    assert "Stream Analytics' defaults (no --inputs)" in text

    spec = parse_spec(yaml.safe_load(text))
    assert spec.having == "avgT > 25" and dict(spec.payload) == {
        "deviceId": "string",
        "temperature": "double",
        "eventTime": "string",
    }


APPLIED = "SELECT e.d, a.ArrayValue.s AS s, COUNT(*) AS n INTO o FROM input e TIMESTAMP BY t\n"


def test_cross_apply_get_array_elements_is_the_specs_cross_apply_its_columns_spelt_as_the_spec_spells_them():
    t = translate(
        APPLIED + "CROSS APPLY GetArrayElements(e.readings) AS a\n"
        "WHERE a.arrayvalue.v IS NOT NULL AND A.ArrayIndex < 8\n"
        "GROUP BY e.d, a.ArrayValue.s, TumblingWindow(minute, 1)",
        "q",
    )
    (step,) = t.steps
    assert step.fields["cross_apply"] == {"name": "a", "elements": "readings"}
    assert step.lines["cross_apply"] == "line 2: CROSS APPLY GetArrayElements(e.readings) AS a"
    assert step.fields["filter"] == "NOT a.ArrayValue.v IS NULL AND a.ArrayIndex < 8"
    assert step.fields["group_by"] == ["d", {"s": "a.ArrayValue.s"}]
    assert t.cross_apply is not None and t.cross_apply.at == "q:2:13"


def test_cross_apply_get_record_properties_is_cross_apply_properties():
    (step,) = fields(
        "SELECT e.d, p.PropertyName AS sensor, p.propertyvalue AS value FROM input e\n"
        "CROSS APPLY GetRecordProperties(e.sensors) AS p WHERE p.PropertyValue > 30"
    )
    assert step == {
        "cross_apply": {"name": "p", "properties": "sensors"},
        "filter": "p.PropertyValue > 30",
        "select": {"d": "d", "sensor": "p.PropertyName", "value": "p.PropertyValue"},
    }


@pytest.mark.parametrize(
    "query, where, words",
    [
        ("SELECT a.ArrayIndex FROM i e\nOUTER APPLY GetArrayElements(e.x) AS a", "q.asaql:2:13:", "OUTER APPLY"),
        (
            "SELECT a.ArrayIndex FROM i e CROSS APPLY GetArrayElements(e.x) AS a\n"
            "  CROSS APPLY GetRecordProperties(e.y) AS p",
            "q.asaql:2:15:",
            "a second CROSS APPLY",
        ),
        (
            "SELECT e.d FROM i e CROSS APPLY GetArrayElements(e.x) AS a\n JOIN r ON e.d = r.d",
            "q.asaql:2:7:",
            "beside a JOIN",
        ),
        (
            "WITH f AS (SELECT e.d FROM i e TIMESTAMP BY t\n CROSS APPLY GetArrayElements(e.x) AS a)\n"
            "SELECT d, COUNT(*) AS n FROM f GROUP BY d, TumblingWindow(minute, 1)",
            "q.asaql:2:14:",
            "cannot be combined with steps",
        ),
        (
            "WITH f AS (SELECT d, COUNT(*) AS n FROM i TIMESTAMP BY t GROUP BY d, TumblingWindow(minute, 1))\n"
            "SELECT f.d FROM f CROSS APPLY GetArrayElements(f.x) AS a",
            "q.asaql:2:31:",
            "a step that reads a step",
        ),
        (
            "SELECT e.d,\n LAG(e.d) OVER (LIMIT DURATION(minute, 1)) AS p\n"
            "FROM i e CROSS APPLY GetArrayElements(e.x) AS a",
            "q.asaql:2:2:",
            "cannot be combined with analytics",
        ),
        ("SELECT e.d FROM i e CROSS APPLY\n Split(e.x, ',') AS a", "q.asaql:2:2:", "only GetArrayElements"),
        ("SELECT e.d FROM i e CROSS APPLY GetArrayElements(\n e.r.list) AS a", "q.asaql:2:2:", "one field"),
        ("SELECT e.d FROM i e CROSS APPLY GetArrayElements(e.x) AS e", "q.asaql:1:33:", "the input's name"),
        (
            "SELECT e.d,\n a.PropertyName AS n FROM i e CROSS APPLY GetArrayElements(e.x) AS a",
            "q.asaql:2:2:",
            "have no PropertyName",
        ),
    ],
)
def test_cross_apply_where_the_spec_cannot_hold_it_is_refused_with_line_and_column(query, where, words):
    with pytest.raises(ConfigError) as err:
        translate(query, "q.asaql")
    assert str(err.value).startswith(where) and words in str(err.value)
    assert "coming-from-stream-analytics" in str(err.value)


@pytest.mark.parametrize(
    "payload, words",
    [
        (None, "the type of readings is not declared"),
        ({"d": "string", "t": "string"}, "the type of readings is not declared"),
        ({"d": "string", "t": "string", "readings": "string"}, "declares readings string"),
    ],
)
def test_the_applied_fields_type_comes_from_the_side_file_never_a_guess(tmp_path, payload, words):
    query = tmp_path / "q.asaql"
    query.write_text(APPLIED + "CROSS APPLY GetArrayElements(e.readings) AS a\nGROUP BY e.d, a.ArrayValue.s,"
                     " TumblingWindow(minute, 1)\n")  # fmt: skip
    side = tmp_path / "s.yaml"
    side.write_text(yaml.safe_dump({"inputs": {"input": {"payload": payload}}} if payload else {}))
    with pytest.raises(ConfigError) as err:
        spec_text(query, side)
    assert str(err.value).startswith(f"{query}:2:13: GetArrayElements(e.readings)") and words in str(err.value)
    assert "inputs.input.payload" in str(err.value) or "inputs: {input: {payload:" in str(err.value)


def test_a_cross_applied_spec_is_one_the_spec_loader_accepts(tmp_path):
    query = tmp_path / "q.asaql"
    query.write_text(APPLIED + "CROSS APPLY GetArrayElements(e.readings) AS a\nGROUP BY e.d, a.ArrayValue.s,"
                     " TumblingWindow(minute, 1)\n")  # fmt: skip
    side = tmp_path / "s.yaml"
    payload = {"d": "string", "t": "string", "readings": "array<struct<s:string,v:double>>"}
    side.write_text(yaml.safe_dump({"inputs": {"input": {"payload": payload}}}))
    text = spec_text(query, side)
    assert "cross_apply: {name: a, elements: readings}   # line 2: CROSS APPLY" in text
    spec = parse_spec(yaml.safe_load(text))
    assert spec.cross_apply is not None and spec.cross_apply.to_dict()["elements"] == "readings"


def test_a_query_nested_past_the_parsers_reach_is_refused_saying_so_not_a_traceback():
    deep = "SELECT " + "(" * 3000 + "a" + ")" * 3000 + " AS x INTO o FROM i TIMESTAMP BY t"
    with pytest.raises(ConfigError, match="nested too deeply") as err:
        translate(deep, "q.asaql")
    assert "runaway parentheses" in err.value.fix


def test_aggregates_over_a_duration_are_analytics_and_a_where_reads_their_column():
    (step,) = fields(
        "SELECT d, COUNT(*) OVER (PARTITION BY d LIMIT DURATION(minute, 5)) AS n INTO o FROM i TIMESTAMP BY t\n"
        "WHERE MAX(v) OVER (PARTITION BY d LIMIT DURATION(hour, 1) WHEN v > 0) = 0"
    )
    assert step["analytics"] == {
        "n": "COUNT(*) OVER (PARTITION BY d LIMIT DURATION(minute, 5))",
        "max_v": "MAX(v) OVER (PARTITION BY d LIMIT DURATION(hour, 1) WHEN v > 0)",
    }
    assert step["filter"] == "max_v = 0" and step["select"] == {"d": "d", "n": "n"}
