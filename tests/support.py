"""Shared test helpers: the golden transcripts, random streams with disorder, a clock the test moves."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.policy import TimePolicy

TRANSCRIPTS = Path(__file__).parent / "transcripts"


class Clock:
    """A wall clock in seconds that only the test moves (``advance``)."""

    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


@dataclass(frozen=True)
class GoldenVariant:
    name: str
    policy: TimePolicy
    over: str | None
    expect: list[list[str]]  # action, reason, system HH:MM, watermark HH:MM


@dataclass(frozen=True)
class Golden:
    date: str
    events: list[tuple[str, str, str]]  # event time, arrival time, device
    variants: list[GoldenVariant]

    def event_us(self) -> np.ndarray:
        return np.array([parse_time_us(f"{self.date}T{e}:00Z") for e, _, _ in self.events])

    def arrival_us(self) -> np.ndarray:
        return np.array([parse_time_us(f"{self.date}T{a}:00Z") for _, a, _ in self.events])

    def devices(self) -> np.ndarray:
        return np.array([d for _, _, d in self.events], dtype=object)


def load_golden(name: str = "spec_golden.yaml") -> Golden:
    raw = yaml.safe_load((TRANSCRIPTS / name).read_text())
    variants = [
        GoldenVariant(
            v["name"],
            TimePolicy.from_durations(
                out_of_order=v["args"]["out_of_order"], late=v["args"]["late"], early=v["args"]["early"]
            ),
            v["args"].get("over"),
            v["expect"],
        )
        for v in raw["variants"]
    ]
    return Golden(raw["date"], [tuple(e) for e in raw["events"]], variants)


@dataclass(frozen=True)
class RandomStream:
    """Events of several partitions, each in arrival order, with skew, lateness and early events."""

    partition: np.ndarray
    event_us: np.ndarray
    arrival_us: np.ndarray
    key: np.ndarray
    value: np.ndarray

    def of_partition(self, p: int) -> np.ndarray:
        return np.flatnonzero(self.partition == p)


SESSIONS_GOLDEN = yaml.safe_load((TRANSCRIPTS / "sessions_golden.yaml").read_text())


def session_times_us(case: dict) -> list[int]:
    """A sessions transcript case's event times, µs: "HH:MM", or {from, to, every} (minutes,
    both ends in), on the transcript's date."""
    day = SESSIONS_GOLDEN["date"]
    out: list[int] = []
    for item in case["events"]:
        if isinstance(item, str):
            out.append(parse_time_us(f"{day}T{item}:00Z"))
            continue
        lo, hi = (parse_time_us(f"{day}T{item[k]}:00Z") for k in ("from", "to"))
        out.extend(range(lo, hi + 1, item["every"] * 60_000_000))
    return out


def random_stream(seed: int, n: int = 2000, partitions: int = 3, keys: int = 7, idle: int = 0) -> RandomStream:
    """Arrivals tick forward per partition; event time = arrival − delay + device skew, with
    a share of events later than minutes and earlier than 5 minutes. ``idle`` partitions get none."""
    rng = np.random.default_rng(seed)
    base = parse_time_us("2026-01-01T00:00:00Z")
    active = max(1, partitions - idle)
    part = rng.integers(0, active, n)
    key = np.array([f"k{k}" for k in rng.integers(0, keys, n)], dtype=object)
    arrival = np.empty(n, dtype=np.int64)
    for p in range(active):
        idx = np.flatnonzero(part == p)
        arrival[idx] = base + np.cumsum(rng.integers(0, 3_000_000, len(idx)))
    skew = {f"k{k}": int(rng.integers(-20, 20)) * 1_000_000 for k in range(keys)}
    delay = rng.exponential(4_000_000, n).astype(np.int64)
    late = rng.random(n) < 0.05
    delay[late] += rng.integers(60, 900, late.sum()) * 1_000_000
    early = rng.random(n) < 0.03
    delay[early] = -rng.integers(301, 600, early.sum()) * 1_000_000
    event = arrival - delay + np.array([skew[k] for k in key])
    return RandomStream(part, event, arrival, key, rng.integers(0, 100, n))


JOIN_ROW_ORDER = ["system_time", "partition", "offset", "right_partition", "right_offset"]  # a join's output order


def run_join_transcript(spark, make_engine, batches, raw_schema: str) -> tuple[list, list]:
    """The join golden transcript through engines: ``batches`` of (raw rows, clock) in turn, a
    new driver (``make_engine()``) half way through when there are more than two. Returns
    ([left id, right id, HH:MM] per output row in output order, the engines' reports)."""
    from pyspark.sql import functions as F

    from tidegate.eventtime.durations import format_time_us

    engine, reports = make_engine(), []
    for batch_id, (batch, clock) in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            reports += engine.reports
            engine = make_engine()  # a new driver
        raw = spark.createDataFrame(batch, raw_schema).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, clock)
    out = spark.read.parquet(str(engine.paths.output)).withColumn("out_us", F.unix_micros("system_time"))
    rows = [[r.left_id, r.right_id, format_time_us(r.out_us)[11:16]] for r in out.orderBy(*JOIN_ROW_ORDER).collect()]
    return rows, reports + engine.reports


def join_transcript_cuts(rows: list, golden: dict, random_cuts: int = 0) -> dict[str, list]:
    """The join golden transcript's rows as micro-batches of (rows, clock): in one batch closed a
    day later; in the transcript's batches, each closed at its last arrival (every event on time:
    the job watermark is the arrival clock); and ``random_cuts`` random cuts of the log's order."""
    by_id = {__import__("json").loads(r[4])["id"]: r for r in rows}
    end = max(r[2] for r in rows) + 86_400_000_000
    cuts = {"whole": [[r for r in rows]], "transcript": [[by_id[i] for i in b["events"]] for b in golden["batches"]]}
    ordered = sorted(rows, key=lambda r: (r[2], r[0]))
    for seed in range(1, random_cuts + 1):
        at = sorted(np.random.default_rng(seed).choice(np.arange(1, len(ordered)), 3, replace=False))
        cuts[f"cut{seed}"] = [ordered[a:b] for a, b in zip([0, *at], [*at, len(ordered)], strict=True)]
    return {
        name: [(b, max(r[2] for r in b)) for b in batches] + ([([], end)] if name != "whole" else [])
        for name, batches in cuts.items()
    } | {"whole": [(rows, end)]}


def assert_stream_is_the_batch_path_and_a_replay_its_tail(
    spark,
    spec,
    where,
    root: Path,
    replay_at_us: int,
    time_column: str = "system_time",
    min_after: int = 20,
    named: dict[str, str] | None = None,
):
    """The stream's output under ``root/run`` equals the batch path over ``where``; a fresh
    lineage starting at ``replay_at_us`` reads back the look-back and emits exactly the batch
    path's rows after it (by ``time_column``, at least ``min_after`` of them). ``named``: each
    named output with its time column, held to the same. Returns the batch path's output."""
    from pyspark.sql import functions as F

    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.pipeline.runner import run_batch
    from tidegate.spark.tools.compare import compare

    batch = run_batch(spark, spec, where, root / "batch").paths
    replay = run_batch(spark, spec, where, root / "replay", from_arrival_us=replay_at_us - spec.lookback_us,
                       emit_after_us=replay_at_us).paths  # fmt: skip
    stream = JobPaths(root / "run")
    for name, column in [(None, time_column), *(named or {}).items()]:
        reference = spark.read.parquet(str(batch.output_of(name)))
        diff = compare(reference, spark.read.parquet(str(stream.output_of(name))))
        assert diff.equal, (name, diff)
        after = reference.where(F.unix_micros(column) > replay_at_us)
        assert after.count() > min_after, name
        diff = compare(after, spark.read.parquet(str(replay.output_of(name))))
        assert diff.equal, (name, diff)
    return spark.read.parquet(str(batch.output))


# -- a test-only analytic function, registered through the registry alone -------------------
SEEN_CALL = "SEEN() OVER (PARTITION BY device LIMIT DURATION(minute, 10))"
SEEN_GOLDEN = [
    1,
    2,
    3,
    2,
    1,
    1,
    1,
    1,
    2,
    2,
]  # analytics_golden.yaml's events, in row order (the 12:20 tie: the earlier arrival first)


def seen_function():
    """``SEEN() LIMIT DURATION d WHEN c``: how many events where ``c`` holds lie within ``d``
    at or before this one, itself included. Defined in a function, so that Spark's workers
    get the class with the task (by value) rather than import it."""
    from dataclasses import dataclass as frozen_dataclass

    from tidegate.errors import ConfigError
    from tidegate.eventtime.analytic_functions import AnalyticFunction, Parsed

    @frozen_dataclass(frozen=True)
    class Seen(AnalyticFunction):
        name = "SEEN"
        form = "SEEN() OVER (LIMIT DURATION(unit, n))"
        result = "bigint"

        limit_duration_us: int
        kind: str = "seen"

        @classmethod
        def parse(cls, call):
            if call.args or call.limit_us is None:
                raise ConfigError(
                    f"{call.where}: SEEN takes no arguments and a LIMIT DURATION", "write SEEN() OVER (...)"
                )
            return Parsed(cls(call.limit_us))

        @property
        def span_us(self):
            return self.limit_duration_us

        @property
        def limit_us(self):
            return self.limit_duration_us

        def text_args(self, expression, default, written):
            return []

        def results(self, system_us, candidates, values, defaults):
            upto = np.searchsorted(candidates, np.arange(len(system_us)), side="right")
            start = np.searchsorted(system_us[candidates], system_us - self.limit_duration_us, side="left")
            return np.maximum(upto - start, 0).astype(np.int64)

        def history_start_us(self, now_us):
            return now_us - self.limit_duration_us

    return Seen


def at_once(call, n: int) -> list:
    """``call()`` in ``n`` threads released together: what each returned or raised, in the
    order they finished."""
    import threading

    barrier, outcomes = threading.Barrier(n), []

    def one() -> None:
        barrier.wait()
        try:
            outcomes.append(call())
        except Exception as exc:  # noqa: BLE001 — the caller judges it
            outcomes.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


@contextmanager
def running_cluster(cluster):
    """``cluster`` (a StandaloneCluster) with its master up and its workers registering (a
    driver may start meanwhile: it waits for executors); stopped by process group when the
    block ends, pass or fail, and checked to leave no process behind."""
    from tidegate.spark.tools.cluster.processes import group_members

    cluster.start(wait=False)
    started = cluster.pids
    try:
        yield cluster
    finally:
        cluster.stop()
        left = {pid: group_members(pid) for pid in started}
        assert not any(left.values()), f"processes left behind, by daemon process group: {left}"
        for pid in started:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)  # exited and reaped


def inventory_database(folder: Path, columns: str, rows: str, *, captures: bool = True) -> dict[str, str]:
    """A SQLite table ``devices`` (``columns``, ``rows`` as SQL) in ``folder``, reached through the
    reference connection ``inventory`` of a config file there (and, with ``captures``, listed for
    capture to ``reference/devices``); the environment that config needs."""
    import sqlalchemy as sa

    url = f"sqlite:///{folder / 'inventory.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE devices ({columns})"))
        conn.execute(sa.text(f"INSERT INTO devices VALUES {rows}"))
    engine.dispose()
    config = "reference_connections:\n  inventory: {url_env: INVENTORY_URL}\n"
    if captures:
        config += "reference_captures:\n  - {connection: inventory, table: devices, to: reference/devices}\n"
    (folder / "tidegate.yaml").write_text(config)
    env = {"TIDEGATE_CONFIG": str(folder / "tidegate.yaml"), "INVENTORY_URL": url}
    if captures:
        env |= {"TIDEGATE_HOME": str(folder / "var"), "TIDEGATE_REFERENCE_DIRS": str(folder / "reference")}
    return env


def wait_for(condition, timeout_s: float, what: str, every_s: float = 0.2):
    """``condition()``'s first true value, asked every ``every_s``; AssertionError naming
    ``what`` when none comes within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"{what}: not after {timeout_s} s")


def put_request(service_folder: Path, request_id: str, content: str) -> None:
    """A request file placed in a check service's queue whole, as its clients place theirs
    (written aside, then renamed): a service polling the queue never reads it half-written."""
    scratch = service_folder / "requests" / f".{request_id}.tmp"
    scratch.write_text(content)
    scratch.rename(scratch.with_name(f"{request_id}.json"))


RAW_EVENTS = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"  # raw rows, arrival in µs


def engine_output(spark, spec, root: Path, batches: list, *columns) -> list[tuple]:
    """``batches`` of raw rows (:data:`RAW_EVENTS`) through one engine, each closed 1,000 s
    after its last arrival; the output's ``columns`` (names or Spark columns), sorted."""
    from pyspark.sql import functions as F

    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.pipeline.engine import Engine

    engine = Engine(spark, spec, JobPaths(root), [0])
    for batch_id, batch in enumerate(batches):
        df = spark.createDataFrame(batch, RAW_EVENTS).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(df, batch_id, max(r[2] for r in batch) + 10**9)
    out = spark.read.parquet(str(engine.paths.output))
    return sorted(tuple(r) for r in out.select(*columns).collect())


def checked_by_records_and_fresh(spark, spec, stream_output: Path, by_records: Path, fresh: Path, root: Path):
    """The completeness check of the stream's output against the batch path given the lineage's
    reference records, then against a fresh batch path (every snapshot on time), in a copy of
    the committed GX project under ``root``: (the first result, the second)."""
    import shutil

    from tidegate.validation import check_completeness

    project = root / "expectations"
    shutil.copytree(Path(__file__).resolve().parents[1] / "expectations", project,
                    ignore=shutil.ignore_patterns("uncommitted"))  # fmt: skip
    stream, read = spark.read.parquet(str(stream_output)), spark.read.parquet
    return tuple(
        check_completeness(
            spark, spec, stream, read(str(batch)), None, label="test", project_dir=project, data_docs=False
        )  # fmt: skip
        for batch in (by_records, fresh)
    )
