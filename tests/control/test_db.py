"""The control database on SQLite and on a real PostgreSQL: versions, leases, active region, metrics,
and an older database brought up to this schema."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import text

from support import Clock, at_once
from tidegate.control import schema as S
from tidegate.control.db import ControlDB
from tidegate.errors import TidegateError


def test_a_version_registers_once_and_its_logic_never_changes(control_url):
    db = ControlDB(control_url)
    assert db.register_version("fleet", 1, "a" * 64, {"name": "fleet"}, "name: fleet\n", "/jobs/fleet.yaml")
    assert not db.register_version("fleet", 1, "a" * 64, {"name": "fleet"}, "name: fleet\n", "/jobs/fleet.yaml")
    with pytest.raises(TidegateError) as err:
        db.register_version("fleet", 1, "b" * 64, {"name": "fleet"}, "changed\n", None)
    assert "already registered with other logic" in str(err.value) and "new version number" in str(err.value)
    db.register_version("fleet", 2, "b" * 64, {"name": "fleet"}, "changed\n", None)
    assert db.version("fleet").version == 2
    assert db.version("fleet", 1).fingerprint == "a" * 64
    assert db.jobs() == ["fleet"]


def test_spec_documents_keep_their_key_order(control_url):
    # payload and aggregate order is meaning (output columns, fingerprints): never sorted
    db = ControlDB(control_url)
    db.register_version("j", 1, "f" * 64, {"aggregates": {"zeta": "count(*)", "alpha": "sum(x)"}}, "", None)
    assert db.version("j").spec_json.index("zeta") < db.version("j").spec_json.index("alpha")


def test_of_many_concurrent_claims_exactly_one_takes_the_lease(control_url):
    db = ControlDB(control_url)
    winners = []
    barrier = threading.Barrier(8)

    def claim(n: int) -> None:
        barrier.wait()
        if ControlDB(control_url, create=False).acquire_lease("job:fleet:east", f"run-{n}", 30):
            winners.append(n)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert db.lease("job:fleet:east").holder == f"run-{winners[0]}"


def test_a_lease_passes_on_only_once_it_expires_and_the_old_holder_then_cannot_renew(control_url):
    clock = Clock()
    db = ControlDB(control_url, now=clock)
    assert db.acquire_lease("job:fleet:east", "run-1", ttl_s=15)
    assert not db.acquire_lease("job:fleet:east", "run-2", ttl_s=15)
    clock.advance(10)
    assert db.renew_lease("job:fleet:east", "run-1", ttl_s=15)  # now expires at +25
    clock.advance(14)
    assert not db.acquire_lease("job:fleet:east", "run-2", ttl_s=15)
    clock.advance(2)
    assert db.acquire_lease("job:fleet:east", "run-2", ttl_s=15)
    assert not db.renew_lease("job:fleet:east", "run-1", ttl_s=15)  # fenced off: it must stop
    db.release_lease("job:fleet:east", "run-1")  # not its lease any more: nothing happens
    assert db.lease("job:fleet:east").holder == "run-2"


def test_switching_the_active_region_is_a_compare_and_set(control_url):
    db = ControlDB(control_url)
    assert db.active_region("fleet") is None
    assert db.set_active_region("fleet", "east", "first start")
    assert db.set_active_region("fleet", "west", "failover", expect="east")
    # a second failover that still believes east is active loses
    assert not db.set_active_region("fleet", "west", "failover", expect="east")
    assert db.active_region("fleet").region == "west"
    assert db.active_region("fleet").reason == "failover"


def test_a_rerun_batch_replaces_its_metrics_row_and_totals_add_up(control_url):
    db = ControlDB(control_url)
    run_id = db.create_run(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l1",
        input="/h",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="test",
        status="running",
    )
    common = dict(run_id=run_id, job="fleet", region="east", processed_at=1.0, quarantined=0, rows_emitted=3)
    db.record_batch(batch_id=0, input_events=100, late_adjusted=2, **common)
    db.record_batch(batch_id=1, input_events=50, late_adjusted=1, **common)
    db.record_batch(batch_id=1, input_events=50, late_adjusted=1, **common)  # the same batch after a crash
    totals = db.run_totals(run_id)
    assert totals["input_events"] == 150 and totals["late_adjusted"] == 3 and totals["rows_emitted"] == 6
    assert [m.batch_id for m in db.batch_metrics("fleet", "east")] == [0, 1]


def test_batch_metrics_give_a_runs_first_or_last_batches_oldest_first(control_url):
    db = ControlDB(control_url)
    run_id = db.create_run(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l1",
        input="/h",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="test",
        status="running",
    )
    for b in range(5):
        db.record_batch(
            run_id=run_id,
            job="fleet",
            region="east",
            batch_id=b,
            processed_at=10.0 + b,
            input_events=b,
            quarantined=0,
            rows_emitted=0,
        )
    assert [m.batch_id for m in db.batch_metrics("fleet", run_id=run_id, limit=2, first=True)] == [0, 1]
    assert [m.batch_id for m in db.batch_metrics("fleet", run_id=run_id, limit=2)] == [3, 4]


def test_lineage_totals_add_every_run_on_the_checkpoint_and_count_a_rerun_batch_once(control_url):
    # run 1 ── b0 b1 ──✗ │ run 2 (same checkpoint) ── b1 again, b2 │ run 3 (another lineage) ── b0
    db = ControlDB(control_url)
    run = dict(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        input="/h",
        start_mode="now",
        checkpoint_reason="test",
        status="running",
    )
    first = db.create_run(lineage="l1", checkpoint="fresh", **run)
    assert db.lineage_totals("l1") == dict.fromkeys(ControlDB.COUNTS, 0)  # before its first batch
    second = db.create_run(lineage="l1", checkpoint="reused", **run)
    other = db.create_run(lineage="l2", checkpoint="fresh", **run)
    common = dict(job="fleet", region="east", processed_at=1.0, quarantined=0, rows_emitted=3)
    db.record_batch(run_id=first, batch_id=0, input_events=100, late_adjusted=2, **common)
    db.record_batch(run_id=first, batch_id=1, input_events=50, late_adjusted=1, **common)
    db.record_batch(run_id=second, batch_id=1, input_events=50, late_adjusted=1, **common)  # re-run after the crash
    db.record_batch(run_id=second, batch_id=2, input_events=7, early_dropped=4, **common)
    db.record_batch(run_id=other, batch_id=0, input_events=1000, **common)
    totals = db.lineage_totals("l1")
    assert (totals["input_events"], totals["late_adjusted"], totals["early_dropped"], totals["rows_emitted"]) == (
        157,
        3,
        4,
        9,
    )
    assert db.lineage_totals("l2")["input_events"] == 1000


def test_only_one_driver_process_can_claim_a_run(control_url):
    db = ControlDB(control_url)
    run_id = db.create_run(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l1",
        input="/h",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="test",
        status="starting",
    )
    assert db.claim_run(run_id, 100, "host-a", pid_started_at=1700000000.25)
    assert not db.claim_run(run_id, 200, "host-b", pid_started_at=1700000001.5)
    assert (db.run(run_id).pid, db.run(run_id).pid_started_at) == (100, 1700000000.25)


def test_an_unreachable_database_says_which_and_what_to_do():
    with pytest.raises(TidegateError) as err:
        ControlDB("postgresql+psycopg://tidegate@127.0.0.1:1/none")
    assert "cannot open the control database" in str(err.value) and "TIDEGATE_CONTROL_DB" in str(err.value)


def test_every_change_of_holder_grows_the_fencing_epoch_and_a_release_never_resets_it(control_url):
    clock = Clock()
    db = ControlDB(control_url, now=clock)
    first = db.acquire_lease("job:fleet:east", "run-1", ttl_s=15)
    assert first == 1 and db.holds("job:fleet:east", "run-1", 1)
    assert db.acquire_lease("job:fleet:east", "run-1", ttl_s=15) == 1  # the driver of the same run: same epoch
    clock.advance(16)
    assert not db.holds("job:fleet:east", "run-1", 1)  # expired: no commit may rely on it
    assert db.acquire_lease("job:fleet:east", "run-2", ttl_s=15) == 2
    assert not db.holds("job:fleet:east", "run-1", 1) and db.holds("job:fleet:east", "run-2", 2)
    db.release_lease("job:fleet:east", "run-2")
    assert not db.holds("job:fleet:east", "run-2", 2)
    assert db.acquire_lease("job:fleet:east", "run-3", ttl_s=15) == 3
    assert db.epoch("job:fleet:east") == 3 and db.epoch("job:other:east") == 0


def test_lease_expiry_is_judged_by_the_database_clock_not_the_callers(control_url):
    holder = ControlDB(control_url)
    assert holder.acquire_lease("job:fleet:east", "run-1", ttl_s=30)
    skewed = ControlDB(control_url, create=False)
    skewed.now = lambda: time.time() + 3600  # a host whose clock runs an hour ahead
    assert not skewed.acquire_lease("job:fleet:east", "run-2", ttl_s=30)
    assert skewed.lease_live("job:fleet:east", "run-1") is not None
    assert abs(skewed.clock() - time.time()) < 5  # the server's clock, whatever the caller's says


@pytest.mark.parametrize("control_url", ["postgresql"], indirect=True)
def test_postgresql_connections_time_out_instead_of_hanging(control_url):
    from sqlalchemy import text

    from tidegate.control.db import PG_STATEMENT_TIMEOUT_S

    db = ControlDB(control_url)
    with db.engine.connect() as c:
        assert c.execute(text("SHOW statement_timeout")).scalar() == f"{PG_STATEMENT_TIMEOUT_S}s"
        assert c.connection.dbapi_connection.info.get_parameters()["connect_timeout"] == "10"


def test_one_procedure_per_job_at_a_time_and_the_second_is_told_which_one_runs(control_url):
    from tidegate.control.db import ProcedureBusy

    db = ControlDB(control_url)
    results, barrier = [], threading.Barrier(4)

    def request(kind: str) -> None:
        barrier.wait()
        try:
            results.append(ControlDB(control_url, create=False).begin_procedure(kind, "fleet", "east", ttl_s=600))
        except ProcedureBusy as exc:
            results.append(exc)

    threads = [
        threading.Thread(target=request, args=(k,)) for k in ("failover", "failover", "drill:upgrade", "planned-stop")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, ProcedureBusy)]
    assert len(won) == 1 and len(refused) == 3
    assert all(f"(procedure {won[0]}" in str(r) and "already running" in str(r) for r in refused)
    assert db.procedure(won[0]).result == "running"
    assert db.begin_procedure("failover", "other-job", None, ttl_s=600)  # other jobs are not held up
    db.finish_procedure(won[0], "passed")
    assert db.procedure_lock("fleet") is None
    assert db.begin_procedure("drill:upgrade", "fleet", "west", ttl_s=600)


def test_a_procedure_that_died_without_ending_frees_the_job_when_its_lock_expires(control_url):
    clock = Clock()
    db = ControlDB(control_url, now=clock)
    dead = db.begin_procedure("failover", "fleet", "east", ttl_s=60)
    clock.advance(61)
    assert db.procedure_lock("fleet") is None
    fresh = db.begin_procedure("failover", "fleet", "east", ttl_s=60)
    assert db.procedure_lock("fleet").procedure_id == fresh != dead
    db.finish_procedure(dead, "failed")  # the late end of the dead one does not free the new lock
    assert db.procedure_lock("fleet").procedure_id == fresh


def test_write_lock_free_says_whether_another_process_holds_the_write_lock(control_url, tmp_path):
    db = ControlDB(control_url)
    assert db.write_lock_free()
    if not control_url.startswith("sqlite"):
        return  # PostgreSQL locks rows: there is no database-wide write lock to hold
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                f"c = sqlite3.connect({control_url.split('///', 1)[1]!r}, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); sys.stdin.readline()\n"
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not db.write_lock_free()
    finally:
        holder.communicate("\n", timeout=30)
    assert db.write_lock_free()


def _as_schema_1(url: str, *, renamed: bool = False) -> None:
    """Turn a new database into what Tidegate's schema 1 made: the run's input in ``runs.hub``
    (``renamed``: as a migration cut short after its rename leaves it), no start time beside a
    PID, no origin of a job version, one run and one version written then."""
    db = ControlDB(url)
    with db.engine.begin() as c:
        if not renamed:
            c.execute(text("ALTER TABLE runs RENAME COLUMN input TO hub"))
        for table in ("runs", "leases"):
            c.execute(text(f"ALTER TABLE {table} DROP COLUMN pid_started_at"))
        c.execute(text("ALTER TABLE job_versions DROP COLUMN origin"))
        c.execute(text("DELETE FROM tidegate_schema"))
        c.execute(text("INSERT INTO tidegate_schema (version, created_at) VALUES (1, 0)"))
        c.execute(
            text(
                f"INSERT INTO runs (job, region, version, fingerprint, lineage, kind, {'input' if renamed else 'hub'}, "
                "start_mode, checkpoint, checkpoint_reason, partial, status, force_stop, requested_at, input_events, "
                "rows_emitted) VALUES ('fleet', 'east', 1, 'ff', 'l1', 'job', '/var/tidegate/hub', 'now', 'fresh', "
                "'first', false, 'stopped', false, 1.0, 0, 0)"
            )
        )
        c.execute(
            text(
                "INSERT INTO job_versions (job, version, fingerprint, spec_json, spec_text, registered_at) "
                "VALUES ('fleet', 1, 'ff', '{}', 'name: fleet', 1.0)"
            )
        )
    db.dispose()


def test_a_schema_1_database_is_migrated_on_open_and_its_runs_read_back_with_their_input(control_url):
    _as_schema_1(control_url)
    db = ControlDB(control_url)
    assert db.schema_version() == S.SCHEMA_VERSION == 4
    assert db.version("fleet", 1).origin is None  # registered from a spec, before origins were kept
    run = db.latest_run("fleet", "east")
    assert run.input == "/var/tidegate/hub" and run.status == "stopped"
    assert run.pid_started_at is None  # written before start times were: its PID is checked by command line
    new = db.create_run(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l2",
        input="kafka://broker:9092/readings",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="test",
        status="running",
    )
    assert db.run(new).input == "kafka://broker:9092/readings"
    assert db.claim_run(new, 4242, "host-a", pid_started_at=1234.5) and db.run(new).pid_started_at == 1234.5
    assert db.acquire_lease("job:fleet:east", f"run-{new}", 60, host="host-a", pid=4242, pid_started_at=1234.5)
    assert db.lease("job:fleet:east").pid_started_at == 1234.5
    assert ControlDB(control_url).schema_version() == 4  # a second open finds nothing to do


def test_processes_opening_an_old_database_at_once_all_see_it_migrated_once(control_url):
    _as_schema_1(control_url)
    opened = at_once(lambda: ControlDB(control_url).schema_version(), 6)
    assert opened == [4] * 6, opened  # no opener failed, and each found the database migrated
    db = ControlDB(control_url)
    with db.engine.connect() as c:
        assert sorted(r.version for r in c.execute(S.schema_info.select())) == [1, 2, 3, 4]
    assert db.latest_run("fleet", "east").input == "/var/tidegate/hub"


def test_a_migration_cut_short_after_its_rename_is_finished_by_the_next_open(control_url):
    _as_schema_1(control_url, renamed=True)
    db = ControlDB(control_url)
    assert db.schema_version() == 4 and db.latest_run("fleet", "east").input == "/var/tidegate/hub"
