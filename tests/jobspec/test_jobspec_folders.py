"""Spec paths from DAGs and the Tidegate page (jobspec/folders.py): a YAML file inside the
spec folders after symlinks are resolved, or a ConfigError that says where specs belong."""

from __future__ import annotations

import os

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec.folders import confined_spec_path, spec_dirs

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


@pytest.mark.parametrize("given, problem", [
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
])
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
