"""The procedures' decisions and records, on a real SQLite control database and a fake clock.

No driver runs here: each test sets up the rows a step reads — a procedure, a run, an
active region — calls the step as its ``@task`` does, and reads what it recorded.
"""

import json

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from tidegate_airflow.procedures import drill, failover, open_procedure, release
from tidegate_airflow.procedures.planned_stop import go_or_abort, record, roll_back

JOB = "fleet"
DEPLOYED = {"job": JOB, "version": 2}
PASSED = {"target": "east", "success": True, "span": ["2026-01-01T00:10:00Z", "2026-01-01T00:20:00Z"]}
FAILED = {"target": "consumer", "success": False, "span": None}


def add_run(db, version=2, status="running", catch_up_s=None) -> int:
    """A run of JOB in east; caught up, after ``catch_up_s``, when that is given."""
    caught_up = {} if catch_up_s is None else {"caught_up_at": db.now(), "catch_up_s": catch_up_s}
    return db.create_run(
        job=JOB,
        region="east",
        version=version,
        fingerprint="f" * 64,
        lineage="l1",
        input="/h",
        start_mode="last-stopped",
        checkpoint="fresh",
        checkpoint_reason="test",
        status=status,
        **caught_up,
    )


# -- deploy and restart: the release is their only leaf -----------------------------------


def test_a_deploy_that_reached_its_end_is_released_as_passed_and_its_run_stays_green(hook):
    procedure = open_procedure(hook, "deploy", JOB, None, {})
    release(procedure, True, "the deploy", hook)
    assert hook.controller.procedure(procedure).result == "passed"


def test_a_deploy_whose_start_failed_is_recorded_failed_and_fails_its_run(hook):
    procedure = open_procedure(hook, "deploy", JOB, None, {})
    with pytest.raises(AirflowFailException, match="the deploy did not reach its end .recorded failed"):
        release(procedure, False, "the deploy", hook)
    assert hook.controller.procedure(procedure).result == "failed"
    open_procedure(hook, "restart", JOB, "east", {})  # the job is free again


def test_a_deploy_that_failed_before_its_claim_fails_its_run_with_nothing_recorded(hook):
    with pytest.raises(AirflowFailException, match="nothing was recorded"):
        release(None, False, "the deploy", hook)
    assert hook.controller.db.procedures(JOB) == []


# -- planned stop -----------------------------------------------------------------------


def test_a_turn_whose_estimate_is_too_long_for_consumers_who_cannot_move_is_aborted_and_recorded(hook):
    db = hook.controller.db
    db.set_active_region(JOB, "east", "deploy")  # east serves consumers; west has never run
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    with pytest.raises(AirflowFailException, match="planned stop aborted: estimated catch-up 900 s exceeds"):
        go_or_abort(hook, procedure, JOB, "east", {"model_s": 900.0}, 600.0)
    row = db.procedure(procedure)
    assert (row.result, row.estimate_s) == ("aborted", 900.0)
    assert "consumers cannot move to west: it is never" in row.detail
    assert db.procedure_lock(JOB) is None  # an abort frees the job


def test_a_turn_of_the_region_consumers_do_not_read_goes_ahead_however_long_it_takes(hook):
    hook.controller.db.set_active_region(JOB, "west", "deploy")
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    decision = go_or_abort(hook, procedure, JOB, "east", {"model_s": 900.0}, 600.0)
    assert decision["proceed"] and decision["switch_to"] is None
    assert "east does not serve consumers" in decision["reason"]
    assert hook.controller.db.procedure(procedure).result == "running"


def test_a_turn_that_never_opened_its_record_fails_saying_so(hook):
    with pytest.raises(AirflowFailException, match="failed before it opened its record"):
        record(hook, None, None, rolled=None, started=None, checks=[None, None])


def test_a_rolled_back_turn_fails_naming_the_version_that_runs_again(hook):
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    rolled = {"region": "east", "restored_version": 1, "why": "version 2 did not become healthy in east (failed)"}
    with pytest.raises(AirflowFailException, match="planned stop of east rolled back to version 1: version 2 did"):
        record(hook, procedure, {"model_s": 30.0}, rolled=rolled, started=None, checks=[None, None])


def test_an_aborted_turn_fails_with_the_reason_it_was_aborted_and_stays_aborted(hook):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    db.finish_procedure(procedure, "aborted", detail="estimated catch-up 900 s exceeds the allowed 600 s")
    with pytest.raises(AirflowFailException, match="planned stop of east aborted: estimated catch-up 900 s"):
        record(hook, procedure, {"model_s": 900.0}, rolled=None, started=None, checks=[None, None])
    assert db.procedure(procedure).result == "aborted"


def test_a_turn_that_failed_before_the_restart_is_recorded_as_failed(hook):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    with pytest.raises(AirflowFailException, match="failed before the restart"):
        record(hook, procedure, {"model_s": 30.0}, rolled=None, started=None, checks=[None, None])
    row = db.procedure(procedure)
    assert (row.result, row.detail) == ("failed", "did not reach the restart")
    assert db.procedure_lock(JOB) is None


def test_a_turn_that_ran_records_estimate_against_the_measured_catch_up(hook):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    run = add_run(db, catch_up_s=50.0)
    summary = record(
        hook,
        procedure,
        {"model_s": 40.0, "rehearsal_s": 60.0},
        rolled=None,
        started={"run_id": run},
        checks=[PASSED, dict(PASSED, target="consumer")],
    )
    assert (summary["estimate_s"], summary["actual_s"], summary["relative_error"]) == (60.0, 50.0, 0.2)
    # each way's figure and error, and the one the decision used
    assert summary["estimates"] == {
        "model_s": 40.0,
        "rehearsal_s": 60.0,
        "used": "rehearsal",
        "used_why": "the rehearsal's, the larger of model 40 s and rehearsal 60 s",
        "model_error": -0.2,
        "rehearsal_error": 0.2,
    }
    assert db.procedure(procedure).result == "passed"
    assert (db.run(run).estimate_model_s, db.run(run).estimate_rehearsal_s) == (40.0, 60.0)


def test_the_record_keeps_the_rehearsal_as_measured_beside_its_figure_for_the_restart(hook):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    run = add_run(db, catch_up_s=50.0)
    estimate = {
        "model_s": 40.0,
        "rehearsal_s": 55.0,
        "rehearsal_measured_s": 100.0,
        "rehearsal_basis": "start-up 30.0 s measured, 20.0 s with 1.50× the CPU",
    }
    summary = record(
        hook,
        procedure,
        estimate,
        rolled=None,
        started={"run_id": run},
        checks=[PASSED, dict(PASSED, target="consumer")],
    )
    recorded = json.loads(db.procedure(procedure).detail)["estimates"]
    assert recorded == summary["estimates"]
    assert (recorded["used"], recorded["rehearsal_s"], recorded["rehearsal_measured_s"]) == ("rehearsal", 55.0, 100.0)
    assert recorded["rehearsal_error"] == pytest.approx(0.1) and recorded["rehearsal_measured_error"] == 1.0
    assert recorded["rehearsal_basis"].startswith("start-up 30.0 s measured")
    assert "the larger of model 40 s and rehearsal 55 s" in recorded["used_why"]


def test_the_record_says_how_far_the_consumer_view_fell_behind_beyond_the_allowed_delay(hook, clock):
    db = hook.controller.db
    db.set_active_region(JOB, "east", "deploy")
    db.create_lineage(
        id="l1", job=JOB, region="east", fingerprint="f" * 64, version=2, root="/l1", output_from_us=None, windowed=True
    )
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {"allowed_delay_s": 200})
    run = add_run(db, catch_up_s=50.0)
    # the view's last window end stays at 1000 s while the clock moves 1150 → 1400 → 1420: 400 s behind
    # from the second batch for 10 s, then 120 s behind once the third batch emits up to 1300
    for batch_id, (clock_s, last_output_s) in enumerate(((1150, 1000), (1400, None), (1420, 1300))):
        clock.advance(10)
        db.record_batch(
            run_id=run,
            job=JOB,
            region="east",
            batch_id=batch_id,
            processed_at=clock(),
            input_events=1,
            quarantined=0,
            rows_emitted=1,
            job_watermark_us=0,
            watermark_delay_us=clock_s * 1_000_000,
            last_output_us=None if last_output_s is None else last_output_s * 1_000_000,
        )
    clock.advance(5)
    summary = record(
        hook,
        procedure,
        {"model_s": 40.0},
        rolled=None,
        started={"run_id": run},
        checks=[PASSED, dict(PASSED, target="consumer")],
    )
    gap = json.loads(db.procedure(procedure).detail)["consumer_gap"]
    assert gap == summary["consumer_gap"]
    assert (gap["max_delay_s"], gap["beyond_allowed_s"], gap["allowed_delay_s"]) == (400.0, 10.0, 200)


@pytest.mark.parametrize(
    "checks, caught_up",
    [
        ([PASSED, FAILED], True),  # something was lost or doubled in the consumer view
        ([PASSED, None], True),  # a check that never reported counts as failed, not as passed
        ([PASSED, PASSED], False),  # the new version never caught up
    ],
)
def test_a_turn_that_ran_but_did_not_prove_itself_is_recorded_as_failed(hook, checks, caught_up):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    run = add_run(db, catch_up_s=50.0 if caught_up else None)
    with pytest.raises(AirflowException, match=f"procedure {procedure} failed"):
        record(hook, procedure, {"model_s": 40.0}, rolled=None, started={"run_id": run}, checks=checks)
    assert db.procedure(procedure).result == "failed"


@pytest.mark.parametrize(
    "procedure_id, deployed, regions",
    [
        (None, DEPLOYED, ["east"]),  # the record never opened
        (7, None, ["east"]),  # the deploy failed
        (7, DEPLOYED, None),  # no order was chosen
    ],
)
def test_nothing_is_rolled_back_when_the_turn_did_not_get_as_far_as_its_record(hook, procedure_id, deployed, regions):
    with pytest.raises(AirflowSkipException, match="nothing to roll back"):
        roll_back(hook, procedure_id, deployed, regions, 0, 1, timeout_s=60)


def test_nothing_is_rolled_back_when_the_new_version_never_started(hook, clock):
    db = hook.controller.db
    add_run(db, version=2)  # a run of version 2 from before this procedure: not its start
    clock.advance(60)
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    with pytest.raises(AirflowSkipException, match="version 2 was never started in east"):
        roll_back(hook, procedure, DEPLOYED, ["east"], 0, 1, timeout_s=60)
    assert db.procedure(procedure).result == "running"  # the record step ends it


def test_a_new_version_with_nothing_to_go_back_to_fails_the_turn(hook, clock):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    clock.advance(1)
    add_run(db, version=2, status="failed")
    with pytest.raises(AirflowFailException, match="no earlier version ran there to roll back to"):
        roll_back(hook, procedure, DEPLOYED, ["east"], 0, None, timeout_s=60)
    assert db.procedure(procedure).result == "failed"


def test_a_new_version_whose_check_failed_is_rolled_back_from_where_the_previous_one_stopped(hook, clock, monkeypatch):
    from tidegate.runtime.procedures import rollback

    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    clock.advance(1)
    add_run(db, version=2, catch_up_s=20.0)  # it caught up: only the check says it is wrong
    asked = {}

    def roll_back_for_real(controller, job, region, previous_version, why, *, timeout_s, discard_output):
        asked.update(region=region, previous=previous_version, why=why, discard=discard_output)
        return rollback.Rollback(
            job,
            region,
            2,
            previous_version,
            11,
            "fresh",
            True,
            "west",
            why,
            3.0,
            resumed_from_us=5_000_000,
            discarded_lineages=("l2",),
        )

    monkeypatch.setattr(rollback, "roll_back", roll_back_for_real)
    missing = {
        "target": "east",
        "success": False,
        "span": ["…", "…"],
        "data_docs": "/docs/east.html",
        "message": "12 (window, key) rows missing: deviceId dev-3",
    }
    done = roll_back(
        hook, procedure, DEPLOYED, ["east"], 0, 1, timeout_s=60, checks=[missing, dict(PASSED, target="consumer")]
    )
    assert asked["discard"] and asked["previous"] == 1
    assert (
        asked["why"] == "version 2 failed its completeness check in east: east: 12 (window, key) rows missing: "
        "deviceId dev-3"
    )
    row = db.procedure(procedure)
    recorded = json.loads(row.detail)
    assert row.result == "rolled-back"
    assert recorded["failed_checks"] == [
        {"target": "east", "message": missing["message"], "span": ["…", "…"], "data_docs": "/docs/east.html"}
    ]
    assert recorded["rollback"]["discarded_lineages"] == ["l2"] and done["resumed_from_us"] == 5_000_000
    assert db.procedure_lock(JOB) is None


def test_a_version_that_never_reported_its_check_is_rolled_back_as_unhealthy_keeping_its_output(
    hook, clock, monkeypatch
):
    from tidegate.runtime.procedures import rollback

    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    clock.advance(1)
    add_run(hook.controller.db, version=2, status="failed")
    asked = {}
    monkeypatch.setattr(
        rollback,
        "roll_back",
        lambda controller, job, region, previous, why, *, timeout_s, discard_output: (
            asked.update(discard=discard_output, why=why)
            or rollback.Rollback(job, region, 2, previous, 11, "fresh", True, "east", why, 3.0)
        ),
    )
    roll_back(hook, procedure, DEPLOYED, ["east"], 0, 1, timeout_s=60, checks=[None])
    assert not asked["discard"] and asked["why"].startswith("version 2 did not become healthy in east (failed")


def test_a_first_version_that_failed_its_check_is_stopped_so_consumers_cannot_move_to_it(hook, clock):
    db = hook.controller.db
    procedure = open_procedure(hook, "planned-stop", JOB, "east", {})
    clock.advance(1)
    add_run(db, version=2, status="failed")
    db.set_deployment(JOB, "east", version=2, desired="running")
    with pytest.raises(AirflowFailException, match="no earlier version ran there"):
        roll_back(
            hook,
            procedure,
            DEPLOYED,
            ["east"],
            0,
            None,
            timeout_s=60,
            checks=[dict(FAILED, target="east", message="3 rows have nulls")],
        )
    recorded = json.loads(db.procedure(procedure).detail)
    assert recorded["stopped"] == "version 2 stopped in east: consumers cannot move to it"
    assert recorded["failed_checks"][0]["message"] == "3 rows have nulls"
    assert db.deployment(JOB, "east").desired == "stopped"  # nothing restarts it either


# -- health watch and failover -------------------------------------------------------------


def test_the_health_watch_asks_for_a_failover_of_each_unhealthy_active_region_no_procedure_owns(hook, monkeypatch):
    from tidegate.runtime.procedures import health
    from tidegate.runtime.procedures.health import Health

    db = hook.controller.db
    verdicts = {"sick": False, "well": True, "busy": False}
    for job, active in (("sick", "east"), ("well", "west"), ("busy", "east"), ("gone", "east"), ("new", None)):
        db.register_version(job, 1, job * 8, {}, "", None)
        if active:
            db.set_active_region(job, active, "deploy")
        if job != "gone":  # consumers read a region the job is no longer deployed in
            db.set_deployment(job, active or "east", version=1, desired="running")
    open_procedure(hook, "drill", "busy", "east", {})
    assessed = []

    def assess_region(controller, job, region, *, max_delay_s, for_s, stalled_after_s):
        assessed.append((job, region, max_delay_s, for_s, stalled_after_s))
        return Health(verdicts[job], "running and keeping up" if verdicts[job] else "the driver is lost")

    monkeypatch.setattr(health, "assess_region", assess_region)
    confs = failover.unhealthy_regions(hook, 300, 120)
    assert sorted(assessed) == [("sick", "east", 300.0, 120.0, 120.0), ("well", "west", 300.0, 120.0, 120.0)]
    assert confs == [
        {
            "job": "sick",
            "from_region": "east",
            "reason": "health watch",
            "only_if_unhealthy": True,
            "max_delay_s": 300,
            "for_s": 120,
        }
    ]


def test_no_failover_ran_so_there_is_nothing_to_record(hook):
    with pytest.raises(AirflowSkipException, match="no failover ran"):
        failover.record(hook, None, [None, None], None)


def test_a_refused_switch_fails_the_run_instead_of_leaving_it_green(hook):
    refused = "refusing to move consumers of job fleet to west: its output is final through …, behind east's …"
    with pytest.raises(RuntimeError, match="the failover did not run: refusing to move consumers"):
        failover.record(hook, None, [None, None], None, refused=refused)


def test_the_switch_leaves_why_it_was_refused_for_the_record(hook, monkeypatch):
    import tidegate.runtime.procedures.failover as runtime_failover
    from tidegate.errors import ControllerError

    class TI:
        pushed: dict = {}

        def xcom_push(self, key, value):
            self.pushed[key] = value

    def refuse(controller, assessed, **kwargs):
        raise ControllerError("refusing to move consumers of job fleet to west: its duplicate is stopped", "start it")

    monkeypatch.setattr(runtime_failover, "begin", refuse)
    ti = TI()
    with pytest.raises(ControllerError):
        failover.switch(hook, {"job": JOB, "from": "east"}, timeout_s=60, ti=ti)
    assert "its duplicate is stopped" in ti.pushed["refused"]


def test_a_failover_whose_restored_region_caught_up_and_checks_passed_is_recorded_as_passed(hook):
    db = hook.controller.db
    procedure = open_procedure(hook, "failover", JOB, "east", {})
    run = add_run(db, catch_up_s=75.0)
    checks = [dict(PASSED, target="consumer"), PASSED]
    assert failover.record(hook, {"procedure": procedure}, checks, {"run_id": run}) == {
        "passed": True,
        "checks": checks,
    }
    row = db.procedure(procedure)
    assert (row.result, row.actual_s) == ("passed", 75.0)
    assert db.procedure_lock(JOB) is None


def test_the_restore_is_estimated_just_before_it_and_that_estimate_is_recorded(hook, monkeypatch):
    import tidegate.runtime.procedures.failover as runtime_failover

    db = hook.controller.db
    procedure = open_procedure(hook, "failover", JOB, "east", {})
    switched = {
        "procedure": procedure,
        "job": JOB,
        "from_region": "east",
        "estimate_s": 9.0,
        "estimate_basis": {"seconds": 9.0, "at": "the switch"},
    }
    stopped = add_run(db, status="stopped")
    monkeypatch.setattr(
        runtime_failover,
        "estimate_restore",
        lambda controller, job, region: {"seconds": 21.5, "at": f"before the restart of {job} in {region}"},
    )
    estimated = failover.before_restore(hook, switched)
    assert estimated == {
        "estimate_s": 21.5,
        "estimate_basis": {"seconds": 21.5, "at": "before the restart of fleet in east"},
    }
    db.update_run(stopped, caught_up_at=db.now(), catch_up_s=20.0)
    failover.record(hook, switched, [dict(PASSED, target="consumer"), PASSED], {"run_id": stopped}, estimated=estimated)
    row = db.procedure(procedure)
    assert (row.estimate_s, row.actual_s) == (21.5, 20.0)
    assert json.loads(row.detail)["estimate_basis"]["at"] == "before the restart of fleet in east"


def test_a_region_whose_stop_failed_is_not_restored(hook):
    add_run(hook.controller.db, status="starting")  # a driver still being started counts as running
    with pytest.raises(AirflowFailException, match="its stop failed, so it is not restored"):
        failover.before_restore(hook, {"procedure": 1, "job": JOB, "from_region": "east"})
    with pytest.raises(AirflowSkipException, match="no failover ran"):
        failover.before_restore(hook, None)


@pytest.mark.parametrize(
    "checks, restored, caught_up",
    [
        ([dict(PASSED, target="consumer"), FAILED], True, True),  # the restored region lost rows
        ([dict(PASSED, target="consumer"), None], True, True),  # its check never ran
        ([dict(PASSED, target="consumer"), PASSED], False, True),  # the restart never started
        ([dict(PASSED, target="consumer"), PASSED], True, False),  # it started but never caught up
    ],
)
def test_a_failover_that_did_not_complete_cleanly_is_recorded_as_failed(hook, checks, restored, caught_up):
    db = hook.controller.db
    procedure = open_procedure(hook, "failover", JOB, "east", {})
    run = add_run(db, catch_up_s=75.0 if caught_up else None)
    with pytest.raises(RuntimeError, match="did not complete cleanly"):
        failover.record(hook, {"procedure": procedure}, checks, {"run_id": run} if restored else None)
    assert db.procedure(procedure).result == "failed"


# -- drill ------------------------------------------------------------------------------------


def test_a_drill_that_never_started_has_nothing_to_finish(hook):
    with pytest.raises(AirflowSkipException, match="nothing was broken"):
        drill.finish(hook, None, None, None, [None, None])


@pytest.mark.parametrize(
    "broken, recovered, checks, step",
    [
        (None, None, [None, None], "break"),
        ({"kind": "node-failure"}, None, [None, None], "recover"),
        ({"kind": "node-failure"}, {"run_id": 1}, [PASSED, None], "check"),
    ],
)
def test_a_drill_that_stopped_half_way_is_restored_and_recorded_failed_at_that_step(
    hook, monkeypatch, broken, recovered, checks, step
):
    from tidegate.runtime.procedures import drills

    restored = []
    monkeypatch.setattr(
        drills,
        "restore",
        lambda controller, job, region, detail: (
            restored.append(region)
            or {"actions": [f"started {job} in {region}"], "state_left": {"consumers_read": "west"}}
        ),
    )
    procedure = open_procedure(hook, "drill-node-failure", JOB, "east", {})
    prepared = {"job": JOB, "kind": "node-failure", "region": "east", "estimate_s": 30.0, "procedure": procedure}
    with pytest.raises(RuntimeError, match=f"failed at its {step} step; restored: \\['started fleet in east'\\]"):
        drill.finish(hook, prepared, broken, recovered, checks)
    assert restored == ["east"]
    row = hook.controller.db.procedure(procedure)
    assert row.result == "failed" and f"the drill failed at its {step} step" in row.detail


@pytest.mark.parametrize(
    "setting, serving, started, state",
    [
        ("5m", False, True, "started"),  # none runs: one is started, not waited for
        ("5m", True, False, "serving"),  # one serves (warm or warming): left alone
        ("off", False, False, "off"),  # checks run as spark-submits: nothing to warm
    ],
)
def test_a_procedures_first_task_starts_the_check_service_without_waiting_for_it(
    hook, monkeypatch, setting, serving, started, state
):
    from tidegate.processes import Recorded
    from tidegate.runtime.checks import check_service
    from tidegate_airflow.procedures import warm_checks

    monkeypatch.setenv("TIDEGATE_CHECK_SERVICE", setting)
    monkeypatch.setattr(check_service, "serving", lambda home: serving)
    spawned = []
    launched = Recorded(4242, 1234.5, "check-service")
    monkeypatch.setattr(
        "tidegate.runtime.jobs.process.spawn_detached",
        lambda args, log, env=None, marker=None: spawned.append(args) or launched,
    )
    assert warm_checks(hook) == {"service": state, "pid": 4242 if started else None}
    assert len(spawned) == (1 if started else 0)
    if started:
        assert spawned[0][-3:] == ["check-service", "--idle-exit", "300.0"]
