"""A benchmark's ``--write``: its run filed in full at the top of its results page, dated, with
the machine and the commit; the runs before it as rows of a short table (bench/results_page.py)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import results_page  # noqa: E402


def test_the_latest_run_is_filed_in_full_and_the_one_before_becomes_a_row_of_earlier_runs(tmp_path):
    page = tmp_path / "bench_x.md"
    page.write_text(f"# `bench_x`\n\nWhat it measures.\n\n{results_page.MARK}\n\n## Earlier runs (by hand)\n\nnotes\n")
    first = dt.datetime(2026, 11, 26, 9, 30, tzinfo=dt.UTC)
    results_page.write(
        "bench_x",
        "events 10\nratio 0.91  (bar 0.8)\ndone\n",
        0,
        ["--events", "10", "--write"],
        now=first,
        pages=tmp_path,
    )
    results_page.write("bench_x", "ratio 0.93\n", 1, [], now=first + dt.timedelta(days=1), pages=tmp_path)
    text = page.read_text()
    assert text.startswith("# `bench_x`\n\nWhat it measures.\n")
    latest, earlier = text.split("## Earlier runs\n")
    assert "## 2026-11-27 09:30 UTC — " in latest and "ratio 0.93\n```" in latest
    assert "`python bench/bench_x.py`; exit code 1." in latest and f"Commit `{results_page.commit()}`" in latest
    assert "--write" not in text.split(results_page.MARK)[1] and "notes" not in text  # hand notes: in git
    row = f"| 2026-11-26 09:30 | {results_page.machine().split(', load')[0]}"
    assert earlier.count("\n| 2026-") == 1 and row in earlier
    assert earlier.rstrip().endswith(f"| `{results_page.commit()}` | ratio 0.91 (bar 0.8) |")


def test_the_table_of_earlier_runs_is_short_newest_first(tmp_path):
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    for day in range(results_page.EARLIER_ROWS + 5):
        results_page.write("bench_y", f"error {day}%\n", 0, [], now=start + dt.timedelta(days=day), pages=tmp_path)
    rows = [line for line in (tmp_path / "bench_y.md").read_text().splitlines() if line.startswith("| 2026-")]
    assert len(rows) == results_page.EARLIER_ROWS
    assert rows[0].startswith("| 2026-11-19 00:00 |") and rows[0].endswith("| error 18% |")  # the run before the latest


def test_a_run_without_a_ratio_is_headlined_by_its_last_line_and_a_failed_one_by_its_exit_code():
    section = (
        "## 2026-11-26 09:30 UTC — 2 cores\n\nCommit `abc`; `python bench/b.py`; exit code 1.\n\n"
        "```\nx\nall | done\n```"
    )
    assert results_page.headline(section) == "all | done"
    assert results_page._row(section) == "| 2026-11-26 09:30 | 2 cores | `abc`, exit 1 | all / done |"


def test_a_page_that_does_not_exist_yet_is_created(tmp_path):
    page = results_page.write("bench_new", "x\n", 0, [], pages=tmp_path)
    assert page == tmp_path / "bench_new.md"
    assert results_page.MARK in page.read_text() and "x\n```" in page.read_text()


def test_a_printed_tables_head_is_not_a_headline_and_a_count_within_the_bar_is():
    section = (
        "## 2026-11-26 09:30 UTC — 2 cores\n\nCommit `abc`; `python bench/b.py`; exit code 0.\n\n"
        "```\n| procedure | estimate (s) | error |\n|---|---|---|\n| failover | 37.8 | -23% |\n"
        "estimates within 25%: 3 of 3\n```"
    )
    assert results_page.headline(section) == "estimates within 25%: 3 of 3"
