"""Spark's Python workers import the installed pyspark, not the zip Spark puts first on their path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tidegate.spark.tools.workerpath import PTH_NAME, PTH_TEXT, install, site_packages


def sys_path_after_site(site_dir: Path, pythonpath: list[str]) -> list[str]:
    code = f"import json, site, sys; site.addsitedir({str(site_dir)!r}); print(json.dumps(sys.path))"
    env = os.environ | {"PYTHONPATH": os.pathsep.join(pythonpath)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_only_the_zips_of_that_site_packages_pyspark_leave_the_path(tmp_path):
    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    other = tmp_path / "spark-3.5" / "python" / "lib"  # a Spark distribution elsewhere keeps its zips
    ours = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    theirs = [str(other / "pyspark.zip"), str(lib / "notes.txt")]
    assert install(site) == site / PTH_NAME
    assert install(site).read_text() == PTH_TEXT  # idempotent

    path = sys_path_after_site(site, ours + theirs)
    assert not set(ours) & set(path)
    assert set(theirs) <= set(path)


def test_this_environment_imports_pyspark_from_site_packages_under_sparks_worker_path():
    pth = site_packages() / PTH_NAME
    assert pth.exists() and pth.read_text() == PTH_TEXT, (
        f"{pth} is missing or stale: run scripts/bootstrap.sh (or python -m tidegate.spark.tools.workerpath)"
    )
    lib = site_packages() / "pyspark" / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)  # what Spark prepends for its workers
    env = os.environ | {"PYTHONPATH": os.pathsep.join(zips)}
    out = subprocess.run(
        [sys.executable, "-c", "import pyspark, py4j; print(pyspark.__file__); print(py4j.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in out.stdout.split():
        assert ".zip" not in line and line.startswith(str(site_packages())), line
