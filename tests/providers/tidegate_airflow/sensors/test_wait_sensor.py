"""Waiting for a job with the sensor: it defers to the trigger with this worker's settings, ends
on what the trigger fires — a real trigger over a real control database too — and, when not
deferrable, pokes the control database itself with the same verdicts."""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, TaskDeferred

from tidegate_airflow.sensors.job_state import TidegateWaitSensor
from tidegate_airflow.triggers.job_state import JobStateTrigger

STATUS = {
    "state": "running",
    "backlog_events": 4200,
    "job_watermark": "2026-11-24T06:00:00Z",
    "watermark_delay_s": 125.0,
    "processing_lag_s": 3.5,
    "log_path": "/r/drivers/run-12.log",
    "detail": "the driver exited 1",
}


def test_the_wait_is_a_sensor_that_defers_by_default():
    wait = TidegateWaitSensor(task_id="wait", job="fleet", region="west")
    assert isinstance(wait, BaseSensorOperator) and wait.deferrable is True


def test_the_wait_defers_to_the_job_state_trigger_with_this_workers_settings(monkeypatch):
    monkeypatch.setenv("TIDEGATE_HOME", "/srv/tidegate")
    monkeypatch.setenv("AIRFLOW_HOME", "/not/for/the/trigger")
    wait = TidegateWaitSensor(
        task_id="wait", job="fleet", region="west", run_id=12, timeout_s=90, max_lag_s=5.0, poke_interval=3.0
    )
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, JobStateTrigger) and deferred.value.method_name == "execute_complete"
    path, kwargs = trigger.serialize()
    assert path == "tidegate_airflow.triggers.job_state.JobStateTrigger"
    assert (kwargs["job"], kwargs["region"], kwargs["condition"], kwargs["timeout_s"], kwargs["poll_s"]) == (
        "fleet",
        "west",
        "caught_up",
        90.0,
        3.0,
    )
    assert kwargs["run_id"] == 12 and kwargs["max_lag_s"] == 5.0  # the run this task started, not a later one
    # the triggerer may run elsewhere: it gets this worker's TIDEGATE_* settings, and nothing else
    assert kwargs["environment"]["TIDEGATE_HOME"] == "/srv/tidegate"
    assert all(k.startswith("TIDEGATE_") for k in kwargs["environment"])


SECRET = "s3cr3t-Pa55"


def test_the_trigger_gets_no_secret_airflow_would_store_while_the_task_is_deferred(monkeypatch):
    """A trigger's arguments sit in Airflow's metadata database (trigger.kwargs) while the task is
    deferred: the settings of a secret, and a URL with a password, stay with the processes."""
    for name, value in {
        "TIDEGATE_HOME": "/srv/tidegate",
        "TIDEGATE_KAFKA_BOOTSTRAP": "kafka-1:9093",
        "TIDEGATE_KAFKA_SASL_PASSWORD": SECRET,
        "TIDEGATE_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/kafka",
        "TIDEGATE_S3_SECRET_KEY": SECRET,
        "TIDEGATE_API_TOKEN": SECRET,
        "TIDEGATE_CONTROL_DB": f"postgresql+psycopg://tidegate:{SECRET}@pg-east:5432,pg-west:5432/control",
        "TIDEGATE_CHECKS_DB": f"postgresql://u:{SECRET}@[::1",  # not a URL Python reads: left out all the same
    }.items():
        monkeypatch.setenv(name, value)
    wait = TidegateWaitSensor(task_id="wait", job="fleet", region="west")
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    _, kwargs = deferred.value.trigger.serialize()
    assert SECRET not in repr(kwargs)
    assert kwargs["environment"]["TIDEGATE_KAFKA_BOOTSTRAP"] == "kafka-1:9093"
    assert "TIDEGATE_CONTROL_DB" not in kwargs["environment"]  # the triggerer's own URL is used
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", "sqlite:////srv/tidegate/control.db")  # no password: handed on
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    assert deferred.value.trigger.serialize()[1]["environment"]["TIDEGATE_CONTROL_DB"].startswith("sqlite:")


def test_a_templated_timeout_is_read_when_the_task_runs():
    wait = TidegateWaitSensor(task_id="wait", job="fleet", region="west", timeout_s="{{ params.timeout_s }}")
    wait.timeout_s = 600  # what the form's param rendered to, natively
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    assert deferred.value.trigger.timeout_s == 600.0 and wait.timeout == 600.0


def test_an_unknown_condition_is_refused_when_the_dag_is_parsed():
    with pytest.raises(ValueError, match="not one of caught_up, healthy, stopped"):
        TidegateWaitSensor(task_id="wait", job="fleet", region="west", condition="happy")


@pytest.mark.parametrize(
    "event, error, message",
    [
        ({"status": "ok", "waited_s": 42.5, "job_status": STATUS}, None, None),
        (
            {"status": "timeout", "waited_s": 90.0, "job_status": STATUS},
            AirflowSensorTimeout,
            "was not caught_up after 90 s: state running, backlog 4200 events.*raise timeout_s",
        ),
        (
            {"status": "failed", "waited_s": 3.0, "job_status": STATUS | {"state": "failed"}},
            AirflowFailException,  # a run that cannot get there: no retry
            "cannot become caught_up: state failed.*the driver exited 1.*run-12.log",
        ),
    ],
)
def test_the_wait_ends_on_the_triggers_event_saying_where_the_job_stands(event, error, message):
    wait = TidegateWaitSensor(task_id="wait", job="fleet", region="west")
    if error is None:
        assert wait.execute_complete({}, event) == {"waited_s": 42.5, **STATUS}
    else:
        with pytest.raises(error, match=message):
            wait.execute_complete({}, event)


def _control(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": f"sqlite:///{tmp_path / 'c.db'}"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _fire(trigger: JobStateTrigger) -> dict:
    async def first_event():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first_event())


@pytest.mark.parametrize(
    "condition, ends",
    [
        ("stopped", None),  # a job that never ran is not running: the wait is over
        ("caught_up", "cannot become caught_up: state never"),  # nor will it ever catch up
    ],
)
def test_the_deferred_wait_ends_on_what_the_real_trigger_fires(tmp_path, monkeypatch, condition, ends):
    _control(tmp_path, monkeypatch)
    wait = TidegateWaitSensor(
        task_id="wait", job="fleet", region="east", condition=condition, timeout_s=5, poke_interval=0.1
    )
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    event = _fire(deferred.value.trigger)
    if ends is None:
        assert wait.execute_complete({}, event)["state"] == "never"
    else:
        with pytest.raises(AirflowFailException, match=ends):
            wait.execute_complete({}, event)


def test_without_deferring_the_sensor_pokes_the_control_database_with_the_same_verdicts(tmp_path, monkeypatch):
    _control(tmp_path, monkeypatch)
    stopped = TidegateWaitSensor(
        task_id="wait",
        job="fleet",
        region="east",
        condition="stopped",
        deferrable=False,
        tidegate_conn_id="",
        poke_interval=0.1,
    )
    result = stopped.execute({})
    assert result["state"] == "never" and result["waited_s"] >= 0
    caught_up = TidegateWaitSensor(
        task_id="wait", job="fleet", region="east", deferrable=False, tidegate_conn_id="", poke_interval=0.1
    )
    with pytest.raises(AirflowFailException, match="cannot become caught_up: state never"):
        caught_up.execute({})


def test_a_poking_wait_that_times_out_says_where_the_job_stands(tmp_path, monkeypatch):
    from tidegate_airflow.hooks.tidegate import TidegateHook

    _control(tmp_path, monkeypatch)
    catching_up = STATUS | {"caught_up": False, "run_id": 12}
    monkeypatch.setattr(TidegateHook, "status", lambda self, job, region: catching_up)
    wait = TidegateWaitSensor(
        task_id="wait",
        job="fleet",
        region="east",
        run_id=12,
        timeout_s=0.3,
        deferrable=False,
        tidegate_conn_id="",
        poke_interval=0.1,
    )
    with pytest.raises(AirflowSensorTimeout, match="was not caught_up after .* backlog 4200 events"):
        wait.execute({})
