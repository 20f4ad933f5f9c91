"""The chaos benchmark's short form (bench/bench_chaos.py --short): two kill -9s and one
frozen driver woken beside its successor, and the output still equals the batch path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_kills_and_a_freeze_mid_stream_lose_and_double_nothing(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_chaos.py"), "--short", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=REPO,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("chaos:")), None)
    assert line is not None, done.stderr[-3000:]
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    assert (counts["missing"], counts["extra"], counts["duplicated"], counts["differing"]) == (0, 0, 0, 0), line
    assert counts["kills"] == 2 and counts["freezes"] == 1 and counts["runs"] >= 4
    assert counts["rows"] > 40
    assert done.returncode == 0, done.stderr[-3000:]
    assert "woke run" in done.stderr and "STILL RUNNING" not in done.stderr, done.stderr[-3000:]
