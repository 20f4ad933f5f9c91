"""``tidegate region supervise``: keep a region's jobs running. A job started with
``--keep-running`` starts one (``python -m tidegate.cli region supervise``,
:func:`tidegate.runtime.jobs.process.ensure_supervisor`); a region host runs one for good."""

from __future__ import annotations

import argparse

from tidegate.cli import dispatch


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("region", help="a region's drivers: keep them running")
    rsub = group.add_subparsers(dest="region_command", metavar="ACTION", required=True)
    p = rsub.add_parser("supervise", help="keep a region's jobs running (restart dead drivers with back-off)")
    p.add_argument("--region", required=True, help="the region whose jobs to keep running")
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


def _supervise(args) -> int:
    from tidegate.runtime.jobs.supervisor import INTERVAL_S, Supervisor

    return Supervisor(dispatch.controller(), args.region, interval_s=args.interval or INTERVAL_S).run_forever(
        once=args.once, exit_when_idle_s=args.exit_when_idle
    )
