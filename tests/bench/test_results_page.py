"""A benchmark's ``--write``: its run filed at the top of its results page, dated, with the
machine and the commit, earlier runs kept below it (bench/results_page.py)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import results_page  # noqa: E402


def test_a_run_is_filed_newest_first_with_its_date_machine_and_commit(tmp_path):
    page = tmp_path / "bench_x.md"
    page.write_text(f"# `bench_x`\n\nWhat it measures.\n\n{results_page.MARK}\n\n## Earlier runs\n\nold table\n")
    first = dt.datetime(2026, 11, 26, 9, 30, tzinfo=dt.timezone.utc)
    results_page.write("bench_x", "ratio 0.91\n", 0, ["--events", "10", "--write"], now=first, pages=tmp_path)
    results_page.write("bench_x", "ratio 0.93\n", 1, [], now=first + dt.timedelta(days=1), pages=tmp_path)
    text = page.read_text()
    assert text.startswith("# `bench_x`\n\nWhat it measures.\n")
    newer, older, earlier = text.index("ratio 0.93"), text.index("ratio 0.91"), text.index("## Earlier runs")
    assert text.index(results_page.MARK) < newer < older < earlier
    assert "## 2026-11-26 09:30 UTC — " in text and "## 2026-11-27 09:30 UTC — " in text
    assert " cores, " in text and "`python bench/bench_x.py --events 10`; exit code 0." in text
    assert "`python bench/bench_x.py`; exit code 1." in text
    assert "--write" not in text.split(results_page.MARK)[1]
    assert f"Commit `{results_page.commit()}`" in text


def test_a_page_that_does_not_exist_yet_is_created(tmp_path):
    page = results_page.write("bench_new", "x\n", 0, [], pages=tmp_path)
    assert page == tmp_path / "bench_new.md"
    assert results_page.MARK in page.read_text() and "x\n```" in page.read_text()
