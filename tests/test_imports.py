"""What an import costs: the control plane, the CLI and the Airflow plugins start without Spark.

The controller plans starts, hands lineages over and reads their files; Airflow's
scheduler and API server import the plugins on every parse; the ``tidegate`` command
builds its whole parser before it runs any command (``--help``, ``hub …``, ``job status``).
None of them needs a JVM, so none may import pyspark — only the driver process that runs a
job, and the commands that start a Spark session inside their own function, do. The imports
run in a fresh interpreter, so a module another test loaded cannot hide a regression.
"""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_support import REPO

PYSPARK_FREE = [
    "tidegate.runtime.controller",
    "tidegate.lineage.layout",
    "tidegate.lineage.offsets",
    "tidegate.lineage.committed",
    "tidegate.lineage.final",
    "tidegate.source_planning",
    "tidegate.cli",
    "tidegate.cli.hub",
    "tidegate.cli.engine",
    "tidegate.cli.jobs",
    "tidegate.cli.demo",
    "tidegate_airflow",
    "tidegate_airflow.hooks",
    "tidegate_airflow.operators",
    "tidegate_airflow.triggers",
    "tidegate_airflow.procedures",
    "tidegate_airflow.procedures.planned_stop",
    "tidegate_airflow.procedures.failover",
    "tidegate_airflow.procedures.drill",
    "tidegate_airflow.commands",
    "tidegate_airflow.dag_defaults",
    "tidegate_ui_plugin",
]


# imported one after another in one fresh interpreter; the first that loads pyspark is named
PROBE = """
import importlib, sys
for module in sys.argv[1:]:
    importlib.import_module(module)
    if "pyspark" in sys.modules:
        print(module)
        break
"""


def test_the_control_plane_the_cli_and_the_plugins_import_without_pyspark():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "plugins"), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", PROBE, *PYSPARK_FREE], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"import {done.stdout.strip()} loaded pyspark"
