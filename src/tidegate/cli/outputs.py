"""``tidegate output …``: what a job wrote, from a shell.

``read`` shows its output as consumers see it (Spark); ``view`` queries the same in DuckDB,
the consumer view, reaching S3 lineages with the region's keys of the moment; ``check``
holds it to the batch path with Great Expectations (``check-service`` serves checks from one
warm Spark session, :mod:`tidegate.cli.warm`); ``compact`` and ``clean`` keep its files in
shape (:mod:`tidegate.runtime.outputs.upkeep` says what each keeps and why). ``clean`` is here, not
in a platform group: all it removes is one job's lineage data (audit, quarantine, metrics,
retired lineages).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tidegate.cli import dispatch, jobs, warm

_JOB_HELP = "the job's name"


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("output", help="a job's output: read, view, check, compact and clean it")
    osub = group.add_subparsers(dest="output_command", metavar="ACTION", required=True)

    p = osub.add_parser("read", help="a job's output as consumers see it (the active region), as CSV or Parquet")
    p.add_argument("job", help=_JOB_HELP)
    p.add_argument("--from", dest="from_time", help="window ends after this (ISO-8601)")
    p.add_argument("--to", dest="to_time", help="window ends up to this (ISO-8601)")
    p.add_argument("--region", help="read this region instead of the active one")
    p.add_argument("--output", type=Path, help="write Parquet here instead of printing CSV")
    p.add_argument(
        "--output-name",
        default="output",
        metavar="NAME",
        help="which output: the job's own (output, the default) or one of its sinks.outputs "
        "(--output names the Parquet folder)",
    )
    p.set_defaults(func=_read)

    p = osub.add_parser(
        "view",
        help="query a job's consumer view in DuckDB, as CSV (lineages on S3 read with the region's keys, never stored)",
        description="Makes the view views/<job>.sql holds afresh (current to the last committed batch) in a DuckDB "
        "session with httpfs and a temporary secret per S3 bucket from the AWS credential chain, then runs the query.",
    )
    p.add_argument("job", help=_JOB_HELP)
    p.add_argument(
        "--query", help='SQL over the view (default: SELECT * FROM "<job>"; a named output\'s view is "<job>.<name>")'
    )
    p.add_argument(
        "--output-name",
        default="output",
        metavar="NAME",
        help="which output's view: the job's own (output, the default) or one of its sinks.outputs",
    )
    p.set_defaults(func=_view)

    p = osub.add_parser(
        "compact", help="merge each hour's batch folders of a job's outputs into one file (safe while the job runs)"
    )
    p.add_argument("job", help=_JOB_HELP)
    p.add_argument("--json", action="store_true", help="print what was merged as JSON")
    p.set_defaults(func=_compact)

    p = osub.add_parser("check", help="Great Expectations completeness of a job's output over an affected span")
    p.add_argument("job", help=_JOB_HELP)
    p.add_argument(
        "--target",
        required=True,
        action="append",
        help="a region, 'consumer' (the active region) or 'pair'; repeat it to check several "
        "in one session against one batch reference",
    )
    p.add_argument("--run", type=int, help="check the span this run affected (default: the latest run's)")
    p.add_argument("--from", dest="from_time", help="span start (exclusive), ISO-8601; with --to")
    p.add_argument("--to", dest="to_time", help="span end (inclusive), ISO-8601")
    p.add_argument("--reference", type=Path, help="batch reference output directory (default: computed now)")
    p.add_argument("--result", type=Path, help="also write the outcomes as a JSON list here")
    p.add_argument("--label", help="the name the outcomes carry (default: JOB TARGET)")
    p.add_argument(
        "--here", action="store_true", help="run in this process even when the platform's warm check service serves"
    )
    p.set_defaults(func=_check)

    p = osub.add_parser(
        "check-service",
        help="serve checks and batch references from one warm Spark session "
        "(the completeness operator starts it; it exits when idle)",
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="exit after this many seconds without a request (default 900)",
    )
    p.set_defaults(func=_check_service)

    p = osub.add_parser(
        "clean", help="remove audit, quarantine, metrics and retired lineages past their retention (TIDEGATE_RETAIN_*)"
    )
    p.add_argument("job", help=_JOB_HELP)
    p.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    p.add_argument("--json", action="store_true", help="print what was removed and kept as JSON")
    p.set_defaults(func=_clean)


def _compact(args) -> int:
    from tidegate.runtime.outputs.upkeep import compact_job

    done = compact_job(dispatch.controller(), args.job)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "output": str(c.output),
                        "through_batch": c.through_batch,
                        "files": c.files_written,
                        "merged": c.folders_merged,
                        "removed": c.folders_removed,
                    }
                    for c in done
                ],
                indent=2,
            )
        )
    else:
        for c in done:
            print(c.describe())
    return 0


def _clean(args) -> int:
    from tidegate.runtime.outputs.upkeep import broker_now_us, clean_job

    controller = dispatch.controller()
    cleaned = clean_job(controller, args.job, broker_now_us(controller, args.job), apply=not args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    if args.json:
        print(json.dumps({verb.replace(" ", "_"): [str(p) for p in cleaned.removed], "kept": cleaned.kept}, indent=2))
        return 0
    for path in cleaned.removed:
        print(f"{verb} {path}")
    for reason in cleaned.kept:
        print(f"kept {reason}")
    if not cleaned.removed:
        print(f"nothing of {args.job} is past its retention")
    return 0


def _read(args) -> int:
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.runtime.outputs.reader import read_consumer_view, read_region
    from tidegate.spark.session import build_session

    c = dispatch.controller()
    low = parse_time_us(args.from_time, field="--from") if args.from_time else None
    high = parse_time_us(args.to_time, field="--to") if args.to_time else None
    # every region's store, whichever the consumer view resolves to: each bucket with its own settings
    spark = build_session("tidegate-read", conf=c.config.storage_spark_conf(), quick_jvm=True)
    which = _output_name(c, args.job, args.output_name)
    if args.region:
        region, rows = (
            args.region,
            read_region(spark, c.db, args.job, args.region, from_us=low, to_us=high, output=which),
        )
    else:
        region, rows = read_consumer_view(spark, c.db, args.job, from_us=low, to_us=high, output=which)
    order = [c for c in ("window_end", "system_time", "partition", "offset") if c in rows.columns]
    rows = rows.orderBy(*order)
    if args.output:
        rows.write.mode("overwrite").parquet(str(args.output))
        print(f"{rows.count()} rows of {args.job} ({which}) from region {region} in {args.output}", file=sys.stderr)
        return 0
    print(f"# job {args.job}, output {which}, region {region}", file=sys.stderr)
    rows.toPandas().to_csv(sys.stdout, index=False)
    return 0


def _view(args) -> int:
    import csv

    from tidegate.runtime.outputs.duckdb_session import connect
    from tidegate.runtime.outputs.duckdb_view import view_name

    c = dispatch.controller()
    which = _output_name(c, args.job, args.output_name)
    con = connect(c, args.job, which)
    try:
        result = con.execute(args.query or f'SELECT * FROM "{view_name(args.job, which)}"')
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow([column[0] for column in result.description])
        while rows := result.fetchmany(10_000):
            out.writerows(rows)
    finally:
        con.close()
    return 0


def _output_name(c, job: str, name: str) -> str:
    """``name`` when the job's latest version has that output; else an error with the closest."""
    from tidegate.errors import ConfigError
    from tidegate.jobspec.hints import did_you_mean

    names = c.spec(job)[1].output_names
    if name not in names:
        raise ConfigError(
            f"job {job} has no output {name!r}" + did_you_mean(name, names),
            f"name one of its outputs: {', '.join(names)}",
        )
    return name


def _check(args) -> int:
    from tidegate.runtime.checks.completeness import check_all, write_outcomes
    from tidegate.spark.session import build_session

    argv = [
        "check",
        args.job,
        *warm.options(*(("--target", target) for target in args.target)),
        *warm.options(
            ("--run", args.run),
            ("--from", args.from_time),
            ("--to", args.to_time),
            ("--reference", args.reference),
            ("--result", args.result),
            ("--label", args.label),
        ),
    ]
    if (served := warm.through_service(args, argv)) is not None:
        return served
    c = dispatch.controller()
    spans = {target: _span(c, args, target) for target in dict.fromkeys(args.target)}
    spark = build_session("tidegate-check", conf=c.config.storage_spark_conf(), quick_jvm=True)
    outcomes = check_all(
        spark,
        c,
        args.job,
        spans,
        reference=args.reference,
        run_id=args.run,
        label=args.label,
        context={"actor": "cli", "run": args.run},
    )
    if args.result:
        write_outcomes(outcomes, args.result)
    for outcome in outcomes:
        print(outcome.summary)
        if not outcome.success:
            print(f"tidegate: error: {outcome.message}", file=sys.stderr)
    return 0 if all(outcome.success for outcome in outcomes) else 1


def _span(c, args, target: str) -> tuple[int, int] | None:
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.runtime.checks.completeness import (
        affected_span,
        consumer_span,
        output_begins_us,
        span_start,
        within_output,
    )

    if args.to_time and not args.from_time:
        from tidegate.errors import ConfigError

        raise ConfigError("--to needs --from", "give --from (and --to, or up to what is final now)")
    if args.from_time:
        low = parse_time_us(args.from_time, field="--from")
        if args.to_time:
            return low, parse_time_us(args.to_time, field="--to")
        region = target if target not in ("consumer", "pair") else None
        if region is None:
            active = c.db.active_region(args.job)
            region = active.region if active else None
        lineages = c.db.lineages(args.job, region) if region else []
        high = lineages[-1].emitted_through_us if lineages else None
        # up to where the output is final now, from no earlier than where it begins: a target
        # checked beside a lost region (one --from for both) never had the windows before that
        low = within_output(low, output_begins_us(c.db, args.job, region)) if region else low
        return (low, high) if high is not None and high > low else None
    if target in ("consumer", "pair"):
        active = c.db.active_region(args.job)
        run = c.db.run(args.run) if args.run else c.db.latest_run(args.job, active.region if active else "")
        start = span_start(c, run) if run is not None else None
        return None if start is None else consumer_span(c, args.job, start)
    return affected_span(c, args.job, target, args.run)


def _check_service(args) -> int:
    from tidegate.runtime.checks.check_server import serve
    from tidegate.runtime.jobs.config import load_config

    return serve(load_config().home, args.idle_exit, run_served)  # the lock first: clients wait for it


def run_served(request: list[str]) -> int:
    """A check service request (``["check", …]``, :func:`tidegate.cli.warm.through_service`) in
    the service's process, run as the command line runs the command it names (``tidegate output
    check …``, ``tidegate job batch-reference …``); its exit code."""
    from tidegate.runtime.checks.check_service import COMMANDS

    parser = argparse.ArgumentParser(prog="tidegate")
    groups = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    jobs.register(groups)  # batch-reference
    register(groups)  # check
    return dispatch.run(parser, [*COMMANDS[request[0]], *request[1:]])
