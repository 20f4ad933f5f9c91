"""The loss of the region that runs the platform, under live traffic, with nobody acting
(bench/bench_control_region_loss.py), lost through the platform's own ``control-region-loss``
drill: east holds the control database's primary, runs Airflow beside west's, and serves
consumers; the drill, triggered through east's API and run by east's scheduler, kills east's
drivers and then every other process of east at once — its own task with them. West's
database must be promoted by its quorum, west's scheduler must run the drill's break again and
the drill go on from its record, west's Airflow must run the health watch on its schedule, the
watch's failover must move consumers to west and restore east's duplicate with both Great
Expectations checks passing, the drill must bring east back with its PostgreSQL as the
standby and pass its own checks, and the consumer view must equal the batch path: nothing
missing, nothing doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]


def test_losing_the_primarys_region_moves_consumers_to_the_other_without_an_operator(tmp_path):
    from tidegate.control.ha.programs import missing_programs

    missing = missing_programs()
    if missing:  # as the cluster fixture does: a failure in CI, whose setup installs them
        message = f"the replicated control database needs {', '.join(missing)}: run scripts/prerequisites.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    results = tmp_path / "region-loss.json"
    bench = REPO / "bench" / "bench_control_region_loss.py"
    done = subprocess.run(  # 10 s undisturbed is several of the consumer view's cadences (~1.5 s)
        [sys.executable, str(bench), "--by", "drill", "--settle", "10", "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=2400,
        cwd=REPO,
    )
    assert results.exists(), done.stdout[-3000:] + done.stderr[-6000:]
    case = json.loads(results.read_text())
    figures = case["figures"]
    assert case["passed"], (case["problems"], done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-3000:]
    assert case["dag_ok"] and case["consumers"] == "west"
    assert case["regions"]["east"] == case["regions"]["west"] == "running"
    score = case["score"]
    assert (score["missing"], score["extra"], score["duplicated"], score["differing"]) == (0, 0, 0, 0)
    assert score["rows"] > 0 and case["appended"] > 0  # rows compared, traffic live throughout
    tasks = figures["failover_tasks"]
    assert tasks["check_consumer_view"] == tasks["check_restored_region"] == "success"  # GX, both views
    # in order: the quorum promotes west, then the watch acts, then consumers move and read new output
    assert 0 < figures["promoted_s"] <= figures["failover_triggered_s"] <= figures["consumers_moved_s"]
    assert figures["consumers_moved_s"] <= figures["first_new_output_s"]
    assert case["gap_s"] is not None and case["view_behind"].get("max_delay_s") is not None
    drill = figures["drill"]  # the drill's run, read through west's API, and its record
    assert drill["state"] == "success" and drill["result"] == "passed", drill
    assert drill["taken_over"], drill  # its break died with east and west's scheduler went on from the record
    assert drill["tasks"]["check_completeness"] == "success"  # GX on east rebuilt by replay and on the consumer view
    assert drill["recovered"]["restarted_by"] == "failover" and drill["recovered"]["rejoined_standby_s"] > 0
    print(f"\nthe drill: {drill}")
    print(
        f"kill → promoted {figures['promoted_s']} s, failover run {figures['failover_triggered_s']} s, "
        f"consumers on west {figures['consumers_moved_s']} s, first new output {figures['first_new_output_s']} s; "
        f"gap {case['gap_s']} s (cadence {figures['cadence_s']} s)"
    )
