"""A benchmark's results: printed as it runs and, with ``--write``, filed in its results page.

Every benchmark prints its results on stdout (progress goes to stderr). With ``--write`` the
same text is also filed in ``docs/benchmarks/<bench>.md`` under a heading with the date, the
machine (cores, memory, CPU model, load) and the git commit, so a figure is never read without
what it was measured on. A page holds its latest run in full and, below it, a short table of
the runs before (:data:`EARLIER_ROWS`, newest first): each one's date, machine, commit and
headline — its lines that give a ratio or an error (:func:`headline`). The full text of every
run stays in the page's git history. A benchmark takes part in two lines::

    args = results_page.parse_args(ap, argv)   # instead of ap.parse_args(argv): adds --write
    ...
    sys.exit(results_page.run(main, __file__)) # files what main printed, when asked to

A run that raises files nothing; one that ends with a failing exit code is filed with it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "docs" / "benchmarks"
MARK = "<!-- results: newest first; `--write` files a new run just below this line -->"
EARLIER = "## Earlier runs"
EARLIER_ROWS = 15  # what a reader compares with; older runs are in the page's git history
_TABLE_HEAD = ("| run (UTC) | machine | commit | headline |", "|---|---|---|---|")
_RUN_HEADING = re.compile(r"## (\d{4}-\d\d-\d\d \d\d:\d\d) UTC — (.*)")
_ROW = re.compile(r"\| \d{4}-\d\d-\d\d \d\d:\d\d \|")  # a row of the earlier runs' table
_COMMIT = re.compile(r"Commit `([^`]*)`.*exit code (\d+)")
_HEADLINE_WORDS = re.compile(r"\b(ratio|error|bar|within)\b", re.I)

_RULE = re.compile(r"\|(\s*:?-+:?\s*\|)+")  # a markdown table's rule, |---|---|
_recording: io.StringIO | None = None


class _Tee(io.TextIOBase):
    """stdout as it was, and a copy kept for the results page."""

    def __init__(self, out, copy: io.StringIO):
        self.out, self.copy = out, copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with ``--write``; when it is given, stdout is kept from here on."""
    global _recording
    parser.add_argument(
        "--write",
        action="store_true",
        help="also file the results, dated, with this machine and commit, in docs/benchmarks/",
    )
    args = parser.parse_args(argv)
    if args.write and _recording is None:
        _recording = io.StringIO()
        sys.stdout = _Tee(sys.stdout, _recording)
    return args


def run(main: Callable[[], int], bench_file: str) -> int:
    """Run a benchmark's ``main``; if it was asked to ``--write``, file what it printed."""
    code = main()
    if _recording is not None:
        page = write(Path(bench_file).stem, _recording.getvalue(), code, sys.argv[1:])
        print(f"results filed in {page.relative_to(REPO)}", file=sys.stderr)
    return code


def write(
    bench: str, printed: str, code: int, argv: list[str], *, now: dt.datetime | None = None, pages: Path = PAGES
) -> Path:
    """File one run in full at the top of ``<pages>/<bench>.md`` (created when missing); the
    run it replaces becomes the first row of the table of earlier runs."""
    now = now or dt.datetime.now(dt.UTC)
    command = f"python bench/{bench}.py {shlex.join(a for a in argv if a != '--write')}".rstrip()
    section = "\n".join(
        [
            f"## {now:%Y-%m-%d %H:%M} UTC — {machine()}",
            "",
            f"Commit `{commit()}`; `{command}`; exit code {code}.",
            "",
            "```",
            printed.rstrip("\n"),
            "```",
        ]
    )
    page = pages / f"{bench}.md"
    text = page.read_text() if page.exists() else f"# `{bench}`\n\n{MARK}\n"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(compact(text, section))
    return page


def compact(text: str, newest: str | None = None) -> str:
    """A results page's ``text`` with ``newest`` (a run's section) as its latest run, and every
    run before it as a row of the earlier runs' table, at most :data:`EARLIER_ROWS` of them."""
    if MARK not in text:
        text = text.rstrip("\n") + f"\n\n{MARK}\n"
    head, tail = text.split(MARK, 1)
    runs, rows = _read_results(tail)
    if newest is not None:
        runs.insert(0, newest)
    latest, earlier = (runs[0], runs[1:]) if runs else (None, [])
    rows = [_row(run) for run in earlier] + rows
    out = f"{head.rstrip()}\n\n{MARK}\n"
    if latest is not None:
        out += f"\n{latest.strip()}\n"
    if rows:
        out += f"\n{EARLIER}\n\n" + "\n".join([*_TABLE_HEAD, *rows[:EARLIER_ROWS]]) + "\n"
    return out


def _read_results(tail: str) -> tuple[list[str], list[str]]:
    """The run sections below the mark, newest first, and the rows of its earlier runs' table.
    Any other section there (notes written by hand) is left to the page's git history."""
    runs: list[list[str]] = []
    rows: list[str] = []
    current: list[str] | None = None
    for line in tail.splitlines():
        if line.startswith("## "):
            current = [line] if _RUN_HEADING.fullmatch(line) else None
            if current is not None:
                runs.append(current)
        elif current is not None:
            current.append(line)
        elif _ROW.match(line):
            rows.append(line)
    return ["\n".join(run) for run in runs], rows


def _row(section: str) -> str:
    """One run's row: its date, machine, commit (with its exit code when not 0) and headline."""
    lines = section.splitlines()
    m = _RUN_HEADING.fullmatch(lines[0])
    when, where = (m.group(1), m.group(2)) if m else ("?", "?")
    c = next((_COMMIT.search(line) for line in lines if _COMMIT.search(line)), None)
    made = f"`{c.group(1)}`" + (f", exit {c.group(2)}" if c.group(2) != "0" else "") if c else "?"
    return f"| {when} | {_cell(where)} | {made} | {_cell(headline(section))} |"


def headline(section: str, limit: int = 300) -> str:
    """What a run's table row says of it: the printed lines that give a ratio, an error or a
    bar, else its last printed line, joined and cut to ``limit`` characters."""
    block = section.split("```")
    printed = [line.strip() for line in (block[1] if len(block) > 2 else "").splitlines() if line.strip()]
    # a printed table's head and rule name its columns ("error"), not a result
    heads = {n for n, line in enumerate(printed[:-1]) if _RULE.fullmatch(printed[n + 1])}
    results = [line for n, line in enumerate(printed) if n not in heads and not _RULE.fullmatch(line)]
    picked = [line for line in results if _HEADLINE_WORDS.search(line)][:3] or printed[-1:]
    text = "; ".join(" ".join(line.split()) for line in picked)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "/")


def machine() -> str:
    """Cores, memory, CPU model and load of this machine, as one line."""
    memory = cpu = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"{os.cpu_count()} cores, {memory or '? GiB'}, {cpu or platform.processor() or platform.machine()}, load {load}"
    )


def commit() -> str:
    """The checkout's commit, marked when the tree has changes not committed."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} with uncommitted changes" if dirty else head
