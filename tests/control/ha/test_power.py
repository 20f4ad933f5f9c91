"""The local topology's power switch: a request written by the command is carried out by the
harness's thread and answered, a failure comes back as the requester's error, and nothing but
a region's name and the two actions is taken."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from tidegate.control.ha.power import PowerSwitch, main, request, state


@pytest.fixture
def switch(tmp_path):
    done: list[tuple[str, str]] = []
    lock = threading.Lock()

    def kill(region):
        with lock:
            done.append(("kill", region))
        if region == "west":
            raise RuntimeError("west's machines did not answer")

    power = PowerSwitch(tmp_path / "power", kill=kill, restore=lambda region: done.append(("restore", region)))
    power.start()
    power.done = done
    yield power
    power.stop()


def test_a_kill_and_a_restore_are_carried_out_by_the_harness_and_answered(switch):
    killed = request(switch.folder, "east", "kill", wait_s=20)
    assert killed["state"] == "down" and killed["action"] == "kill"
    assert state(switch.folder, "east")["id"] == killed["id"]
    restored = request(switch.folder, "east", "restore", wait_s=20)
    assert restored["state"] == "up" and restored["at"] >= killed["at"]
    assert switch.done == [("kill", "east"), ("restore", "east")]
    assert [(region, action) for region, action, _ in switch.events] == [("east", "kill"), ("east", "restore")]


def test_the_command_line_reports_a_failed_kill_and_exits_1(switch, capsys):
    assert main(["kill", "west", "--folder", str(switch.folder), "--wait", "20"]) == 1
    assert "west's machines did not answer" in capsys.readouterr().err
    assert switch.events == []  # nothing recorded as carried out


def test_a_command_run_as_a_drill_runs_it_waits_for_the_outcome(switch):
    done = subprocess.run(
        [sys.executable, "-m", "tidegate.control.ha.power", "kill", "east", "--folder", str(switch.folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"state": "down"' in done.stdout


@pytest.mark.parametrize("region", ["../east", "East", "", "east west"])
def test_only_a_regions_name_is_taken(tmp_path, region):
    (tmp_path / "power").mkdir()
    with pytest.raises(ValueError, match="not a region's name"):
        request(tmp_path / "power", region, "kill", wait_s=1)
    assert list((tmp_path / "power").iterdir()) == []


def test_nothing_watching_the_folder_is_an_error_that_says_so(tmp_path):
    with pytest.raises(RuntimeError, match="no harness watches it"):
        request(tmp_path / "nowhere", "east", "kill", wait_s=1)
    (tmp_path / "idle").mkdir()
    with pytest.raises(RuntimeError, match="is its harness running"):
        request(tmp_path / "idle", "east", "kill", wait_s=0.5)
