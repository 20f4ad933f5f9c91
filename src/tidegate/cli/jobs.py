"""``tidegate job …``: the job lifecycle from a shell — deploy a version, start, stop and
restart it in a region, its status and catch-up estimates, a failover of its consumers, and
its batch path over a span (``batch-reference``, run in the warm check service when one
serves: :mod:`tidegate.cli.warm`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tidegate.cli import dispatch, warm
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us


def register(sub: argparse._SubParsersAction) -> None:
    job = sub.add_parser(
        "job", help="deploy, start, stop, restart, status, estimates, failover and batch path of streaming jobs"
    )
    jsub = job.add_subparsers(dest="job_command", metavar="ACTION", required=True)

    p = jsub.add_parser(
        "deploy",
        help="register a job version from its spec file, or from a Stream Analytics query",
        description="Registers the spec; with --query, the spec translated from the query as "
        "tidegate asa import does, recording the query (path, SHA-256, text) and its side file (path, SHA-256).",
    )
    p.add_argument("spec", type=Path, nargs="?", help="the job spec YAML, e.g. jobs/device_fleet.yaml")
    p.add_argument("--query", type=Path, help="a Stream Analytics query (.asaql) to translate, instead of a spec")
    p.add_argument("--inputs", type=Path, help="the query's side file (YAML), as for tidegate asa import")
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
    p.add_argument("--grace", type=float, default=60.0, metavar="S", help="seconds before a forced stop")
    p.add_argument("--force", action="store_true", help="stop even the last healthy duplicate of a paired job")
    p.set_defaults(func=_restart)

    p = jsub.add_parser("status", help="jobs × regions: state, watermark, lag, counts")
    p.add_argument("job", nargs="?", help="only this job (default: every job)")
    p.add_argument("--region", help="only this region (default: every region)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
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
    p.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="seconds the rehearsal may run (default 600)"
    )
    p.set_defaults(func=_estimate)

    p = jsub.add_parser("failover", help="move a job's consumers to the other region (refused if it lags)")
    p.add_argument("job", help="the job's name")
    p.add_argument("--to", dest="to_region", required=True, help="the region consumers read from next")
    p.add_argument("--reason", default="operator", help="why, as recorded with the switch (default: operator)")
    p.add_argument("--force", action="store_true", help="switch even to a lagging region")
    p.set_defaults(func=_failover)

    p = jsub.add_parser("batch-reference", help="recompute a job as a Spark batch over a span of the log")
    p.add_argument("job", help="the job's name")
    p.add_argument("--version", type=int, help="job version (default: the latest registered)")
    p.add_argument("--from", dest="from_time", required=True, help="first window end to emit is after this")
    p.add_argument("--output", type=Path, required=True, help="directory for the run (output under output/)")
    p.add_argument(
        "--here", action="store_true", help="run in this process even when the platform's warm check service serves"
    )
    p.set_defaults(func=_batch_reference)


def _job_region(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", help="job name (or a spec file, deployed first)")
    p.add_argument("--region", required=True, help="the region it runs in")


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


def _job_name(controller, arg: str, version: int | None) -> tuple[str, int | None]:
    path = Path(arg)
    if path.suffix in (".yaml", ".yml") and path.exists():
        result = controller.deploy(path)
        print(result.describe(), file=sys.stderr)
        return result.job, version or result.version
    return arg, version


def _deploy(args) -> int:
    if (args.spec is None) == (args.query is None):
        raise ConfigError(
            "give a spec or --query, exactly one",
            "tidegate job deploy jobs/<spec>.yaml, or tidegate job deploy --query Q.asaql [--inputs Q.inputs.yaml]",
        )
    if args.inputs is not None and args.query is None:
        raise ConfigError("--inputs is a query's side file, and no --query is given", "add --query Q.asaql")
    controller = dispatch.controller()
    if args.query is not None:
        print(controller.deploy_query(args.query, args.inputs).describe() + f", translated from {args.query}")
    else:
        print(controller.deploy(args.spec).describe())
    return 0


def _start(args) -> int:
    c = dispatch.controller()
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
    status = dispatch.controller().stop(args.job, args.region, grace_s=args.grace, force=args.force)
    print(f"job {args.job} in {args.region}: {status.state} ({status.detail or ''})")
    return 0


def _restart(args) -> int:
    c = dispatch.controller()
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
    rows = dispatch.controller().status(args.job, args.region)
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
            f"{dispatch.seconds(r.watermark_delay_s):>10}{dispatch.seconds(r.processing_lag_s):>9}"
            f"{r.backlog_events if r.backlog_events is not None else '-':>9}"
            f"  {late}/{c.get('early_dropped', 0)}/{ooo}"
        )
        if r.state in ("failed", "lost") and r.detail:
            print(f"    {r.detail}")
    return 0


def _list(args) -> int:
    c = dispatch.controller()
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

    c = dispatch.controller()
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


def _batch_reference(args) -> int:
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.runtime.checks.completeness import batch_reference
    from tidegate.spark.session import build_session

    argv = [
        "batch-reference",
        args.job,
        *warm.options(("--version", args.version), ("--from", args.from_time), ("--output", args.output)),
    ]
    if (served := warm.through_service(args, argv)) is not None:
        return served
    c = dispatch.controller()
    start = parse_time_us(args.from_time, field="--from")
    spark = build_session("tidegate-batch-reference", conf=c.config.storage_spark_conf(), quick_jvm=True)
    out = batch_reference(spark, c, args.job, args.version, (start, start), args.output)
    print(f"batch reference of {args.job} (windows ending after {args.from_time}) in {out}")
    return 0


def _failover(args) -> int:
    result = dispatch.controller().switch_active(args.job, args.to_region, args.reason, force=args.force)
    print(json.dumps(result, default=str))
    return 0
