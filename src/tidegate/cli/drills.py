"""``tidegate drill history``: the recovery drills run so far (the ``tidegate_drill`` DAG runs
them; :mod:`tidegate.runtime.procedures.drills` records them)."""

from __future__ import annotations

import argparse
import json
import time

from tidegate.cli import dispatch


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("drill", help="recovery drills: their history")
    dsub = group.add_subparsers(dest="drill_command", metavar="ACTION", required=True)
    p = dsub.add_parser(
        "history",
        help="the history of recovery drills: result, estimate vs actual, what was checked, "
        "how far the consumer view fell behind (at most, and beyond the allowed delay)",
        description="`view behind` is the largest delay of the consumer view's last window end behind "
        "the live stream while the drill ran, `beyond` the seconds it spent beyond the allowed delay "
        "(600 s for drills). --json adds each drill's estimate_basis (terms and inputs) and consumer_gap.",
    )
    p.add_argument("job", nargs="?", help="only this job's drills (default: every job's)")
    p.add_argument("--json", action="store_true", help="print the drills as JSON, with all they recorded")
    p.set_defaults(func=_history)


def _history(args) -> int:
    from tidegate.runtime.procedures.drills import history

    rows = history(dispatch.controller().db, args.job)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print("no drills recorded yet (run the tidegate_drill DAG)")
        return 0
    secs = dispatch.seconds
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
            f"{secs(r['estimate_s']):>9} {secs(r['actual_s']):>8} {secs(gap.get('max_delay_s')):>12} "
            f"{secs(gap.get('beyond_allowed_s')):>8}  {checks}"
        )
    return 0
