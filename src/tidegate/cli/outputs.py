"""A job's own files from a shell: ``tidegate compact`` and ``tidegate clean``
(:mod:`tidegate.runtime.outputs.upkeep` says what each keeps and why)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compact", help="merge each hour's batch folders of a job's outputs into one file (safe while the job runs)"
    )
    p.add_argument("job")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_compact)

    p = sub.add_parser(
        "clean", help="remove audit, quarantine, metrics and retired lineages past their retention (TIDEGATE_RETAIN_*)"
    )
    p.add_argument("job")
    p.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_clean)


def _compact(args) -> int:
    from tidegate.runtime.jobs.controller import Controller
    from tidegate.runtime.outputs.upkeep import compact_job

    done = compact_job(Controller(actor="cli"), args.job)
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
    from tidegate.runtime.jobs.controller import Controller
    from tidegate.runtime.outputs.upkeep import broker_now_us, clean_job

    controller = Controller(actor="cli")
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
