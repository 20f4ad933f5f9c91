"""The job lifecycle from a shell: ``tidegate job …``, ``check``, ``batch-reference``,
``check-service``, ``read``, ``drills``, ``failover`` and ``supervise``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tidegate.cli import dispatch
from tidegate.eventtime.durations import format_time_us


def register(sub: argparse._SubParsersAction) -> None:
    job = sub.add_parser("job", help="deploy, start, stop, restart, status and estimates of streaming jobs")
    jsub = job.add_subparsers(dest="job_command", metavar="ACTION", required=True)

    p = jsub.add_parser("deploy", help="register a job version from its spec file")
    p.add_argument("spec", type=Path)
    p.set_defaults(func=_deploy)

    p = jsub.add_parser("start", help="start a job in a region (the driver runs detached)")
    _job_region(p)
    _start_options(p)
    p.add_argument(
        "--keep-running",
        action="store_true",
        help="restart the driver whenever it dies (a region supervisor is started if none runs)",
    )
    p.add_argument("--no-wait", action="store_true", help="return once the driver is launched")
    p.set_defaults(func=_start)

    p = jsub.add_parser("stop", help="stop a job gracefully (finish the micro-batch, commit, exit)")
    _job_region(p)
    p.add_argument("--grace", type=float, default=60.0, metavar="S", help="seconds before a forced stop")
    p.add_argument("--force", action="store_true", help="stop even the last healthy duplicate of a paired job")
    p.set_defaults(func=_stop)

    p = jsub.add_parser("restart", help="stop, then start with a start mode (default last-stopped)")
    _job_region(p)
    _start_options(p, default_mode="last-stopped")
    p.add_argument("--grace", type=float, default=60.0, metavar="S")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=_restart)

    p = jsub.add_parser("status", help="jobs × regions: state, watermark, lag, counts")
    p.add_argument("job", nargs="?")
    p.add_argument("--region")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)

    p = jsub.add_parser("list", help="registered job versions and where they are deployed")
    p.set_defaults(func=_list)

    p = jsub.add_parser("estimate", help="catch-up estimate: the model, and optionally a rehearsal run")
    _job_region(p)
    p.add_argument(
        "--mode",
        choices=("now", "custom", "last-stopped"),
        default=None,
        help="the start to estimate (default: last-stopped if the job ran here, else now)",
    )
    p.add_argument("--at", help="time for --mode custom")
    p.add_argument("--rehearsal", action="store_true", help="also rehearse: run the job in a scratch sink")
    p.add_argument("--timeout", type=float, default=600.0)
    p.set_defaults(func=_estimate)

    p = sub.add_parser("check", help="Great Expectations completeness of a job's output over an affected span")
    p.add_argument("job")
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
    p.add_argument("--label")
    p.add_argument(
        "--here", action="store_true", help="run in this process even when the platform's warm check service serves"
    )
    p.set_defaults(func=_check)

    p = sub.add_parser("batch-reference", help="recompute a job as a Spark batch over a span of the log")
    p.add_argument("job")
    p.add_argument("--version", type=int)
    p.add_argument("--from", dest="from_time", required=True, help="first window end to emit is after this")
    p.add_argument("--output", type=Path, required=True, help="directory for the run (output under output/)")
    p.add_argument(
        "--here", action="store_true", help="run in this process even when the platform's warm check service serves"
    )
    p.set_defaults(func=_batch_reference)

    p = sub.add_parser(
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

    p = sub.add_parser("read", help="a job's output as consumers see it (the active region), as CSV or Parquet")
    p.add_argument("job")
    p.add_argument("--from", dest="from_time", help="window ends after this (ISO-8601)")
    p.add_argument("--to", dest="to_time", help="window ends up to this (ISO-8601)")
    p.add_argument("--region", help="read this region instead of the active one")
    p.add_argument("--output", type=Path, help="write Parquet here instead of printing CSV")
    p.add_argument(
        "--output-name",
        default="output",
        metavar="NAME",
        help="which output: the job's own (output, the default) or one of its sinks.outputs",
    )
    p.set_defaults(func=_read)

    p = sub.add_parser(
        "drills",
        help="the history of recovery drills: result, estimate vs actual, what was checked, "
        "how far the consumer view fell behind (at most, and beyond the allowed delay)",
    )
    p.add_argument("job", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_drills)

    p = sub.add_parser("failover", help="move a job's consumers to the other region (refused if it lags)")
    p.add_argument("job")
    p.add_argument("--to", dest="to_region", required=True)
    p.add_argument("--reason", default="operator")
    p.add_argument("--force", action="store_true", help="switch even to a lagging region")
    p.set_defaults(func=_failover)

    p = sub.add_parser("supervise", help="keep a region's jobs running (restart dead drivers with back-off)")
    p.add_argument("--region", required=True)
    p.add_argument("--interval", type=float, help="seconds between ticks (default 2)")
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument(
        "--exit-when-idle",
        type=float,
        default=None,
        metavar="S",
        help="exit once no job of the region has needed keeping for S seconds",
    )
    p.set_defaults(func=_supervise)


def _job_region(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", help="job name (or a spec file, deployed first)")
    p.add_argument("--region", required=True)


def _start_options(p: argparse.ArgumentParser, default_mode: str = "auto") -> None:
    p.add_argument(
        "--mode",
        choices=("auto", "now", "custom", "last-stopped"),
        default=default_mode,
        help="output start mode (auto: last-stopped if the job ran here before, else now)",
    )
    p.add_argument("--at", help="first output time for --mode custom, ISO-8601")
    p.add_argument("--version", type=int, help="job version (default: the latest registered)")
    p.add_argument(
        "--accept-partial",
        action="store_true",
        help="start even if retention deleted part of the input; the run is marked partial",
    )


def _controller():
    from tidegate.runtime.jobs.controller import Controller

    return Controller(actor="cli")


def _job_name(controller, arg: str, version: int | None) -> tuple[str, int | None]:
    path = Path(arg)
    if path.suffix in (".yaml", ".yml") and path.exists():
        result = controller.deploy(path)
        print(result.describe(), file=sys.stderr)
        return result.job, version or result.version
    return arg, version


def _deploy(args) -> int:
    print(_controller().deploy(args.spec).describe())
    return 0


def _start(args) -> int:
    c = _controller()
    job, version = _job_name(c, args.job, args.version)
    result = c.start(
        job,
        args.region,
        version=version,
        mode=args.mode,
        at=args.at,
        accept_partial=args.accept_partial,
        keep_running=args.keep_running or None,
        wait_s=0 if args.no_wait else 180.0,
    )
    print(result.describe())
    return 0


def _stop(args) -> int:
    status = _controller().stop(args.job, args.region, grace_s=args.grace, force=args.force)
    print(f"job {args.job} in {args.region}: {status.state} ({status.detail or ''})")
    return 0


def _restart(args) -> int:
    c = _controller()
    job, version = _job_name(c, args.job, args.version)
    result = c.restart(
        job,
        args.region,
        mode=args.mode,
        at=args.at,
        version=version,
        accept_partial=args.accept_partial,
        grace_s=args.grace,
        force=args.force,
    )
    print(result.describe())
    return 0


def _status(args) -> int:
    rows = _controller().status(args.job, args.region)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
        return 0
    if not rows:
        print("no jobs registered (tidegate job deploy jobs/<spec>.yaml)")
        return 0
    print(
        f"{'job':<28}{'region':<8}{'state':<10}{'ver':>4} {'active':<7}{'mode':<13}{'last output':<22}"
        f"{'wm delay':>10}{'lag':>9}{'backlog':>9}  late/early/ooo"
    )
    for r in rows:
        c = r.counts
        late = c.get("late_adjusted", 0) + c.get("late_dropped", 0)
        ooo = c.get("out_of_order_adjusted", 0) + c.get("out_of_order_dropped", 0)
        print(
            f"{r.job:<28}{r.region:<8}{r.state:<10}{r.version or '-':>4} {'yes' if r.active else '':<7}"
            f"{r.start_mode or '-':<13}{format_time_us(r.last_output_us) or '-':<22}"
            f"{_secs(r.watermark_delay_s):>10}{_secs(r.processing_lag_s):>9}"
            f"{r.backlog_events if r.backlog_events is not None else '-':>9}"
            f"  {late}/{c.get('early_dropped', 0)}/{ooo}"
        )
        if r.state in ("failed", "lost") and r.detail:
            print(f"    {r.detail}")
    return 0


def _list(args) -> int:
    c = _controller()
    for v in c.db.versions():
        where = [f"{d.region}:{d.desired}" for d in c.db.deployments(v.job) if d.version == v.version]
        print(
            f"{v.job:<28} v{v.version:<4} {v.fingerprint[:12]}  "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(v.registered_at))}"
            f"  {' '.join(where)}"
        )
    return 0


def _estimate(args) -> int:
    from tidegate.runtime.estimates.estimate import model_estimate
    from tidegate.runtime.estimates.rehearsal import rehearsal_for_restart, rehearse
    from tidegate.runtime.jobs import planning

    c = _controller()
    job, _ = _job_name(c, args.job, None)
    plan = None
    if args.mode:
        from tidegate.eventtime.durations import parse_time_us

        plan = planning.plan(
            c,
            job,
            args.region,
            args.mode,
            at_us=parse_time_us(args.at, field="--at") if args.at else None,
            accept_partial=True,
        )
    rehearsal = rehearse(c, job, args.region, timeout_s=args.timeout) if args.rehearsal else None
    if rehearsal is not None:
        print(rehearsal.describe())
    model = model_estimate(c, job, args.region, plan=plan)
    c.db.add_estimate(job, args.region, "model", model.seconds, model.__dict__)
    print(model.describe())
    if rehearsal is not None:
        print(rehearsal_for_restart(rehearsal, model.backlog_events, model.input_rate_eps).describe())
    return 0


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


def _through_service(args, argv: list[str]) -> int | None:
    """``tidegate <argv>`` run by the platform's warm check service when one serves, so that
    a check from a shell costs what a warm check costs; None: run it here (none serves, it
    did not take the request, ``--here``, or this is the service itself)."""
    from tidegate.runtime.checks import check_server, check_service

    if args.here or check_server.serving_here():
        return None
    home = _controller().config.home
    served = check_service.run(home, argv) if check_service.serving(home) else None
    if served is None:
        return None
    print(served.output, end="", file=sys.stdout if served.exit_code == 0 else sys.stderr)
    return served.exit_code


def _options(*pairs: tuple[str, object]) -> list[str]:
    """``--name value`` for each value given, paths made absolute (the service has its own cwd)."""
    argv = []
    for name, value in pairs:
        if value is not None:
            argv += [name, str(value.resolve() if isinstance(value, Path) else value)]
    return argv


def _check(args) -> int:
    from tidegate.runtime.checks.completeness import check_all, write_outcomes
    from tidegate.spark.session import build_session

    argv = [
        "check",
        args.job,
        *_options(*(("--target", target) for target in args.target)),
        *_options(
            ("--run", args.run),
            ("--from", args.from_time),
            ("--to", args.to_time),
            ("--reference", args.reference),
            ("--result", args.result),
            ("--label", args.label),
        ),
    ]
    if (served := _through_service(args, argv)) is not None:
        return served
    c = _controller()
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


def _batch_reference(args) -> int:
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.runtime.checks.completeness import batch_reference
    from tidegate.spark.session import build_session

    argv = [
        "batch-reference",
        args.job,
        *_options(("--version", args.version), ("--from", args.from_time), ("--output", args.output)),
    ]
    if (served := _through_service(args, argv)) is not None:
        return served
    c = _controller()
    start = parse_time_us(args.from_time, field="--from")
    spark = build_session("tidegate-batch-reference", conf=c.config.storage_spark_conf(), quick_jvm=True)
    out = batch_reference(spark, c, args.job, args.version, (start, start), args.output)
    print(f"batch reference of {args.job} (windows ending after {args.from_time}) in {out}")
    return 0


def _check_service(args) -> int:
    from tidegate.runtime.checks.check_server import serve
    from tidegate.runtime.jobs.config import load_config

    return serve(load_config().home, args.idle_exit, _served)  # the lock first: clients wait for it


def _served(argv: list[str]) -> int:
    """``tidegate <argv>`` in the check service's process, as the command line runs it: the
    commands it serves (``check``, ``batch-reference``) are this module's."""
    parser = argparse.ArgumentParser(prog="tidegate")
    register(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return dispatch.run(parser, argv)


def _read(args) -> int:
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.runtime.outputs.reader import read_consumer_view, read_region
    from tidegate.spark.session import build_session

    c = _controller()
    low = parse_time_us(args.from_time, field="--from") if args.from_time else None
    high = parse_time_us(args.to_time, field="--to") if args.to_time else None
    spark = build_session("tidegate-read")
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


def _drills(args) -> int:
    from tidegate.runtime.procedures.drills import history

    rows = history(_controller().db, args.job)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print("no drills recorded yet (run the tidegate_drill DAG)")
        return 0
    print(
        f"{'id':>4}  {'when':<17} {'drill':<19} {'job':<24} {'region':<7} {'result':<8} {'estimate':>9} "
        f"{'actual':>8} {'view behind':>12} {'beyond':>8}  checks"
    )
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["started_at"]))
        checks = ", ".join(f"{c.get('target')} {'ok' if c.get('success') else 'FAIL'}" for c in r["checks"])
        gap = r.get("consumer_gap") or {}
        print(
            f"{r['id']:>4}  {when:<17} {r['kind']:<19} {r['job']:<24} {r['region'] or '-':<7} {r['result']:<8} "
            f"{_secs(r['estimate_s']):>9} {_secs(r['actual_s']):>8} {_secs(gap.get('max_delay_s')):>12} "
            f"{_secs(gap.get('beyond_allowed_s')):>8}  {checks}"
        )
    return 0


def _failover(args) -> int:
    result = _controller().switch_active(args.job, args.to_region, args.reason, force=args.force)
    print(json.dumps(result, default=str))
    return 0


def _supervise(args) -> int:
    from tidegate.runtime.jobs.supervisor import INTERVAL_S, Supervisor

    return Supervisor(_controller(), args.region, interval_s=args.interval or INTERVAL_S).run_forever(
        once=args.once, exit_when_idle_s=args.exit_when_idle
    )


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"
