"""A benchmark's results: printed as it runs and, with ``--write``, filed in its results page.

Every benchmark prints its results on stdout (progress goes to stderr). With ``--write`` the
same text is also filed in ``docs/benchmarks/<bench>.md``, newest first, under a heading with
the date, the machine (cores, memory, CPU model, load) and the git commit, so a figure is never
read without what it was measured on. A benchmark takes part in two lines::

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
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "docs" / "benchmarks"
MARK = "<!-- results: newest first; `--write` files a new run just below this line -->"

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
    parser.add_argument("--write", action="store_true",
                        help="also file the results, dated, with this machine and commit, in docs/benchmarks/")
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


def write(bench: str, printed: str, code: int, argv: list[str], *, now: dt.datetime | None = None,
          pages: Path = PAGES) -> Path:
    """File one run at the top of ``<pages>/<bench>.md`` (created when missing), older runs kept."""
    now = now or dt.datetime.now(dt.timezone.utc)
    command = f"python bench/{bench}.py {shlex.join(a for a in argv if a != '--write')}".rstrip()
    section = "\n".join([
        f"## {now:%Y-%m-%d %H:%M} UTC — {machine()}",
        "",
        f"Commit `{commit()}`; `{command}`; exit code {code}.",
        "",
        "```",
        printed.rstrip("\n"),
        "```",
        "",
    ])
    page = pages / f"{bench}.md"
    text = page.read_text() if page.exists() else f"# `{bench}`\n\n{MARK}\n"
    if MARK not in text:
        text = text.rstrip("\n") + f"\n\n{MARK}\n"
    head, tail = text.split(MARK, 1)
    page.parent.mkdir(parents=True, exist_ok=True)
    tail = tail.lstrip("\n")
    page.write_text(f"{head}{MARK}\n\n{section}" + (f"\n{tail}" if tail else ""))
    return page


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
    return (f"{os.cpu_count()} cores, {memory or '? GiB'}, {cpu or platform.processor() or platform.machine()}, "
            f"load {load}")


def commit() -> str:
    """The checkout's commit, marked when the tree has changes not committed."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} with uncommitted changes" if dirty else head
