"""The Airflow provider and the DAGs reach the control database only through the controller's
methods (:mod:`tidegate.runtime.jobs.records`, the status reads, the procedures' functions),
never its repository: no ``controller.db``, no ``.db.`` anywhere in the provider or ``dags/``.
The Tidegate page keeps its own read-only connection (``tidegate_airflow.ui.reads``), which is
not a controller's."""

from __future__ import annotations

import ast

from airflow_support import REPO

FILES = sorted([*(REPO / "providers" / "tidegate-airflow" / "src").rglob("*.py"), *(REPO / "dags").rglob("*.py")])


def db_accesses(source: str, name: str) -> list[str]:
    """Each ``<anything>.db`` in ``source`` as ``file:line``."""
    lines = sorted(
        node.lineno
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, ast.Attribute) and node.attr == "db"
    )
    return [f"{name}:{line}" for line in lines]


def test_no_provider_module_or_dag_reaches_into_the_controllers_database():
    assert len(FILES) > 10, f"no provider or DAG files found under {REPO}"
    found = [hit for path in FILES for hit in db_accesses(path.read_text(), str(path.relative_to(REPO)))]
    assert not found, "use the controller's methods (tidegate.runtime.jobs.records) instead: " + ", ".join(found)


def test_the_rule_sees_each_way_of_reaching_it():
    source = "hook.controller.db.finish_procedure(1, 'failed')\ndb = c.db\nx = TidegateHook().controller.db\n"
    assert db_accesses(source, "bad.py") == ["bad.py:1", "bad.py:2", "bad.py:3"]
    assert db_accesses("hook.controller.finish_procedure(1, 'failed')\n", "good.py") == []
