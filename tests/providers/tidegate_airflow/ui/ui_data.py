"""A control database as the platform leaves it, for the Tidegate page's tests.

``device_fleet`` runs in east and west (east active), each with half an hour of batch
metrics; ``hot_readings`` has a run in east whose driver vanished (its lease expired but
nobody recorded it) and never ran in west. The drill history: a region-loss drill refused
before it broke anything, one that failed at its recover step (what the restore did and the
state it left, as ``drills.abandon`` records them), a node-failure drill that passed with a
GX check whose Data Docs site lies in a temporary GX project, and an aborted planned stop.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from tidegate.control.db import ControlDB

JOB = "device_fleet"
LOST_JOB = "hot_readings"
US = 1_000_000
BATCHES = 60  # one every 30 s: half an hour


@dataclass(frozen=True)
class Fixture:
    url: str
    path: Path
    now: float
    runs: dict  # (job, region) -> run id
    drill_id: int
    planned_stop_id: int
    refused_drill_id: int
    failed_drill_id: int
    check_id: int
    docs_site: Path
    docs_page: Path


def make_data_docs(root: Path) -> tuple[Path, Path]:
    """A miniature GX Data Docs site: index, a validation page two folders down, a stylesheet."""
    site = root / "uncommitted" / "data_docs" / "local_site"
    page = site / "validations" / "tidegate_completeness" / "20260101T000000Z" / "device_fleet-west.html"
    page.parent.mkdir(parents=True)
    (site / "static").mkdir()
    (site / "static" / "styles.css").write_text("body { font-family: sans-serif; }\n")
    (site / "index.html").write_text("<html><body><h1>Data Docs index</h1></body></html>\n")
    page.write_text(
        '<html><head><link rel="stylesheet" href="../../../static/styles.css"></head>'
        "<body><h1>Validation of device_fleet in west</h1><p>10 expectations, 10 successful</p>"
        '<a href="../../../index.html">home</a></body></html>\n'
    )
    return site, page


# how far the consumer view fell behind during the passed drill (runtime.outputs.consumer_gap)
DRILL_GAP = {"max_delay_s": 212.4, "beyond_allowed_s": 0.0, "allowed_delay_s": 600.0, "moments": 41, "worst_at": 1000.0}


def build_control_db(root: Path, *, now: float | None = None, url: str | None = None) -> Fixture:
    """Fill a control database (SQLite under ``root`` unless ``url`` names another one)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "control.db"
    url = url or f"sqlite:///{path}"
    now = time.time() if now is None else now
    clock = [now - 3600]
    db = ControlDB(url, now=lambda: clock[0])
    site, page = make_data_docs(root / "gx")

    for job in (JOB, LOST_JOB):
        spec = {"name": job, "version": 1}
        db.register_version(job, 1, (job[0] * 64)[:64], spec, f"name: {job}\nversion: 1\n", f"/jobs/{job}.yaml")
    db.register_version(
        JOB, 2, "2" * 64, {"name": JOB, "version": 2}, f"name: {JOB}\nversion: 2\n", f"/jobs/{JOB}-v2.yaml"
    )

    runs = {}
    for region in ("east", "west"):
        clock[0] = now - 1900
        run_id = db.create_run(
            job=JOB,
            region=region,
            version=2,
            fingerprint="2" * 64,
            lineage=f"lin-{region}",
            kind="job",
            input="/var/tidegate/event-log",
            start_mode="last-stopped" if region == "east" else "now",
            output_start_us=int((now - 4000) * US),
            checkpoint="reused" if region == "east" else "fresh",
            checkpoint_reason="same logic",
            status="running",
            host="driver-host-" + region,
            pid=4242,
            started_at=now - 1890,
            heartbeat_at=now - 5,
            log_path=f"/var/log/{region}.log",
            context={"actor": "test"},
        )
        runs[(JOB, region)] = run_id
        db.set_deployment(JOB, region, version=2, desired="running", keep_running=True, current_run=run_id)
        db.acquire_lease(f"job:{JOB}:{region}", f"run-{run_id}", ttl_s=7200, host="driver-host-" + region, pid=4242)
        _batches(db, clock, run_id, JOB, region, now, west=(region == "west"))
        db.update_run(
            run_id,
            last_batch_id=BATCHES - 1,
            job_watermark_us=int((now - 95) * US),
            last_output_us=int((now - 120) * US),
            input_events=BATCHES * 1000,
            backlog_events=3,
        )
    clock[0] = now - 3000
    db.set_active_region(JOB, "east", "initial placement")

    # a driver that died without saying so: recorded running, lease long expired
    clock[0] = now - 900
    lost = db.create_run(
        job=LOST_JOB,
        region="east",
        version=1,
        fingerprint="h" * 64,
        lineage="lin-hot",
        input="/var/tidegate/event-log",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="first start",
        status="running",
        host="driver-host-east",
        pid=4343,
        started_at=now - 890,
        heartbeat_at=now - 600,
    )
    runs[(LOST_JOB, "east")] = lost
    db.acquire_lease(f"job:{LOST_JOB}:east", f"run-{lost}", ttl_s=30)  # expired at now − 870
    db.set_active_region(LOST_JOB, "east", "initial placement")

    refused, failed = _drills_that_did_not_pass(db, clock, now)
    clock[0] = now - 1500
    drill = db.start_procedure("drill:node-failure", JOB, "west", estimate_s=120.0)
    clock[0] = now - 1404.5
    check = db.record_check(
        JOB,
        "west",
        True,
        span=(int((now - 1800) * US), int((now - 1400) * US)),
        summary="10 of 10 expectations met: no missing window, no duplicate, equal to the batch path",
        findings={"missing": [], "duplicates": [], "mismatched": []},
        data_docs=str(page),
        context={"drill": drill, "kind": "node-failure"},
    )
    db.finish_procedure(
        drill,
        "passed",
        actual_s=95.5,
        checks=[
            {"name": "resumed from checkpoint", "passed": True},
            {"name": "gap reprocessed only", "passed": True, "detail": "2 batches replayed"},
            {"name": "completeness (GX)", "passed": True, "check_id": check},
        ],
        data_docs=str(page),
        detail=json.dumps({"consumer_gap": DRILL_GAP}),
    )
    clock[0] = now - 700
    stop = db.start_procedure("planned-stop", JOB, "east", estimate_s=300.0)
    clock[0] = now - 300
    db.finish_procedure(stop, "aborted", actual_s=None, detail="the estimate (300 s) exceeds the allowed delay (120 s)")
    db.record_operation("failover", "refused", job=JOB, region="west", detail={"why": "west is behind"}, actor="dag")
    db.dispose()
    return Fixture(
        url=url,
        path=path,
        now=now,
        runs=runs,
        drill_id=drill,
        planned_stop_id=stop,
        refused_drill_id=refused,
        failed_drill_id=failed,
        check_id=check,
        docs_site=site,
        docs_page=page,
    )


REFUSED_WHY = f"drill of {JOB} in west not started, nothing was broken: west has not caught up (backlog 120 events)"
FAILED_WHY = "the drill failed at its recover step (see that task's log)"
LOST_STORAGE = "/var/tidegate/east/lost/device_fleet-1767222000"
RESTORED = [f"moved east's storage back from {LOST_STORAGE}", f"started {JOB} in east (run 7, reused checkpoint)"]
STATE_LEFT = {
    "consumers_read": "west",
    "regions": {
        "east": {"state": "running", "run": 7, "caught_up": False, "storage": True},
        "west": {"state": "running", "run": 2, "caught_up": True, "storage": True},
    },
}


def _drills_that_did_not_pass(db: ControlDB, clock: list, now: float) -> tuple[int, int]:
    """Rows as ``drills.prepare`` (refused) and ``drills.abandon`` (failed part-way) write them."""
    clock[0] = now - 3500
    refused = db.start_procedure("drill:region-loss", JOB, "west", detail=json.dumps({"refused": REFUSED_WHY}))
    db.finish_procedure(refused, "refused", detail=json.dumps({"refused": REFUSED_WHY}))
    clock[0] = now - 3400
    failed = db.begin_procedure(
        "drill:region-loss",
        JOB,
        "east",
        ttl_s=4200,
        detail=json.dumps({"preflight": {"region": "east", "partner": "west"}}),
    )
    broken = {
        "kind": "region-loss",
        "job": JOB,
        "region": "east",
        "at": now - 3390,
        "killed_run": 1,
        "killed_pid": 4242,
        "storage_moved_to": LOST_STORAGE,
        "failover": {
            "job": JOB,
            "from_region": "east",
            "to_region": "west",
            "switched": True,
            "reason": "drill: region east lost",
            "waited_s": 0.0,
            "catching_up_through_us": None,
        },
    }
    clock[0] = now - 3100
    db.finish_procedure(
        failed,
        "failed",
        estimate_s=240.0,
        detail=json.dumps({"failed": FAILED_WHY, "broken": broken, "actions": RESTORED, "state_left": STATE_LEFT}),
    )
    return refused, failed


def _batches(db: ControlDB, clock: list, run_id: int, job: str, region: str, now: float, west: bool) -> None:
    for b in range(BATCHES):
        at = now - (BATCHES - b) * 30
        clock[0] = at
        rate = 40.0 + (b % 10) * (3 if west else 2)
        stages = {"stages": [], "substreams": {}, "input_rate_eps": rate}
        if west and b % 7 == 0:
            stages = {"stages": [], "substreams": {}}  # no rate recorded: the page derives it
        db.record_batch(
            run_id=run_id,
            batch_id=b,
            job=job,
            region=region,
            processed_at=at,
            batch_seconds=4.0,
            input_events=1000 + b,
            quarantined=b % 3,
            rows_emitted=60,
            out_of_order_adjusted=b % 5,
            out_of_order_dropped=0,
            late_adjusted=b % 4,
            late_dropped=1 if b % 9 == 0 else 0,
            early_dropped=1 if b % 6 == 0 else 0,
            job_watermark_us=int((at - 95) * US),
            watermark_delay_us=int((95 + (b % 12) * (4 if west else 1)) * US),
            processing_time_watermark_us=int((at - 2) * US),
            processing_lag_us=int(2.5 * US),
            last_output_us=int((at - 120) * US),
            backlog_events=3,
            end_offsets={"0": b * 500, "1": b * 500},
            partitions={"0": {"input": 500}, "1": {"input": 500}},
            stages=stages,
        )


@dataclass(frozen=True)
class Restarted:
    """A job restarted on its checkpoint: run 1 of lineage ``lin-r`` processed batches 0–4
    and stopped; run 2 (running, its lease held) reuses the checkpoint and has recorded no
    batch yet."""

    url: str
    first_run: int
    second_run: int
    last_output_us: int  # the lineage's
    emitted_through_us: int  # the lineage's
    watermark_us: int  # of run 1's last batch
    db: ControlDB  # to record run 2's batches


RESTARTED_JOB = "restarted"
RESTARTED_BATCHES = 5


def restarted_counts(batch: int) -> dict[str, int]:
    """The counts batch ``batch`` of the restarted job records, whichever run processes it."""
    return dict(
        input_events=100 + batch,
        quarantined=1,
        rows_emitted=10,
        out_of_order_adjusted=batch,
        out_of_order_dropped=0,
        late_adjusted=2,
        late_dropped=batch % 2,
        early_dropped=1,
    )


def build_restarted_job(root: Path, now: float) -> Restarted:
    root.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{root / 'control.db'}"
    clock = [now - 1000]
    db = ControlDB(url, now=lambda: clock[0])
    job, region = RESTARTED_JOB, "east"
    db.register_version(job, 1, "r" * 64, {"name": job, "version": 1}, f"name: {job}\n", f"/jobs/{job}.yaml")
    common = dict(
        job=job,
        region=region,
        version=1,
        fingerprint="r" * 64,
        lineage="lin-r",
        kind="job",
        input="/var/tidegate/event-log",
        host="driver-host-east",
        pid=5151,
    )
    first = db.create_run(
        **common,
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="first start",
        status="stopped",
        started_at=now - 990,
        ended_at=now - 300,
    )
    db.create_lineage(
        id="lin-r",
        job=job,
        region=region,
        fingerprint="r" * 64,
        version=1,
        root="/var/r/lin-r",
        output_from_us=int((now - 1000) * US),
        windowed=True,
        created_by_run=first,
    )
    for b in range(RESTARTED_BATCHES):
        at = now - 900 + b * 60
        clock[0] = at
        db.record_batch(
            run_id=first,
            batch_id=b,
            job=job,
            region=region,
            processed_at=at,
            batch_seconds=1.0,
            job_watermark_us=int((at - 30) * US),
            watermark_delay_us=30 * US,
            last_output_us=int((at - 60) * US),
            **restarted_counts(b),
        )
    watermark = int((now - 900 + (RESTARTED_BATCHES - 1) * 60 - 30) * US)
    last_output = watermark - 30 * US
    db.update_run(first, last_batch_id=RESTARTED_BATCHES - 1, job_watermark_us=watermark, last_output_us=last_output)
    db.update_lineage("lin-r", last_output_us=last_output, emitted_through_us=watermark, last_offsets={"0": 500})
    clock[0] = now - 10
    second = db.create_run(
        **common,
        start_mode="last-stopped",
        checkpoint="reused",
        checkpoint_reason="same logic",
        status="running",
        started_at=now - 9,
        heartbeat_at=now - 1,
    )
    db.set_deployment(job, region, version=1, desired="running", keep_running=True, current_run=second)
    db.acquire_lease(f"job:{job}:{region}", f"run-{second}", ttl_s=7200, host="driver-host-east", pid=5151)
    db.set_active_region(job, region, "initial placement")
    return Restarted(
        url=url,
        first_run=first,
        second_run=second,
        last_output_us=last_output,
        emitted_through_us=watermark,
        watermark_us=watermark,
        db=db,
    )


def expected_totals() -> dict[str, int]:
    late = sum(b % 4 + (1 if b % 9 == 0 else 0) for b in range(BATCHES))
    early = sum(1 if b % 6 == 0 else 0 for b in range(BATCHES))
    ooo = sum(b % 5 for b in range(BATCHES))
    return {"late": late, "early": early, "out_of_order": ooo}


def table_fingerprint(path: Path) -> str:
    """Every row of every table, to prove the page wrote nothing."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return json.dumps(
            {t: [list(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2")] for t in tables}, default=str
        )
    finally:
        conn.close()
