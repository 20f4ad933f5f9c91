"""The control-region-loss drill's parts that need no second region: the operator's fault
commands (hostile values refused with what to write instead), the refusals recorded before
anything breaks, the platform-wide lock that leaves the job's own free for its failover, and
the break's second run, which goes on from the record instead of breaking anything twice —
on a real SQLite control database. The whole drill, with the region's processes killed and
the other region taking over, runs in tests/control/ha/test_region_loss.py."""

from __future__ import annotations

import json
import sys

import pytest

from support import Clock
from tidegate.control.leases import ProcedureBusy
from tidegate.errors import ConfigError, TidegateError
from tidegate.runtime.estimates import recovery
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.procedures import control_drill
from tidegate.runtime.procedures.drills import DrillRefused

JOB = "fleet"


@pytest.fixture
def controller(tmp_path):
    from tidegate.control.db import ControlDB

    clock = Clock(1_000.0)
    config = load_config(env={"TIDEGATE_HOME": str(tmp_path)})
    c = Controller(config, ControlDB(config.control_db, now=clock), actor="test", now=clock)
    yield c
    c.close()


def marker_command(folder, action: str) -> list[str]:
    """A command that leaves ``<folder>/<region>.<action>``: what ran, and for which region."""
    return [sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(folder / f"{{region}}.{action}")]


@pytest.fixture
def faults(tmp_path, monkeypatch):
    value = {"kill": marker_command(tmp_path, "kill"), "restore": marker_command(tmp_path, "restore")}
    monkeypatch.setenv(control_drill.FAULTS_ENV, json.dumps(value))
    return tmp_path


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("kill east", "is not JSON"),
        ('["kill", "{region}"]', "exactly the keys kill and restore"),
        ('{"kill": ["x", "{region}"]}', "exactly the keys kill and restore"),
        ('{"kill": ["x", "{region}"], "restore": ["y", "{region}"], "shell": "sh"}', "exactly the keys"),
        ('{"kill": [], "restore": ["y", "{region}"]}', "kill must be a non-empty list"),
        ('{"kill": "x {region}", "restore": ["y", "{region}"]}', "kill must be a non-empty list"),
        ('{"kill": ["x", 1], "restore": ["y", "{region}"]}', "kill must be a non-empty list"),
        ('{"kill": ["x", "{region}"], "restore": ["y", ""]}', "restore must be a non-empty list"),
        ('{"kill": ["x", "{region}"], "restore": ["y"]}', "the restore command never names {region}"),
    ],
)
def test_a_fault_setting_that_is_not_two_commands_naming_the_region_is_refused_with_the_form(value, says):
    with pytest.raises(ConfigError) as refused:
        control_drill.parse_faults(value)
    assert says in refused.value.problem
    assert '"kill"' in refused.value.fix and "without a shell" in refused.value.fix


def test_only_region_is_filled_in_and_nothing_else_is_interpreted():
    faults = control_drill.parse_faults(
        json.dumps({"kill": ["stop", "{region}", "{0}", "{region!r}", "$HOME"], "restore": ["start", "{region}"]})
    )
    assert faults.command("kill", "east") == ["stop", "east", "{0}", "{region!r}", "$HOME"]
    assert faults.command("restore", "west") == ["start", "west"]


def test_a_fault_command_that_fails_says_how_with_the_end_of_its_output(tmp_path):
    faults = control_drill.Faults(
        kill=(sys.executable, "-c", "import sys; sys.exit('no route to {region}')"), restore=("true",)
    )
    with pytest.raises(TidegateError, match=r"the kill command of east \(.*python.*\) exited 1: no route to east"):
        faults.run("kill", "east", timeout_s=30)


def test_without_fault_commands_the_drill_is_refused_before_anything_breaks_and_says_so(controller, monkeypatch):
    monkeypatch.delenv(control_drill.FAULTS_ENV, raising=False)
    with pytest.raises(DrillRefused, match="needs TIDEGATE_CONTROL_FAULTS"):
        control_drill.prepare(controller, JOB, "primary", timeout_s=60, watch_every_s=20)
    [record] = controller.db.procedures(JOB, kind_prefix="drill:control-region-loss")
    assert record.result == "refused" and "TIDEGATE_CONTROL_FAULTS" in json.loads(record.detail)["refused"]
    assert controller.db.procedure_lock(control_drill.LOCK) is None


def test_on_a_control_database_in_one_region_the_drill_is_refused_and_nothing_runs(controller, faults):
    with pytest.raises(DrillRefused, match="not replicated across regions"):
        control_drill.prepare(controller, JOB, "primary", timeout_s=60, watch_every_s=20)
    [record] = controller.db.procedures(JOB, kind_prefix="drill:control-region-loss")
    assert record.result == "refused"
    assert sorted(p.name for p in faults.iterdir() if p.suffix in (".kill", ".restore")) == []


def test_the_drill_holds_the_platforms_lock_and_leaves_the_jobs_free_for_its_failover(controller):
    first = controller.db.begin_procedure(
        f"drill:{control_drill.KIND}", JOB, "east", ttl_s=600, lock=control_drill.LOCK
    )
    assert controller.db.procedure_lock(JOB) is None  # the health watch assesses the job, its failover may run
    failover = controller.db.begin_procedure("failover", JOB, "east", ttl_s=600)
    with pytest.raises(ProcedureBusy) as busy:
        controller.db.begin_procedure(
            f"drill:{control_drill.KIND}", "other", "east", ttl_s=600, lock=control_drill.LOCK
        )
    assert f"drill:control-region-loss of {JOB} in east is already running (procedure {first}" in str(busy.value)
    assert [p.job for p in controller.db.procedures(kind_prefix="drill:")] == [JOB]  # the refused one left none
    controller.db.finish_procedure(first, "passed")
    controller.db.finish_procedure(failover, "done")
    assert controller.db.procedure_lock(control_drill.LOCK) is None


def test_a_second_run_of_the_break_goes_on_from_the_record_and_breaks_nothing_again(controller, faults):
    procedure = controller.db.begin_procedure(
        f"drill:{control_drill.KIND}", JOB, "east", ttl_s=600, lock=control_drill.LOCK
    )
    broken = {"kind": control_drill.KIND, "job": JOB, "region": "east", "at": 1_000.0, "killed_run": 7}
    controller.db.note_procedure(procedure, json.dumps({"breaking_at": 1_000.0, "broken": broken}))
    prepared = {"job": JOB, "kind": control_drill.KIND, "region": "east", "procedure": procedure}
    again = control_drill.break_region(controller, prepared)
    assert {k: v for k, v in again.items() if k != "taken_over_at"} == broken
    assert again["taken_over_at"] > 0
    assert not (faults / "east.kill").exists()  # the kill command did not run a second time


def test_a_note_on_a_procedure_that_ended_changes_nothing(controller):
    procedure = controller.db.begin_procedure("drill:upgrade", JOB, "east", ttl_s=600)
    controller.db.finish_procedure(procedure, "passed", detail="{}")
    assert controller.db.note_procedure(procedure, json.dumps({"broken": {}})) is False
    assert controller.db.procedure(procedure).detail == "{}"


def test_a_fault_commands_arguments_never_reach_an_error_or_the_record(controller, tmp_path):
    secret = "token=s3cr3t"
    hung = control_drill.Faults(kill=(sys.executable, "-c", "import time; time.sleep(30)", secret), restore=("true",))
    with pytest.raises(TidegateError) as late:
        hung.run("kill", "east", timeout_s=1)
    assert "did not end within 1 s" in str(late.value) and secret not in str(late.value)
    missing = control_drill.Faults(kill=(str(tmp_path / "no-such-program"), secret), restore=("true",))
    with pytest.raises(TidegateError) as absent:
        missing.run("kill", "east")
    assert "No such file or directory" in str(absent.value) and secret not in str(absent.value)


def test_a_first_drill_of_the_kind_adds_the_takeover_and_when_consumers_move_the_failovers_hand_over(controller):
    basis = {"seconds": 40.0, "terms": {"restart_s": 10.0, "catch_up_s": 25.0, "break_s": 5.0}, "inputs": {}}
    standby = control_drill.first_of_kind(controller.db, JOB, basis, consumers_move=False, watch_every_s=20)
    takeover = control_drill.PROMOTION_S + 20
    assert standby["terms"]["break_s"] == 5.0 + takeover and standby["seconds"] == 40.0 + takeover
    assert "health-watch interval (20 s)" in standby["inputs"]["first_of_kind"]
    assert basis["seconds"] == 40.0  # the basis handed in is left as it was
    # consumers read the lost region: the watch's failover restores it after its switch and check
    p = controller.db.start_procedure("planned-stop", JOB, "east")
    controller.db.finish_procedure(p, "passed", checks=[{"target": "consumer", "success": True, "task_s": 16.0}])
    active = control_drill.first_of_kind(controller.db, JOB, basis, consumers_move=True, watch_every_s=20)
    handover = 16.0 + recovery.FIRST_BREAK_S
    assert active["terms"]["break_s"] == 5.0 + takeover + handover
    assert active["seconds"] == 40.0 + takeover + handover
    assert (
        active["inputs"]["recorded_check_tasks_s"] == [16.0]
        and "failover's hand-over" in active["inputs"]["first_of_kind"]
    )
