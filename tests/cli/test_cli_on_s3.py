"""Every command that reads a region, from a shell, on a platform whose regions keep their
lineages on S3: a real SeaweedFS store per region (tests/s3.py), keys in ``TIDEGATE_S3_<REGION>_*``.

One platform for all of them (a platform's start costs minutes): ``output compact`` and ``output
clean`` go through each region's store, ``output read`` of a region and of the consumer view,
``output view`` (the consumer view in DuckDB, with the region's keys in its session only),
``job batch-reference`` and ``output check`` each build a Spark session that carries hadoop-aws
and every region's store settings. Without the jars a command says so in one paragraph
(:func:`test_a_read_of_an_s3_region_without_the_s3a_jars_says_what_is_missing_and_what_fetches_it`,
fast: it fails before any JVM starts).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from platform_support import fill
from s3 import BUCKETS, region_env
from tidegate.eventtime.durations import format_time_us

JOB = "device-fleet-counts"
ROWS = 10  # 2,000 events give 16 window rows after T


def tidegate(p, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """``tidegate <args>`` as an operator runs it, in the platform's environment."""
    done = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", *args],
        env=p.cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr, done.stderr[-4000:]
    return done


@pytest.mark.spark
@pytest.mark.slow
def test_every_command_that_reads_a_region_works_on_s3_roots(platform_factory, s3_stores, monkeypatch, tmp_path):
    event_log = tmp_path / "event-log"
    fill(event_log, 2_000, seed=61)
    env = {"TIDEGATE_COMPACTION_GRACE": "1s"}  # batch folders merged by the compaction below are older than that
    for region in ("east", "west"):  # each region on its own store, with its own endpoint and keys
        for name, value in region_env(region, s3_stores[region]).items():
            monkeypatch.setenv(name, value)
        env[f"TIDEGATE_REGION_{region.upper()}_STORAGE"] = f"s3a://{BUCKETS[region]}/cli-{time.time_ns()}"
    p = platform_factory("cli-s3", event_log, env=env)
    t = p.start_pair(JOB)
    assert p.controller.db.active_region(JOB).region == "east"

    compacted = tidegate(p, "output", "compact", JOB, "--json")
    assert compacted.returncode == 0, compacted.stderr[-4000:]
    merged = json.loads(compacted.stdout)
    assert {c["output"].split("/", 1)[0] for c in merged} == set(BUCKETS.values()), merged  # each region's store
    cleaned = tidegate(p, "output", "clean", JOB, "--dry-run", "--json")
    assert cleaned.returncode == 0, cleaned.stderr[-4000:]
    assert json.loads(cleaned.stdout)["would_remove"] == []  # nothing of a new platform is past its retention

    east = tidegate(p, "output", "read", JOB, "--region", "east", "--from", format_time_us(t))
    assert east.returncode == 0, east.stderr[-4000:]
    rows = pd.read_csv(io.StringIO(east.stdout))
    assert len(rows) > ROWS and "window_end" in rows.columns
    view = tidegate(p, "output", "read", JOB, "--from", format_time_us(t), "--output", str(tmp_path / "view"))
    assert view.returncode == 0, view.stderr[-4000:]
    assert "from region east" in view.stderr and pq.read_table(tmp_path / "view").num_rows == len(rows)
    # the DuckDB consumer view: the same rows, read through httpfs with a secret made in its session only
    after = format_time_us(t).replace("T", " ").rstrip("Z")
    query = f"SELECT count(*) AS n FROM \"{JOB}\" WHERE window_end > TIMESTAMP '{after}'"
    duck = tidegate(p, "output", "view", JOB, "--query", query)
    assert duck.returncode == 0, duck.stderr[-4000:]
    assert pd.read_csv(io.StringIO(duck.stdout))["n"].tolist() == [len(rows)]
    secret = s3_stores["east"].settings().credentials.secret_access_key
    left = [duck.stdout, duck.stderr, *(f.read_text() for f in (p.config.home / "views").iterdir())]
    assert not any(secret in text for text in left)

    reference = tmp_path / "reference"
    batch = tidegate(
        p, "job", "batch-reference", JOB, "--from", format_time_us(t), "--output", str(reference), "--here"
    )
    assert batch.returncode == 0, batch.stderr[-4000:]
    assert pq.read_table(reference / "output").num_rows > ROWS
    result = tmp_path / "check.json"
    args = ["--from", format_time_us(t), "--result", str(result), "--here"]
    checked = tidegate(p, "output", "check", JOB, "--target", "east", "--target", "west", *args)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-4000:]
    assert [(o["target"], o["success"]) for o in json.loads(result.read_text())] == [("east", True), ("west", True)]


def test_a_read_of_an_s3_region_without_the_s3a_jars_says_what_is_missing_and_what_fetches_it(tmp_path):
    """No store is reached: the session's settings are refused before its JVM starts."""
    from platform_support import Platform

    p = Platform(
        tmp_path,
        tmp_path / "event-log",
        env={"TIDEGATE_REGION_EAST_STORAGE": "s3a://tidegate-east/x", "TIDEGATE_JVM_DEPS": str(tmp_path / "no-jars")},
    )
    done = tidegate(p, "output", "read", JOB, "--region", "east", timeout_s=120)
    assert done.returncode == 2 and done.stdout == ""
    message = done.stderr.strip()
    assert message.startswith("tidegate: error: the hadoop-aws jars are not in") and "\n" not in message, message
    assert "bash scripts/jvm_deps.sh" in message and "TIDEGATE_JVM_DEPS" in message
