"""``tidegate query …``: the engine from a shell — ``query test`` runs a job spec on a sample
file, ``query policy-check`` the time policy alone on a CSV of events."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tidegate.eventtime.durations import parse_duration_us


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("query", help="the engine on sample data: a job spec, or the time policy alone")
    qsub = group.add_subparsers(dest="query_command", metavar="ACTION", required=True)

    tq = qsub.add_parser(
        "test",
        help="run a job spec on a sample file through the engine and print outputs and outcomes",
        description="Runs the job's query on the sample as the streaming engine would and prints its "
        "outputs, each event's outcome (accepted, adjusted, dropped and why) and the quarantine.",
    )
    tq.add_argument("--spec", required=True, type=Path, help="job spec YAML")
    tq.add_argument("--input", required=True, type=Path, help="sample .jsonl or .csv (see docs)")
    tq.add_argument("--work-dir", type=Path, default=None, help="where to keep the run (default: a temp dir)")
    tq.add_argument("--limit", type=int, default=50, help="rows of each table to print (default 50)")
    tq.set_defaults(func=_test_query)

    pc = qsub.add_parser(
        "policy-check",
        help="judge events with the time policy on the Spark engine, one decision per input row",
        description="Reads a CSV (partition, arrival_time, event time, other columns) and writes every "
        "row again with action, reason, system_timestamp and watermark.",
    )
    pc.add_argument("--input", required=True, type=Path, help="CSV with a header row")
    pc.add_argument("--output", required=True, type=Path, help="CSV to write")
    pc.add_argument("--out-of-order", required=True, metavar="DUR", help="out-of-order tolerance, e.g. 2m")
    pc.add_argument("--late", required=True, metavar="DUR", help="late-arrival tolerance, e.g. 5m")
    early = pc.add_mutually_exclusive_group()
    early.add_argument("--early", metavar="DUR", default="5m", help="early-arrival window (default 5m)")
    early.add_argument("--no-early", action="store_true", help="switch the early-arrival rule off")
    pc.add_argument(
        "--late-action",
        choices=("adjust", "drop"),
        default="adjust",
        help="what happens to a late event: its time is adjusted (default) or it is dropped",
    )
    pc.add_argument(
        "--out-of-order-action",
        choices=("adjust", "drop"),
        default="adjust",
        help="what happens to an event out of order beyond the tolerance: adjusted (default) or dropped",
    )
    pc.add_argument(
        "--timestamp-by", default="event_time", metavar="COLUMN", help="the event-time column (default event_time)"
    )
    pc.add_argument("--over", default=None, metavar="COLUMN", help="substream key column")
    pc.set_defaults(func=_policy_check)


def _policy_check(args: argparse.Namespace) -> int:
    from tidegate.eventtime.policy import TimePolicy
    from tidegate.spark.session import build_session
    from tidegate.spark.tools.policy_check import decide, read_rows, write_decisions

    policy = TimePolicy(
        out_of_order_tolerance_us=parse_duration_us(args.out_of_order, field="--out-of-order"),
        out_of_order_action=args.out_of_order_action,
        late_arrival_tolerance_us=parse_duration_us(args.late, field="--late"),
        late_arrival_action=args.late_action,
        early_arrival_window_us=None if args.no_early else parse_duration_us(args.early, field="--early"),
    )
    header, rows = read_rows(args.input, args.timestamp_by, args.over)
    spark = build_session("tidegate-policy-check")
    decisions = decide(spark, rows, policy, args.timestamp_by, args.over)
    write_decisions(args.output, header, rows, decisions)
    counts: dict[str, int] = {}
    for d in decisions:
        counts[d.action] = counts.get(d.action, 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{len(decisions)} events judged ({summary}); decisions in {args.output}", file=sys.stderr)
    return 0


def _test_query(args: argparse.Namespace) -> int:
    from tidegate.spark.tools.test_query import run_test_query

    return run_test_query(args.spec, args.input, args.work_dir, args.limit)
