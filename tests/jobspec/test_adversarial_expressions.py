"""A corpus of hostile spec expressions: each is refused when the spec loads, or runs and leaks nothing.

``adversarial_expressions.txt`` holds the expressions a job author could try against the
platform: substitution of environment variables, system properties and Spark settings,
subqueries in every form (the FROM-first ones included), files and tables by other names,
calls into Java, window functions, comments and statement breaks, and expressions that make
one event build gigabytes. Each one is either refused by the spec's load-time checks, or run
through a Spark session built as a driver builds it — with canaries in the environment, in
the JVM's system properties, in Spark's settings and in a file — and no canary may appear in
what it returns or in the error it raises. The last section holds harmless expressions that
must load, so the corpus cannot pass by refusing everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec

CORPUS = Path(__file__).with_name("adversarial_expressions.txt")
PAYLOAD = {"deviceId": "string", "eventTime": "string", "temperature": "double", "tags": "string", "text": "string"}
CANARIES = {
    "env": "canary-env-5b1f0c",
    "system": "canary-system-8e2d41",
    "conf": "canary-conf-37aa90",
    "file": "canary-file-c6d2e7",
}
MUST_LOAD = ("built at run time from parts", "harmless")


def corpus(folder: Path) -> list[tuple[str, str]]:
    """(section, expression) per line, with {FILE} and {DIR} filled in."""
    out, section = [], ""
    for line in CORPUS.read_text().splitlines():
        if line.startswith(("# --", "# built")):
            section = line.strip("# -")
        if not line.strip() or line.startswith("#"):
            continue
        out.append((section, line.replace("{FILE}", str(folder / "canary.txt")).replace("{DIR}", str(folder))))
    return out


def spec_with(expr: str) -> dict:
    return {
        "name": "hostile",
        "version": 1,
        "payload": dict(PAYLOAD),
        "timestamp_by": "eventTime",
        "select": {"x": expr},
    }


def load_error(expr: str) -> str | None:
    try:
        parse_spec(spec_with(expr), origin="job.yaml")
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def canary_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("canary")
    (folder / "canary.txt").write_text(CANARIES["file"] + "\n")
    return folder


def test_the_corpus_holds_at_least_200_expressions(canary_folder):
    assert len(corpus(canary_folder)) >= 200


def test_every_refusal_names_the_field_and_says_what_to_do(canary_folder):
    refused = [(expr, load_error(expr)) for section, expr in corpus(canary_folder)]
    refused = [(expr, message) for expr, message in refused if message is not None]
    assert len(refused) >= 150
    for expr, message in refused:
        assert message.startswith("job.yaml: select.x") and " — " in message, (expr, message)
        for canary in CANARIES.values():
            assert canary not in message


def test_the_harmless_expressions_load(canary_folder):
    harmless = [expr for section, expr in corpus(canary_folder) if section.startswith(MUST_LOAD)]
    assert len(harmless) >= 30
    assert {expr: load_error(expr) for expr in harmless if load_error(expr)} == {}


@pytest.mark.parametrize(
    "expr, says",
    [
        ("'${env:TIDEGATE_CONTROL_DB}'", "'${' is not allowed"),
        ("(FROM text.`/etc/hostname`)", "subqueries are not allowed"),
        ("deviceId IN (FROM text.`/etc/hostname`)", "subqueries are not allowed"),
        ("EXISTS (FROM text.`/etc/hostname`)", "subqueries are not allowed"),
        ("size(sequence(1, 2000000000))", "sequence() would build more than 10,000"),
        ("repeat('x', 2000000000)", "repeat() would build more than 10,000"),
    ],
)
def test_the_probes_found_by_trying_are_refused_at_load_with_what_to_do(expr, says):
    message = load_error(expr)
    assert message is not None and says in message, message


RUNNER = r"""
import json, sys
from pyspark.sql import functions as F
from tidegate.errors import ConfigError
from tidegate.spark.expression_guard import check_with_spark
from tidegate.spark.session import build_session

spark = build_session("hostile", conf={"spark.tidegate.canary": sys.argv[1]}, quick_jvm=True)
rows = [("dev-1", "2026-03-01T12:00:00Z", 21.5, "a,b", "hello")]
events = spark.createDataFrame(rows, "deviceId string, eventTime string, temperature double, tags string, text string")
for line in sys.stdin:
    expr = json.loads(line)
    try:
        check_with_spark(spark, expr, "select.x")
        got = [str(r[0]) for r in events.select(F.expr(expr).cast("string")).collect()]
        print(json.dumps({"expr": expr, "ran": got}), flush=True)
    except ConfigError as exc:
        print(json.dumps({"expr": expr, "refused": str(exc)}), flush=True)
    except Exception as exc:
        print(json.dumps({"expr": expr, "failed": str(exc)[:2000]}), flush=True)
"""


@pytest.mark.spark
def test_what_loads_runs_in_a_drivers_session_and_no_canary_reaches_its_output(canary_folder, tmp_path):
    loaded = [expr for section, expr in corpus(canary_folder) if load_error(expr) is None]
    env = {
        **os.environ,
        "TIDEGATE_CANARY_SECRET": CANARIES["env"],
        "TIDEGATE_JVM_OPTIONS": f"-Dtidegate.canary.secret={CANARIES['system']}",
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, CANARIES["conf"]],
        input="".join(json.dumps(e) + "\n" for e in loaded),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["expr"] for r in results] == loaded
    ran = [r for r in results if "ran" in r]
    assert len(ran) >= 30  # the harmless ones, and the ones built from parts, really ran
    for result in results:
        for canary in CANARIES.values():
            assert canary not in json.dumps(result), result
    assert "${env:TIDEGATE_CANARY_SECRET}" in {v for r in ran for v in r["ran"]}  # text, not substituted


@pytest.mark.spark
def test_a_drivers_session_keeps_substitution_and_sql_on_files_off_whatever_it_is_given(spark, tmp_path):
    from tidegate.spark.session import build_session

    (tmp_path / "secret.txt").write_text("file-contents\n")
    session = build_session(
        "tidegate-tests", conf={"spark.sql.variable.substitute": "true", "spark.sql.runSQLOnFiles": "true"}
    )
    assert session.conf.get("spark.sql.variable.substitute") == "false"
    assert session.conf.get("spark.sql.runSQLOnFiles") == "false"
    assert session.sql("SELECT '${spark.app.name}' AS v").collect()[0].v == "${spark.app.name}"
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND|cannot be found"):
        session.sql(f"SELECT * FROM text.`{tmp_path / 'secret.txt'}`").collect()


@pytest.mark.spark
@pytest.mark.parametrize(
    "expr, says",
    [
        ("(FROM text.`/etc/hostname`)", "subquery"),
        ("deviceId IN (SELECT 1)", "subquery"),
        ("EXISTS (SELECT 1)", "subquery"),
        ("deviceId = (TABLE t)", "subquery"),  # a grammar without Spark's TABLE form reads an alias here
        ("reflect('java.lang.System', 'getenv', 'PATH')", "reflect() is not allowed"),
        ("system.builtin.upper(deviceId)", "qualified function name"),
        ("count(deviceId)", "aggregate function"),
    ],
)
def test_sparks_own_parser_refuses_what_the_load_check_is_there_to_catch(spark, expr, says):
    from tidegate.spark.expression_guard import check_with_spark

    with pytest.raises(ConfigError, match=re.escape(says)):
        check_with_spark(spark, expr, "select.x")


@pytest.mark.spark
def test_an_engine_refuses_a_spec_whose_expression_slipped_past_loading(spark, tmp_path):
    """A spec is only ever built by loading it; should one be built otherwise, the engine still
    holds it to Spark's parser before it plans anything."""
    from dataclasses import replace

    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.pipeline.engine import Engine

    spec = parse_spec(spec_with("upper(deviceId)"))
    smuggled = replace(spec, select=(("x", "(FROM text.`/etc/hostname`)"),))
    with pytest.raises(ConfigError, match="select.x: Spark reads a subquery"):
        Engine(spark, smuggled, JobPaths(tmp_path), [0])
