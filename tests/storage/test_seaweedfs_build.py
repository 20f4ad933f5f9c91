"""Where setup caches SeaweedFS and what a missing build says, without starting it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from platform_support import REPO
from tidegate.errors import ConfigError
from tidegate.storage import seaweedfs


def test_the_cache_is_outside_the_checkout_and_follows_the_environment(tmp_path):
    version = seaweedfs.pinned_version()
    assert version.startswith("v") and version in (REPO / "tools" / "seaweedfs" / "go.mod").read_text()
    assert seaweedfs.binary_path({"TIDEGATE_CACHE": str(tmp_path)}) == tmp_path / "seaweedfs" / version / "weed"
    assert seaweedfs.cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/tidegate")
    assert seaweedfs.cache_dir({"HOME": "/home/op"}) == Path("/home/op/.cache/tidegate")


def test_the_script_and_the_package_agree_on_the_place(tmp_path):
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "seaweedfs.sh"), "--path"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"TIDEGATE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == str(seaweedfs.binary_path({"TIDEGATE_CACHE": str(tmp_path)}))


def test_a_missing_build_says_how_to_make_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_CACHE", str(tmp_path))
    with pytest.raises(ConfigError) as missing:
        seaweedfs.binary()
    assert "bash scripts/seaweedfs.sh" in str(missing.value) and "Go" in str(missing.value)


def test_without_go_setup_says_what_to_install_and_goes_on(tmp_path):
    tools = tmp_path / "bin"  # a PATH with what the script needs, and no Go wherever the machine has one
    tools.mkdir()
    for tool in ("dirname", "sed"):
        (tools / tool).symlink_to(shutil.which(tool))
    done = subprocess.run(
        [shutil.which("bash"), str(REPO / "scripts" / "seaweedfs.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"TIDEGATE_CACHE": str(tmp_path), "PATH": str(tools)},
    )
    assert done.returncode == 0
    assert "go not found" in done.stderr and "install Go" in done.stderr
