"""DAG files declare; plugins act: read from each file's syntax tree, without importing it.

A task body in ``dags/`` is one call of a function in ``tidegate_airflow.procedures``
(or an operator): it never reaches the control database or the controller itself. And
every DAG takes its start, catch-up and retries from ``dag_defaults()``.
"""

from __future__ import annotations

import ast

import pytest

from airflow_support import REPO

DAG_FILES = sorted((REPO / "dags").glob("*.py"))

ATTRIBUTES = {"db", "engine", "controller"}  # the controller too: reaching it is the first step to its database
CALLS = {"switch_active", "status_of", "finish_procedure", "record_check"}
MODULES = ("tidegate.control", "sqlalchemy")


def database_access(source: str, filename: str) -> list[str]:
    """Where ``source`` touches the control database, one ``file:line: what`` each."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            found.append((node.lineno, f"reads .{node.attr}"))
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in CALLS:
                found.append((node.lineno, f"calls {name}()"))
        imported = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        for module in imported:
            if any(module == m or module.startswith(m + ".") for m in MODULES):
                found.append((node.lineno, f"imports {module}"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(found)]


def calls_dag_defaults(source: str) -> bool:
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "id", None) == "dag_defaults" for n in ast.walk(ast.parse(source))
    )


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_a_dag_file_leaves_the_control_database_to_the_plugins(path):
    assert database_access(path.read_text(), path.name) == []


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_a_dag_file_takes_its_schedule_rules_from_dag_defaults(path):
    assert calls_dag_defaults(path.read_text()), f"{path.name} does not spread dag_defaults() into @dag"


def test_the_rule_names_the_file_and_line_of_each_access():
    source = """from tidegate.control.db import ProcedureBusy
import sqlalchemy

def body(hook):
    hook.controller.db.finish_procedure(1, "failed")
    switch_active("fleet", "west", "why")
    return hook.status("fleet", "east")  # the hook's own summary: allowed
"""
    assert database_access(source, "bad.py") == [
        "bad.py:1: imports tidegate.control.db",
        "bad.py:2: imports sqlalchemy",
        "bad.py:5: calls finish_procedure()",
        "bad.py:5: reads .controller",
        "bad.py:5: reads .db",
        "bad.py:6: calls switch_active()",
    ]
