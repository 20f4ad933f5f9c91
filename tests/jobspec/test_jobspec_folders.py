"""Spec paths from DAGs and the Tidegate page (jobspec/folders.py): a YAML file inside the
spec folders after symlinks are resolved, or a ConfigError that says where specs belong. And
the places a loaded spec names — its event logs, its reference folder and what is in it —
inside the event-log and reference folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec
from tidegate.jobspec.folders import confined_spec_path, log_dirs, spec_dirs

SPEC = "name: x\nversion: 1\npayload: {a: int}\n"


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "jobs" / "team").mkdir(parents=True)
    (root / "jobs" / "fleet.yaml").write_text(SPEC)
    (root / "jobs" / "team" / "orders.yml").write_text(SPEC)
    (tmp_path / "outside.yaml").write_text("secret: hunter2\n")
    return root


def confine(given, checkout, folders=None):
    return confined_spec_path(given, folders or [checkout / "jobs"], checkout)


def test_a_spec_inside_the_folder_is_given_back_as_its_real_path(checkout):
    jobs = (checkout / "jobs").resolve()
    assert confine("jobs/fleet.yaml", checkout) == jobs / "fleet.yaml"  # relative: from the checkout
    assert confine("team/orders.yml", checkout) == jobs / "team" / "orders.yml"  # or from the folder
    assert confine(str(checkout / "jobs" / "fleet.yaml"), checkout) == jobs / "fleet.yaml"
    os.symlink(checkout / "jobs" / "fleet.yaml", checkout / "jobs" / "alias.yaml")  # a link that stays inside
    assert confine("jobs/alias.yaml", checkout) == jobs / "fleet.yaml"


@pytest.mark.parametrize(
    "given, problem",
    [
        ("/etc/passwd", "outside the spec folders"),
        ("{outside}", "outside the spec folders"),
        ("jobs/../../outside.yaml", "contains '..'"),
        ("jobs/team/../fleet.yaml", "contains '..'"),
        ("jobs/link.yaml", "outside the spec folders (through a symlink)"),
        ("jobs/linked-dir/outside.yaml", "outside the spec folders (through a symlink)"),
        ("jobs/dangling.yaml", "a link that leads nowhere"),
        ("jobs/missing.yaml", "no such job spec file"),
        ("jobs/team", "not a regular file"),
        ("jobs/notes.txt", "a job spec is a .yaml or .yml file"),
        ("", "empty or not text"),
        ("jobs/fleet.yaml\n", "control characters"),
    ],
)
def test_a_path_that_leaves_the_folders_or_is_no_spec_is_refused_without_reading_it(checkout, given, problem):
    jobs = checkout / "jobs"
    os.symlink(checkout.parent / "outside.yaml", jobs / "link.yaml")
    os.symlink(checkout.parent, jobs / "linked-dir")
    os.symlink(checkout / "nowhere.yaml", jobs / "dangling.yaml")
    (jobs / "notes.txt").write_text("hunter2")
    with pytest.raises(ConfigError) as refused:
        confine(given.format(outside=checkout.parent / "outside.yaml"), checkout)
    assert problem in refused.value.problem
    assert "hunter2" not in str(refused.value) and "root:" not in str(refused.value)
    if "outside" in problem or ".." in problem:
        assert "TIDEGATE_SPEC_DIRS" in refused.value.fix and str(jobs) in refused.value.fix


def test_a_path_that_is_not_text_is_refused(checkout):
    with pytest.raises(ConfigError, match="empty or not text"):
        confine(["jobs/fleet.yaml"], checkout)


def test_the_folders_are_a_setting_defaulting_to_the_checkouts_jobs(tmp_path, checkout):
    default = checkout / "jobs"
    assert spec_dirs({}, default, checkout) == (default,)
    other = tmp_path / "specs"
    other.mkdir()
    (other / "extra.yaml").write_text(SPEC)
    folders = spec_dirs({"TIDEGATE_SPEC_DIRS": f"{other}{os.pathsep}jobs"}, default, checkout)
    assert folders == (other, checkout / "jobs")
    assert confine(str(other / "extra.yaml"), checkout, folders) == (other / "extra.yaml").resolve()
    with pytest.raises(ConfigError, match="outside the spec folders"):  # the default is replaced, not added to
        confine(str(checkout / "jobs" / "fleet.yaml"), checkout, [other])


# -- the places a spec names, when it is loaded ------------------------------------------------
# A spec is its author's: the event logs and reference files it names are read with the
# platform's rights, so each must resolve inside folders the operator configures.
JOB = """name: x
version: 1
payload: {deviceId: string, site: string}
source: {event_log: LOG}
"""
TWO_LOGS = """name: x
version: 1
inputs:
  a: {source: {event_log: logs/a}, payload: {deviceId: string}}
  b: {source: {event_log: LOG}, payload: {deviceId: string}}
join: {type: inner, left: a, right: b, keys: [a.deviceId = b.deviceId],
       within: "DATEDIFF(second, a, b) BETWEEN 0 AND 1"}
select: {deviceId: a.deviceId}
"""
REFERENCE = """name: x
version: 1
payload: {deviceId: string}
reference: {name: devices, path: refs/devices, columns: {deviceId: string, site: string},
            keys: [deviceId = devices.deviceId]}
select: {deviceId: deviceId, site: devices.site}
"""
SNAPSHOT = "valid_from=2026-03-01T12:00:00Z"


@pytest.fixture
def platform(tmp_path, monkeypatch):
    """A working directory with the platform's home (var/), another team's log and an outside CSV."""
    monkeypatch.chdir(tmp_path)
    for name in ("TIDEGATE_HOME", "TIDEGATE_LOG_DIRS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path / "refs"))
    (tmp_path / "var" / "event-log").mkdir(parents=True)
    (tmp_path / "other-team" / "event-log").mkdir(parents=True)
    (tmp_path / "outside" / SNAPSHOT).mkdir(parents=True)
    (tmp_path / "outside" / SNAPSHOT / "a.csv").write_text("deviceId,site\nhunter2,vault\n")
    (tmp_path / "refs" / "devices" / SNAPSHOT).mkdir(parents=True)
    (tmp_path / "refs" / "devices" / SNAPSHOT / "a.csv").write_text("deviceId,site\nd1,hall\n")
    return tmp_path


def write(folder, text: str, event_log: str = "var/event-log"):
    path = folder / "job.yaml"
    path.write_text(text.replace("LOG", event_log))
    return path


def refused_load(path, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_spec(path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and len(message.encode()) < 2048, message
    assert "hunter2" not in message
    return message


def test_the_log_folders_are_a_setting_defaulting_to_the_platforms_home(tmp_path):
    assert log_dirs({}, Path("var"), tmp_path) == (tmp_path / "var",)
    assert log_dirs({}, Path("/srv/tg"), tmp_path) == (Path("/srv/tg"),)
    assert log_dirs({"TIDEGATE_LOG_DIRS": f"/srv/logs{os.pathsep}shared"}, Path("var"), tmp_path) == (
        Path("/srv/logs"),
        tmp_path / "shared",
    )
    with pytest.raises(ConfigError, match="TIDEGATE_LOG_DIRS=.* names no folder"):
        log_dirs({"TIDEGATE_LOG_DIRS": os.pathsep}, Path("var"), tmp_path)


def test_an_event_log_inside_the_log_folders_loads(platform, monkeypatch):
    assert load_spec(write(platform, JOB)).source.event_log == "var/event-log"
    assert load_spec(
        write(platform, JOB, str(platform / "var" / "event-log" / "not-yet"))
    ).source.event_log  # may come later
    (platform / "var" / "alias").symlink_to(platform / "var" / "event-log")  # a link that stays inside
    load_spec(write(platform, JOB, "var/alias"))
    monkeypatch.setenv("TIDEGATE_LOG_DIRS", str(platform / "other-team"))  # the operator's setting replaces the home
    load_spec(write(platform, JOB, "other-team/event-log"))


@pytest.mark.parametrize(
    "event_log, problem",
    [
        (
            "{root}/other-team/event-log",
            "source.event_log '{root}/other-team/event-log' is outside the event-log folders —",
        ),
        (
            "var/../other-team/event-log",
            "source.event_log 'var/../other-team/event-log' is outside the event-log folders —",
        ),
        ("var/event-log/../../../etc", "is outside the event-log folders —"),
        ("/etc", "source.event_log '/etc' is outside the event-log folders —"),
        ("var/escape", "source.event_log 'var/escape' is outside the event-log folders (through a symlink)"),
        (
            "other-team/" + "x" * 1000,
            "source.event_log 'other-team/" + "x" * 245 + "'… (1,011 characters) is outside",
        ),  # 256 of it
    ],
    ids=["absolute", "dot-dot", "dot-dot-to-etc", "etc", "symlink", "long"],
)
def test_an_event_log_outside_the_log_folders_is_refused_at_load(platform, event_log, problem):
    (platform / "var" / "escape").symlink_to(platform / "other-team" / "event-log")
    message = refused_load(write(platform, JOB, event_log.format(root=platform)))
    assert problem.format(root=platform) in message
    assert f"name an event log under {platform / 'var'}" in message and "TIDEGATE_LOG_DIRS" in message


def test_an_inputs_own_event_log_is_held_to_the_log_folders_too(platform):
    assert load_spec(write(platform, TWO_LOGS.replace("logs/a", "var/a"))).own_logs
    message = refused_load(write(platform, TWO_LOGS.replace("logs/a", "var/a"), "other-team/event-log"))
    assert "inputs.b.source.event_log 'other-team/event-log' is outside the event-log folders" in message
    message = refused_load(write(platform, TWO_LOGS), log_dirs=[platform / "var"])
    assert "inputs.a.source.event_log 'logs/a' is outside the event-log folders" in message


def test_the_controller_passes_its_log_folders(platform):
    """load_spec(log_dirs=…): the platform's configuration, not this process's environment."""
    path = write(platform, JOB, "other-team/event-log")
    assert load_spec(path, log_dirs=[platform / "other-team"]).source.event_log == "other-team/event-log"
    refused_load(path, log_dirs=[platform / "var"])


def test_a_reference_folder_whose_snapshot_folder_or_csv_leads_outside_is_refused_at_load(platform):
    path = write(platform, REFERENCE)
    assert load_spec(path).references[0].path == "refs/devices"
    devices = platform / "refs" / "devices"
    (devices / SNAPSHOT / "b.csv").symlink_to(platform / "outside" / SNAPSHOT / "a.csv")
    message = refused_load(path)
    assert f"reference.path: '{SNAPSHOT}/b.csv' is a symlink that leads outside the reference folders" in message
    assert "TIDEGATE_REFERENCE_DIRS" in message and str(platform / "outside") not in message
    (devices / SNAPSHOT / "b.csv").unlink()
    later = "valid_from=2026-03-02T00:00:00Z"
    (devices / later).symlink_to(platform / "outside" / SNAPSHOT, target_is_directory=True)
    assert f"reference.path: '{later}' is a symlink that leads outside" in refused_load(path)
    (devices / later).unlink()
    (devices / "notes").symlink_to(platform / "outside")  # not a snapshot: never read, not refused
    load_spec(path)


def test_a_reference_folder_not_there_yet_loads_when_it_would_be_inside(platform):
    assert load_spec(write(platform, REFERENCE.replace("refs/devices", "refs/later"))).references
    message = refused_load(write(platform, REFERENCE.replace("refs/devices", "outside")))
    assert "reference.path 'outside' is outside the reference folders" in message
    message = refused_load(write(platform, REFERENCE.replace("refs/devices", "nowhere/devices")))
    assert "reference.path 'nowhere/devices' is outside the reference folders" in message
