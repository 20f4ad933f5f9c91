"""What an import costs and which way imports go: the control plane, the CLI and the Airflow
provider start without Spark.

The controller plans starts, hands lineages over and reads their files; Airflow's
scheduler and API server import the provider on every parse; the ``tidegate`` command
builds its whole parser before it runs any command (``--help``, ``event log …``, ``job status``).
None of them needs a JVM, so none may import pyspark — only the driver process that runs a
job, and the commands that start a Spark session inside their own function, do. The imports
run in a fresh interpreter, so a module another test loaded cannot hide a regression.

The whole tree (``src/tidegate`` and the provider's ``providers/tidegate-airflow/src``) is a
house of layers, declared below from the bottom up (:data:`LAYERS`; docs/architecture.md says
what each holds): a module imports its own layer and the layers below it, never one above, and
no modules import one another in a circle — read from the source with ``ast``, imports at the
top and those deferred inside functions alike, with no exceptions. Inside ``tidegate.spark``
imports go one way too: the tools use the pipeline, the engine and the runner drive the
stages, and never the other way round.
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
    "tidegate.runtime.jobs.controller",
    "tidegate.lineage.layout",
    "tidegate.lineage.offsets",
    "tidegate.lineage.committed",
    "tidegate.lineage.final",
    "tidegate.lineage.compaction",
    "tidegate.runtime.outputs.upkeep",
    "tidegate.cli.outputs",
    "tidegate.jvm.java",
    "tidegate.jvm.options",
    "tidegate.jvm.class_archive",
    "tidegate.inputs.log",
    "tidegate.inputs.log_set",
    "tidegate.inputs.planning",
    "tidegate.inputs.event_log",
    "tidegate.inputs.event_log.generator",
    "tidegate.inputs.kafka.client",
    "tidegate.inputs.kafka.log",
    "tidegate.inputs.kafka.broker",
    "tidegate.cli",
    "tidegate.cli.event_log",
    "tidegate.cli.engine",
    "tidegate.cli.asa",
    "tidegate.cli.jobs",
    "tidegate.cli.demo",
    "tidegate.cli.manual",  # docs/reference/cli.md from the parser
    "tidegate.spark.pipeline.sink.metrics",  # a batch's report is plain data the driver module imports
    "tidegate_airflow",
    "tidegate_airflow.get_provider_info",
    "tidegate_airflow.hooks.tidegate",
    "tidegate_airflow.operators.lifecycle",
    "tidegate_airflow.operators.spark_submit",
    "tidegate_airflow.sensors.job_state",
    "tidegate_airflow.triggers.job_state",
    "tidegate_airflow.procedures",
    "tidegate_airflow.procedures.planned_stop",
    "tidegate_airflow.procedures.failover",
    "tidegate_airflow.procedures.drill",
    "tidegate_airflow.commands",
    "tidegate_airflow.dag_defaults",
    "tidegate_airflow.ui.plugin",  # what the airflow.plugins entry point loads
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


def test_the_control_plane_the_cli_and_the_provider_import_without_pyspark():
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *PYSPARK_FREE], env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"import {done.stdout.strip()} loaded pyspark"


# -- the runtime's modules: no import cycle ------------------------------------------------
RUNTIME = REPO / "src" / "tidegate" / "runtime"
RUNTIME_MODULES = sorted(  # every module of the runtime and its subpackages (jobs, estimates, procedures, …)
    "tidegate.runtime." + ".".join(p.relative_to(RUNTIME).with_suffix("").parts)
    for p in RUNTIME.rglob("*.py")
    if p.stem != "__init__"
)

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
        done = subprocess.run(
            [sys.executable, "-c", LOADED, module], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"import {module} alone: {done.stderr}"
        loaded[module] = set(done.stdout.split())
    assert "tidegate.runtime.jobs.supervisor" not in loaded["tidegate.runtime.jobs.controller"]
    assert "tidegate.runtime.jobs.controller" not in loaded["tidegate.runtime.jobs.supervisor"]


# -- the layers of the whole tree ---------------------------------------------------------
# Bottom to top: each layer may import itself and the layers before it. A module belongs to
# the layer naming its package (the longest that fits); "base" names modules, not packages.
LAYERS = [
    # errors, file helpers, the demo's job, recorded processes: import nothing
    ("base", ("tidegate", "tidegate.errors", "tidegate.files", "tidegate.examples", "tidegate.processes")),
    ("jvm", ("tidegate.jvm",)),  # which java, its options, Spark's class archive, the fetched jars
    ("storage", ("tidegate.storage",)),  # where a region's lineages are: a folder or an object store
    ("eventtime", ("tidegate.eventtime",)),  # the semantics, pure
    ("jobspec", ("tidegate.jobspec",)),  # what a job reads and computes
    ("asa", ("tidegate.asa",)),  # Stream Analytics queries translated into job specs
    ("control", ("tidegate.control",)),  # the control database
    ("lineage", ("tidegate.lineage",)),  # one lineage on disk, and its fence
    ("inputs", ("tidegate.inputs",)),  # what jobs read: the embedded log, Kafka, planning
    ("spark", ("tidegate.spark",)),  # everything that runs on Spark
    ("validation", ("tidegate.validation",)),  # Great Expectations over a comparison
    ("runtime", ("tidegate.runtime",)),  # the lifecycle (inside: no circles)
    ("cli", ("tidegate.cli",)),  # the tidegate command
    ("provider", ("tidegate_airflow",)),  # Airflow's side: the tidegate-airflow package (and above it, dags/)
]
EXACT = {"base"}
ROOTS = [REPO / "src", REPO / "providers" / "tidegate-airflow" / "src"]


def tree_modules() -> dict[str, Path]:
    """Every module of ``src/`` and the provider's ``src/`` by dotted name (a package by its ``__init__``)."""
    found = {}
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = tree_modules()


def layer_of(module: str) -> int | None:
    best, at = -1, None
    for i, (name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            fits = module == prefix if name in EXACT else module == prefix or module.startswith(prefix + ".")
            if fits and len(prefix) > best:
                best, at = len(prefix), i
    return at


def tree_imports() -> dict[str, dict[str, int]]:
    """Per module of the tree, the modules of the tree it imports (with a line that does) —
    at the top, inside a function or under ``TYPE_CHECKING``: a deferred import hides an
    order from the interpreter, not from the design. ``from a import b`` is module ``a.b``
    when there is one, else ``a``; importing ``a.b`` runs ``a`` too, which is not counted."""
    graph = {}
    for module, path in MODULES.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            for name in names:
                parts = name.split(".")
                while parts and ".".join(parts) not in MODULES:
                    parts.pop()
                if parts and ".".join(parts) != module:
                    found.setdefault(".".join(parts), node.lineno)
        graph[module] = found
    return graph


def test_every_module_of_the_tree_has_a_declared_layer():
    assert len(MODULES) > 100, f"the tree was not found under {ROOTS}"
    loose = sorted(m for m in MODULES if layer_of(m) is None)
    assert not loose, f"modules in no layer of LAYERS (declare where they stand): {loose}"


def test_no_import_runs_up_the_layers():
    wrong = []
    for module, imports in tree_imports().items():
        for imported, line in imports.items():
            if layer_of(imported) > layer_of(module):
                wrong.append(
                    f"{MODULES[module].relative_to(REPO)}:{line} ({LAYERS[layer_of(module)][0]}) imports "
                    f"{imported} ({LAYERS[layer_of(imported)][0]})"
                )
    assert not wrong, "imports that run up the layers:\n" + "\n".join(sorted(wrong))


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The groups of modules that import one another round a circle (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_modules_import_one_another_in_a_circle():
    graph = tree_imports()
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(
        " , ".join(f"{m} → {sorted(set(graph[m]) & set(group))}" for m in group) for group in found
    )
    # the supervisor runs the controller's starts and the controller launches supervisors: they
    # meet in the runtime's process module and its config, and neither imports the other
    runtime = [m for m in graph if m.startswith("tidegate.runtime.")]
    controllers = [m for m in runtime if m.endswith(".controller")]
    supervisors = [m for m in runtime if m.endswith(".supervisor")]
    assert controllers and supervisors
    assert not [(c, s) for c in controllers for s in supervisors if s in graph[c] or c in graph[s]]


def test_the_circle_finder_finds_a_circle_and_only_circles():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


PIPELINE = REPO / "src" / "tidegate" / "spark" / "pipeline"
DRIVERS = {PIPELINE / "engine.py", PIPELINE / "runner.py"}
# (the rule, the files, the modules none of them may import)
ONE_WAY = [
    ("the pipeline never imports the tools", sorted(PIPELINE.rglob("*.py")), ("tidegate.spark.tools",)),
    (
        "a stage never imports what drives it",
        sorted(set(PIPELINE.rglob("*.py")) - DRIVERS),
        ("tidegate.spark.pipeline.engine", "tidegate.spark.pipeline.runner"),
    ),
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
    wrong = {
        f"{f.relative_to(REPO)} imports {m}"
        for f in files
        for m in imported(f)
        if any(m == x or m.startswith(x + ".") for x in forbidden)
    }
    assert not wrong, f"{rule}: {sorted(wrong)}"
