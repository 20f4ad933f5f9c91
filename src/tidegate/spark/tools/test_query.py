"""``tidegate query test``: a job spec over a sample file, through the same engine code path.

A sample is JSON lines (each line one payload object) or CSV (each row one payload; CSV
values are text). Two optional reserved fields give the input position: ``_partition``
(default 0) and ``_arrival_time`` (default: the event time, i.e. on time and in order).
A job whose inputs read their own logs needs a third on every row: ``_input``, the input whose
log the row is in (``_partition`` is then a partition of that log). ``_headers``, an object of
names and text values (or null), gives the row's Kafka record headers to a job that reads
``headers`` (without it, the empty map); it stays in the payload, where no field can read it
(a leading ``_`` is the engine's). The end of the sample closes every window, so a test query
shows all its results.
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.windows import MAX_WINDOW_US
from tidegate.inputs.log_set import InputLayout
from tidegate.jobspec.fields import HEADERS
from tidegate.jobspec.spec_expressions import reads_headers
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.spark.output import read_output

PARTITION_FIELD = "_partition"
INPUT_FIELD = "_input"  # inputs that read their own logs: which input's log the row is in
HEADERS_FIELD = "_headers"  # the row's record headers, for a job that reads headers
ARRIVAL_FIELD = "_arrival_time"

SampleRow = tuple[int, int, str | None, str]  # (partition, arrival µs, key, payload JSON)
# with timestamp_by per input, the partition as (input, its partition) — a line that is not a
# JSON object keeps partition 0
InputSampleRow = tuple[int | tuple[str, int], int, str | None, str]


@overload
def read_sample(path: Path, timestamp_by: str | None) -> list[SampleRow]: ...
@overload
def read_sample(path: Path, timestamp_by: Mapping[str, str | None]) -> list[InputSampleRow]: ...
def read_sample(path: Path, timestamp_by: str | Mapping[str, str | None] | None) -> Sequence[InputSampleRow]:
    """(partition, arrival µs, key, payload JSON) per sample row, in file order. With
    ``timestamp_by`` per input (inputs that read their own logs), each row names its input in
    ``_input`` and the partition is the input's own: see :func:`job_rows`."""
    if not path.exists():
        raise ConfigError(f"sample file {path} does not exist", "give a .jsonl or .csv file")
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as f:
            records: list = list(csv.DictReader(f))
    elif path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        records = []
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                records.append(line)  # kept as is: the engine quarantines it, as it would in production
    else:
        raise ConfigError(f"sample file {path} is neither .jsonl nor .csv", "convert it to JSON lines or CSV")
    rows: list[InputSampleRow] = []
    previous = 0
    for n, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            if isinstance(timestamp_by, Mapping):
                raise ConfigError(
                    f"{path} row {n} is not a JSON object, so it cannot name the input it is read by",
                    f"make it an object with {INPUT_FIELD}: one of {', '.join(timestamp_by)} (a line that is not JSON "
                    "is quarantined only in a job with one input, where every row is the same input's)",
                )
            rows.append((0, previous, None, str(rec)))  # the engine quarantines it, as it would in production
            continue
        rec = dict(rec)
        number = int(rec.pop(PARTITION_FIELD, 0) or 0)
        partition: int | tuple[str, int] = number
        arrival_text = rec.pop(ARRIVAL_FIELD, None)
        time_field = timestamp_by
        if isinstance(timestamp_by, Mapping):
            name = rec.pop(INPUT_FIELD, None)
            if name not in timestamp_by:
                raise ConfigError(f"{path} row {n}: {INPUT_FIELD} is {name!r}",
                                  f"name the input the row is read by: one of {', '.join(timestamp_by)}")  # fmt: skip
            partition = (name, number)
            time_field = timestamp_by[name]
        if arrival_text is None and time_field and isinstance(rec.get(time_field), str):
            try:
                arrival_text = rec[time_field]
                arrival = parse_time_us(arrival_text)
            except ConfigError:
                arrival = previous  # an unreadable event time: quarantined by the engine
        elif arrival_text is None:
            arrival = previous
        else:
            arrival = parse_time_us(arrival_text, field=f"{path} row {n} {ARRIVAL_FIELD}")
        previous = max(previous, arrival)
        rows.append((partition, arrival, None, json.dumps(rec)))
    return rows


def job_rows(rows: list, names: tuple[str, ...]) -> tuple[list, InputLayout]:
    """Rows whose partition is (input, its partition), numbered as the job numbers them: each
    input's partitions after the inputs' before it (:mod:`tidegate.inputs.log_set`)."""
    counts = tuple(max([q + 1 for (name, q), *_ in rows if name == n], default=1) for n in names)
    layout = InputLayout(names, counts)
    base = dict(zip(names, layout.bases, strict=True))  # a base per input
    return [(base[name] + q, *rest) for (name, q), *rest in rows], layout


def as_logged(rows: list[tuple[int, int, str | None, str]]) -> list[tuple[int, int, int, str | None, str]]:
    """(partition, offset, arrival µs, key, payload) per sample row, as a log would hold them:
    each partition in arrival order (file order among equal arrivals), offsets counting from 0
    in that order — so a row whose ``_arrival_time`` is earlier than a row above it still
    comes first, as the time policy requires."""
    ordered = sorted(enumerate(rows), key=lambda ir: (ir[1][0], ir[1][1], ir[0]))
    next_offset: dict[int, int] = {}
    out = []
    for _, (partition, arrival, key, payload) in ordered:
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        out.append((partition, offset, arrival, key, payload))
    return out


@dataclass(frozen=True)
class SampleInput:
    """A sample file as the job's log would hold it: the logged rows (partition, offset,
    arrival µs, key, payload), the job's partitions (and input layout, for a join of own logs),
    and a closing clock far enough ahead that every window of the sample is final."""

    logged: list[tuple[int, int, int, str | None, str]]
    partitions: list[int]
    layout: InputLayout | None
    end_clock_us: int


def sample_input(spec, sample: Path) -> SampleInput:
    """``sample`` read for ``spec`` (:func:`read_sample`, per input for a join of own logs)."""
    layout = None
    if spec.own_logs:
        timestamp_by: dict[str, str | None] = {}
        for i in spec.inputs:
            assert i.own is not None  # when one input reads its own log, every input does (parse_inputs)
            timestamp_by[i.name] = i.own.timestamp_by
        rows, layout = job_rows(read_sample(sample, timestamp_by), tuple(i.name for i in spec.inputs))
    else:
        rows = read_sample(sample, spec.timestamp_by)
    if not rows:
        raise ConfigError(f"sample file {sample} has no rows", "add at least one event")
    partitions = list(range(layout.partitions)) if layout is not None else sorted({p for p, *_ in rows})
    end_clock = max(a for _, a, _, _ in rows) + spec.lookback_us + MAX_WINDOW_US
    return SampleInput(as_logged(rows), partitions, layout, end_clock)


def logged_frame(spark, logged: list, headers: bool = False):
    """Logged rows (:class:`SampleInput`) as the frame a micro-batch of the source gives; with
    ``headers`` (the job reads them), as one read with ``includeHeaders``: each row's ``_headers``."""
    frame = spark.createDataFrame(
        logged, "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
    ).select("partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
    if not headers:
        return frame
    given = F.from_json(F.get_json_object("payload", f"$.{HEADERS_FIELD}"), "map<string,string>")
    return frame.withColumn(HEADERS, F.coalesce(given, F.create_map().cast("map<string,string>")))


def run_test_query(spec_path: Path, sample: Path, work_dir: Path | None, limit: int) -> int:
    from tidegate.jobspec import load_spec
    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.pipeline.engine import Engine
    from tidegate.spark.session import build_session

    spec = load_spec(spec_path)
    given = sample_input(spec, sample)
    spark = build_session("tidegate-test-query")
    raw = logged_frame(spark, given.logged, reads_headers(spec))
    root = Path(work_dir or tempfile.mkdtemp(prefix="tidegate-test-query-"))
    engine = Engine(spark, spec, JobPaths(root), given.partitions, audit=True, layout=given.layout)
    end_clock = given.end_clock_us  # the end of the sample: every window final
    report = engine.process_batch(raw, 0, end_clock)
    out = read_output(spark, engine.paths.output)
    audit = read_output(spark, engine.paths.audit)
    print(f"== output ({report.rows_emitted} rows) ==")
    if out is not None:
        print(_shown(out, spec.emitted, limit))
    for name, step in spec.sinks.outputs:  # each named output, beside the job's own
        named = read_output(spark, engine.paths.output_of(name))
        print(f"\n== output {name}, step {step} ({0 if named is None else named.count()} rows) ==")
        if named is not None:
            print(_shown(named, spec.output_view(name), limit))
    print("\n== per-event outcomes ==")
    if audit is not None:
        print(audit.drop(*LAYOUT_COLUMNS).orderBy("partition", "offset").limit(limit).toPandas().to_string(index=False))
    if report.quarantined:
        q = read_output(spark, engine.paths.quarantine).orderBy("offset")
        print(f"\n== quarantine ({report.quarantined} rows) ==")
        print(q.drop(*LAYOUT_COLUMNS).limit(limit).toPandas().to_string(index=False))
    print(f"\nrun kept in {root} (closing clock {format_time_us(end_clock)})")
    return 0


def _shown(frame, view, limit: int) -> str:
    """An output's first ``limit`` rows as text, in an order that is the same on every run."""
    frame = frame.drop(*LAYOUT_COLUMNS)
    first = _order(view)
    # rows of one window (or one position) next by every other column Spark can sort on
    # quoted: a column's name from the spec is a name, not a path (a dot in it selects no field)
    rest = [
        F.col("`" + f.name.replace("`", "``") + "`")
        for f in frame.schema.fields
        if f.name not in first and _sortable(f.dataType)
    ]
    return frame.orderBy(*first, *rest).limit(limit).toPandas().to_string(index=False)


def _sortable(t: DataType) -> bool:
    """Whether Spark can order rows by a column of type ``t``: not a map, nor anything holding one."""
    if isinstance(t, MapType):
        return False
    if isinstance(t, ArrayType):
        return _sortable(t.elementType)
    if isinstance(t, StructType):
        return all(_sortable(f.dataType) for f in t.fields)
    return True


def _order(view) -> list[str]:
    """How an output's rows are shown: by window end, a join's by its output order, else by position."""
    return (
        ["window_end"]
        if view.window is not None
        else ["system_time", "partition", "offset", "right_partition", "right_offset"]
        if view.join
        else ["partition", "offset"]
    )
