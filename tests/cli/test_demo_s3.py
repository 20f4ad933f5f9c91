"""`tidegate demo run --storage s3`: the demo end to end with its lineages on a local SeaweedFS
store (s3a://tidegate-demo/lineages), streaming equal to the batch path, batches committed
by record and nothing renamed into place."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from platform_support import REPO
from s3 import require_weed

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_the_demo_runs_on_s3_and_streaming_equals_the_batch_path(tmp_path):
    require_weed()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidegate.cli",
            "demo",
            "run",
            "--storage",
            "s3",
            "--home",
            str(tmp_path / "demo"),
            "--events",
            "6000",
            "--max-events-per-batch",
            "2000",
            "--partitions",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "streaming vs batch: 0 missing, 0 extra" in done.stdout
    assert "output      s3a://tidegate-demo/lineages/stream/output" in done.stdout
    assert "lineages under s3a://tidegate-demo/lineages" in done.stderr
