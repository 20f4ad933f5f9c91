"""What an import costs and which way imports go.

The controller plans starts, hands lineages over and reads their files; Airflow's
scheduler and API server import the plugins on every parse. Neither needs a JVM, so
neither may import pyspark — only the driver process that runs a job does. The imports
run in a fresh interpreter, so a module another test loaded cannot hide a regression.

Inside ``tidegate.spark`` imports go one way: the tools use the pipeline, the engine and
the runner drive the stages, and never the other way round (read from the source, no
import needed).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_support import REPO

PYSPARK_FREE = [
    "tidegate.runtime.controller",
    "tidegate.lineage.layout",
    "tidegate.lineage.offsets",
    "tidegate.lineage.committed",
    "tidegate.lineage.final",
    "tidegate.source_planning",
    "tidegate.spark.pipeline.sink.metrics",  # a batch's report is plain data the driver module imports
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


def test_the_control_plane_and_the_plugins_import_without_pyspark():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "plugins"), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", PROBE, *PYSPARK_FREE], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"import {done.stdout.strip()} loaded pyspark"


PIPELINE = REPO / "src" / "tidegate" / "spark" / "pipeline"
DRIVERS = {PIPELINE / "engine.py", PIPELINE / "runner.py"}
# (the rule, the files, the modules none of them may import)
ONE_WAY = [
    ("the pipeline never imports the tools", sorted(PIPELINE.rglob("*.py")), ("tidegate.spark.tools",)),
    ("a stage never imports what drives it", sorted(set(PIPELINE.rglob("*.py")) - DRIVERS),
     ("tidegate.spark.pipeline.engine", "tidegate.spark.pipeline.runner")),
]


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports by absolute name (``from a import b`` counts as ``a`` and ``a.b``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("rule, files, forbidden", ONE_WAY, ids=[rule for rule, _, _ in ONE_WAY])
def test_imports_inside_tidegate_spark_go_one_way(rule, files, forbidden):
    assert files, f"{rule}: no files found under {PIPELINE}"
    wrong = {f"{f.relative_to(REPO)} imports {m}" for f in files for m in imported(f)
             if any(m == x or m.startswith(x + ".") for x in forbidden)}
    assert not wrong, f"{rule}: {sorted(wrong)}"
