"""The Spark SQL step for tumbling and hopping windows is the core's ``step``, row for row.

Random system times (some before the epoch, to exercise floor division on negatives; half of
them on the minute grid, so exactly on window edges), substream units (NULL among them),
per-key frontiers for some units only (on the grid too, in some cases), and a cut for windows
already output by an earlier lineage; windows with both edge conventions.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter

import numpy as np
import pytest
import yaml
from pyspark.sql import functions as F

from support import TRANSCRIPTS
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.windows import START_INCLUSIVE, HoppingWindow, TumblingWindow, step
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.window_stage import ROLE, fixed_window_step

pytestmark = pytest.mark.spark

MIN = 60_000_000
DAY = 86_400_000_000
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
UNITS = ["a", "b", "c", None]

CASES = {
    "tumbling": TumblingWindow(size_us=MIN),
    "tumbling-offset": TumblingWindow(size_us=5 * MIN, offset_us=2 * MIN + 7),
    "hopping": HoppingWindow(size_us=3 * MIN, hop_us=MIN),
    "hopping-uneven": HoppingWindow(size_us=7 * MIN, hop_us=2 * MIN, offset_us=30_000_000),
    "tumbling-start-inclusive": TumblingWindow(size_us=MIN, edges=START_INCLUSIVE),
    "tumbling-negative-offset": TumblingWindow(size_us=5 * MIN, offset_us=-MIN),
    "hopping-start-inclusive": HoppingWindow(size_us=3 * MIN, hop_us=MIN, offset_us=MIN // 2, edges=START_INCLUSIVE),
}


def core_rows(window, s, units, scalar, per_key, emit_after):
    """(row, start, end, role) multiset the core's ``step`` gives, frontiers per event."""
    pairs = [per_key.get(u, scalar) if per_key is not None else scalar for u in units]
    prev = np.array([p for p, _ in pairs], dtype=np.int64)
    now = np.array([n for _, n in pairs], dtype=np.int64)
    result = step(window, s, prev, now, emit_after_us=emit_after)
    rows = Counter(
        (int(i), int(a), int(b), "emit")
        for i, a, b in zip(result.emit.event_index, result.emit.start_us, result.emit.end_us, strict=True)
    )
    rows.update((int(i), None, None, "keep") for i in np.flatnonzero(result.keep))
    return rows


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("keyed", [False, True], ids=["scalar", "per-key"])
@pytest.mark.parametrize("cut", [False, True], ids=["all", "emit-after"])
def test_fixed_window_step_equals_the_core(spark, name, keyed, cut):
    window = CASES[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{keyed}/{cut}".encode()))
    n = 400
    s = rng.integers(-30 * MIN, 30 * MIN, n)
    s = np.sort(np.where(rng.random(n) < 0.5, s // MIN * MIN, s)).astype(np.int64)
    units = [UNITS[i] for i in rng.integers(0, len(UNITS), n)]
    grid = MIN if not cut else 1  # frontiers exactly on window ends, or anywhere
    scalar = (
        int(rng.integers(-20 * MIN, -10 * MIN)) // grid * grid,
        int(rng.integers(10 * MIN, 20 * MIN)) // grid * grid,
    )
    per_key = None
    if keyed:  # "c" has no entry: it follows the scalar frontiers
        per_key = {
            u: tuple(sorted(int(v) // grid * grid for v in rng.integers(-25 * MIN, 25 * MIN, 2)))
            for u in ("a", "b", None)
        }
    emit_after = int(rng.integers(-5 * MIN, 5 * MIN)) if cut else None  # closing windows on both sides

    df = spark.createDataFrame(
        [(i, u, int(t)) for i, (u, t) in enumerate(zip(units, s, strict=True))],
        "row BIGINT, _unit STRING, system_us BIGINT",
    )
    got_df = fixed_window_step(spark, df, window, scalar, per_key, "_unit" if keyed else None, emit_after)
    assert got_df.columns == ["row", "_unit", "system_us", "window_start_us", "window_end_us", ROLE]
    got = Counter((r["row"], r["window_start_us"], r["window_end_us"], r[ROLE]) for r in got_df.collect())

    expected = core_rows(window, s, units, scalar, per_key, emit_after)
    assert sum(1 for k in expected if k[3] == "emit") > 5 and sum(1 for k in expected if k[3] == "keep") > 5
    assert got == expected


EDGES_GOLDEN = yaml.safe_load((TRANSCRIPTS / "window_edges_golden.yaml").read_text())


@pytest.mark.parametrize("case", EDGES_GOLDEN["windows"], ids=lambda c: c["name"])
def test_the_engine_puts_events_on_a_boundary_where_the_transcript_says(spark, tmp_path, case):
    """The window-edges transcript through the engine, cut into two micro-batches right
    after the event at exactly 13:00, with the watermark then exactly on that boundary: the
    12:00–13:00 window must wait for it (its end is in) unless its edges are [start, end)."""
    day = EDGES_GOLDEN["date"]
    spec = parse_spec(
        {
            "name": "edges-golden",
            "version": 1,
            "payload": {"deviceId": "string", "eventTime": "string"},
            "timestamp_by": "eventTime",
            "window": case["window"],
            "aggregates": {"n": "count(*)"},
        }
    )
    times = [parse_time_us(f"{day}T{t}:00Z") for t in EDGES_GOLDEN["events"]]
    rows = [
        (0, i, t, "d1", json.dumps({"deviceId": "d1", "eventTime": format_time_us(t)})) for i, t in enumerate(times)
    ]
    engine = Engine(spark, spec, JobPaths(tmp_path), [0])
    thirteen = parse_time_us(f"{day}T13:00:00Z")
    for batch_id, (batch, clock) in enumerate(
        [([r for r in rows if r[2] <= thirteen], thirteen), ([r for r in rows if r[2] > thirteen], thirteen + DAY)]
    ):
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, clock)
    out = spark.read.parquet(str(engine.paths.output)).select(
        F.unix_micros("window_start").alias("s"), F.unix_micros("window_end").alias("e"), "n", "batch_id"
    )
    got = sorted([format_time_us(r["s"])[11:16], format_time_us(r["e"])[11:16], r["n"]] for r in out.collect())
    assert got == case["expect"]
    # the 12:00–13:00 window (if any) at W = 13:00: final only when it excludes its end
    early = {(format_time_us(r["e"])[11:16], r["batch_id"]) for r in out.collect()}
    if ("13:00", 0) in early or ("13:00", 1) in early:
        assert (("13:00", 0) in early) == (spec.window.edges == "start_inclusive")
