"""What an import costs and which way imports go: the control plane, the CLI and the Airflow plugins start without Spark.

The controller plans starts, hands lineages over and reads their files; Airflow's
scheduler and API server import the plugins on every parse; the ``tidegate`` command
builds its whole parser before it runs any command (``--help``, ``hub …``, ``job status``).
None of them needs a JVM, so none may import pyspark — only the driver process that runs a
job, and the commands that start a Spark session inside their own function, do. The imports
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
    "tidegate.lineage.compaction",
    "tidegate.runtime.upkeep",
    "tidegate.cli.outputs",
    "tidegate.inputs.planning",
    "tidegate.cli",
    "tidegate.cli.hub",
    "tidegate.cli.engine",
    "tidegate.cli.jobs",
    "tidegate.cli.demo",
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


def test_the_control_plane_the_cli_and_the_plugins_import_without_pyspark():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "plugins"), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", PROBE, *PYSPARK_FREE], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"import {done.stdout.strip()} loaded pyspark"


# -- the runtime's modules: no import cycle ------------------------------------------------
RUNTIME = REPO / "src" / "tidegate" / "runtime"
RUNTIME_MODULES = sorted(f"tidegate.runtime.{p.stem}" for p in RUNTIME.glob("*.py") if p.stem != "__init__")

# imports one module in this fresh interpreter; prints the runtime modules that came with it
LOADED = """
import importlib, sys
importlib.import_module(sys.argv[1])
print(" ".join(sorted(m for m in sys.modules if m.startswith("tidegate.runtime."))))
"""


def test_each_runtime_module_imports_alone_and_the_controller_and_supervisor_not_each_other():
    """The supervisor runs the controller's starts and the controller launches supervisors:
    both go through ``process`` and the config, so importing either leaves the other out."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    loaded = {}
    for module in RUNTIME_MODULES:
        done = subprocess.run([sys.executable, "-c", LOADED, module], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"import {module} alone: {done.stderr}"
        loaded[module] = set(done.stdout.split())
    assert "tidegate.runtime.supervisor" not in loaded["tidegate.runtime.controller"]
    assert "tidegate.runtime.controller" not in loaded["tidegate.runtime.supervisor"]


def runtime_imports() -> dict[str, set[str]]:
    """Per runtime module, the runtime modules it imports — at the top or deferred inside a
    function (a deferred import hides a cycle from the interpreter, not from the design)."""
    import ast

    graph = {}
    for module in RUNTIME_MODULES:
        tree = ast.parse((RUNTIME / (module.rsplit(".", 1)[1] + ".py")).read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "tidegate.runtime":
                found |= {f"tidegate.runtime.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[module] = {m for m in found if m in RUNTIME_MODULES and m != module}
    return graph


def test_the_runtime_modules_import_one_another_without_a_cycle():
    graph = runtime_imports()
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        for imported in sorted(graph[module]):
            if imported in path:
                cycles.append(" → ".join(path[path.index(imported):] + [imported]))
            elif len(path) < len(graph):
                visit(imported, path + [imported])

    for module in RUNTIME_MODULES:
        visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(sorted(set(cycles)))
    assert "tidegate.runtime.controller" not in graph["tidegate.runtime.supervisor"]
    assert "tidegate.runtime.supervisor" not in graph["tidegate.runtime.controller"]


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
