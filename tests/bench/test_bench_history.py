"""The history benchmark's short form (bench/bench_history.py --short): a 10-minute span read
and checked with a compacted week behind it reads the same files as with one hour behind it.

Time is printed, not asserted: on 2 shared cores one run's Spark jobs take 2–4 s either way,
so the ratio moves with the machine's load; the files a read lists are what make it cost
the span and not the history."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_a_span_reads_the_same_files_with_a_week_behind_it_as_with_an_hour(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_history.py"), "--short", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("history:")), None)
    assert line is not None, done.stderr[-3000:]
    found = dict(re.findall(r"(\w+)=([\d.]+)", line))
    assert int(found["files_week"]) == int(found["files_hour"]) > 0, line
    assert int(found["rows_week"]) == int(found["rows_hour"]) == 10 * 10, line  # 10 minutes × 10 devices
    assert "168 compacted files" in done.stderr, done.stderr[-3000:]
