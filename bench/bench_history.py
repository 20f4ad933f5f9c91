"""Benchmark: does reading and checking a span cost what the span costs, whatever lies behind it?

    .venv/bin/python bench/bench_history.py [--batches-per-hour 720] [--devices 30] [--days 7]
                                            [--repeat 3] [--no-gx] [--short] [--work DIR]

Builds, without Spark, the output of ``jobs/device_fleet.yaml`` (one-minute windows per
device, each device's windows closing in their own micro-batch as per-device watermarks
do) as the engine files it — ``date=D/hour=H/batch-N`` — for two histories that end at the
same moment:

* **hour**: one hour of batches (a 5 s trigger: 720 batches), none compacted;
* **week**: ``--days`` of batches, all but the last hour compacted (one file per hour, as
  the driver's compaction leaves them), the last hour as above — the compacted equivalent
  of ~120,000 batches.

Then, per history, it reads the last 10 minutes as ``tidegate output read`` and the checks do
(:func:`tidegate.runtime.outputs.reader.read_output`) and checks them against a reference of the same
rows: the GX completeness suite (``check_completeness``), or with ``--no-gx`` its
comparison frame only. A third row reads the week the way readers did before (a listing of
the whole output, then a filter) for scale (not with ``--short``). Prints one table and the bar: week ÷ hour ≤ 1.5.
Exit 1 when the week reads more files than the hour or the bar is missed.
``--short`` is the form CI runs (tests/bench/test_bench_history.py): fewer batches, no GX.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import results_page
from scratch import scratch
from tidegate.lineage.committed import committed_files
from tidegate.lineage.compaction import compact
from tidegate.lineage.layout import HOUR_US, batch_folder_name, hour_dir

REPO = Path(__file__).resolve().parents[1]
MINUTE_US = 60_000_000
SPAN_US = 10 * MINUTE_US
END_US = 1_767_225_600_000_000 + 7 * 24 * HOUR_US + 30 * MINUTE_US  # 2026-01-08T00:30Z: history ends here
BAR = 1.5


def say(text: str) -> None:
    print(f"[history] {text}", file=sys.stderr, flush=True)


def window_rows(first_minute: int, last_minute: int, devices: int) -> pa.Table:
    """Every (minute window, device) row of minutes ``[first, last)`` since the epoch, with
    the batch that emitted it: device ``d`` closes its minute ``d/devices`` of a batch span
    later than device 0, so the rows of a minute spread over several batches."""
    minutes = range(first_minute, last_minute)
    ends = [(m + 1) * MINUTE_US for m in minutes for _ in range(devices)]
    names = [f"dev-{d:03d}" for _ in minutes for d in range(devices)]
    lag = [d for _ in minutes for d in range(devices)]
    return pa.table(
        {
            "window_start": pa.array([e - MINUTE_US for e in ends], pa.timestamp("us", tz="UTC")),
            "window_end": pa.array(ends, pa.timestamp("us", tz="UTC")),
            "deviceId": pa.array(names),
            "readings": pa.array([60 + (e // MINUTE_US + i) % 7 for i, e in zip(lag, ends, strict=True)], pa.int64()),
            "avg_temperature": pa.array([20.0 + (i % 5) / 10 for i in lag], pa.float64()),
            "max_temperature": pa.array([25.0 + (i % 3) / 10 for i in lag], pa.float64()),
            "_lag": pa.array(lag, pa.int64()),
        }
    )


def write_batches(output: Path, rows: pa.Table, batch_us: int, devices: int, origin_us: int, first_batch: int) -> int:
    """File ``rows`` as the engine would: each row in the batch its window closed in (batches of
    ``batch_us`` from ``origin_us``, numbered from ``first_batch``), each batch's rows in the
    folder of their hour. The number of batch folders written."""
    import pyarrow.compute as pc

    ends = pc.cast(rows.column("window_end"), pa.int64()).to_pylist()
    lags = rows.column("_lag").to_pylist()
    # device d's watermark trails device 0's by d/devices of a minute (12 batches at a 5 s trigger)
    batch_of = [
        first_batch + (e + lag * MINUTE_US // devices - origin_us) // batch_us
        for e, lag in zip(ends, lags, strict=True)
    ]
    table = rows.drop_columns(["_lag"]).append_column("batch_id", pa.array(batch_of, pa.int64()))
    hours = pa.array([e // HOUR_US for e in ends], pa.int64())
    folders = 0
    for batch in sorted(set(batch_of)):
        in_batch = pc.equal(table.column("batch_id"), batch)
        for hour in sorted(set(pc.filter(hours, in_batch).to_pylist())):
            part = table.filter(pc.and_(in_batch, pc.equal(hours, hour)))
            folder = hour_dir(output, hour) / batch_folder_name(batch)
            folder.mkdir(parents=True)
            pq.write_table(part, folder / "part-00000.parquet", use_deprecated_int96_timestamps=True)
            folders += 1
    return folders


def build(work: Path, name: str, hours: int, batches_per_hour: int, devices: int) -> dict:
    """A lineage output with ``hours`` of history ending at END_US: the last hour in batches
    of ``batches_per_hour``; every hour before it compacted. Those hours are written fast, one
    batch folder each, and merged by the real compaction: one file per hour, as a driver's
    compaction leaves them."""
    output = work / name / "output"
    shutil.rmtree(output.parent, ignore_errors=True)
    end_minute = END_US // MINUTE_US
    recent_from = end_minute - 60
    started = time.monotonic()
    batch, compacted = 0, 0
    for first in range(end_minute - hours * 60, recent_from, 60):
        rows = window_rows(first, min(first + 60, recent_from), devices)
        write_batches(output, rows, HOUR_US * 10, devices, first * MINUTE_US, batch)  # the whole hour: one batch
        batch += 1
    if batch:
        compacted = compact(output, batch - 1, now_s=0.0, grace_s=0.0).files_written  # published long ago
    recent = window_rows(recent_from, end_minute, devices)
    folders = write_batches(output, recent, HOUR_US // batches_per_hour, devices, recent_from * MINUTE_US, batch)
    say(
        f"{name}: {hours} h of history, {folders:,} batch folders and {compacted} compacted files "
        f"in {time.monotonic() - started:.1f} s"
    )
    return {"name": name, "output": output, "hours": hours, "batch_folders": folders, "compacted": compacted}


def measure(spark, spec, case: dict, reference, project: Path | None, whole_listing: bool = False) -> dict:
    """One read and check of the span: seconds of each, files read, rows."""
    from pyspark.sql import functions as F

    from tidegate.spark.output import read_output
    from tidegate.validation.comparison import Layout, comparison_frame

    span = (END_US - SPAN_US, END_US)
    started = time.monotonic()
    if whole_listing:  # how every reader read before: list the whole output, then filter
        end = F.unix_micros("window_end")
        df = (
            spark.read.parquet(str(case["output"]))
            .where((end > F.lit(span[0])) & (end <= F.lit(span[1])))
            .drop("batch_id", "date", "hour")
        )
        files = len(df.inputFiles())
    else:
        df = read_output(spark, case["output"], *span)
        files = len(committed_files(case["output"], *span))
    rows = df.count()
    read_s = time.monotonic() - started
    started = time.monotonic()
    if project is not None:
        from tidegate.validation import check_completeness

        result = check_completeness(
            spark, spec, df, reference, span, label=f"history {case['name']}", project_dir=project, data_docs=False
        )
        assert result.success, result.describe()
    else:
        frame = comparison_frame(Layout.of(spec), df, reference, span, 1e-9)
        bad = frame.where(~F.col("in_output") | ~F.col("in_reference") | F.col("mismatches").isNotNull()).count()
        assert bad == 0, f"{bad} rows of {case['name']} differ from the reference"
    return {"files": files, "rows": rows, "read_s": read_s, "check_s": time.monotonic() - started}


def summary(case: dict, runs: list[dict]) -> dict:
    return case | {
        "files": runs[-1]["files"],
        "rows": runs[-1]["rows"],
        "read_s": statistics.median(r["read_s"] for r in runs),
        "check_s": statistics.median(r["check_s"] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches-per-hour", type=int, default=720, help="720: a 5 s trigger")
    p.add_argument("--devices", type=int, default=30)
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-gx", action="store_true", help="check with the comparison frame only")
    p.add_argument(
        "--short", action="store_true", help="CI: 120 batches per hour, 10 devices, no GX, one run each, no warm-up"
    )
    p.add_argument("--work", type=Path)
    args = results_page.parse_args(p, argv)
    if args.short:
        args.batches_per_hour, args.devices, args.no_gx, args.repeat = 120, 10, True, 1

    from tidegate.jobspec import load_spec
    from tidegate.spark.session import build_session

    spec = load_spec(REPO / "jobs" / "device_fleet.yaml")
    with scratch(args.work, "history") as work:
        hour = build(work, "hour", 1, args.batches_per_hour, args.devices)
        week = build(work, "week", 24 * args.days, args.batches_per_hour, args.devices)
        project = None
        if not args.no_gx:
            project = work / "expectations"
            shutil.copytree(
                REPO / "expectations", project, ignore=shutil.ignore_patterns("uncommitted"), dirs_exist_ok=True
            )
        spark = build_session("tidegate-bench-history")
        first = (END_US - SPAN_US) // MINUTE_US
        ref_dir = work / "reference"
        ref_dir.mkdir(exist_ok=True)
        pq.write_table(
            window_rows(first, END_US // MINUTE_US, args.devices).drop_columns(["_lag"]),
            ref_dir / "part-00000.parquet",
            use_deprecated_int96_timestamps=True,
        )
        reference = spark.read.parquet(str(ref_dir)).cache()
        reference.count()
        if not args.short:
            measure(spark, spec, hour, reference, project)  # warm-up: the session's first jobs
        runs: dict[str, list[dict]] = {"hour": [], "week": []}
        for _ in range(args.repeat):  # interleaved, so a busy moment of the machine hits both
            for case in (hour, week):
                runs[case["name"]].append(measure(spark, spec, case, reference, project))
        results = [summary(hour, runs["hour"]), summary(week, runs["week"])]
        if not args.short:
            listing = week | {"name": "week, whole listing"}
            results.append(summary(listing, [measure(spark, spec, listing, reference, project, whole_listing=True)]))
        spark.stop()

    print(
        f"span 10 min at {args.batches_per_hour} batches/h, {args.devices} devices, "
        f"check {'comparison frame' if args.no_gx else 'GX completeness suite'}, median of {args.repeat}"
        f"{'' if args.short else ' after a warm-up'}"
    )
    print(
        f"{'history':<22} {'batch folders':>13} {'compacted':>9} {'files read':>10} {'rows':>6} {'read s':>7} "
        f"{'check s':>8} {'total s':>8}"
    )
    for r in results:
        print(
            f"{r['name']:<22} {r['batch_folders']:>13,} {r['compacted']:>9,} {r['files']:>10,} {r['rows']:>6,} "
            f"{r['read_s']:>7.2f} {r['check_s']:>8.2f} {r['read_s'] + r['check_s']:>8.2f}"
        )
    h, w = results[0], results[1]
    ratio = (w["read_s"] + w["check_s"]) / (h["read_s"] + h["check_s"])
    print(
        f"history: week/hour={ratio:.2f} bar={BAR} files_hour={h['files']} files_week={w['files']} "
        f"rows_hour={h['rows']} rows_week={w['rows']}"
    )
    ok = w["files"] <= h["files"] and w["rows"] == h["rows"] and ratio <= BAR
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
