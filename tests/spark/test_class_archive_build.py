"""Building Spark's class archive: never half-written, and checked by a JVM that must map it
(where it lives, who maps it, and building without java: tests/jvm/test_class_archive.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jvm import class_archive as archive
from tidegate.jvm.class_archive import ARCHIVE_ENV, DIR_ENV, archive_path
from tidegate.jvm.options import java_options
from tidegate.spark import class_archive
from tidegate.spark.class_archive import build


@pytest.mark.spark
@pytest.mark.slow
def test_setup_builds_an_archive_a_jvm_maps_and_a_truncated_one_is_refused(tmp_path):
    # an absolute home, as the image's (/var/tidegate): the demo spec's relative event log is then
    # outside the event-log folders, and the workload, which reads a log of its own, still runs
    env = dict(os.environ, **{DIR_ENV: str(tmp_path / "archives"), "TIDEGATE_HOME": str(tmp_path / "home")})
    env.pop(ARCHIVE_ENV, None)
    stale = tmp_path / "archives" / f"{archive.PREFIX}0123456789abcdef.jsa"  # another pyspark's
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    path = build(env)
    assert path == archive_path(env) and path.stat().st_size > 50_000_000
    assert not stale.exists() and [p.name for p in path.parent.iterdir()] == [path.name]  # nothing half-written left
    built = path.stat().st_mtime_ns
    assert build(env) == path and path.stat().st_mtime_ns == built  # a second setup run does nothing
    assert f"-XX:SharedArchiveFile={path}" in java_options(env)

    # build() renamed it into place after a JVM that must map it (-Xshare:on) started; the same
    # check refuses a half-written one (as a JVM killed while writing it leaves)
    half = tmp_path / "half.jsa"
    with path.open("rb") as whole, half.open("wb") as out:
        shutil.copyfileobj(whole, out, length=1 << 20)
        out.truncate(path.stat().st_size // 3)
    with pytest.raises(ConfigError) as refused:
        class_archive._run(
            ["--map", str(half)], env | {ARCHIVE_ENV: "off"}, 300, "mapping the class archive just written"
        )
    assert "mapping the class archive just written failed" in str(refused.value)
    assert not list(Path.cwd().glob("hs_err_pid*.log"))  # the crashed JVM's report stayed out of the checkout
