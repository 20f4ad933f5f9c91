"""The test suite's cost, read from the log of one CI run: its wall time, and its slowest 30 tests.

    python bench/bench_suite.py CI.log [--commit SHA] [--workers 2] [--write]

``CI.log`` is what ``.ci/run`` (``scripts/test.sh``) printed: pytest's summary line gives the
tests and the wall time, and its ``slowest 30 durations`` block (``--durations=30`` is in the
project's pytest options) the tests that cost most. A run with ``--durations=0``
(``bash .ci/run --durations=0``) lists every test; then the files that cost most are shown
too, since a file is what a worker takes (``--dist loadfile``). The bar is the suite's: 30 minutes of
pytest on 2 cores. Each slow test is shown with its share of the suite's worker time
(wall × workers), which is what a test gives back when it is made cheaper: the workers stay
busy to the end (``--dist loadfile``), so the wall time falls by about that share.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_page  # noqa: E402

BAR_S = 30 * 60
SHOWN = 30  # tests, and files, listed
_SUMMARY = re.compile(r"=+ (?P<counts>.*?) in (?P<wall>[\d.]+)s(?: \([\d:]+\))? =+")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_SLOWEST = re.compile(r"^(?:> )?=+ slowest (?:\d+ )?durations =+$", re.MULTILINE)  # pytest's header of the block
_DURATION = re.compile(r"^(?P<s>[\d.]+)s (?P<phase>call|setup|teardown)\s+(?P<test>\S+)")


@dataclass(frozen=True)
class SuiteRun:
    counts: dict[str, int]
    wall_s: float
    slowest: list[tuple[float, str, str]]  # seconds, phase, test id


def read_log(text: str) -> SuiteRun:
    """The last pytest summary in ``text`` and the slowest-durations block before it."""
    summaries = list(_SUMMARY.finditer(text))
    if not summaries:
        raise SystemExit("no pytest summary line (`N passed … in S s`) in the log: is it a CI run's whole output?")
    last = summaries[-1]
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in _COUNT.findall(last.group("counts"))}  # fmt: skip
    headers = list(_SLOWEST.finditer(text, 0, last.start()))
    if not headers:
        raise SystemExit("no `slowest 30 durations` block in the log: run pytest with --durations=30")
    block = text[headers[-1].end() : last.start()]  # not a test whose name says "slowest"
    slowest = []
    for line in block.splitlines():
        # lines may carry a prefix (a report quoting the log): read from the duration on
        m = _DURATION.match(line.lstrip("> ").strip())
        if m:
            slowest.append((float(m.group("s")), m.group("phase"), m.group("test")))
    return SuiteRun(counts, float(last.group("wall")), slowest)


def report(run: SuiteRun, workers: int, commit: str) -> None:
    worker_s = run.wall_s * workers
    counts = ", ".join(f"{n:,} {kind}" for kind, n in run.counts.items())
    print(f"suite at commit {commit}: {counts}")
    print(f"pytest wall time {run.wall_s / 60:.1f} min on {workers} workers; bar {BAR_S / 60:.0f} min; "
          f"ratio to the bar {run.wall_s / BAR_S:.2f}")  # fmt: skip
    slowest = sorted(run.slowest, key=lambda d: -d[0])[:SHOWN]
    top = sum(s for s, _, _ in slowest)
    print(f"the slowest {len(slowest)}: {top / 60:.1f} min, {top / worker_s:.0%} of the worker time")
    print()
    print(f"{'s':>7}  {'share':>5}  test")
    for seconds, phase, test in slowest:
        print(f"{seconds:7.1f}  {seconds / worker_s:5.1%}  {test}{'' if phase == 'call' else f' ({phase})'}")
    if len(run.slowest) > SHOWN:  # every test's duration is in the log: the files that cost most
        files: dict[str, float] = {}
        for seconds, _, test in run.slowest:
            files[test.split("::")[0]] = files.get(test.split("::")[0], 0.0) + seconds
        listed = sum(files.values())
        print()
        print(f"by file, setup and teardown included ({len(run.slowest):,} durations, {listed / 60:.1f} min):")
        print(f"{'s':>7}  {'share':>5}  file")
        for name, seconds in sorted(files.items(), key=lambda f: -f[1])[:SHOWN]:
            print(f"{seconds:7.1f}  {seconds / worker_s:5.1%}  {name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="the output of one .ci/run")
    ap.add_argument("--commit", help="the commit the log ran on (default: this checkout's)")
    ap.add_argument("--workers", type=int, default=2, help="pytest workers of that run (-n)")
    args = results_page.parse_args(ap, argv)
    if not args.log.is_file():
        raise SystemExit(f"{args.log}: no such file — give the saved output of .ci/run")
    run = read_log(args.log.read_text(errors="replace"))
    report(run, args.workers, args.commit or results_page.commit())
    return 0 if run.wall_s <= BAR_S and not run.counts.get("failed") else 1


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
