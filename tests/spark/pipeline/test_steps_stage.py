"""Steps through the engine: the steps transcript in one batch, in random micro-batch cuts and
across a new driver half way (a restart from the checkpoint), all with the same rows — a
step's reference join among them, over the transcript's snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from pyspark.sql import Row
from pyspark.sql import functions as F

from support import TRANSCRIPTS
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "steps_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000
PAYLOADS = {
    "readings": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "orders": {"kind": "string", "orderId": "string", "eventTime": "string"},
}
CASES = {c["name"]: c for c in GOLDEN["cases"]}


SNAPSHOT_HEADERS = {"limits": "deviceId,max_temperature", "sites": "deviceId,site"}


@pytest.fixture(scope="module", autouse=True)
def snapshots(tmp_path_factory):
    """The transcript's reference snapshots, each in its valid_from folder, under one of the
    reference folders; a step's ``reference.path`` names its table."""
    root = tmp_path_factory.mktemp("reference")
    for table, by_time in GOLDEN["snapshots"].items():
        for valid_from, rows in by_time.items():
            folder = root / table / snapshot_folder_name(parse_time_us(f"{GOLDEN['date']}T{valid_from}:00Z"))
            folder.mkdir(parents=True)
            lines = [SNAPSHOT_HEADERS[table], *(",".join(str(v) for v in row) for row in rows)]
            (folder / f"{table}.csv").write_text("\n".join(lines) + "\n")
    before = os.environ.get("TIDEGATE_REFERENCE_DIRS")
    os.environ["TIDEGATE_REFERENCE_DIRS"] = str(root)
    SNAPSHOTS["root"] = root
    yield root
    if before is None:
        os.environ.pop("TIDEGATE_REFERENCE_DIRS")
    else:
        os.environ["TIDEGATE_REFERENCE_DIRS"] = before


SNAPSHOTS: dict[str, Path] = {}


def case_spec(case: dict):
    steps = [
        s | {"reference": s["reference"] | {"path": str(SNAPSHOTS["root"] / s["reference"]["path"])}}
        if "reference" in s
        else s
        for s in case["steps"]
    ]
    return parse_spec(
        {
            "name": case["name"].replace("_", "-"),
            "version": 1,
            "payload": PAYLOADS[case["events"]],
            "timestamp_by": "eventTime",
            "steps": steps,
        }
        | {k: case[k] for k in ("inputs", "sinks") if k in case}
    )


def case_rows(case: dict) -> list[tuple]:
    """The case's events as one log partition holds them, on time, in the transcript's order."""
    rows = []
    for offset, (time, a, b) in enumerate(GOLDEN[case["events"]]):
        at = f"{GOLDEN['date']}T{time}:00Z"
        payload = {"deviceId": a, "temperature": b} if case["events"] == "readings" else {"kind": a, "orderId": b}
        rows.append((0, offset, parse_time_us(at), None, json.dumps(payload | {"eventTime": at})))
    return rows


def cuts(rows: list, seed: int | None) -> list[tuple[list, int]]:
    """(rows, clock) per micro-batch: one batch closed a day later, or the log cut in 2–5 random
    places, each batch closed at its last arrival, then an empty batch a day later."""
    end = rows[-1][2] + DAY
    if seed is None:
        return [(rows, end)]
    rng = np.random.default_rng(seed)
    at = sorted(rng.choice(np.arange(1, len(rows)), int(rng.integers(2, 6)), replace=False))
    batches = [rows[a:b] for a, b in zip([0, *at], [*at, len(rows)], strict=True)]
    return [(b, b[-1][2]) for b in batches] + [([], end)]


def run(
    spark, root, spec, batches, restart: bool = False, emit_after_us: int | None = None, output: str = "output"
) -> list[list]:
    """The engine over ``batches``, a new driver half way when ``restart``; the rows of
    ``output`` (the job's own, or a named one) ordered, times as HH:MM."""
    make = lambda: Engine(spark, spec, JobPaths(root), [0], emit_after_us=emit_after_us)  # noqa: E731
    engine = make()
    for batch_id, (batch, clock) in enumerate(batches):
        if restart and batch_id == len(batches) // 2:
            engine = make()  # a new driver resumes from the last committed state version
        engine.process_batch(raw_batch(spark, batch), batch_id, clock)
    return output_rows(spark, engine.paths.output_of(output))


def raw_batch(spark, batch: list):
    return spark.createDataFrame(batch, RAW).select(
        "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
    )


def output_rows(spark, folder) -> list[list]:
    """An output's rows ordered: a window row as [start, end, columns…], any other as [its
    system time, columns…] (times — and a reference snapshot's — as HH:MM, a table's row as a
    mapping; not its position or the layout's columns)."""
    out = spark.read.parquet(str(folder))
    times = ["window_start", "window_end"] if "window_end" in out.columns else ["system_time"]
    skip = {*times, "partition", "offset", "right_partition", "right_offset", "batch_id", "date", "hour"}
    snapshot = {f.name for f in out.schema.fields if f.name.startswith("reference_snapshot")}
    values = [F.unix_micros(c).alias(c) if c in snapshot else F.col(c) for c in out.columns if c not in skip]
    rows = out.select(*[F.unix_micros(t) for t in times], *values)
    names = rows.columns
    return sorted(
        [
            *[format_time_us(t)[11:16] for t in r[: len(times)]],
            *[_value(v, names[len(times) + i] in snapshot) for i, v in enumerate(r[len(times) :])],
        ]
        for r in rows.collect()
    )


def _value(v, snapshot: bool):
    if snapshot:
        return None if v is None else format_time_us(v)[11:16]
    if isinstance(v, Row):
        return {k: _value(x, False) for k, x in v.asDict().items()}
    return int(v) if isinstance(v, float) else v


@pytest.mark.parametrize("name", list(CASES))
def test_the_steps_transcript_in_one_batch(spark, tmp_path, name):
    case = CASES[name]
    assert run(spark, tmp_path, case_spec(case), cuts(case_rows(case), None)) == case["expect"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, case in CASES.items() if "outputs" not in case])
def test_random_micro_batch_cuts_and_a_restart_give_the_one_batch_rows(spark, tmp_path, name):
    """Two random cuts (seeds 1, 2), the second with a new driver half way. A case with named
    outputs runs the same cuts in the test that checks every output too."""
    case = CASES[name]
    for seed in (1, 2):
        got = run(spark, tmp_path / str(seed), case_spec(case), cuts(case_rows(case), seed), restart=seed == 2)
        assert got == case["expect"], f"seed {seed}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "analytic_filter_window", "two_windows_of_one_input", "per_event_over_window", "lag_over_window",
        "reference_over_window",
    ],
)  # fmt: skip
def test_with_substreams_the_first_step_waits_per_key_and_later_steps_for_the_job(spark, tmp_path, name):
    """``over: deviceId`` with LAG (or the first step's window) partitioned by it: the first step
    emits each device's rows on its own watermark, the later steps — a window over its rows or
    over the input, a per-event step — close on the job's; the rows are the same."""
    case = CASES[name]
    spec = parse_spec(case_spec(case).to_dict() | {"over": "deviceId"})
    for seed in (1, 2):
        root = tmp_path / str(seed)
        got = run(spark, root, spec, cuts(case_rows(case), seed), restart=seed == 2)
        assert got == case["expect"], f"seed {seed}"
        for output, expect in case.get("outputs", {}).items():
            assert output_rows(spark, JobPaths(root).output_of(output)) == expect, f"{output}, seed {seed}"


# -- two outputs from one chain: a pass-through archive beside a windowed alert -------------
OUTPUTS = {name: case for name, case in CASES.items() if "outputs" in case}


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_each_named_output_of_the_transcript_in_one_batch(spark, tmp_path, name):
    case = OUTPUTS[name]
    for output, expect in case["outputs"].items():
        assert run(spark, tmp_path / output, case_spec(case), cuts(case_rows(case), None), output=output) == expect


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_random_cuts_and_a_restart_give_every_output_the_one_batch_rows(spark, tmp_path, name):
    """Seeds 1 and 2, the second with a new driver half way: the job's own output and each
    named one are the rows of the one batch (the batch path)."""
    case = OUTPUTS[name]
    for seed in (1, 2):
        root = tmp_path / str(seed)
        assert run(spark, root, case_spec(case), cuts(case_rows(case), seed), restart=seed == 2) == case["expect"]
        for output, expect in case["outputs"].items():
            assert output_rows(spark, JobPaths(root).output_of(output)) == expect, f"{output}, seed {seed}"


def test_every_output_is_cut_at_the_first_output_time(spark, tmp_path):
    """Started at 13:00: the alert step rebuilds its hour from the earlier rows, which the
    archive does not write; each output holds only rows timed after 13:00."""
    case = OUTPUTS["archive_and_alerts"]
    start = parse_time_us(f"{GOLDEN['date']}T13:00:00Z")
    got = run(spark, tmp_path, case_spec(case), cuts(case_rows(case), None), emit_after_us=start)
    assert got == [r for r in case["expect"] if r[1] > "13:00"]
    assert output_rows(spark, JobPaths(tmp_path).output_of("archive")) == [["13:01", "d1", 60]]


def test_a_batch_run_again_writes_each_output_once(spark, tmp_path):
    """A batch re-run after a crash before Spark recorded it: every output already holds its
    folders, which the re-run finds and keeps — no output doubles."""
    case = OUTPUTS["archive_and_alerts"]
    spec, ((batch, clock),) = case_spec(case), cuts(case_rows(case), None)
    for _ in range(2):
        engine = Engine(spark, spec, JobPaths(tmp_path), [0])
        engine.process_batch(raw_batch(spark, batch), 0, clock)
    assert output_rows(spark, engine.paths.output) == case["expect"]
    assert output_rows(spark, engine.paths.output_of("archive")) == case["outputs"]["archive"]
    hours = sorted(
        p.relative_to(engine.paths.output_of("archive")).parts[:3]
        for p in engine.paths.output_of("archive").glob("date=*/hour=*/batch-*")
    )
    assert hours == [("date=2026-01-01", "hour=12", "batch-0"), ("date=2026-01-01", "hour=13", "batch-0")]


@pytest.mark.parametrize(
    "name, output, expect",
    [
        # the busy rows timed after 13:00, and the hour they fall in: rebuilt from the minutes before
        ("per_event_over_window", "output", [["13:10", "d1", 0]]),
        ("per_event_over_window", "hours", [["13:00", "14:00", 1, 0]]),
        # both windows of the input rebuild what they need from the readings before 13:00
        ("two_windows_of_one_input", "output", [["13:00", "14:00", "d1", 1, 60]]),
        ("two_windows_of_one_input", "tens", [["13:00", "13:10", "d1", 1]]),
        ("two_filters_of_one_input", "output", [["13:01", "d1", 60]]),
        ("two_filters_of_one_input", "cold", []),
        # a reference join of the minutes after 13:00, by their ends, and the hour they fall in
        ("reference_over_window", "output", [["13:10", "d1", 60, 50, "12:50"]]),
        ("reference_over_window", "hours", [["13:00", "14:00", 1]]),
        # a join of two steps: the rows after 13:00, whose rows before it are read back
        ("join_of_two_windows", "output", [["14:00", "d1", 60, 10]]),
        ("left_join_of_window_and_events", "output", [["13:10", "d1", 60, 47], ["13:10", "d1", 60, 60]]),
    ],
)
def test_a_start_at_13_00_writes_each_later_steps_rows_after_it(spark, tmp_path, name, output, expect):
    """Every output of the new step forms cut at the first output time by its rows' time — a
    per-event step's rows by their window's end or their event's time — whatever step it holds."""
    case = CASES[name]
    start = parse_time_us(f"{GOLDEN['date']}T13:00:00Z")
    run(spark, tmp_path, case_spec(case), cuts(case_rows(case), None), emit_after_us=start)
    folder = JobPaths(tmp_path).output_of(output)
    assert (output_rows(spark, folder) if any(folder.glob("**/*.parquet")) else []) == expect
