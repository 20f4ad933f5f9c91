"""``tidegate asa …``: Stream Analytics queries — ``asa import`` writes one as a job spec,
``asa check`` runs it on a sample as ``query test`` runs a spec."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("asa", help="Azure Stream Analytics queries: import one as a job spec, check it on a sample")
    asub = group.add_subparsers(dest="asa_command", metavar="ACTION", required=True)

    imp = asub.add_parser(
        "import",
        help="translate a Stream Analytics query into a job spec",
        description="Reads the query with a Stream Analytics grammar and writes the job spec that computes the same "
        "rows, each field commented with the query line it came from. A construct without a Tidegate form is refused "
        "with its line and column. The spec is loaded by the spec loader before it is written. A query of several "
        "SELECT … INTO is one job, each output the rows of a step, when the outputs read one chain of steps; when "
        "they fork it is one job per output, written beside --out as NAME-<output>.yaml.",
    )
    imp.add_argument("query", type=Path, help="the query, a .asaql file")
    imp.add_argument(
        "--inputs", type=Path, default=None, help="side file: event ordering policy, inputs and outputs (YAML)"
    )
    imp.add_argument(
        "--out", type=Path, default=None, help="the spec to write (default: print it; several jobs: --- between them)"
    )
    imp.set_defaults(func=_import)

    chk = asub.add_parser(
        "check",
        help="run a Stream Analytics query on a sample file through the engine, as query test runs a spec",
        description="Translates the query as asa import does and runs the spec on the sample as tidegate query test "
        "does: outputs, each event's outcome and the quarantine.",
    )
    chk.add_argument("query", type=Path, help="the query, a .asaql file")
    chk.add_argument("--inputs", type=Path, default=None, help="side file (as for asa import)")
    chk.add_argument("--input", required=True, type=Path, help="sample .jsonl or .csv (as for query test)")
    chk.add_argument("--work-dir", type=Path, default=None, help="where to keep the run (default: a temp dir)")
    chk.add_argument("--limit", type=int, default=50, help="rows of each table to print (default 50)")
    chk.set_defaults(func=_check)


def _import(args: argparse.Namespace) -> int:
    from tidegate.asa import translated_jobs
    from tidegate.asa.spec_text import checked_spec, write_spec

    jobs = translated_jobs(args.query, args.inputs, args.out.stem if args.out is not None else None)
    if args.out is None:
        with tempfile.TemporaryDirectory(prefix="tidegate-asa-") as folder:
            for job in jobs:
                checked_spec(job.text, Path(folder))
        sys.stdout.write("---\n".join(job.text for job in jobs))
        return 0
    for job in jobs:
        out = args.out if len(jobs) == 1 else args.out.with_name(f"{job.name}.yaml")
        write_spec(job.text, out)
        print(f"wrote {out}: " + ", ".join(f"INTO {q} → {o}" for q, o in job.outputs.items()), file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    return check(args.query, args.inputs, args.input, args.work_dir, args.limit)


def check(query: Path, inputs: Path | None, sample: Path, work_dir: Path | None, limit: int = 50) -> int:
    """Translate ``query`` and run each job it becomes on ``sample`` through
    :func:`~tidegate.spark.tools.test_query.run_test_query`: the spec in ``work_dir/spec.yaml``
    and the run in ``work_dir/run`` — for a query of several jobs, in ``work_dir/<job>/``."""
    from tidegate.asa import translated_jobs
    from tidegate.asa.spec_text import write_spec
    from tidegate.spark.tools.test_query import run_test_query

    root = Path(work_dir or tempfile.mkdtemp(prefix="tidegate-asa-check-"))
    jobs = translated_jobs(query, inputs)
    code = 0
    for job in jobs:
        folder = root if len(jobs) == 1 else root / job.name
        if len(jobs) > 1:
            print(f"=== job {job.name}: " + ", ".join(f"INTO {q} → {o}" for q, o in job.outputs.items()) + " ===")
        write_spec(job.text, folder / "spec.yaml")
        code = max(code, run_test_query(folder / "spec.yaml", sample, folder / "run", limit))
    return code
