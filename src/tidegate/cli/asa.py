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
        "with its line and column. The spec is loaded by the spec loader before it is written.",
    )
    imp.add_argument("query", type=Path, help="the query, a .asaql file")
    imp.add_argument(
        "--inputs", type=Path, default=None, help="side file: event ordering policy, inputs and outputs (YAML)"
    )
    imp.add_argument("--out", type=Path, default=None, help="the spec to write (default: print it)")
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
    from tidegate.asa import spec_text
    from tidegate.asa.spec_text import checked_spec, write_spec

    name = args.out.stem if args.out is not None else None
    text = spec_text(args.query, args.inputs, name)
    if args.out is None:
        with tempfile.TemporaryDirectory(prefix="tidegate-asa-") as folder:
            checked_spec(text, Path(folder))
        sys.stdout.write(text)
    else:
        write_spec(text, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    return check(args.query, args.inputs, args.input, args.work_dir, args.limit)


def check(query: Path, inputs: Path | None, sample: Path, work_dir: Path | None, limit: int = 50) -> int:
    """Translate ``query`` into ``work_dir/spec.yaml`` and run it on ``sample`` through
    :func:`~tidegate.spark.tools.test_query.run_test_query`; the run is kept in ``work_dir``."""
    from tidegate.asa import spec_text
    from tidegate.asa.spec_text import write_spec
    from tidegate.spark.tools.test_query import run_test_query

    root = Path(work_dir or tempfile.mkdtemp(prefix="tidegate-asa-check-"))
    spec = root / "spec.yaml"
    write_spec(spec_text(query, inputs), spec)
    return run_test_query(spec, sample, root / "run", limit)
