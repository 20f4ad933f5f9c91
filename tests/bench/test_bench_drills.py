"""The drill matrix in CI (bench/bench_drills.py): each kind once — a node failure of the
active region, an upgrade of the standby, the loss of the active region (consumers fail
over) — through ``airflow dags test`` while the realtime generator feeds the log. The other
three cells (each kind against the other target) run the same code with the roles swapped,
and two concurrent failover requests and a drill that fails half way are the bench's too;
CI proves those two in tests/runtime/procedures/test_failover.py and
tests/providers/tidegate_airflow/procedures/test_procedures.py. Each case must end with
consumers on a running region, both regions running and caught up, the drill's estimate and
actual recorded, and the consumer view equal to the batch path: nothing missing, nothing
doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
MATRIX = ("node-failure / active", "upgrade / standby", "region-loss / active")


def test_every_drill_under_live_traffic_recovers_without_losing_or_doubling_a_row(tmp_path):
    results = tmp_path / "drills.json"
    chosen = [arg for name in MATRIX for arg in ("--case", name)]
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "bench_drills.py"),
            "--work",
            str(tmp_path / "work"),
            "--json",
            str(results),
            "--settle",
            "5",  # the cadence is a reported figure; every gap is measured from its own case's start
            *chosen,
        ],
        capture_output=True,
        text=True,
        timeout=3000,
        cwd=REPO,
    )
    assert results.exists(), done.stdout[-3000:] + done.stderr[-5000:]
    cases = {case["name"]: case for case in json.loads(results.read_text())}
    assert set(MATRIX) == set(cases), sorted(cases)
    for name, case in cases.items():
        assert case["passed"], (name, case["problems"])
        assert case["consumers"] in ("east", "west") and case["regions"]["east"] == case["regions"]["west"] == "running"
        score = case["score"]
        assert (score["missing"], score["extra"], score["duplicated"], score["differing"]) == (0, 0, 0, 0), name
        assert score["rows"] > 0, name
    for name in MATRIX:  # each drill recorded its estimate and how long the recovery really took
        assert cases[name]["dag_ok"] and cases[name]["estimate_s"] is not None and cases[name]["recover_s"] > 0, name
        assert cases[name]["view_behind"].get("max_delay_s") is not None, name  # and how far consumers fell behind
    assert done.returncode == 0, done.stdout[-3000:]
    assert "| case |" in done.stdout
    # the drill history an operator reads lists each drill with its result and checks
    platform = tmp_path / "work" / "platform"
    env = dict(
        os.environ,
        TIDEGATE_HOME=str(platform),
        TIDEGATE_EVENT_LOG=str(tmp_path / "work" / "event-log"),
        TIDEGATE_CONTROL_DB=f"sqlite:///{platform / 'control.db'}",
        TIDEGATE_REGIONS="east,west",
    )
    history = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "drill", "history", "device-fleet-counts"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert history.returncode == 0, history.stderr
    lines = [line for line in history.stdout.splitlines() if "drill:" in line]
    assert len(lines) == 3 and {line.split()[3] for line in lines} == {
        "drill:node-failure",
        "drill:upgrade",
        "drill:region-loss",
    }
    assert all(" passed " in line and "consumer ok" in line for line in lines), lines
