"""A worker's own view of the machine's folders: hidden folders look empty, read-only ones
refuse writes — inside the namespace only; outside, nothing changes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tidegate.errors import TidegateError
from tidegate.spark.tools.cluster.isolation import WorkerView, check_available, isolated_command


def test_the_command_covers_the_hidden_folders_and_binds_the_read_only_ones_back_through_the_stage():
    view = WorkerView(hidden=(Path("/d/home"),), read_only=(Path("/d/home/event-log"),))
    assert isolated_command(["java", "-cp", "a b"], view, Path("/w/view")) == [
        "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
        "set -e\n"
        "mkdir -p /w/view/0\n"
        "mount --bind /d/home/event-log /w/view/0\n"
        "mount -t tmpfs -o mode=0755 tidegate-hidden /d/home\n"
        "mkdir -p /d/home/event-log\n"
        "mount --bind /w/view/0 /d/home/event-log\n"
        "mount -o remount,bind,ro /d/home/event-log\n"
        "umount /w/view/0\n"
        'exec "$@"',
        "sh", "java", "-cp", "a b",
    ]  # fmt: skip


def test_a_view_takes_absolute_folders_only():
    with pytest.raises(TidegateError, match="not an absolute path"):
        WorkerView(hidden=(Path("var"),))
    assert not WorkerView() and WorkerView(read_only=(Path("/srv/event-log"),))


def test_inside_the_namespace_the_hidden_folder_is_empty_and_the_read_only_one_refuses_writes(tmp_path):
    try:
        check_available()
    except TidegateError as missing:
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))
    driver = tmp_path / "driver"
    (driver / "event-log").mkdir(parents=True)
    (driver / "marker").write_text("driver")
    (driver / "event-log" / "segment").write_text("events\n")
    stage = tmp_path / "worker" / "view"
    look = (f"cd {driver} && test ! -e marker && cat event-log/segment && ls -A . && "
            "if touch event-log/new 2>/dev/null; then echo writable; else echo refused; fi")  # fmt: skip
    argv = isolated_command(["sh", "-c", look], WorkerView(hidden=(driver,), read_only=(driver / "event-log",)), stage)
    seen = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == ["events", "event-log", "refused"]
    # outside: as before
    assert (driver / "marker").read_text() == "driver" and not (driver / "event-log" / "new").exists()
    assert sorted(p.name for p in driver.iterdir()) == ["event-log", "marker"]
